"""The reward models' lifecycle as a Lightning callback: loaded for fit and validate, freed in teardown.

`GRPOModule.configure_callbacks` contributes it with the module's own terms, so a config lists its terms
once (under `model.rewards`) and `predict`, which scores nothing, loads none of them; unless it paints two
turns, whose feedback and records need the scores.
"""

from __future__ import annotations

import gc

import lightning.pytorch as pl
import torch

from lit_watercolour.rewards.base import RewardTerm

STAGES = ("fit", "validate")


class RewardModels(pl.Callback):
    """Calls each term's `setup(device)` on the trainer's device when fit or validate (and with `predict`,
    predict) starts, and its `teardown()` when that stage ends."""

    def __init__(self, terms: list[RewardTerm], predict: bool = False) -> None:
        self.terms, self.stages = terms, (*STAGES, "predict") if predict else STAGES
        self.loaded = False

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage in self.stages and not self.loaded:
            device = trainer.strategy.root_device  # the module moves there after this hook
            for term in self.terms:
                term.setup(device)
            self.loaded = True

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.loaded:
            for term in self.terms:
                term.teardown()
            self.loaded = False
            gc.collect()  # a freed model's tensors go now, not at the next collection
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
