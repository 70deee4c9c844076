"""`predict`'s paintings on disk, written by Lightning's `BasePredictionWriter` after each batch."""

from __future__ import annotations

import re
from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import BasePredictionWriter

from lit_watercolour.records import Rollout


class PaintingWriter(BasePredictionWriter):
    """Each predicted rollout as `<subject>-<batch>-<i>` .txt (the raw completion), .js (the sketch) and .png
    (the render) in `dirpath`; `per_subject` paintings of each subject, rows grouped by subject."""

    def __init__(self, dirpath: str, per_subject: int) -> None:
        super().__init__(write_interval="batch")
        self.dirpath, self.per_subject = Path(dirpath), per_subject

    def write_on_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, prediction: list[Rollout],
                           batch_indices, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(prediction):
            stem = self.dirpath / f"{slug(r.prompt)}-{batch_idx}-{i % self.per_subject}"
            stem.with_suffix(".txt").write_text(r.completion)
            if r.code is not None:
                stem.with_suffix(".js").write_text(r.code)
            if r.render is not None and r.render.png is not None:
                stem.with_suffix(".png").write_bytes(r.render.png)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "painting"
