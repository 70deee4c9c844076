"""The reward-term contract: a Lightning callback that scores a batch of rollouts."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch

from lit_watercolour.rollout import Rollout


class RewardTerm(pl.Callback):
    """One term of the reward mix.

    `score` returns float32 values in [0, 1], one per rollout; NaN means the score is missing
    because a service failed after its retries (never a silent 0), so the module can drop the
    rollout from the group baseline. `last_metrics` describes the last call and is logged by
    the module as `reward/<name>/<key>`. Being a Callback lets a term own its model's device
    placement and lifecycle hooks (setup/teardown) inside the Trainer.
    """

    name: str = "term"

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = float(weight)
        self.last_metrics: dict[str, float] = {}

    def score(self, rollouts: list[Rollout]) -> torch.Tensor:
        raise NotImplementedError

    @property
    def state_key(self) -> str:  # one callback state per term name, not per class
        return f"{type(self).__name__}[{self.name}]"


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
