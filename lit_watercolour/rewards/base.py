"""The reward-term contract: a plain object that scores a batch of rollouts."""

from __future__ import annotations

import math
from typing import Any

import torch

from lit_watercolour.records import Rollout


class RewardTerm:
    """One term of the reward mix (`lit_watercolour.rewards.mix.RewardMix`).

    `score` returns float32 values in [0, 1], one per rollout; NaN means the score is missing
    because a service failed after its retries (never a silent 0), so the step can drop the
    rollout from the group baseline. `last_metrics` describes the last call and is logged as
    `reward/<name>/<key>`. A gated term sees only the rollouts that passed the gate (the others
    score 0); an ungated one sees them all. `setup`/`teardown` run with the trainer's
    (GRPOModule forwards its own): load a model there, not in `__init__`, so a config parses fast.

    A term whose work is per rollout `streams`: it defines `score_row` (that work on one rollout) and
    `combine` (scores and metrics from the rows' results, in order), and `score(rs)` must equal
    `combine([score_row(r) for r in rs])`; `collect` then starts each row's work as soon as it is gated.
    """

    name: str = "term"
    gated: bool = True
    streams: bool = False

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = float(weight)
        self.last_metrics: dict[str, float] = {}

    def setup(self) -> None:
        pass

    def teardown(self) -> None:
        pass

    def score(self, rollouts: list[Rollout]) -> torch.Tensor:
        return self.combine([self.score_row(r) for r in rollouts])

    def score_row(self, rollout: Rollout) -> Any:
        raise NotImplementedError

    def combine(self, rows: list[Any]) -> torch.Tensor:
        raise NotImplementedError


def summary_metrics(scores: torch.Tensor) -> dict[str, float]:
    """mean / std / min / max over the resolved scores, and how many are missing."""
    ok = scores[~torch.isnan(scores)]
    if ok.numel() == 0:
        return {"mean": math.nan, "std": math.nan, "min": math.nan, "max": math.nan,
                "missing": float(scores.numel())}
    return {
        "mean": ok.mean().item(),
        "std": ok.std(unbiased=False).item(),
        "min": ok.min().item(),
        "max": ok.max().item(),
        "missing": float(scores.numel() - ok.numel()),
    }
