"""An asyncio pool of warm headless-Chromium pages that render p5.brush sketches.

Each render gets a fresh browser context (state never leaks between sketches: p5.brush's
`scaleBrushes` compounds, globals linger), but the context is opened and p5 + p5.brush are
parsed ahead of time, while earlier sketches paint, so a render pays only for its own JS.
The page (renderer/sandbox.html + prelude.js + harness.js) reports when p5.brush has
flushed its last frame; there are no sleeps. A sketch that loops forever is cut off by
`asyncio.wait_for` (Playwright's own timeouts do not fire while page JS spins) and its
context closed, which kills its renderer.

`ThreadedRenderPool` runs the pool on a background event loop for Lightning's synchronous
training loop: `submit` returns a `concurrent.futures.Future`, so renders overlap scoring.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import io
import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from playwright.async_api import Browser, BrowserContext, Error as PlaywrightError, Page, async_playwright

from lit_watercolour.rollout import CANVAS_RANGE, RenderResult

RENDERER_DIR = Path(__file__).resolve().parent.parent / "renderer"
ORIGIN = "http://sketch.invalid"
CHROMIUM_ENV = "LIT_WATERCOLOUR_CHROMIUM"
DEBIAN_CHROMIUM = "/usr/bin/chromium"

# Chosen by measurement (scripts/bench_render.py, 7 fixture sketches, 2 cores shared with
# other jobs): without --disable-accelerated-2d-canvas the same batch took 435 s instead of
# 17 s (p5.brush rasterises every fill into an offscreen Canvas2D mask, and GPU-rasterised
# Canvas2D under SwiftShader is ~25x slower than the software path); adding --in-process-gpu
# gave the same throughput (17.1 s), so the GPU process stays separate, where its crash
# cannot take the browser down. SwiftShader must be opted into since Chrome 139. The
# host-resolver rule makes any request that escapes routing fail at DNS. The background
# flags keep timers and rAF at full rate in pages that are not in front; the V8 heap cap
# makes a runaway allocation kill its own renderer early rather than swamp the machine.
LAUNCH_ARGS: tuple[str, ...] = (
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--disable-accelerated-2d-canvas",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--mute-audio",
    "--js-flags=--max-old-space-size=1024",
)

PAINT_DISTANCE = 32.0  # RGB distance from the modal colour that counts as paint (recipe)
WARM_TIMEOUT_S = 60.0  # warming a page takes ~1 s; a minute means its browser is wedged


def chromium_executable(explicit: str | None = None) -> str | None:
    """The Chromium to drive: an explicit path, $LIT_WATERCOLOUR_CHROMIUM, Debian's
    /usr/bin/chromium, or None for Playwright's own browser (users who ran `playwright install`)."""
    path = explicit or os.environ.get(CHROMIUM_ENV)
    if path:
        return path
    return DEBIAN_CHROMIUM if shutil.which(DEBIAN_CHROMIUM) else None


def painted_fraction(png: bytes) -> float:
    """Share of pixels farther than PAINT_DISTANCE (RGB) from the most common colour."""
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    flat = rgb.reshape(-1, 3)
    packed = (flat[:, 0].astype(np.int32) << 16) | (flat[:, 1].astype(np.int32) << 8) | flat[:, 2]
    values, counts = np.unique(packed, return_counts=True)
    mode = values[counts.argmax()]
    background = np.array([(mode >> 16) & 255, (mode >> 8) & 255, mode & 255], dtype=np.float32)
    distance = np.linalg.norm(flat.astype(np.float32) - background, axis=1)
    return float((distance > PAINT_DISTANCE).mean())


def _assets() -> dict[str, tuple[bytes, str]]:
    js = "application/javascript"
    modules = RENDERER_DIR / "node_modules"
    return {
        "/index.html": ((RENDERER_DIR / "sandbox.html").read_bytes(), "text/html"),
        "/prelude.js": ((RENDERER_DIR / "prelude.js").read_bytes(), js),
        "/p5.min.js": ((modules / "p5" / "lib" / "p5.min.js").read_bytes(), js),
        "/p5.brush.js": ((modules / "p5.brush" / "dist" / "p5.brush.js").read_bytes(), js),
        "/harness.js": ((RENDERER_DIR / "harness.js").read_bytes(), js),
    }


