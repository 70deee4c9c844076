"""Callbacks for tests/test_update_edges.py: fixed completions per rank, and what one step's update did.

`ScriptedRows` puts a `ScriptedSampler` in the module before Lightning builds it (`setup` runs before
`configure_model`), rank r replaying `texts[r * k:(r + 1) * k]` of each group. `UpdateProbe` writes, per
rank, the adapter before the step, its gradients as the optimizer is about to step (after DDP's all-reduce),
the rows and their advantages, to rank{R}.pt.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import torch
from transformers import AutoTokenizer

from lit_watercolour.policy import trainable_state_dict
from scripted_sampler import ScriptedSampler


class ScriptedRows(pl.Callback):
    def __init__(self, texts: list[str], tokenizer: str) -> None:
        self.texts, self.tokenizer = texts, tokenizer

    def setup(self, trainer, pl_module, stage: str) -> None:
        k = len(self.texts) // trainer.world_size
        rows = self.texts[trainer.global_rank * k:(trainer.global_rank + 1) * k]
        pl_module.sampler = ScriptedSampler(AutoTokenizer.from_pretrained(self.tokenizer), rows)


class UpdateProbe(pl.Callback):
    def __init__(self, out_dir: str) -> None:
        self.out_dir, self.record = Path(out_dir), {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.record["before"] = {k: v.detach().clone() for k, v in trainable_state_dict(pl_module).items()}

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.record["grads"] = {n: p.grad.detach().clone() for n, p in pl_module.named_parameters()
                                if p.requires_grad and p.grad is not None}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = outputs["step"]
        self.record.update(samples=step.batch.samples, advantages=step.advantages.clone(),
                           rewards=step.group_rewards.clone())

    def on_train_end(self, trainer, pl_module) -> None:
        torch.save({"world": trainer.world_size, **self.record}, self.out_dir / f"rank{trainer.global_rank}.pt")
