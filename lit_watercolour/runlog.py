"""The run log: every finished step's rollouts as JSON lines, exactly once across resumes.

Each optimizer step appends one line per rollout to `rollouts.jsonl` after its update, in a
single write. A run resumed from a checkpoint first cuts the file back to the checkpoint's
step, dropping steps that finished after the checkpoint (they are trained again) and any
half-written line a killed process left, so every step the run keeps appears once.
Missing (NaN) numbers are written as null, keeping the file standard JSON.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from torch import Tensor

from lit_watercolour.rollout import Rollout

ROLLOUTS_FILE = "rollouts.jsonl"


def _number(x: float) -> float | None:
    return None if math.isnan(x) else x


def rollout_records(
    step: int, rollouts: list[Rollout], scores: dict[str, Tensor], rewards: Tensor, advantages: Tensor
) -> list[dict]:
    """One JSON-ready dict per rollout of `step` (the global step after its update)."""
    return [
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
        }
        for row, r in enumerate(rollouts)
    ]


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
