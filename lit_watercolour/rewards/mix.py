"""Mixing term scores into one reward per rollout: `RewardMix` and the pure functions it uses."""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from lit_watercolour.records import Rollout
from lit_watercolour.rewards.base import RewardTerm

if TYPE_CHECKING:
    from lit_watercolour.overlap import Timeline


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


class RewardMix:
    """The reward: the terms of `model.rewards`, each weighted, summed for gate-passed rollouts.
    The terms score at the same time, a thread each (a judge's HTTP calls wait while HPSv3 computes)."""

    def __init__(self, terms: list[RewardTerm]) -> None:
        names = [t.name for t in terms]
        if len(set(names)) != len(names):
            raise ValueError(f"reward terms need distinct names, got {names}")
        self.terms = terms

    def score(self, rollouts: list[Rollout], timeline: Timeline | None = None
              ) -> tuple[Tensor, dict[str, Tensor], dict[str, float]]:
        """[N] rewards (NaN: missing), term name -> [N] scores, and the metrics to log.
        `timeline`: records each term's span as `score_<name>`."""
        if not self.terms:
            raise RuntimeError("no reward terms: list them under `model.rewards`")
        passed = torch.tensor([r.gate.passed for r in rollouts])
        idx = passed.nonzero().flatten().tolist()
        # the current CUDA device is per thread: a term's "cuda" must mean the caller's (its DDP rank's) GPU
        cuda = torch.cuda.current_device() if torch.cuda.is_initialized() else None

        def run(term: RewardTerm) -> tuple[Tensor, float]:
            if cuda is not None:
                torch.cuda.set_device(cuda)
            t0 = time.perf_counter()
            with timeline.span(f"score_{term.name}") if timeline is not None else nullcontext():
                s = torch.zeros(len(rollouts))
                if not term.gated:
                    s = term.score(rollouts).float()
                elif idx:
                    s[idx] = term.score([rollouts[i] for i in idx]).float()
            return s, time.perf_counter() - t0

        with ThreadPoolExecutor(len(self.terms), thread_name_prefix="reward") as pool:
            done = list(pool.map(run, self.terms))
        scores, metrics = {}, {}
        for term, (s, seconds) in zip(self.terms, done, strict=True):
            scores[term.name] = s
            metrics[f"time/score_{term.name}_s"] = seconds
            metrics.update({f"reward/{term.name}/{k}": float(v) for k, v in term.last_metrics.items()})
        rewards = mix_rewards(scores, {t.name: t.weight for t in self.terms}, passed)
        # a browser failure says nothing about the sketch: leave it out of the baseline (NaN)
        infra = torch.tensor([r.render is not None and r.render.infra_error for r in rollouts])
        rewards = torch.where(infra, torch.full_like(rewards, math.nan), rewards)
        metrics["gate/pass_rate"] = passed.float().mean().item()
        metrics["render/infra_error_frac"] = infra.float().mean().item()
        return rewards, scores, metrics

    def setup(self) -> None:
        for term in self.terms:
            term.setup()

    def teardown(self) -> None:
        for term in self.terms:
            term.teardown()
