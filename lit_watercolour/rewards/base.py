"""The reward-term contract: a plain object that scores a batch of rollouts, and its lifecycle."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from lit_watercolour.records import Rollout


class TermScores(NamedTuple):
    """What one term says about a batch: a value per rollout and the numbers to log about them."""

    values: Tensor  # [N] float32 in [0, 1]; NaN: missing (a service failed after its retries)
    metrics: dict[str, float]  # logged as `reward/<term>/<key>`


class RewardTerm:
    """One term of the reward mix (`lit_watercolour.rewards.mix.RewardMix`).

    `score` returns `TermScores`: float32 values in [0, 1], one per rollout (NaN when a service failed
    after its retries, never a silent 0, so the step can drop the rollout from the group baseline), and
    the metrics of that call. A gated term sees only the rollouts that passed the gate (the others score
    0); an ungated one sees them all.

    Lifecycle: `__init__` stores settings only, so a config parses fast and `predict` loads nothing.
    `setup(device)` loads what the term needs (a model, a reference pool) and `teardown()` frees it; the
    `RewardModels` callback that `GRPOModule.configure_callbacks` contributes calls them, on the trainer's
    device, for fit and validate.

    A term whose work is per rollout `streams`: it defines `score_row` (that work on one rollout) and
    `combine` (scores and metrics from the rows' results, in order), and `score(rs)` must equal
    `combine([score_row(r) for r in rs])`; the rollout pipeline then starts each row's work as soon as it
    is gated. A row's work that waits on the network may be a coroutine, `ascore_row`, run on the
    pipeline's event loop.

    `feedback` is what a two-turn painter is told of this term about its first sketch (`lit_watercolour.turns`):
    by default the term's score; a term may say more (its parts) or nothing.
    """

    name: str = "term"
    gated: bool = True
    streams: bool = False
    awaits: bool = False  # a streaming term whose row work waits on the network: `ascore_row`, a coroutine

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = float(weight)

    def setup(self, device: torch.device) -> None:
        pass

    def teardown(self) -> None:
        pass

    def score(self, rollouts: list[Rollout]) -> TermScores:
        return self.combine([self.score_row(r) for r in rollouts])

    def score_row(self, rollout: Rollout) -> Any:
        raise NotImplementedError

    def combine(self, rows: list[Any]) -> TermScores:
        raise NotImplementedError

    def feedback(self, rollout: Rollout, score: float) -> dict[str, float]:
        """Numbers in [0, 1] the painter is shown about a first sketch this term scored `score` (NaN: missing,
        shown as nothing), by name."""
        return {} if math.isnan(score) else {self.name: score}


def summary_metrics(scores: Tensor) -> dict[str, float]:
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
