"""A callback for tests/test_ddp.py: each rank writes what it saw each step to rank{R}.pt."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import torch

from lit_watercolour.policy import trainable_state_dict


class RankProbe(pl.Callback):
    def __init__(self, out_dir: str) -> None:
        self.out_dir, self.steps, self.initial = Path(out_dir), [], None

    def on_train_start(self, trainer, pl_module) -> None:
        self.initial = {k: v.clone() for k, v in trainable_state_dict(pl_module).items()}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = outputs["step"]
        self.steps.append({"rewards": step.rewards.clone(), "group_rewards": step.group_rewards.clone(),
                           "completions": [r.completion for r in step.batch.rollouts]})

    def on_train_end(self, trainer, pl_module) -> None:
        torch.save({"world": trainer.world_size, "initial": self.initial, "steps": self.steps,
                    "final": trainer_state(pl_module)}, self.out_dir / f"rank{trainer.global_rank}.pt")


def trainer_state(pl_module) -> dict:
    return {k: v.detach().clone() for k, v in trainable_state_dict(pl_module).items()}
