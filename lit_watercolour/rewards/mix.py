"""Mixing term scores into one reward per rollout (a pure function)."""

from __future__ import annotations

import torch


def mix_rewards(scores: dict[str, torch.Tensor], weights: dict[str, float], passed: torch.Tensor) -> torch.Tensor:
    """R = sum_k w_k * s_k for gate-passed rollouts, 0 for gate-failed ones.

    Weights are used as given, not renormalised (the recipe's 0.05/0.05/0.60/0.30 sum to 1).
    A NaN score of a passed rollout propagates, so the caller can exclude that rollout instead
    of rewarding an infrastructure failure as a bad painting.
    """
    missing = set(scores) - set(weights)
    if missing:
        raise KeyError(f"no weight for terms {sorted(missing)}")
    passed = passed.to(torch.bool)
    total = torch.zeros(passed.shape, dtype=torch.float32)
    for name, s in scores.items():
        total = total + float(weights[name]) * s.to(torch.float32)
    return torch.where(passed, total, torch.zeros_like(total))
