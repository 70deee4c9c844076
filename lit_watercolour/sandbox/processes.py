"""Process control: a render's time as the CPU time of its own processes, the time it spent waiting,
and killing what a browser leaves behind.

A page alone on its browser owns that browser's renderers and GPU process, so the CPU they burn
while it paints is its cost: user + system time of every thread, read from /proc/<pid>/stat. A
loaded machine stretches the wall clock, never this time, and waiting on a busy core adds nothing.

A sketch that waits (a promise that never settles, a frame rate near zero) burns no CPU, so its
waiting is counted apart: from each thread's time on a core and time runnable in the kernel's run
queue (/proc/<pid>/task/<tid>/schedstat), the part of the wall clock in which no thread of the
processes ran or wanted to run. A starved page wants to run all the time, so load never counts as
waiting; a page that waits wants nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SCHEDSTAT = os.path.exists("/proc/self/schedstat")  # the kernel keeps each thread's run-queue time


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its threads; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # utime, stime


def thread_demand(pid: int) -> tuple[dict[int, float], bool]:
    """Seconds each thread of a process has spent on a core or runnable in the run queue, by thread id ({}
    once the process is gone), and whether one of them is runnable now (the kernel adds a thread's time in
    the queue only when it next runs, so a starved thread shows it late)."""
    found, runnable = {}, False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}, False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                on_cpu, queued = f.read().split()[:2]
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                runnable = runnable or f.read().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, ValueError, IndexError):  # the thread has exited
            continue
        found[int(tid)] = (int(on_cpu) + int(queued)) / 1e9
    return found, runnable


class CpuClock:
    """The CPU time a set of processes spent since the clock started, the wall clock beside it, and the
    time they waited (`tick`, `waited_s`)."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = list(pids)
        self.start = self.ticked = time.monotonic()
        self.base = {pid: cpu_seconds(pid) for pid in self.pids}
        self.demand: dict[tuple[int, int], float] = {}  # (pid, tid) -> its demand at the last tick
        self.waited = 0.0
        self.tick()  # the threads' demand so far, the base of the next tick
        self.waited = 0.0

    def cpu_s(self) -> float:
        return sum(max(0.0, cpu_seconds(pid) - self.base[pid]) for pid in self.pids)

    def wall_s(self) -> float:
        return time.monotonic() - self.start

    def tick(self) -> None:
        """Counts as waiting the part of the wall clock since the last tick that the processes' threads neither
        ran nor queued for: the interval less their demand in it (several threads busy at once make it none),
        none of it while a thread is runnable now; demand beyond the interval (queueing reported late, when a
        starved thread finally runs) takes back what earlier intervals counted."""
        now, used, runnable = time.monotonic(), 0.0, False
        for pid in self.pids if SCHEDSTAT else ():
            threads, busy = thread_demand(pid)
            runnable = runnable or busy
            for tid, seconds in threads.items():
                used += seconds - self.demand.get((pid, tid), 0.0)  # a thread started since the last tick: all of it
                self.demand[(pid, tid)] = seconds
        idle = now - self.ticked - used
        self.waited = max(0.0, self.waited + (min(idle, 0.0) if runnable else idle))
        self.ticked = now

    def waited_s(self) -> float:
        """Wall-clock seconds of waiting; 0 where the kernel keeps no run-queue time (no wait is then told from load)."""
        return self.waited if SCHEDSTAT else 0.0

    def own_s(self) -> float:
        """The page's own time: CPU while it works, wall clock while it waits."""
        return self.cpu_s() + self.waited_s()


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
