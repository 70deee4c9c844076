"""The gate term: 1 when the sketch compiled, painted and did not cheat, else 0."""

from __future__ import annotations

import torch

from lit_watercolour.rewards.base import RewardTerm, TermScores, summary_metrics
from lit_watercolour.records import Rollout


class GateTerm(RewardTerm):
    """Reads the verdict already stored on each rollout (`rollout.gate`); it judges nothing itself.

    Metrics: `pass_rate`. How many fail for each reason is the mix's `gate/reason_<name>`, logged whatever
    the terms (`rewards.mix.gate_monitors`).
    """

    name = "gate"
    gated = False  # it scores every rollout: its verdict is what the other terms are gated on

    def __init__(self, weight: float = 0.05) -> None:
        super().__init__(weight)

    def score(self, rollouts: list[Rollout]) -> TermScores:
        if any(r.gate is None for r in rollouts):
            raise ValueError("GateTerm needs rollout.gate set on every rollout")
        scores = torch.tensor([1.0 if r.gate.passed else 0.0 for r in rollouts], dtype=torch.float32)
        metrics = summary_metrics(scores)
        metrics["pass_rate"] = metrics.pop("mean")
        return TermScores(scores, metrics)

    def feedback(self, rollout: Rollout, score: float) -> dict[str, float]:
        return {}  # the feedback's first line is the gate's verdict and reason
