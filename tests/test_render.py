"""The render pool against real Chromium and p5.brush: pixels, reports, determinism,
concurrency, recovery and cleanup."""

from __future__ import annotations

import asyncio
import io
import os
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import psutil
import pytest
from PIL import Image

from lit_watercolour.sandbox import RenderPool, ThreadedRenderPool, default_browsers, gpu_present
from lit_watercolour.sandbox.pages import RENDERER_DIR
from lit_watercolour.records import RenderResult
from lit_watercolour.sandbox.picture import measured
from processes import chromium_descendants

SMALL = """function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#3a6ea5", 170);
  brush.circle(256, 256, 40);
}
"""

EMPTY = "function setup() { createCanvas(512, 512, WEBGL); noLoop(); }"

ANIMATED = """let frames = 0;
function setup() { createCanvas(512, 512, WEBGL); }
function draw() {
  frames++;
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("#3a6ea5", 170);
  brush.circle(60 + frames * 40, 256, 30);
  console.log("frame " + frames);
}
"""


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def test_good_sketch_renders_with_report(rendered, sketches):
    (result,) = rendered([sketches["hibiscus"]], [0])
    assert result.error is None and not result.timed_out and not result.infra_error
    assert result.violations == []
    image = Image.open(io.BytesIO(result.png))
    assert image.size == (512, 512) and image.mode in ("RGB", "RGBA")
    assert result.painted_fraction > 0.05
    assert result.calls["brush.endShape"] >= 15 and result.calls["brush.fill"] >= 15
    assert not any(name.startswith("p5.") for name in result.calls)  # p5.brush's own p5 use is not counted
    assert 0 < result.js_s <= result.elapsed_s


def test_same_code_and_seed_give_the_same_pixels(render_pool, sketches):
    code = sketches["poppy"]
    a, b, c = render_pool.render_many([code, code, code], [7, 7, 8])
    diff = np.abs(pixels(a.png) - pixels(b.png)).max(axis=2)
    # Rasteriser nondeterminism: measured up to ~70 of 262,144 pixels off, by at most ~25 levels.
    assert (diff > 0).mean() < 0.0005 and np.abs(pixels(a.png) - pixels(b.png)).mean() < 0.05
    other = np.abs(pixels(a.png) - pixels(c.png)).max(axis=2)
    assert (other > 8).mean() > 0.01  # another seed paints another picture


REFERENCE = Path(__file__).resolve().parent / "reference"
REFERENCE_SKETCHES = {  # fills with bleed and texture, flow-field strokes, a custom tip's callback
    "hibiscus": RENDERER_DIR / "sketches" / "hibiscus.js",
    "flow_field_lines": Path(__file__).resolve().parent / "legit" / "flow_field_lines.js",
    "custom_tip_stamp": Path(__file__).resolve().parent / "legit" / "custom_tip_stamp.js",
}


def test_the_harness_leaves_the_pixels_as_they_were(render_pool, rendered):
    """Changes to the sandbox page (prelude.js, harness.js) must not move a pixel: seed 0 of these
    sketches against PNGs rendered by main's page of 2026-12-04 (SwiftShader, Debian Chromium;
    another rasteriser paints other pixels, so a machine with a GPU renders them on a SwiftShader pool of its own)."""
    codes, seeds = [path.read_text() for path in REFERENCE_SKETCHES.values()], [0] * len(REFERENCE_SKETCHES)
    own = render_pool.pool.backend != "swiftshader"
    with ThreadedRenderPool(size=1, timeout_s=60.0, render_backend="swiftshader") if own else nullcontext(render_pool) as pool:
        assert "SwiftShader" in pool.pool.renderer
        results = pool.render_many(codes, seeds) if own else rendered(codes, seeds)
    for name, result in zip(REFERENCE_SKETCHES, results):
        assert result.error is None and result.violations == [], name
        diff = np.abs(pixels(result.png) - pixels((REFERENCE / f"{name}.png").read_bytes()))
        # only the rasteriser's run-to-run jitter (test_same_code_and_seed_give_the_same_pixels)
        assert (diff.max(axis=2) > 0).mean() < 0.0005 and diff.mean() < 0.05, name


FROZEN_PROBE = SMALL.replace("noLoop();", """noLoop();
  const builtins = [Object, Array, Reflect.getPrototypeOf(function () {}), Promise, String, Number, Boolean, Symbol, Error, RegExp, Map, Set, JSON, Reflect, Date];
  console.log(builtins.map((c) => Object.isFrozen(c.prototype || c)).join(" "));
  try { Object.defineProperty(Array.prototype, "then", { value: 1 }); console.log("then added"); } catch (e) { console.log(e.name); }""")


