"""Renderer faults in the middle of a batch: a browser process killed while sketches paint (one
browser or one of several), a page that exhausts its memory or meets the OS memory cap, a wedged
GPU process, a sketch that navigates its page. The pool recovers, the sketches caught by the fault
are retried or decided alone, and every result belongs to its own sketch (each sketch logs its
index; the report must carry that index and no other).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from lit_watercolour.gate import gate
from lit_watercolour.sandbox import RenderPool, ThreadedRenderPool
from lit_watercolour.sandbox import pool as pool_module
from lit_watercolour.sandbox.browser import gpu_pid
from lit_watercolour.sandbox.faults import SOLO_BACKSTOP
from lit_watercolour.sandbox.threaded import CLOSE_BUDGET_S
from processes import chromium_descendants
from test_render import SMALL, own_processes

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


def stop_gpu_process(pid: int | None) -> None:
    gpu = psutil.Process(pid)  # psutil.Process(None) is this process: never stop that
    assert pid and "--type=gpu-process" in gpu.cmdline(), pid
    gpu.send_signal(signal.SIGSTOP)


def assert_own_results(results, indices) -> None:
    for index, result in zip(indices, results):
        assert result.error is None and not result.infra_error and result.png, (index, result.error)
        assert result.console == [f"log: sketch {index}"], (index, result.console)


def test_browser_killed_mid_batch_loses_nothing():
    others = {p.pid for p in browser_processes()}  # e.g. the session's shared pool
    with ThreadedRenderPool(size=3, browsers=1, timeout_s=30.0) as pool:
        (browser,) = [p for p in browser_processes() if p.pid not in others]
        futures = [pool.submit(MARKED.format(index=i), i) for i in range(6)]
        futures[0].result()  # the first is done: the next ones are painting or queued
        browser.send_signal(signal.SIGKILL)
        results = [f.result(timeout=120) for f in futures]
        assert_own_results(results, range(6))
        fresh = [p for p in browser_processes() if p.pid not in others]
        assert fresh and browser not in fresh  # a fresh browser took over
        assert_own_results(pool.render_many([MARKED.format(index=9)], [0]), [9])


def test_a_page_warming_on_a_killed_browser_is_given_up_at_once(monkeypatch):
    """The hang behind a killed browser: Playwright can leave a call on it (seen: `new_page`)
    pending for ever, and a render waiting for that warm page then waited for ever too. The
    pending call is stood in for by a future nobody completes; the browser is really killed."""

    async def scenario(others: set[int]) -> None:
        async with RenderPool(size=1, browsers=1, timeout_s=30.0) as pool:
            (browser,) = [p for p in browser_processes() if p.pid not in others]
            entered = asyncio.Event()

            async def pending_for_ever(*args):
                entered.set()
                await asyncio.get_running_loop().create_future()

            monkeypatch.setattr(pool_module, "open_page", pending_for_ever)
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
            assert not verdict.passed and verdict.reason == "runtime_error", verdict  # the sketch's own failure, never infra
        assert_own_results(pool.render_many([MARKED.format(index=7)], [0]), [7])


def test_one_of_several_browsers_killed_mid_batch_loses_nothing():
    with ThreadedRenderPool(size=4, browsers=2, timeout_s=60.0) as pool:
        first, second = pool.pool._active
        assert first.busy == second.busy == 2  # the warm pages are spread over both browsers
        futures = [pool.submit(MARKED.format(index=i), i) for i in range(8)]
        futures[0].result()
        victim = psutil.Process(second.pid)
        victim.send_signal(signal.SIGKILL)
        results = [f.result(timeout=180) for f in futures]
        assert_own_results(results, range(8))
        assert first.renders > 0 and second.renders > 0  # both browsers painted
        # the pool launches the replacement when it next warms a page: a full batch needs one
        again = range(10, 18)
        assert_own_results(pool.render_many([MARKED.format(index=i) for i in again], list(again)), again)
        pool._call(pool.pool.settled()).result(timeout=120)
        assert victim.pid not in {b.pid for b in pool.pool._active} and len(pool.pool._active) == 2


def test_a_render_beside_a_wedged_gpu_process_is_decided_alone():
    """The browser's one GPU process is stopped (SIGSTOP), so every page on it waits for ever:
    the good sketch runs out of time there, passes alone, and the wedged browser is replaced."""
    async def scenario():
        async with RenderPool(size=1, browsers=1, timeout_s=5.0) as pool:
            wedged = pool._active[0]
            stop_gpu_process(await gpu_pid(wedged))
            result = await pool.render(MARKED.format(index=1), 1)
            after = await pool.render(MARKED.format(index=2), 2)
            return wedged, result, after, pool._active

    wedged, result, after, active = asyncio.run(scenario())
    assert_own_results([result, after], [1, 2])
    assert not result.timed_out and wedged not in active


def test_close_returns_within_its_budget_after_a_wedged_gpu_process():
    before = chromium_descendants()
    others = {os.getpgid(p) for p in before if psutil.pid_exists(p)}

    async def scenario():
        pool = RenderPool(size=2, browsers=1, timeout_s=60.0)
        await pool.start()
        good = await pool.render(SMALL, 0)
        stop_gpu_process(await gpu_pid(pool._active[0]))
        owner = pool._active[0]
        stuck = asyncio.ensure_future(pool.render(SMALL, 1))  # waits on the stopped GPU process
        while not owner.painting:  # the pool's own mark: the render has its page and paints there
            await asyncio.sleep(0)
        assert not stuck.done()
        start = time.monotonic()
        await pool.close()
        closing = time.monotonic() - start
        return good, closing, await stuck

    good, closing, stuck = asyncio.run(scenario())
    assert good.error is None and closing < CLOSE_BUDGET_S
    assert stuck.png is None and not stuck.timed_out  # the pool closed under it: not the sketch's timeout
    deadline = time.monotonic() + 10  # killed processes are reaped asynchronously
    while own_processes(before, others) and time.monotonic() < deadline:
        psutil.wait_procs([psutil.Process(p) for p in own_processes(before, others) if psutil.pid_exists(p)], timeout=0.5)
    assert not own_processes(before, others)


@pytest.mark.parametrize("move", ["history.back()", "location.assign('/index.html')", "globalThis['loc' + 'ation'].reload()"])
def test_a_sketch_that_reaches_for_navigation_fails_with_dom(render_pool, move):
    code = SMALL.replace("brush.noStroke();", f"{move};")
    result = render_pool.submit(code, 0).result()
    assert not result.infra_error and not result.timed_out
    assert any(v.startswith("dom:") for v in result.violations)  # nothing behind the name, and the attempt recorded
    assert gate(code, result).reason == "dom"


def test_a_page_navigated_under_its_render_fails_with_dom():
    """The pool's own fallback: the page's document is replaced while the sketch waits (here by the
    test, from outside: the sketch has no way to), so the page's evaluate dies with its context."""
    waiting = SMALL.replace("noLoop();", "noLoop();\n  return new Promise(() => {});").replace("function setup", "async function setup")

    async def scenario():
        async with RenderPool(size=1, browsers=1, timeout_s=60.0) as pool:
            # the one sandbox page, warm before the render starts: the render takes it
            (page,) = [p for c in pool._active[0].browser.contexts for p in c.pages if p.url.endswith("/index.html")]
            render = asyncio.ensure_future(pool.render(waiting, 0))
            # the sketch has made its canvas: it waits in setup() for ever
            await page.wait_for_function("() => [...document.querySelectorAll('canvas')].some((c) => c.width === 512)")
            # navigated from the page's own timer, not awaited: the pool closes the page as soon as the
            # navigation lands, so waiting for the navigation (page.goto) would race that close
            await page.evaluate("() => { setTimeout(() => location.replace('about:blank'), 0); }")
            return await render

    result = asyncio.run(scenario())
    assert not result.infra_error and not result.timed_out and result.violations == ["dom:navigation"]
    assert gate(waiting, result).reason == "dom"


