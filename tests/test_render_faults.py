"""Renderer faults in the middle of a batch: the browser process killed while sketches paint, a
page that exhausts its memory. The pool recovers, the sketches caught by the fault are retried,
and every result belongs to its own sketch (each sketch logs its index; the report must carry
that index and no other).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import psutil
import pytest

from lit_watercolour.gate import gate
from lit_watercolour.render import RenderPool, ThreadedRenderPool

HOSTILE = Path(__file__).resolve().parent / "hostile"

# ~1 s of JS before painting, so several renders are in flight when the fault comes
MARKED = """function setup() {{
  createCanvas(512, 512, WEBGL);
  noLoop();
}}
function draw() {{
  console.log("sketch {index}");
  const t = Date.now();
  while (Date.now() - t < 1000) {{}}
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#3a6ea5", 170);
  brush.circle(256, 256, 60);
}}
"""


def browser_processes() -> list[psutil.Process]:
    """This process's Chromium browser processes (not their renderer, GPU or utility children)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "chrom" in child.name().lower() and not any(a.startswith("--type=") for a in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def assert_own_results(results, indices) -> None:
    for index, result in zip(indices, results):
        assert result.error is None and not result.infra_error and result.png, (index, result.error)
        assert result.console == [f"log: sketch {index}"], (index, result.console)


def test_browser_killed_mid_batch_loses_nothing():
    others = {p.pid for p in browser_processes()}  # e.g. the session's shared pool
    with ThreadedRenderPool(size=3, timeout_s=30.0) as pool:
        (browser,) = [p for p in browser_processes() if p.pid not in others]
        futures = [pool.submit(MARKED.format(index=i), i) for i in range(6)]
        futures[0].result()  # the first is done: the next ones are painting or queued
        browser.send_signal(signal.SIGKILL)
        results = [f.result(timeout=120) for f in futures]
        assert_own_results(results, range(6))
        fresh = [p for p in browser_processes() if p.pid not in others]
        assert fresh and browser not in fresh  # a fresh browser took over
        assert_own_results(pool.render_many([MARKED.format(index=9)], [0]), [9])


def test_a_page_warming_on_a_killed_browser_is_given_up_at_once():
    """The hang behind a killed browser: Playwright can leave a call on it (seen: `new_page`)
    pending for ever, and a render waiting for that warm page then waited for ever too. The
    pending call is stood in for by a future nobody completes; the browser is really killed."""

    async def scenario(others: set[int]) -> None:
        async with RenderPool(size=1, timeout_s=30.0) as pool:
            (browser,) = [p for p in browser_processes() if p.pid not in others]
            entered = asyncio.Event()

            async def pending_for_ever(*args):
                entered.set()
                await asyncio.get_running_loop().create_future()

            pool._open_page = pending_for_ever
            warming = asyncio.ensure_future(pool._new_page())
            await entered.wait()
            browser.send_signal(signal.SIGKILL)
            with pytest.raises(RuntimeError, match="browser died while a page was warming"):
                await asyncio.wait_for(warming, 20)

    asyncio.run(scenario({p.pid for p in browser_processes()}))


def test_page_out_of_memory_spares_its_neighbours():
    hog = (HOSTILE / "allocation_without_end.js").read_text()
    with ThreadedRenderPool(size=3, timeout_s=20.0) as pool:
        codes = [MARKED.format(index=0), hog, MARKED.format(index=2), MARKED.format(index=3), hog, MARKED.format(index=5)]
        results = pool.render_many(codes, list(range(6)))
        assert_own_results([results[i] for i in (0, 2, 3, 5)], (0, 2, 3, 5))
        for i in (1, 4):
            verdict = gate(hog, results[i])
            assert not verdict.passed and verdict.reason in {"runtime_error", "timeout", "infra_error"}, verdict
        assert_own_results(pool.render_many([MARKED.format(index=7)], [0]), [7])
