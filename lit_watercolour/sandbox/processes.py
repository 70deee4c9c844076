"""Process control: a render's time as the CPU time of its own processes, and killing what a
browser leaves behind.

A page alone on its browser owns that browser's renderers and GPU process, so the CPU they burn
while it paints is its cost: user + system time of every thread, read from /proc/<pid>/stat. A
loaded machine stretches the wall clock, never this time, and waiting on a busy core adds nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its threads; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # utime, stime


class CpuClock:
    """The CPU time a set of processes spent since the clock started, and the wall clock beside it."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = list(pids)
        self.start = time.monotonic()
        self.base = {pid: cpu_seconds(pid) for pid in self.pids}

    def cpu_s(self) -> float:
        return sum(max(0.0, cpu_seconds(pid) - self.base[pid]) for pid in self.pids)

    def wall_s(self) -> float:
        return time.monotonic() - self.start


def process_group(pid: int | None) -> int | None:
    """The browser's own process group (Playwright starts each browser as a group leader), or None."""
    try:
        return pid if pid and os.getpgid(pid) == pid and pid != os.getpgid(0) else None
    except ProcessLookupError:
        return None


def kill_group(pgid: int | None) -> None:
    """SIGKILL what is left of a browser's process group, even once the browser itself has exited
    (a utility child can outlive it)."""
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill(pids: Sequence[int]) -> None:
    """SIGKILL these processes (a page's renderers: what the sketch left running dies with them)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
