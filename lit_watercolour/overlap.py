"""Overlapping the step (`GRPOModule.max_staleness = k`), and the timeline each phase's busy time is read from.

A step with staleness k keeps k batches sampled ahead in a `PrefetchQueue`: before its own update it samples
the batch k steps on, on the main thread, with the weights of the step before; that batch's renders, gate and
scores run on the rollout pipeline's event loop while this step waits for its own scores and updates. The
policy is only ever used on the main thread, one thing at a time: sampling and the update never share the
weights or the accelerator. A prefetched batch is k optimizer steps behind the update that uses it, and
carries the sampler's log-probs as the old policy (`RolloutBatch.old_logps`).

With `GRPOModule.sample_during_update` the batch ahead is sampled on the pipeline's sampling thread by an engine of
its own (vLLM) while the main thread updates, and the weights go to the engine once both are done: the step is
about max(sampling, render + score + update) instead of sampling + update. The engine then computes no policy
log-probs (the policy is being updated): the main thread runs that forward with the adapter the batch was sampled
with (`AdapterVersions`), while the batch renders and is scored.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Hashable
from concurrent.futures import Future
from concurrent.futures import wait as wait_all
from contextlib import contextmanager

import torch


class Timeline:
    """Spans of named phases on one monotonic clock (seconds since the timeline began), from any thread."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()
        self.lock = threading.Lock()
        self.spans: list[list] = []  # [phase, start, end or None while open]

    def now(self) -> float:
        return time.perf_counter() - self.origin

    def begin(self, phase: str) -> list:
        span = [phase, self.now(), None]
        with self.lock:
            self.spans.append(span)
        return span

    def end(self, span: list) -> None:
        span[2] = self.now()

    @contextmanager
    def span(self, phase: str):
        s = self.begin(phase)
        try:
            yield s
        finally:
            self.end(s)

    def busy(self, lo: float, hi: float) -> dict[str, float]:
        """Per phase, the time within [lo, hi] at least one of its spans was open (an open span runs to hi)."""
        with self.lock:
            spans = list(self.spans)
            self.spans = [s for s in spans if s[2] is None or s[2] > lo]  # older spans can no longer count
        cut: dict[str, list[tuple[float, float]]] = {}
        for phase, a, b in spans:
            a, b = max(a, lo), min(hi if b is None else b, hi)
            if b > a:
                cut.setdefault(phase, []).append((a, b))
        return {phase: union_length(intervals) for phase, intervals in cut.items()}


def union_length(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of [a, b] intervals (concurrent renders count once)."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(intervals):
        a = max(a, reach)
        if b > a:
            total += b - a
            reach = b
    return total


def busy_idle_metrics(timeline: Timeline, lo: float, hi: float, phases: list[str]) -> dict[str, float]:
    """`time/busy/<phase>_s` within the step's wall window [lo, hi], `time/idle/<phase>_s` = wall - busy."""
    busy = timeline.busy(lo, hi)
    out = {}
    for phase in phases:
        out[f"time/busy/{phase}_s"] = busy.get(phase, 0.0)
        out[f"time/idle/{phase}_s"] = hi - lo - busy.get(phase, 0.0)
    return out


class PrefetchQueue:
    """The batches sampled ahead, oldest first, at most `depth`, each keyed by what it is for (its prompts)."""

    def __init__(self, depth: int) -> None:
        if depth < 0:
            raise ValueError(f"a prefetch depth is >= 0, not {depth}")
        self.depth = depth
        self.pending: deque[tuple[Hashable, Future]] = deque()

    def __len__(self) -> int:
        return len(self.pending)

    def put(self, key: Hashable, job: Future) -> None:
        if len(self.pending) >= self.depth:
            raise RuntimeError(f"{self.depth} batches are already prefetched")
        self.pending.append((key, job))

    def take(self, key: Hashable) -> Future | None:
        """The oldest job if it was for `key`; else None, and every queued job is dropped once done (they were
        read for another order of batches: they finish unused, before the batch sampled in their place)."""
        if self.pending and self.pending[0][0] == key:
            return self.pending.popleft()[1]
        self.drain()
        return None

    def wait(self) -> None:
        """Until every job in flight is done (failed ones included); they stay to be taken."""
        wait_all([job for _, job in self.pending])

    def drain(self) -> None:
        """Wait for the jobs in flight and drop them (at teardown: their renders use the pool being closed)."""
        self.wait()
        self.pending.clear()


class AdapterVersions:
    """The trainable weights (the adapter) of the last `keep` policy versions, kept where they live, so a batch sampled
    by a version the update has since changed can be scored by it (`applied`)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.saved: dict[int, dict[str, torch.Tensor]] = {}

    def save(self, version: int, model: torch.nn.Module) -> None:
        self.saved.setdefault(version, {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad})
        for old in sorted(self.saved)[:-self.keep]:
            del self.saved[old]

    @contextmanager
    def applied(self, version: int, model: torch.nn.Module):
        """The model with `version`'s adapter in place of its own, which is put back after."""
        params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        own = {n: p.detach().clone() for n, p in params.items()}
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(self.saved[version][n])
            try:
                yield model
            finally:
                for n, p in params.items():
                    p.copy_(own[n])


def stage_times(metrics: dict[str, float]) -> dict[str, float]:
    """A step's stages from its own metrics: sampling, render+score (the render wait after sampling plus the
    scoring), update; their serial sum; the bound a pipelined step can reach on one policy device,
    max(sampling + update, render + score); and the largest single stage."""
    sampling, update = metrics["time/sampling_s"], metrics["time/update_s"]
    render_score = metrics["time/render_wait_s"] + metrics["time/scoring_s"]
    return {"sampling_s": sampling, "render_score_s": render_score, "update_s": update,
            "serial_s": sampling + render_score + update,
            "pipeline_bound_s": max(sampling + update, render_score),
            "largest_stage_s": max(sampling, render_score, update)}