def test_the_builtin_prototypes_are_frozen(render_pool):
    # a sketch that made every object thenable could answer for the harness (harness.js)
    result = render_pool.submit(FROZEN_PROBE, 0).result()
    assert result.error is None
    assert result.console == ["log: " + " ".join(["true"] * 15), "log: TypeError"]


def test_half_density_paints_the_same_picture_at_half_the_pixels(render_pool, sketches):
    code = sketches["hibiscus"]
    full = render_pool.submit(code, 3).result()
    with ThreadedRenderPool(size=1, timeout_s=60.0, pixel_density=0.5) as half_pool:
        half = half_pool.submit(code, 3).result()
    assert half.error is None and half.violations == []
    assert Image.open(io.BytesIO(half.png)).size == (256, 256)
    shrunk = np.asarray(Image.open(io.BytesIO(full.png)).convert("RGB").resize((256, 256), Image.BILINEAR), dtype=np.int16)
    # the same washes, coarser grain: measured 1.0 levels off on average (another seed: 3.8)
    assert np.abs(shrunk - pixels(half.png)).mean() < 2.0
    assert abs(half.painted_fraction - full.painted_fraction) < 0.25 * full.painted_fraction
    with pytest.raises(ValueError, match="pixel_density"):
        RenderPool(pixel_density=2.0)


def test_animated_sketch_stops_after_max_frames(render_pool):
    result = render_pool.submit(ANIMATED, 0).result()
    assert result.error is None
    assert result.calls["brush.circle"] == 5  # RenderPool(max_frames=5)
    assert result.console == [f"log: frame {i}" for i in range(1, 6)]


def test_console_flood_is_capped(render_pool):
    flood = SMALL.replace('brush.noStroke();', 'brush.noStroke();\n  for (let i = 0; i < 100000; i++) console.log("spam " + i);')
    result = render_pool.submit(flood, 0).result()
    assert result.error is None and len(result.console) == 51
    assert result.console[-1] == "(99950 more console lines dropped)"


def test_painted_fraction_counts_pixels_off_the_background():
    image = Image.new("RGB", (100, 100), "#fbf7ee")
    image.paste((200, 40, 80), (0, 0, 10, 10))  # 1% painted
    image.paste((245, 240, 230), (50, 50, 70, 70))  # near the background: not paint
    buf = io.BytesIO()
    image.save(buf, "PNG")
    result = measured(RenderResult(png=buf.getvalue()))
    assert result.painted_fraction == 0.01
    assert result.image is result.image and result.image.size == (100, 100)  # decoded once, shared by every reader



# A clean sketch that leaves every trace it can without failing the gate: globals of its own, and
# compounded brush scale and fill state in p5.brush's module.
POLLUTER = """var leak = 1;
globalThis.leak2 = 2;
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#20304a");
  brush.scaleBrushes(3);
  brush.noStroke();
  brush.fill("#e0a030", 230);
  brush.circle(256, 256, 200);
}
"""
# Reads what a previous sketch could have left and paints with state that compounds in one realm.
PROBE = """function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
  console.log([typeof leak, typeof leak2, frameCount, millis() < 100].join("|"));
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#3a6ea5", 170);
  brush.circle(256, 256, 60);
  brush.pick("2B");
  brush.stroke("#2a2a2a");
  brush.line(100, 400, 400, 420);
}
"""


def test_a_reused_page_is_as_fresh_as_a_new_one():
    with ThreadedRenderPool(size=1, browsers=1, timeout_s=60.0) as pool:
        fresh = pool.submit(PROBE, 4).result()  # the first page: a new context
        for _ in range(3):
            polluted = pool.submit(POLLUTER, 4).result()
            assert polluted.error is None and polluted.violations == [] and polluted.png
        pool._call(pool.pool.settled()).result()
        reused_before = pool.pool.pages_reused  # the last polluter's page, renewed for the first probe
        probes = [pool.submit(PROBE, 4).result() for _ in range(3)]
        pool._call(pool.pool.settled()).result()
        assert pool.pool.pages_reused >= reused_before + 3  # and each probe's page after it
    assert fresh.error is None and fresh.violations == [] and fresh.console == ["log: undefined|undefined|0|true"]
    for probe in probes:
        assert probe.error is None and probe.violations == [] and probe.console == fresh.console
        diff = np.abs(pixels(probe.png) - pixels(fresh.png))
        assert (diff.max(axis=2) > 0).mean() < 0.0005 and diff.mean() < 0.05  # rasteriser noise only