class _PageCrashed(Exception):
    pass


@dataclass
class _WarmPage:
    """A context with the sandbox loaded and p5 + p5.brush parsed, waiting for one sketch."""

    context: BrowserContext
    page: Page
    crashed: asyncio.Future
    violations: list[str]  # requests the router refused, seen outside the page
    browser: Browser
    disconnected: asyncio.Future  # done when the browser is gone: calls on it may then never return


class RenderPool:
    """`async with RenderPool(size=4) as pool: result = await pool.render(code, seed)`.

    size: renders in flight at once (and warm pages kept ready).
    canvas: (min, max) side in canvas units of the sketch's one createCanvas(w, h, WEBGL); the
        capture has the size the sketch made, times pixel_density.
    pixel_density: pixels per canvas unit of the capture; 0.5 paints a 512 sketch as a 256x256
        image in about two thirds of the time (scripts/bench_render.py), for scorers that look
        at 256 px anyway.
    timeout_s: wall-clock limit of one render, from the moment it has a page.
    max_frames: animated sketches are stopped after this many draw() frames.
    executable_path: Chromium binary; see `chromium_executable`.
    relaunch_every: renders after which the browser is replaced (Chrome gives up on GL after
        repeated GPU-process crashes; a fresh browser also bounds memory growth).
    """

    def __init__(
        self,
        size: int = 4,
        canvas: tuple[int, int] = CANVAS_RANGE,
        pixel_density: float = 1.0,
        timeout_s: float = 60.0,
        max_frames: int = 5,
        executable_path: str | None = None,
        launch_args: Sequence[str] = LAUNCH_ARGS,
        relaunch_every: int = 500,
    ) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        if not 0 < pixel_density <= 1:
            raise ValueError("pixel_density must be in (0, 1]")
        if not 0 < canvas[0] <= canvas[1]:
            raise ValueError("canvas must be (min_side, max_side) with 0 < min_side <= max_side")
        self.canvas = tuple(canvas)
        self.pixel_density = pixel_density
        self.timeout_s = timeout_s
        self.max_frames = max_frames
        self.executable_path = chromium_executable(executable_path)
        self.launch_args = list(launch_args)
        self.relaunch_every = relaunch_every
        self._assets = _assets()
        self._playwright = None
        self._browser: Browser | None = None
        self._browser_lock = asyncio.Lock()
        self._renders_on_browser = 0
        self._busy: dict[Browser, int] = {}  # renders in flight per browser
        self._disconnected: dict[Browser, asyncio.Future] = {}
        self._retired: set[Browser] = set()
        self._slots = asyncio.Semaphore(size)
        self._warm: asyncio.Queue[asyncio.Task] = asyncio.Queue()
        self._closed = False

    async def __aenter__(self) -> RenderPool:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def start(self) -> None:
        self._playwright = await async_playwright().start()
        await self._ensure_browser()
        tasks = [asyncio.ensure_future(self._new_page()) for _ in range(self.size)]
        for task in tasks:
            self._warm.put_nowait(task)
        await asyncio.wait(tasks)  # the pool is warm when start() returns

    async def close(self) -> None:
        self._closed = True
        while not self._warm.empty():
            task = self._warm.get_nowait()
            task.cancel()
            try:
                warm = await task
                await warm.context.close()
            except (asyncio.CancelledError, Exception):
                pass
        for browser in {*self._retired, self._browser} - {None}:
            try:
                await asyncio.wait_for(browser.close(), 10)
            except (PlaywrightError, asyncio.TimeoutError):
                pass
        self._retired.clear()
        self._disconnected.clear()
        self._browser = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def _ensure_browser(self) -> Browser:
        async with self._browser_lock:
            stale = self._browser is not None and (
                not self._browser.is_connected() or self._renders_on_browser >= self.relaunch_every
            )
            if stale:
                old, self._browser = self._browser, None
                self._retired.add(old)  # closed once its last render is done
                await self._close_if_idle(old)
            if self._browser is None:
                browser = await self._playwright.chromium.launch(
                    executable_path=self.executable_path, headless=True, args=self.launch_args
                )
                gone = asyncio.get_running_loop().create_future()
                browser.on("disconnected", lambda _: gone.done() or gone.set_result(None))
                self._browser, self._disconnected[browser], self._renders_on_browser = browser, gone, 0
            return self._browser

    async def _new_page(self) -> _WarmPage:
        """A warm page, or an error as soon as its browser dies (Playwright can leave a call on a
        killed browser pending for ever, e.g. `new_page`) or it takes over WARM_TIMEOUT_S."""
        browser = await self._ensure_browser()
        gone = self._disconnected[browser]
        opening = asyncio.ensure_future(self._open_page(browser, gone))
        try:
            await asyncio.wait({opening, gone}, timeout=WARM_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the pool is closing
            opening.cancel()
            raise
        if not opening.done():
            opening.cancel()
            raise RuntimeError("browser died while a page was warming" if gone.done() else "page warm-up timed out")
        return opening.result()

    async def _open_page(self, browser: Browser, gone: asyncio.Future) -> _WarmPage:
        context = await browser.new_context(
            viewport={"width": self.canvas[1], "height": self.canvas[1]},
            device_scale_factor=1,
            service_workers="block",
            accept_downloads=False,
        )
        violations: list[str] = []
        loaded = False

        async def route(route):
            path = route.request.url.removeprefix(ORIGIN).split("?")[0]
            asset = self._assets.get(path) if route.request.url.startswith(ORIGIN + "/") else None
            if asset is None or (path == "/index.html" and loaded):
                violations.append("network:request")
                await route.abort()
            else:
                await route.fulfill(status=200, body=asset[0], content_type=asset[1])

        try:
            await context.route("**/*", route)
            page = await context.new_page()
            crashed = asyncio.get_running_loop().create_future()
            page.on("crash", lambda _: crashed.done() or crashed.set_exception(_PageCrashed("page crashed")))
            await page.goto(ORIGIN + "/index.html", wait_until="load")
            loaded = True
            page.on("framenavigated", lambda _: violations.append("dom:navigation"))
            if not await page.evaluate("() => window.__lw && window.__lw.ready === true"):
                raise RuntimeError("sandbox page did not load its harness")
        except BaseException:
            try:
                await asyncio.wait_for(context.close(), 10)
            except (PlaywrightError, asyncio.TimeoutError):
                pass
            raise
        return _WarmPage(context, page, crashed, violations, browser, gone)

    async def _take_page(self) -> _WarmPage:
        """A warm page, counted busy until `_discard`; its replacement starts warming at once.
        A page that was warming on a browser that has since died is skipped, not handed out
        (it would spend the render's one retry)."""
        failures = 0
        while True:
            task = await self._warm.get()
            if not self._closed:
                self._warm.put_nowait(asyncio.ensure_future(self._new_page()))
            try:
                warm = await task
            except (PlaywrightError, RuntimeError):
                failures += 1
                if failures > self.size:  # every warm page failed: the browser itself cannot start
                    raise
                continue
            if warm.browser.is_connected():
                self._busy[warm.browser] = self._busy.get(warm.browser, 0) + 1
                return warm

    async def render(self, code: str, seed: int = 0, timeout_s: float | None = None) -> RenderResult:
        """Render one sketch; retried once on a fresh page if the page or browser died.
        `timeout_s` overrides the pool's limit for this render."""
        async with self._slots:
            for _ in range(2):
                try:
                    return await self._render_once(code, seed, self.timeout_s if timeout_s is None else timeout_s)
                except (PlaywrightError, _PageCrashed, RuntimeError) as exc:
                    failure = f"{type(exc).__name__}: {exc}"
            return RenderResult(png=None, error=f"render failed twice: {failure}"[:500], infra_error=True)

    async def _render_once(self, code: str, seed: int, timeout_s: float) -> RenderResult:
        warm = await self._take_page()
        self._renders_on_browser += 1
        start = time.monotonic()
        try:
            run = asyncio.ensure_future(
                warm.page.evaluate(
                    "(options) => __lw.run(options)",
                    {"code": code, "seed": seed & 0x7FFFFFFF, "maxFrames": self.max_frames, "minSide": self.canvas[0],
                     "maxSide": self.canvas[1], "density": self.pixel_density},
                )
            )
            done, _ = await asyncio.wait(
                {run, warm.crashed, warm.disconnected}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                run.cancel()
                return RenderResult(png=None, error="timeout", elapsed_s=time.monotonic() - start, timed_out=True)
            if run not in done and warm.disconnected in done:
                run.cancel()
                raise RuntimeError("browser died mid-render")  # retried by render()
            if warm.crashed in done:
                run.cancel()
                warm.crashed.result()  # raises _PageCrashed: retried by render()
            try:
                report = run.result()
            except PlaywrightError as exc:
                if not warm.violations:
                    raise  # the page died by itself: retried by render()
                # the sketch navigated or was cut off by the router: its own doing, not retried
                return RenderResult(png=None, error=f"{exc}"[:500], elapsed_s=time.monotonic() - start, violations=sorted(set(warm.violations)))
        finally:
            await self._discard(warm)
        png = None
        if (report.get("png") or "").startswith("data:image/png;base64,"):
            png = base64.b64decode(report["png"].split(",", 1)[1])
        return RenderResult(
            png=png,
            error=report.get("error"),
            console=list(report.get("console", [])),
            elapsed_s=time.monotonic() - start,
            js_s=float(report.get("js_ms", 0.0)) / 1000.0,
            calls={str(k): int(v) for k, v in report.get("calls", {}).items()},
            painted_fraction=painted_fraction(png) if png else 0.0,
            violations=sorted(set(report.get("violations", [])) | set(warm.violations)),
            width=int(report.get("width", 0)),
            height=int(report.get("height", 0)),
        )

    async def _discard(self, warm: _WarmPage) -> None:
        """Close a used context; a close that hangs means the browser is unwell: replace it."""
        if not warm.crashed.done():
            warm.crashed.cancel()
        try:
            await asyncio.wait_for(warm.context.close(), 10)
        except (PlaywrightError, asyncio.TimeoutError):
            if self._browser is warm.browser:
                self._renders_on_browser = self.relaunch_every  # relaunched on next use
        self._busy[warm.browser] -= 1
        await self._close_if_idle(warm.browser)

    async def _close_if_idle(self, browser: Browser) -> None:
        if browser in self._retired and not self._busy.get(browser):
            self._retired.discard(browser)
            self._busy.pop(browser, None)
            self._disconnected.pop(browser, None)
            try:
                await asyncio.wait_for(browser.close(), 10)
            except (PlaywrightError, asyncio.TimeoutError):
                pass


class ThreadedRenderPool:
    """A RenderPool on a background event-loop thread, for synchronous callers.

    `with ThreadedRenderPool(size=4) as pool: futures = [pool.submit(c, s) ...]`.
    Takes the same arguments as RenderPool.
    """

    def __init__(self, **pool_kwargs) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="render-pool", daemon=True)
        self._thread.start()
        self.pool = RenderPool(**pool_kwargs)
        try:
            self._call(self.pool.start()).result()
        except BaseException:
            self.close()
            raise

    def _call(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def submit(self, code: str, seed: int = 0, timeout_s: float | None = None) -> concurrent.futures.Future[RenderResult]:
        return self._call(self.pool.render(code, seed, timeout_s))

    def render_many(self, codes: Sequence[str], seeds: Sequence[int]) -> list[RenderResult]:
        if len(codes) != len(seeds):
            raise ValueError("one seed per code")
        futures = [self.submit(c, s) for c, s in zip(codes, seeds)]
        return [f.result() for f in futures]

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._loop.is_running():
            self._call(self.pool.close()).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def __enter__(self) -> ThreadedRenderPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
