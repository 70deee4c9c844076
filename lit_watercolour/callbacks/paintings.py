"""`predict`'s paintings on disk, written by Lightning's `BasePredictionWriter` after each batch."""

from __future__ import annotations

import re
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from lit_watercolour.callbacks.runlog import RolloutLog, rollout_records
from lit_watercolour.records import Rollout, RolloutBatch

PAINTINGS_FILE = "paintings.jsonl"


class PaintingWriter(BasePredictionWriter):
    """Each predicted painting as `<subject>-<batch>-<i>` .txt (the raw completion), .js (the sketch) and .png
    (the render) in `dirpath`, `per_subject` paintings of each subject, and one line of `paintings.jsonl` as
    rollouts.jsonl writes it (its `painting`: the files' stem). Two turns: the files are the revision's, the
    first sketch's are `<stem>_turn1.*`, and the line holds both turns' scores and the feedback."""

    def __init__(self, dirpath: str, per_subject: int) -> None:
        super().__init__(write_interval="batch")
        self.dirpath, self.per_subject = Path(dirpath), per_subject
        self.records = RolloutLog(self.dirpath / PAINTINGS_FILE)

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.records.path.unlink(missing_ok=True)  # this run's paintings only, as their files are

    def write_on_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, prediction: RolloutBatch,
                           batch_indices, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        unscored = torch.full((len(prediction.rollouts),), float("nan"))  # predict has no groups' baselines
        rewards = prediction.rewards if prediction.rewards is not None else unscored
        records = rollout_records(trainer.global_step, prediction.rollouts, prediction.scores, rewards, unscored,
                                  prediction.policy_version, prediction.turn1)
        for i, (r, record) in enumerate(zip(prediction.rollouts, records, strict=True)):
            stem = f"{slug(r.prompt)}-{batch_idx}-{i % self.per_subject}"
            write(self.dirpath / stem, r)
            if prediction.turn1 is not None:
                write(self.dirpath / f"{stem}_turn1", prediction.turn1.rollouts[i])
            record["painting"] = stem
        self.records.append(records)


def write(stem: Path, r: Rollout) -> None:
    """One sketch's .txt, .js and .png (those it has)."""
    stem.with_suffix(".txt").write_text(r.completion)
    if r.code is not None:
        stem.with_suffix(".js").write_text(r.code)
    if r.render is not None and r.render.png is not None:
        stem.with_suffix(".png").write_bytes(r.render.png)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "painting"
