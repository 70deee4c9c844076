"""Mixing term scores into one reward per rollout: `RewardMix` and the pure functions it uses."""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from lit_watercolour.gate import REASONS
from lit_watercolour.records import Rollout
from lit_watercolour.rewards.base import RewardTerm, TermScores

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


def gate_monitors(rollouts: list[Rollout]) -> dict[str, float]:
    """Reward-hacking monitors of the gate, per step: `gate/reason_<name>`, the fraction of the rollouts whose
    verdict has each reason (every reason, `ok` included, so each is a column of every step), and
    `gate/text_hits`, how many verdicts are `text` (words written or painted where a judge would read them)."""
    n = max(len(rollouts), 1)
    counts = dict.fromkeys(REASONS, 0)
    for r in rollouts:
        counts[r.gate.reason] = counts.get(r.gate.reason, 0) + 1
    return {**{f"gate/reason_{name}": c / n for name, c in counts.items()}, "gate/text_hits": float(counts["text"])}


class RewardMix:
    """The reward: the terms of `model.rewards`, each weighted, summed for gate-passed rollouts. A streaming
    term's rows may already be scored (the rollout pipeline starts them as each row is gated); `score_term` then
    only combines them. The rollout pipeline is the one caller that mixes (`RolloutPipeline.score`)."""

    def __init__(self, terms: list[RewardTerm]) -> None:
        names = [t.name for t in terms]
        if len(set(names)) != len(names):
            raise ValueError(f"reward terms need distinct names, got {names}")
        self.terms = terms

    def streaming(self, rollout: Rollout) -> list[RewardTerm]:
        """The streaming terms that score this gated rollout (a gated term only if it passed)."""
        return [t for t in self.terms if t.streams and (rollout.gate.passed or not t.gated)]

    def score_term(self, term: RewardTerm, rollouts: list[Rollout], streamed: dict[int, Any] | None = None,
                   timeline: Timeline | None = None) -> tuple[Tensor, dict[str, float]]:
        """One term's [N] scores (0 for the rows a gated term skips) and its metrics. `streamed`: {row: its
        `score_row` result}, for a streaming term whose rows are scored (then only combined here); else the
        term scores here, as a `score_<name>` span of `timeline`."""
        t0 = time.perf_counter()
        rows = [i for i, r in enumerate(rollouts) if r.gate.passed or not term.gated]
        s = torch.zeros(len(rollouts))
        if streamed is not None:
            done = term.combine([streamed[i] for i in rows])
        else:
            with timeline.span(f"score_{term.name}") if timeline is not None else nullcontext():
                done = term.score([rollouts[i] for i in rows]) if rows else TermScores(torch.zeros(0), {})
        s[rows] = done.values.float()
        metrics = {f"reward/{term.name}/{k}": float(v) for k, v in done.metrics.items()}
        return s, {**metrics, f"time/score_{term.name}_s": time.perf_counter() - t0}

    def mix(self, rollouts: list[Rollout], scored: dict[str, tuple[Tensor, dict[str, float]]]
            ) -> tuple[Tensor, dict[str, Tensor], dict[str, float]]:
        """The terms' scores (`score_term`, by name) mixed into [N] rewards, with every term's metrics."""
        if not self.terms:
            raise RuntimeError("no reward terms: list them under `model.rewards`")
        passed = torch.tensor([r.gate.passed for r in rollouts])
        scores = {name: s for name, (s, _) in scored.items()}
        metrics = {k: v for _, m in scored.values() for k, v in m.items()}
        rewards = mix_rewards(scores, {t.name: t.weight for t in self.terms}, passed)
        # a browser failure says nothing about the sketch: leave it out of the baseline (NaN)
        infra = torch.tensor([r.render is not None and r.render.infra_error for r in rollouts])
        rewards = torch.where(infra, torch.full_like(rewards, math.nan), rewards)
        metrics["gate/pass_rate"] = passed.float().mean().item()
        metrics.update(gate_monitors(rollouts))
        metrics["render/infra_error_frac"] = infra.float().mean().item()
        return rewards, scores, metrics

    def feedback(self, rollouts: list[Rollout], scores: dict[str, Tensor]) -> list[dict[str, float]]:
        """What each rollout is told of its scores (a two-turn painter's feedback): every term's `feedback`, for
        the rows the term scored (a gated term says nothing of a sketch that failed the gate)."""
        return [{k: v for t in self.terms if r.gate.passed or not t.gated for k, v in t.feedback(r, float(scores[t.name][i])).items()}
                for i, r in enumerate(rollouts)]
