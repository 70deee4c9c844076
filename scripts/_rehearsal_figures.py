"""What scripts/rehearse_recipe.py reports besides the trainer's metrics: the JSON lines as they happen, the
WebGL renderer and linear-attention kernels it runs with, the GPU's memory sampled on a thread, and each step's
phases with their table."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import time
from pathlib import Path

import torch
from playwright.async_api import async_playwright

from lit_watercolour.sandbox.browser import LAUNCH_ARGS, RENDERER_PROBE, chromium_executable


def webgl_renderer(render: dict) -> str:
    """The WebGL renderer string a page of the pool's browser gets (SwiftShader or the GPU)."""

    async def probe() -> str:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium_executable(render.get("executable_path")),
                                              args=list(render.get("launch_args") or LAUNCH_ARGS))
            page = await browser.new_page()
            text = await page.evaluate(RENDERER_PROBE) or "no WebGL"
            await browser.close()
            return text

    return asyncio.run(probe())


class Report:
    """Prints each line of JSON as it happens and appends it to `path` (flushed): a run cut short keeps its finished steps."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a")

    def __call__(self, line: dict) -> None:
        text = json.dumps(line)
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


def linear_attention_kernels() -> dict:
    """Which Gated DeltaNet / causal-conv implementations transformers finds: the optimised packages or its PyTorch fallback."""
    return {name: "installed" if importlib.util.find_spec(name) else "torch fallback" for name in ("fla", "causal_conv1d")}


class DeviceMemory:
    """The GPU's memory in use by every process (the trainer and vLLM's engine), sampled on a thread every
    `period_s`, so that each phase's peak can be read off afterwards (`peak(start, end)`, perf_counter times)."""

    def __init__(self, device: torch.device, period_s: float = 0.005) -> None:
        self.device, self.period_s = device, period_s
        self.samples: list[tuple[float, int]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="device-memory", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        torch.cuda.set_device(torch.device(self.device).index or 0)
        while not self.stopped.wait(self.period_s):
            free, total = torch.cuda.mem_get_info(self.device)
            self.samples.append((time.perf_counter(), total - free))

    def peak_gib(self, start: float, end: float) -> float:
        inside = [used for t, used in self.samples if start - self.period_s <= t <= end + self.period_s]
        return round(max(inside, default=0) / 2**30, 2)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()


def phase_seconds(m: dict) -> dict:
    """The step's phases in seconds: each turn's sampling (one turn: `sampling_turn1`), the renderer's and each
    scorer's busy time within the step's window, the update."""
    turn1 = m.get("time/sampling_turn1_s", m["time/sampling_s"])
    out = {"sampling_turn1": turn1, "sampling_turn2": m["time/sampling_s"] - turn1, "render": m["time/busy/render_s"],
           **{k.removeprefix("time/busy/").removesuffix("_s"): v for k, v in m.items() if k.startswith("time/busy/score_")},
           "update": m["time/update_s"]}
    return {k: round(v, 3) for k, v in out.items()}


def phase_table(rows: list[dict]) -> str:
    """Per phase: mean seconds and the highest device memory over the steps after the first (all if one)."""
    later = rows[1:] or rows
    names = sorted({k.removeprefix("phase/").removesuffix("_s") for r in later for k in r if k.startswith("phase/") and k.endswith("_s")})
    lines = [f"{'phase':<14}{'mean s':>10}{'peak GiB':>10}"]
    for name in names:
        seconds = [r[f"phase/{name}_s"] for r in later if f"phase/{name}_s" in r]
        peak = max((r.get(f"phase/{name}_peak_gib", 0.0) for r in later), default=0.0)
        lines.append(f"{name:<14}{sum(seconds) / len(seconds):>10.2f}{peak:>10.2f}")
    return "\n".join(lines)
