"""The run log: every finished step's rollouts as JSON lines, exactly once across resumes.

`RolloutLogger` appends one line per rollout of each optimizer step, every rank's rows, to
`rollouts.jsonl` after its update, in a single write; by default in the logger's root folder,
beside its version_N folders (a resumed run gets a new version, and keeps one log). A run resumed from a checkpoint first cuts the file back to the checkpoint's
step, dropping steps that finished after the checkpoint (they are trained again) and any
half-written line a killed process left, so every step the run keeps appears once.
Missing (NaN) numbers are written as null, keeping the file standard JSON.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch import Tensor

from lit_watercolour.records import Rollout, RolloutBatch, StepResult

ROLLOUTS_FILE = "rollouts.jsonl"


def _number(x: float) -> float | None:
    return None if math.isnan(x) else x


def rollout_records(
    step: int, rollouts: list[Rollout], scores: dict[str, Tensor], rewards: Tensor, advantages: Tensor,
    policy_version: int = 0, turn1: RolloutBatch | None = None,
) -> list[dict]:
    """One JSON-ready dict per rollout of `step` (the global step after its update); `policy_version`: the
    optimizer step count of the weights that sampled them (one behind the update's with `max_staleness` 1).
    Two turns: each row is the revision, with the `feedback` it was given and its first sketch as `turn1`."""
    records = [
        {
            "step": step,
            "group": r.group,
            "row": row,
            "subject": r.prompt,
            "seed": r.seed,
            "completion": r.completion,
            "code": r.code,
            "gate": r.gate.reason if r.gate is not None else None,
            "scores": {name: _number(float(s[row])) for name, s in scores.items()},
            "reward": _number(float(rewards[row])),
            "advantage": _number(float(advantages[row])),
            "policy_version": policy_version,
        }
        for row, r in enumerate(rollouts)
    ]
    if turn1 is not None:
        for row, (record, first) in enumerate(zip(records, turn1.rollouts, strict=True)):
            record["feedback"] = rollouts[row].feedback
            record["turn1"] = {"completion": first.completion, "code": first.code,
                               "gate": first.gate.reason if first.gate is not None else None,
                               "scores": {name: _number(float(s[row])) for name, s in turn1.scores.items()},
                               "reward": _number(float(turn1.rewards[row])) if turn1.rewards is not None else None}
    return records


class RolloutLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, records: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    def truncate(self, step: int) -> None:
        """Keep the entries of steps <= `step` (0: none); written to a temp file, then swapped in."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # the tail of a write cut off by a kill
                continue
            if line.endswith("\n") and record["step"] <= step:
                kept.append(line)
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        os.replace(tmp, self.path)

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines()]


def log_root(trainer: pl.Trainer) -> Path | None:
    """The logger's root folder, not its version folder; None without a logger."""
    logger = trainer.logger
    folder = logger and (getattr(logger, "root_dir", None) or logger.save_dir)
    return Path(folder) if folder else None


class RolloutLogger(pl.Callback):
    def __init__(self, dirpath: str | None = None) -> None:  # None: the logger's root (no logger: no log)
        """
        Args:
            dirpath: Where rollouts.jsonl goes; None: the logger's root folder (no logger: no log).
        """
        self.dirpath = dirpath
        self.log: RolloutLog | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        folder = Path(self.dirpath) if self.dirpath else log_root(trainer)
        if folder is None:
            return
        self.log = RolloutLog(folder / ROLLOUTS_FILE)
        if trainer.is_global_zero:  # the checkpoint's loop state is restored: later steps are trained again
            self.log.truncate(trainer.global_step)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module, outputs: dict, batch, batch_idx: int) -> None:
        if self.log is None:
            return
        step: StepResult = outputs["step"]
        records = rollout_records(trainer.global_step, step.batch.rollouts, step.scores, step.rewards, step.advantages,
                                  step.batch.policy_version, step.batch.turn1)
        if trainer.world_size > 1:
            for r in records:
                r["rank"] = trainer.global_rank  # "row" is the row on its rank
            parts = [None] * trainer.world_size
            torch.distributed.all_gather_object(parts, records)
            records = [r for part in parts for r in part]
        if trainer.is_global_zero:
            self.log.append(records)
