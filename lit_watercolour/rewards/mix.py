"""Mixing term scores into one reward per rollout (pure functions)."""

from __future__ import annotations

import os

import torch

# term name -> environment variable overriding its weight (the recipe's two experiment knobs)
WEIGHT_ENV = {"judge": "LIT_WATERCOLOUR_JUDGE_WEIGHT", "hpsv3": "LIT_WATERCOLOUR_HPS_WEIGHT"}


def resolve_weights(weights: dict[str, float]) -> dict[str, float]:
    """Config weights with the environment overrides applied to the terms that are present."""
    out = {name: float(w) for name, w in weights.items()}
    for name, var in WEIGHT_ENV.items():
        raw = os.environ.get(var)
        if raw is None or raw.strip() == "" or name not in out:
            continue
        try:
            out[name] = float(raw)
        except ValueError as e:
            raise ValueError(f"{var}={raw!r} is not a number") from e
    return out


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
