"""Overlapping the step (`GRPOModule.max_staleness = 1`), and the timeline each phase's busy time is read from.

A step with staleness 1 samples the next step's batch on the main thread before its own update, with the
weights of the step before, then hands that batch's renders, gate and scores to the finishing thread, so
they run while this step waits for its own scores and updates. The policy is only ever used on the main
thread, one thing at a time: sampling and the update never share the weights or the accelerator. A
prefetched batch is one optimizer step behind the update that uses it; the module passes it to the loss
with the sampler's log-probs as the old policy (`update.policy_update(stale=True)`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from concurrent.futures import Future
from concurrent.futures import wait as wait_all
from contextlib import contextmanager


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


class Prefetched:
    """The one batch sampled ahead, still finishing, keyed by what it is for (the step's prompts)."""

    def __init__(self) -> None:
        self.pending: tuple[Hashable, Future] | None = None

    def put(self, key: Hashable, job: Future) -> None:
        if self.pending is not None:
            raise RuntimeError("a batch is already prefetched")
        self.pending = (key, job)

    def take(self, key: Hashable) -> Future | None:
        """The job if it was for `key`; None if none was, or another (it then finishes unused)."""
        if self.pending is None:
            return None
        (started_for, job), self.pending = self.pending, None
        return job if started_for == key else None

    def wait(self) -> None:
        """Until the job in flight (if any) is done; it stays to be taken."""
        if self.pending is not None:
            wait_all([self.pending[1]])


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
