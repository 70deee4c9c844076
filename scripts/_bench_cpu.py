"""CPU seconds of this process and every process below it (Playwright's driver, the browsers and their renderer,
GPU and utility processes), by process kind, from /proc. Used by scripts/bench_render.py."""

from __future__ import annotations

import os
from collections import Counter


def _read(pid: int | str, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/{name}") as f:
            return f.read()
    except OSError:
        return None


def _kind(cmdline: str, pid: int, me: int) -> str:
    """Chromium's process type (renderer, gpu-process, utility, zygote: the renderers it reaped),
    browser, driver (Playwright's node) or python."""
    if pid == me:
        return "python"
    args = cmdline.split("\0")
    kind = next((a.removeprefix("--type=") for a in args if a.startswith("--type=")), None)
    if kind is None:  # Chromium rewrites its command line into one string
        kind = next((a.removeprefix("--type=") for a in cmdline.split() if a.startswith("--type=")), None)
    return kind or ("driver" if "node" in (args[0] or "") else "browser")


def tree_cpu() -> Counter:
    """CPU seconds by process kind of this process and every process below it (Playwright's driver,
    the browsers and their renderer, GPU and utility processes): each descendant's own time plus
    the time of the children it has reaped (renderers of closed pages land in `zygote`), from
    /proc. Wall clock depends on the machine's load; CPU time does not, so it is the figure to
    compare across machines and runs."""
    me = os.getpid()
    parent, ticks = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _read(entry, "stat")) is not None:
            fields = stat.rsplit(")", 1)[1].split()
            parent[int(entry)] = int(fields[1])
            ticks[int(entry)] = sum(int(v) for v in fields[11:15])

    def below_me(pid: int) -> bool:
        while pid in parent and pid > 1:
            pid = parent[pid]
            if pid == me:
                return True
        return False

    hz = os.sysconf("SC_CLK_TCK")
    times = os.times()
    cpu = Counter({"python": times.user + times.system})  # not its reaped children: earlier runs' drivers
    for pid, t in ticks.items():
        if below_me(pid):
            cpu[_kind(_read(pid, "cmdline") or "", pid, me)] += t / hz
    return cpu


def cpu_parts(before: Counter, after: Counter, renders: int) -> Counter:
    """Core-seconds per render by process kind."""
    return Counter({k: (after[k] - before[k]) / renders for k in after})


def per_render(before: Counter, after: Counter, renders: int) -> str:
    """'1.93 (renderer 1.10, gpu-process 0.41, ...)': core-seconds per render, largest parts first."""
    parts = cpu_parts(before, after, renders)
    shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v >= 0.01)
    return f"{sum(parts.values()):.2f} ({shown})"