def test_browser_memory_is_capped_and_a_breach_is_the_sketch_s_own():
    hog = SMALL.replace("brush.noStroke();", "const keep = []; while (true) keep.push(new ArrayBuffer(64 << 20));")
    with ThreadedRenderPool(size=1, browsers=1, timeout_s=60.0, memory_cap_gib=1.5) as pool:
        for pid in [b.pid for b in pool.pool._active] + [c.pid for b in pool.pool._active for c in psutil.Process(b.pid).children(recursive=True)]:
            assert psutil.Process(pid).rlimit(psutil.RLIMIT_DATA)[0] == int(1.5 * 2**30), pid
        result = pool.submit(hog, 0).result()
        assert not result.infra_error and not result.timed_out
        assert result.error == "RangeError: Array buffer allocation failed"
        assert gate(hog, result).reason == "runtime_error"
        assert_own_results(pool.render_many([MARKED.format(index=3)], [0]), [3])


PAINT = 'translate(-width / 2, -height / 2); brush.noStroke(); brush.fill("#3a6ea5", 170); brush.circle(128, 128, 60);'
WAITING = {
    "promise": "async function setup() { createCanvas(256, 256, WEBGL); await new Promise(() => {}); }\nfunction draw() { %s }" % PAINT,
    "frame_rate": "function setup() { createCanvas(256, 256, WEBGL); frameRate(0.01); }\nfunction draw() { %s }" % PAINT,
    "paint_then_wait": "async function setup() { createCanvas(256, 256, WEBGL); %s await { then() {} }; }" % PAINT,
}


