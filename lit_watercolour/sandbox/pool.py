"""An asyncio pool of warm headless-Chromium pages, spread over several browsers, that render
p5.brush sketches.

Each render gets a fresh document and JS realm (state never leaks between sketches: p5.brush's
`scaleBrushes` compounds, globals linger), loaded with p5 + p5.brush ahead of time, while earlier
sketches paint, so a render pays only for its own JS (sandbox.pages). The page (renderer/
sandbox.html + prelude.js + harness.js) reports when p5.brush has flushed its last frame; there are
no sleeps. A sketch that loops forever is cut off by the pool's own clock (Playwright's timeouts do
not fire while page JS spins) and its context closed, which kills its renderer. Whose fault a
failure is: sandbox.faults. Browsers and backends: sandbox.browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import tempfile
import time
from pathlib import Path

from playwright.async_api import Error as PlaywrightError, async_playwright

from lit_watercolour.records import RenderResult
from lit_watercolour.sandbox import browser as chromium
from lit_watercolour.sandbox.browser import BrowserHandle, gpu_answers, gpu_pid, launch, probe, processes, shutdown
from lit_watercolour.sandbox.config import RenderConfig
from lit_watercolour.sandbox.faults import SOLO_BACKSTOP, Lane, PageCrashed, Retired, Suspect, from_report, navigated
from lit_watercolour.sandbox.pages import RENDERER_DIR, WARM_TIMEOUT_S, WarmPage, assets, close_context, open_page, renew
from lit_watercolour.sandbox.picture import measured
from lit_watercolour.sandbox.processes import CpuClock
from lit_watercolour.sandbox.text_check import TextDetector, shared_detector

log = logging.getLogger(__name__)

WATCH_S = 0.25  # the least time between two readings of a render's time: the most it runs past its limit, closing aside
PACE = 4.0  # cores a page may keep busy at once: its time is read again when, at this pace, it could reach its limit


class RenderPool:
    """`async with RenderPool(size=4) as pool: result = await pool.render(code, seed)`.

    size: renders in flight at once (and warm pages kept ready). `config` (a RenderConfig) says
    how each renders; keyword arguments replace its fields (`RenderPool(2, timeout_s=8)`).
    """

    def __init__(self, size: int = 4, config: RenderConfig | None = None, **fields) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        self.config = config = dataclasses.replace(config or RenderConfig(), **fields)
        self.canvas, self.timeout_s = config.canvas, config.timeout_s
        self.executable_path = chromium.chromium_executable(config.executable_path)
        self.backend = chromium.resolve_backend(config.render_backend)
        self.browsers = config.browsers or chromium.default_browsers(self.backend, size)
        self.pages_reused = 0  # renders that got a used page with a new document rather than a new context
        self.renderer: str | None = None  # what WebGL reported at start-up
        self._assets = assets(Path(config.page_dir) if config.page_dir else RENDERER_DIR)
        self._playwright = None
        self._executable: str | None = None
        self._wrapper_dir: tempfile.TemporaryDirectory | None = None  # the memory cap's wrapper script
        self._active: list[BrowserHandle] = []
        self._retired: set[BrowserHandle] = set()
        self._alone: set[BrowserHandle] = set()  # browsers of renders judged alone
        self._closing: set[asyncio.Future] = set()  # retired browsers being shut down
        self._browser_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(size)
        self._warm: asyncio.Queue[asyncio.Future] = asyncio.Queue()
        self._warming: set[asyncio.Future] = set()  # pages being opened or renewed
        self._closed = False
        self.reader: TextDetector | None = None  # the capture's text check (config.text_check)

    async def __aenter__(self) -> RenderPool:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def args(self) -> list[str]:
        return chromium.launch_args(self.backend, self.config.launch_args, self.config.accelerated_canvas2d)

    async def start(self) -> None:
        try:
            if self.config.text_check.enabled:  # its models load while the browser starts
                reading = asyncio.ensure_future(asyncio.to_thread(shared_detector, self.config.text_check))
            self._playwright = await async_playwright().start()
            self._executable = self._capped_executable()
            first = await launch(self._playwright, self._executable, self.args)
            try:
                self.renderer = await probe(first)
            except (PlaywrightError, asyncio.TimeoutError):
                if self.backend != "gpu":
                    raise
                self.renderer = None  # the GPU path broke: fall back below
            if self.backend == "gpu" and self.config.launch_args is None and chromium.is_software(self.renderer):
                log.warning("render backend gpu: WebGL got %r, falling back to SwiftShader", self.renderer)
                await shutdown(first)
                self.backend = "swiftshader"
                self.browsers = self.config.browsers or chromium.default_browsers("swiftshader", self.size)
                first = await launch(self._playwright, self._executable, self.args)
                self.renderer = await probe(first)
            log.info("render pool: %s backend, %d browsers x %d pages, WebGL renderer %r",
                     self.backend, self.browsers, self.size, self.renderer)
            self._active = [first]
            for _ in range(self.size):
                self._queue_page(self._new_page())
            await self.settled()  # the pool is warm when start() returns
            if self.config.text_check.enabled:
                self.reader = await reading
        except BaseException:
            await self.close()
            raise

    def _capped_executable(self) -> str | None:
        real = self.executable_path or (self._playwright.chromium.executable_path if self.config.memory_cap_gib else None)
        if not self.config.memory_cap_gib or not real:
            return real
        self._wrapper_dir = tempfile.TemporaryDirectory(prefix="lw-render-")
        return chromium.capped_executable(real, self.config.memory_cap_gib, self._wrapper_dir.name)

    async def close(self) -> None:
        """Bounded: every await has a limit, then the browsers' processes are killed."""
        self._closed = True
        pending = []
        while not self._warm.empty():
            task = self._warm.get_nowait()
            task.cancel()
            pending.append(task)
        for _ in range(self.size):  # wakes renders waiting for a page
            gone = asyncio.get_running_loop().create_future()
            gone.set_exception(RuntimeError("the render pool is closed"))
            gone.exception()  # retrieved: nobody may be waiting
            self._warm.put_nowait(gone)
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        everyone = {*self._active, *self._retired, *self._alone}
        self._active, self._retired, self._alone = [], set(), set()
        await asyncio.gather(*(shutdown(b) for b in everyone), *self._closing)
        if self._playwright is not None:
            with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
                await asyncio.wait_for(self._playwright.stop(), chromium.CLOSE_TIMEOUT_S)
            self._playwright = None
        if self._wrapper_dir is not None:
            self._wrapper_dir.cleanup()
            self._wrapper_dir = None

    async def _pick_browser(self) -> BrowserHandle:
        """The usable browser with the fewest pages warming or painting, launching replacements."""
        async with self._browser_lock:
            for owner in self._active:
                if owner.usable() and owner.renders >= self.config.relaunch_every:
                    await self._retire(owner)
            self._active = [b for b in self._active if b.usable()]
            while len(self._active) < self.browsers:
                if self._closed:
                    raise RuntimeError("the render pool is closed")
                self._active.append(await launch(self._playwright, self._executable, self.args))
            return min(self._active, key=lambda b: b.busy)

    async def _retire(self, owner: BrowserHandle) -> None:
        """No new pages on this browser; it is closed when its last page is done."""
        if owner in self._alone:
            return
        if not owner.retired.done():
            owner.retired.set_result(None)
        self._retired.add(owner)
        if owner in self._active:
            self._active.remove(owner)
        await self._close_if_idle(owner)

    async def _close_if_idle(self, owner: BrowserHandle) -> None:
        if (owner.retired.done() or owner.disconnected.done()) and owner.busy <= 0 and owner in self._retired | set(self._active):
            self._retired.discard(owner)
            if owner in self._active:
                self._active.remove(owner)
            closing = asyncio.ensure_future(shutdown(owner))  # in the background: renders go on
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _new_page(self) -> WarmPage:
        """A warm page on the least busy browser, counted busy until `_discard`."""
        owner = await self._pick_browser()
        owner.busy += 1
        try:
            return await self._warm_on(owner)
        except BaseException:
            owner.busy -= 1
            await asyncio.shield(self._close_if_idle(owner))
            raise

    async def _warm_on(self, owner: BrowserHandle) -> WarmPage:
        """A warm page, or an error as soon as its browser dies (Playwright can leave a call on a
        killed browser pending for ever, e.g. `new_page`) or it takes over WARM_TIMEOUT_S."""
        opening = asyncio.ensure_future(open_page(owner, self._assets, self.canvas[1]))
        try:
            await asyncio.wait({opening, owner.disconnected, owner.retired}, timeout=WARM_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the pool is closing
            opening.cancel()
            raise
        if not opening.done():
            opening.cancel()
            if owner.disconnected.done():
                raise RuntimeError("browser died while a page was warming")
            if owner.retired.done():
                raise Retired("browser retired while a page was warming")
            raise RuntimeError("page warm-up timed out")
        return opening.result()

    async def _renew_or_new(self, warm: WarmPage) -> WarmPage:
        """The page with a new document; one that cannot be renewed (its old document still runs
        work, or it crashed) has its context closed, renderer and all, and a new page is warmed."""
        if warm.owner.usable():
            with contextlib.suppress(PlaywrightError, RuntimeError, asyncio.TimeoutError):
                await renew(warm)
                self.pages_reused += 1
                return warm
        await self._discard(warm)
        return await self._new_page()

    def _queue_page(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)
        self._warm.put_nowait(task)

    async def settled(self) -> None:
        """Wait until no page is being opened or renewed (the pool's work of past renders is done)."""
        while self._warming:
            await asyncio.wait(set(self._warming))

    async def _take_page(self) -> WarmPage:
        """A warm page. When it was the last one ready or warming, a new one starts warming at once.
        A page warmed on a browser that has since died or been retired is skipped, not handed out
        (it would spend the render's one retry)."""
        failures = 0
        while True:
            if self._closed:
                raise RuntimeError("the render pool is closed")
            task = await self._warm.get()
            if not self._closed and self._warm.empty():
                self._queue_page(self._new_page())
            try:
                warm = await task
            except Retired:
                continue
            except (PlaywrightError, RuntimeError, asyncio.TimeoutError):
                failures += 1
                if failures > self.size:  # every warm page failed: the browser itself cannot start
                    raise
                continue
            if warm.owner.usable():
                return warm
            await self._discard(warm)

    async def _recycle(self, warm: WarmPage, clean: bool) -> None:
        """After a render: the context of a clean one (no error, no violation) gets a new page for the
        next sketch, up to `size` + 1 spare pages; others are closed."""
        if clean and self.config.reuse_pages and not self._closed and warm.owner.usable() and self._warm.qsize() <= self.size:
            self._queue_page(self._renew_or_new(warm))
        else:
            await self._discard(warm)

    async def render(self, code: str, seed: int = 0, timeout_s: float | None = None) -> RenderResult:
        """Render one sketch (whose fault a failure is: sandbox.faults). `timeout_s` overrides the
        pool's limit for this render."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        async with self._slots:
            for _ in range(2):
                try:
                    result = await self._render_once(code, seed, limit)
                except Suspect as exc:
                    result = await self._render_alone(code, seed, limit, str(exc))
                except (PlaywrightError, RuntimeError, asyncio.TimeoutError) as exc:
                    failure = f"{type(exc).__name__}: {exc}"
                    continue
                # off the event loop, overlapping other renders: PNG decoding, numpy and onnxruntime release the GIL
                return await asyncio.to_thread(measured, result, self.reader)
            return RenderResult(png=None, error=f"render failed twice: {failure}"[:500], infra_error=True)

    async def _render_once(self, code: str, seed: int, timeout_s: float) -> RenderResult:
        warm = await self._take_page()
        owner = warm.owner
        owner.renders += 1
        if owner.gpu_pid is None:  # Chromium starts its GPU process lazily
            owner.gpu_pid = await gpu_pid(owner)
        gpu_before = owner.gpu_pid
        lane = Lane(shared=bool(owner.painting))
        clean = False
        for other in owner.painting:
            other.shared = True
        owner.painting.add(lane)
        try:
            # a page that starts beside others is judged by wall clock: no CPU reading to pay for
            clock = None if lane.shared else CpuClock([p for kind, p in await processes(owner.cdp) if kind != "browser"])
            result = await self._paint(warm, code, seed, timeout_s, clock, lane)
            if result.timed_out:
                await self._retire(owner)  # its GPU process may be wedged
                if lane.shared:
                    raise Suspect("timed out beside other pages")
                if not await gpu_answers(owner):
                    raise Suspect("timed out on a GPU process that does not answer")
                return result
            gpu_now = await gpu_pid(owner)
            if gpu_before is not None and gpu_now is not None and gpu_now != gpu_before:
                owner.gpu_pid = gpu_now
                await self._retire(owner)
                raise Suspect("the GPU process was replaced while the sketch painted")
            clean = result.png is not None and result.error is None and not result.violations
            return result
        except PageCrashed as exc:
            raise Suspect(str(exc)) from exc
        finally:
            owner.painting.discard(lane)
            await self._recycle(warm, clean)

    async def _paint(self, warm: WarmPage, code: str, seed: int, timeout_s: float, clock: CpuClock | None, lane: Lane | None = None) -> RenderResult:
        """Run the sketch on a warm page. Beside other pages of its browser (`lane.shared`): cut
        off after `timeout_s` of wall clock. Alone: when its own time (CPU while it works, wall
        clock while it waits) reaches `timeout_s`, or at the backstop. Raises PageCrashed, or
        RuntimeError when the browser died."""
        start = time.monotonic()
        options = {"code": code, "seed": seed & 0x7FFFFFFF, "maxFrames": self.config.max_frames, "minSide": self.canvas[0],
                   "maxSide": self.canvas[1], "density": self.config.pixel_density}
        run = asyncio.ensure_future(warm.page.evaluate("(options) => __lw.run(options)", options))
        watched = {run, warm.crashed, warm.owner.disconnected}

        def until_next_reading() -> float:
            """Seconds to let the sketch run before its time is read again; 0 once its time is over."""
            if clock is None or (lane is not None and lane.shared):
                return max(0.0, timeout_s - (time.monotonic() - start))
            clock.tick()
            left, backstop = timeout_s - clock.own_s(), SOLO_BACKSTOP * timeout_s - clock.wall_s()
            return 0.0 if left <= 0 or backstop <= 0 else max(WATCH_S, min(left / PACE, backstop))

        done = set()
        while not done and (pause := until_next_reading()) > 0:
            done, _ = await asyncio.wait(watched, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
        cpu_s, waited_s = (clock.cpu_s(), clock.waited_s()) if clock is not None else (0.0, 0.0)
        if not done:
            run.cancel()
            error = "timeout" if waited_s <= cpu_s else (
                f"timeout: the sketch waited {waited_s:.1f} s of its {timeout_s:g} s limit, doing nothing (a promise "
                "that never settles, a frame rate near zero); its time runs while it waits")
            return RenderResult(png=None, error=error, elapsed_s=time.monotonic() - start, cpu_s=cpu_s, waited_s=waited_s,
                                timed_out=True)
        if run not in done and warm.owner.disconnected in done:
            run.cancel()
            raise RuntimeError("browser died mid-render")
        if warm.crashed in done:
            run.cancel()
            warm.crashed.result()  # raises PageCrashed
        try:
            report = run.result()
        except PlaywrightError as exc:
            if warm.crashed.done() or warm.owner.disconnected.done() or not (warm.violations or warm.destroyed or navigated(str(exc))):
                raise  # the page died by itself
            # the sketch navigated or was cut off by the router: its own doing, not retried
            violations = set(warm.violations) | ({"dom:navigation"} if warm.destroyed or navigated(str(exc)) else set())
            return RenderResult(png=None, error=f"{exc}"[:500], elapsed_s=time.monotonic() - start, cpu_s=cpu_s,
                                waited_s=waited_s, violations=sorted(violations))
        result = from_report(report, time.monotonic() - start, cpu_s, warm.violations)
        result.waited_s = waited_s
        return result

    async def _render_alone(self, code: str, seed: int, timeout_s: float, why: str) -> RenderResult:
        """The deciding run of a sketch that failed beside others: its own fresh browser, one page."""
        try:
            owner = await launch(self._playwright, self._executable, self.args)
        except (PlaywrightError, RuntimeError, asyncio.TimeoutError) as exc:
            return RenderResult(png=None, error=f"{why}; its own browser did not start: {exc}"[:500], infra_error=True)
        self._alone.add(owner)
        cap = f"each browser process is capped at {self.config.memory_cap_gib:g} GiB" if self.config.memory_cap_gib else "no memory cap"
        try:
            warm = await self._warm_on(owner)
            found = await processes(owner.cdp)
            gpu_before = next((p for kind, p in found if kind == "GPU"), None)
            result = await self._paint(warm, code, seed, timeout_s, CpuClock([p for kind, p in found if kind != "browser"]))
            if not result.timed_out and gpu_before is not None and await gpu_pid(owner) not in (gpu_before, None):
                return RenderResult(png=None, error=f"the sketch crashed its own GPU process, alone in its browser ({cap})", elapsed_s=result.elapsed_s)
            return result
        except PageCrashed:
            return RenderResult(png=None, error=f"the sketch crashed its page alone in its browser: out of memory or a renderer fault ({cap})")
        except (PlaywrightError, RuntimeError, asyncio.TimeoutError) as exc:
            return RenderResult(png=None, error=f"{why}; alone: {type(exc).__name__}: {exc}"[:500], infra_error=True)
        finally:
            self._alone.discard(owner)
            await asyncio.shield(shutdown(owner))

    async def _discard(self, warm: WarmPage) -> None:
        """Close a used context; a close that hangs means the browser is unwell: retire it."""
        if not warm.crashed.done():
            warm.crashed.cancel()
        if warm.owner.usable() and not await close_context(warm.context):
            await self._retire(warm.owner)  # a retired or dead browser's contexts go with it
        warm.owner.busy -= 1
        await self._close_if_idle(warm.owner)
