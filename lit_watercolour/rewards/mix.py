"""Mixing term scores into one reward per rollout: `RewardMix` and the pure functions it uses."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

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


def caller_cuda() -> int | None:
    """The caller's CUDA device, for work it hands to other threads (the current device is per thread)."""
    return torch.cuda.current_device() if torch.cuda.is_initialized() else None


@contextmanager
def scoring(term: RewardTerm, cuda: int | None, timeline: Timeline | None):
    """A term's work on this thread: on the caller's device (a term's "cuda" is its DDP rank's GPU), as a
    `score_<name>` span."""
    if cuda is not None:
        torch.cuda.set_device(cuda)
    with timeline.span(f"score_{term.name}") if timeline is not None else nullcontext():
        yield


class RewardMix:
    """The reward: the terms of `model.rewards`, each weighted, summed for gate-passed rollouts.
    The terms score at the same time, a thread each (a judge's HTTP calls wait while HPSv3 computes);
    a streaming term's rows are already under way (`streamer`, called by `collect` as each row is gated)."""

    def __init__(self, terms: list[RewardTerm]) -> None:
        names = [t.name for t in terms]
        if len(set(names)) != len(names):
            raise ValueError(f"reward terms need distinct names, got {names}")
        self.terms = terms

    def streaming(self) -> list[RewardTerm]:
        return [t for t in self.terms if t.streams]

    def streamer(self, executor: Executor, timeline: Timeline | None = None) -> Callable[[Rollout], dict[str, Future]]:
        """What starts each streaming term's `score_row` on a gated rollout (a gated term's only if it passed),
        on `executor` and on the caller's CUDA device, whichever thread the rollout is gated on."""
        cuda = caller_cuda()

        def run(term: RewardTerm, rollout: Rollout) -> Any:
            with scoring(term, cuda, timeline):
                return term.score_row(rollout)

        def start(rollout: Rollout) -> dict[str, Future]:
            terms = [t for t in self.streaming() if rollout.gate.passed or not t.gated]
            return {t.name: executor.submit(run, t, rollout) for t in terms}
        return start

    def score(self, rollouts: list[Rollout], timeline: Timeline | None = None,
              streamed: list[dict[str, Future]] | None = None) -> tuple[Tensor, dict[str, Tensor], dict[str, float]]:
        """[N] rewards (NaN: missing), term name -> [N] scores, and the metrics to log.
        `timeline`: records each term's span as `score_<name>`. `streamed`: per row, what `streamer` started
        (a streaming term's rows are combined, and its error, if any, raised here, as `score` would)."""
        if not self.terms:
            raise RuntimeError("no reward terms: list them under `model.rewards`")
        passed = torch.tensor([r.gate.passed for r in rollouts])
        idx = passed.nonzero().flatten().tolist()
        cuda = caller_cuda()

        def run(term: RewardTerm) -> tuple[Tensor, float]:
            t0 = time.perf_counter()
            rows = idx if term.gated else list(range(len(rollouts)))
            # a streamed term's wait for its last rows is not its work: its rows' spans are
            results = [streamed[i][term.name].result() for i in rows] if streamed and term.streams else None
            with scoring(term, cuda, timeline):
                s = torch.zeros(len(rollouts))
                if rows or not term.gated:
                    scored = term.score([rollouts[i] for i in rows]) if results is None else term.combine(results)
                    s[rows] = scored.float()
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
