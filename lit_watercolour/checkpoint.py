"""Checkpoints that also write the adapter in peft format, and publishing it to the Hub.

The Lightning `.ckpt` holds the adapter, optimizer, scheduler, loop and RNG state (resume);
next to it a `<name>-adapter/` folder holds what users load with
`PeftModel.from_pretrained(base, folder)`. At the end of `fit` the last adapter can be
uploaded with `HfApi.upload_folder`; a `hub_repo` that is a local path receives a copy instead
(offline runs and tests).

SIGTERM (a scheduler's preemption, `kill`): Lightning's handler only raises a flag, and a
single-process run would act on it at the end of the epoch, which an endless prompt stream
never reaches. `AdapterCheckpoint` checks the flag after each step instead: it writes
`last.ckpt` (whatever `save_last` says) and stops the trainer, so `--ckpt_path last` resumes
at the next step. Lightning then exits with SIGTERMException (a SystemExit, status 0).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint


def rng_state() -> dict:
    """Every generator sampling touches, so a resumed run draws what the uninterrupted one would."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    numpy = (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss)  # loadable with weights_only
    state = {"torch": torch.get_rng_state(), "numpy": numpy, "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def adapter_dir(ckpt_path: str | Path) -> Path:
    p = Path(ckpt_path)
    return p.with_name(p.stem + "-adapter")


def is_local(repo: str) -> bool:
    return repo.startswith(("/", "./", "../", "file://")) or Path(repo).exists()


def publish_folder(folder: str | Path, repo: str, private: bool = True, message: str = "Upload adapter") -> str:
    """Upload `folder` to the Hub model repo `repo` (created if missing), or copy it to a local path."""
    if is_local(repo):
        dest = Path(repo.removeprefix("file://"))
        shutil.copytree(folder, dest, dirs_exist_ok=True)
        return str(dest)
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo, private=private, exist_ok=True)
    return str(api.upload_folder(repo_id=repo, folder_path=str(folder), commit_message=message))


class AdapterCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that writes `<ckpt stem>-adapter/` beside each .ckpt and can publish the last one."""

    def __init__(self, hub_repo: str | None = None, hub_private: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.hub_repo, self.hub_private = hub_repo, hub_private
        self.last_adapter: Path | None = None

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        super()._save_checkpoint(trainer, filepath)
        if trainer.is_global_zero:
            self.last_adapter = adapter_dir(filepath)
            trainer.lightning_module.save_adapter(self.last_adapter)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args, **kwargs) -> None:
        super().on_train_batch_end(trainer, pl_module, *args, **kwargs)
        if trainer.received_sigterm and not trainer.should_stop:
            trainer.should_stop = True
            if self.save_last and self._last_global_step_saved == trainer.global_step:
                return  # this step's last.ckpt is written already
            save_last, self.save_last = self.save_last, True
            try:
                self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
            finally:
                self.save_last = save_last

    def _remove_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        super()._remove_checkpoint(trainer, filepath)
        if trainer.is_global_zero:
            shutil.rmtree(adapter_dir(filepath), ignore_errors=True)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        if self.hub_repo and trainer.is_global_zero and self.last_adapter is not None:
            where = publish_folder(self.last_adapter, self.hub_repo, self.hub_private, f"step {trainer.global_step}")
            print(f"published {self.last_adapter} to {where}")