def test_fifty_renders_through_four_pages_leave_no_processes():
    before = chromium_descendants()
    # other pools' browsers (the session's) may start a helper process meanwhile: not this pool's
    others = {os.getpgid(p) for p in before if psutil.pid_exists(p)}
    # relaunch_every=20: the browser is replaced twice while renders are in flight on it.
    with ThreadedRenderPool(size=4, browsers=1, timeout_s=60.0, relaunch_every=20) as pool:
        results = pool.render_many([EMPTY] * 50, list(range(50)))  # cheap: this is about the pages
        during = chromium_descendants() - before
    assert all(r.error is None and r.png and not r.infra_error for r in results)
    assert during, "the pool's Chromium should have been visible while it ran"
    deadline = time.monotonic() + 30  # processes exit asynchronously after close; a loaded box is slow
    leftover = own_processes(before, others)
    while leftover and time.monotonic() < deadline:
        psutil.wait_procs([psutil.Process(p) for p in leftover if psutil.pid_exists(p)], timeout=0.5)
        leftover = own_processes(before, others)
    assert not leftover, [(p, psutil.Process(p).status(), psutil.Process(p).cmdline()[:3]) for p in leftover]


def own_processes(before: set[int], other_groups: set[int]) -> set[int]:
    """Chromium processes started since `before`, outside the process groups of other browsers."""
    found = set()
    for pid in chromium_descendants() - before:
        try:
            if os.getpgid(pid) not in other_groups:
                found.add(pid)
        except ProcessLookupError:
            pass
    return found


def test_browser_death_is_recovered():
    async def scenario():
        async with RenderPool(size=1, timeout_s=30.0) as pool:
            first = await pool.render(SMALL, 0)
            await pool._active[0].browser.close()  # the browser dies under the pool's warm page
            second = await pool.render(SMALL, 0)
            return first, second

    first, second = asyncio.run(scenario())
    assert first.error is None and second.error is None and not second.infra_error
    assert np.abs(pixels(first.png) - pixels(second.png)).max() <= 2


@pytest.mark.parametrize("browsers", [1, 2])
def test_stuck_page_is_cut_off_and_the_pool_serves_on(browsers):
    """3 s is tight for the good sketch on a loaded box. One browser: if it runs out beside the
    stuck pages, a run alone in a browser of its own decides. A browser per page: each page is
    judged by its own time in the pool (module docstring)."""
    stuck = SMALL.replace("brush.noStroke();", "while (true) {}")

    async def scenario():
        async with RenderPool(size=2, browsers=browsers, timeout_s=3.0) as pool:
            return await asyncio.gather(pool.render(stuck, 0), pool.render(SMALL, 0), pool.render(stuck, 1))

    hung, good, hung2 = asyncio.run(scenario())
    assert hung.timed_out and hung2.timed_out and hung.error == "timeout"
    assert good.error is None and good.png and not good.timed_out


def test_crashed_page_is_replaced_and_the_render_retried():
    async def scenario():
        async with RenderPool(size=1, timeout_s=30.0) as pool:
            take = pool._take_page
            crashes = []

            async def take_and_crash_first():
                warm = await take()
                if not crashes:  # the renderer of the first page dies just as the sketch starts
                    cdp = await warm.context.new_cdp_session(warm.page)
                    crashes.append(asyncio.ensure_future(cdp.send("Page.crash")))
                return warm

            pool._take_page = take_and_crash_first
            result = await pool.render(SMALL, 0)
            await asyncio.gather(*crashes, return_exceptions=True)  # Page.crash never answers
            return result, crashes

    result, crashes = asyncio.run(scenario())
    assert len(crashes) == 1
    assert result.error is None and result.png and not result.infra_error


def test_the_pool_reports_which_renderer_webgl_got(render_pool):
    """`auto` names the backend WebGL really got: SwiftShader's renderer string on swiftshader, a hardware one on
    gpu, and gpu only where the machine has one."""
    pool = render_pool.pool
    software = "SwiftShader" in pool.renderer
    assert pool.config.render_backend == "auto" and pool.backend == ("swiftshader" if software else "gpu")
    assert software or gpu_present()


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU")
def test_gpu_backend_without_a_gpu_falls_back_to_swiftshader(caplog):
    async def scenario():
        async with RenderPool(size=1, render_backend="gpu", timeout_s=60.0) as pool:
            return pool.backend, pool.renderer, await pool.render(SMALL, 0)

    with caplog.at_level("WARNING", logger="lit_watercolour.sandbox.pool"):
        backend, renderer, result = asyncio.run(scenario())
    assert backend == "swiftshader" and "SwiftShader" in renderer
    assert any("falling back to SwiftShader" in r.getMessage() for r in caplog.records)
    assert result.error is None and result.png


