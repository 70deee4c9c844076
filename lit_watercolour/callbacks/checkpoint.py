"""Checkpoints that also write the adapter in peft format, and publishing it to the Hub.

The Lightning `.ckpt` holds the adapter, optimizer, scheduler, loop and RNG state (resume);
next to it a `<name>-adapter/` folder holds what users load with
`PeftModel.from_pretrained(base, folder)`. At the end of `fit` the last adapter can be
uploaded with `HfApi.upload_folder`; a `hub_repo` that is a local path receives a copy instead
(offline runs and tests).

SIGTERM (a scheduler's preemption, `kill`) is Lightning's: it finishes the step under way and raises
SIGTERMException (a SystemExit, status 0); `save_on_exception`, on by default here, then writes that
step's checkpoint and, with `save_last`, `last.ckpt`, so `--ckpt_path last` resumes at the next step.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint


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
    """ModelCheckpoint with an adapter folder beside each .ckpt in `dirpath`; can publish the last one.

    After each of ModelCheckpoint's own saving hooks, a .ckpt that is new or rewritten since the
    last look gets `<stem>-adapter/` (the module's state is the one just saved), and the folder of
    a .ckpt ModelCheckpoint removed goes too. Checkpoints already there when the run starts keep theirs.
    """

    def __init__(self, hub_repo: str | None = None, hub_private: bool = True, save_on_exception: bool = True,
                 **kwargs) -> None:
        """
        Args:
            hub_repo: A Hub model repo (or a local folder, which gets a copy) the last adapter goes to at the end
                of fit; None: none.
            hub_private: Create that repo private.
            save_on_exception: Save a checkpoint when fit stops on an exception (a SIGTERM included).
            kwargs: ModelCheckpoint's arguments (dirpath, every_n_train_steps, save_last, ...).
        """
        super().__init__(save_on_exception=save_on_exception, **kwargs)
        self.hub_repo, self.hub_private = hub_repo, hub_private
        self.last_adapter: Path | None = None
        self.seen: dict[Path, int] = {}  # .ckpt -> the modification time its adapter was written for

    def checkpoints(self) -> dict[Path, int]:
        folder = Path(self.dirpath) if self.dirpath else None
        if folder is None or not folder.is_dir():
            return {}
        return {p: p.stat().st_mtime_ns for p in folder.glob(f"*{self.FILE_EXTENSION}")}

    def write_adapters(self, trainer: pl.Trainer) -> None:
        if not trainer.is_global_zero:
            return
        now = self.checkpoints()
        for path in sorted((p for p, mtime in now.items() if self.seen.get(p) != mtime), key=now.get):
            self.last_adapter = adapter_dir(path)
            trainer.lightning_module.save_adapter(self.last_adapter)
        for path in self.seen.keys() - now.keys():
            shutil.rmtree(adapter_dir(path), ignore_errors=True)
        self.seen = now

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self.seen = self.checkpoints()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args, **kwargs) -> None:
        super().on_train_batch_end(trainer, pl_module, *args, **kwargs)
        self.write_adapters(trainer)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        super().on_exception(trainer, pl_module, exception)
        self.write_adapters(trainer)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        self.write_adapters(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        self.write_adapters(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        self.write_adapters(trainer)
        if self.hub_repo and trainer.is_global_zero and self.last_adapter is not None:
            where = publish_folder(self.last_adapter, self.hub_repo, self.hub_private, f"step {trainer.global_step}")
            print(f"published {self.last_adapter} to {where}")