def test_a_sketch_that_waits_ends_at_its_limit():
    """Waiting uses no CPU, so a limit of CPU time alone let these hold their pages until the backstop
    (SOLO_BACKSTOP x the limit); their waiting is counted as wall clock and they end when their own time (CPU
    and waiting) reaches the limit. The time bound is generous: on a loaded box a waiting page's wake-ups queue
    for a core too, and that queueing is not counted as waiting (a starved page's is not either)."""
    limit = 6.0

    async def waiting():
        async with RenderPool(size=len(WAITING), browsers=len(WAITING), timeout_s=limit) as pool:
            return await asyncio.gather(*(pool.render(code) for code in WAITING.values()))

    for name, result in zip(WAITING, asyncio.run(waiting())):
        verdict = gate(WAITING[name], result)
        if name == "frame_rate" and not result.timed_out:  # a page whose frames follow the virtual clock does not wait
            assert result.elapsed_s < SOLO_BACKSTOP * limit and result.error is None, (name, result.error)
            continue
        assert result.timed_out and verdict.reason == "timeout" and "waited" in verdict.detail, (name, result.error)
        assert result.cpu_s + result.waited_s >= limit and result.waited_s > result.cpu_s, (name, result)  # its own time
        assert result.waited_s <= result.elapsed_s < SOLO_BACKSTOP * limit, (name, result.elapsed_s)  # not the backstop


def test_load_never_counts_as_waiting_and_waiting_counts_whatever_the_load():
    """The clock behind the limit (sandbox.processes.CpuClock) on processes of its own: a spinner starved of CPU
    (pinned to one core beside three more spinners, on whatever else loads that core) queues for the core all the
    time, so none of its wall clock is waiting and it keeps being judged by its CPU time, with its backstop; a
    process blocked on a read wants no core, so all of its wall clock is waiting."""
    import subprocess
    import sys

    from lit_watercolour.sandbox.processes import SCHEDSTAT, CpuClock

    assert SCHEDSTAT  # the kernel keeps run-queue time (Linux with schedstats, as on every machine this runs on)
    core = min(os.sched_getaffinity(0))
    spin = [sys.executable, "-c", "while True: pass"]
    spinners = [subprocess.Popen(spin) for _ in range(4)]
    blocked = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for p in spinners:
            os.sched_setaffinity(p.pid, {core})
        assert blocked.stdout.readline() == "ready\n"  # started up: from here on it only waits
        starved, idle = CpuClock([spinners[0].pid]), CpuClock([blocked.pid])
        while starved.wall_s() < 3.0:
            time.sleep(0.25)  # the clock's readings, as the pool takes them
            starved.tick()
            idle.tick()
        assert starved.cpu_s() < 0.6 * starved.wall_s()  # it did share its core
        assert starved.waited_s() < 0.1 * starved.wall_s(), (starved.cpu_s(), starved.waited_s(), starved.wall_s())
        assert idle.waited_s() > 0.9 * idle.wall_s() and idle.cpu_s() < 0.1
    finally:
        for p in [*spinners, blocked]:
            p.kill()
            p.wait()
