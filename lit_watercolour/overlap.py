"""Overlapping the step (`GRPOModule.max_staleness = 1`): the next step's rollouts are sampled, rendered
and scored on a worker thread while this step updates; and the timeline each phase's busy time is read from.

Weights: before each prefetch the sampler is pointed (`sync_weights`) at `policy.frozen_copy`, a plain model
of the policy's weights at that moment with the adapter folded in, so the update writes tensors the sampler
never reads. A prefetched batch is one optimizer step behind the update that uses it; the module passes it
to the loss with the sampler's log-probs as the old policy (`update.policy_update(stale=True)`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from contextlib import contextmanager
from typing import Any


class Timeline:
    """Spans of named phases on one monotonic clock (seconds since the timeline began), from any thread."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()
        self.lock = threading.Condition()  # notified as a span begins
        self.spans: list[list] = []  # [phase, start, end or None while open]

    def now(self) -> float:
        return time.perf_counter() - self.origin

    def begin(self, phase: str) -> list:
        span = [phase, self.now(), None]
        with self.lock:
            self.spans.append(span)
            self.lock.notify_all()
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

    def wait_for_begin(self, phase: str, since: float, job: Future) -> None:
        """Until a `phase` span begins after `since`, or `job` ends (having failed before it, say)."""
        job.add_done_callback(lambda _: self._notify())
        with self.lock:
            self.lock.wait_for(lambda: job.done() or any(s[0] == phase and s[1] >= since for s in self.spans))

    def _notify(self) -> None:
        with self.lock:
            self.lock.notify_all()

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


class Prefetcher:
    """At most one job in flight on one worker thread, keyed by what it is for (the step's prompts)."""

    def __init__(self) -> None:
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="prefetch")
        self.pending: tuple[Hashable, Future] | None = None

    def start(self, key: Hashable, fn: Callable[..., Any], *args) -> Future:
        if self.pending is not None:
            raise RuntimeError("a prefetch is already in flight")
        self.pending = (key, self.worker.submit(fn, *args))
        return self.pending[1]

    def take(self, key: Hashable) -> Any | None:
        """The job's result if it was for `key` (its error is raised here); None if none was, or another."""
        if self.pending is None:
            return None
        (started_for, future), self.pending = self.pending, None
        if started_for != key:
            wait_all([future])  # never leave it running against weights the caller goes on to change
            return None
        return future.result()

    def wait(self) -> None:
        """Until the job in flight (if any) is done; its result stays to be taken."""
        if self.pending is not None:
            wait_all([self.pending[1]])

    def close(self) -> None:
        self.wait()
        self.pending = None
        self.worker.shutdown()