def test_browsers_by_default_follow_the_backend_and_the_cores():
    assert default_browsers("swiftshader", size=32, cores=16) == 32  # one per page
    assert default_browsers("gpu", size=32, cores=16) == 1 and default_browsers("gpu", size=32, cores=64) == 4
    assert default_browsers("gpu", size=1, cores=64) == 1  # never more than the pages
    assert default_browsers("gpu", size=4, cores=2) == 1


def test_nothing_a_sketch_left_running_survives_into_the_next_render(monkeypatch):
    """A clean render's page gets a new document before the next sketch (work injected from outside: the
    sketch has no timer of its own). Work left scheduled is discarded with the old document while the
    renderer is kept; work left spinning blocks that navigation, and the page's context is closed,
    its renderer with it."""
    from lit_watercolour.sandbox import pages as pages_module, pool as pool_module
    from lit_watercolour.sandbox.browser import processes
    from lit_watercolour.sandbox.processes import cpu_seconds

    left_ticks: list[str] = []
    ticked: list[int] = []  # ticks logged before the renewal: the chain ran
    spinners: list[int] = []
    pools: list[RenderPool] = []
    real_renew = pool_module.renew

    async def renew_after_leaving_work(warm):
        renewals = pools[0].pages_reused
        if renewals == 0:  # a timer chain that would log for as long as its document lives
            warm.page.on("console", lambda message: left_ticks.append(message.text))
            await warm.page.evaluate("() => { const tick = () => { console.log('tick'); setTimeout(tick, 20); }; tick(); }")
            ticked.append(len(left_ticks))
            monkeypatch.setattr(pages_module, "RENEW_TIMEOUT_S", pages_module.WARM_TIMEOUT_S)  # a loaded box is slow
            await real_renew(warm)
            left_ticks.clear()  # from here on, a tick is work that outlived its document
            return warm
        # the spare page warming beside it is let finish, so that of the browser's renderers only
        # the page's own burns CPU in the fixed work below: that one is the page's renderer
        spare = pools[0]._warming - {asyncio.current_task()}
        if spare:
            await asyncio.wait(spare)
        renderers = [pid for kind, pid in await processes(warm.owner.cdp) if kind == "renderer"]
        before = {pid: cpu_seconds(pid) for pid in renderers}
        # answered once the spin is queued behind the answer: it runs when renew() starts
        await warm.page.evaluate("""() => new Promise((answer) => {
          let work = 0;
          for (let i = 0; i < 3e8; i++) work += i & 1;
          setTimeout(() => answer(work), 0);
          setTimeout(() => { for (;;) {} }, 0);
        })""")
        spinners.append(max(renderers, key=lambda pid: cpu_seconds(pid) - before[pid]))
        monkeypatch.setattr(pages_module, "RENEW_TIMEOUT_S", 2.0)  # the spin blocks it anyway: fail sooner
        return await real_renew(warm)

    monkeypatch.setattr(pool_module, "renew", renew_after_leaving_work)

    def alive(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    async def scenario():
        async with RenderPool(size=1, browsers=1, timeout_s=60.0) as pool:
            pools.append(pool)
            results = [await pool.render(SMALL, 0)]
            await pool.settled()  # renewed, the timer chain left behind
            renewed = pool.pages_reused
            results.append(await pool.render(SMALL, 1))
            await pool.settled()  # renewal fails on the spin: a new context instead
            results.append(await pool.render(SMALL, 2))
            return results, renewed, [pid for pid in spinners if alive(pid)]

    results, renewed, left = asyncio.run(scenario())
    assert all(r.error is None and r.png for r in results)
    assert renewed == 1 and ticked[0] >= 1 and left_ticks == [] and spinners
    assert left == []


def test_a_report_that_cannot_be_read_is_the_sketch_s_tampering():
    from lit_watercolour.gate import gate
    from lit_watercolour.sandbox.faults import from_report

    good = {"error": None, "console": [], "calls": {"brush.circle": 1}, "violations": [], "js_ms": 5.0,
            "png": "data:image/png;base64,", "width": 512, "height": 512}
    assert from_report(good, 1.0, 0.5, []).violations == []
    for broken in (None, "ok", {}, {**good, "calls": {"brush.circle": "1"}}, {**good, "violations": [{}]},
                   {**good, "png": "data:text/html,<b>"}, {**good, "png": "data:image/png;base64,@@"}, {**good, "width": "wide"}):
        result = from_report(broken, 1.0, 0.5, [])
        assert result.violations == ["tamper:report"] and not result.infra_error and result.png is None, broken
        assert gate(SMALL, result).reason == "tamper"
