"""An asyncio pool of warm headless-Chromium pages, spread over several browsers, that render
p5.brush sketches.

Each render gets a fresh document, a new JS realm (state never leaks between sketches: p5.brush's
`scaleBrushes` compounds, globals linger), loaded with p5 + p5.brush ahead of time, while earlier
sketches paint, so a render pays only for its own JS. The page of a sketch that finished cleanly
(no error, no violation) gets the next document in place: same context and renderer process, the
libraries compiled from the context's code cache, about a fifth of the CPU of a new context. Any
other page has its context closed, which kills its renderer.
The page (renderer/sandbox.html + prelude.js + harness.js) reports when p5.brush has
flushed its last frame; there are no sleeps. A sketch that loops forever is cut off by
`asyncio.wait_for` (Playwright's own timeouts do not fire while page JS spins) and its
context closed, which kills its renderer.

Browsers. One browser has one GPU process, which every page of that browser shares; the pool
runs `browsers` of them (by default from the core count, see `default_browsers`) and warms each
new page on the browser with the fewest pages warming or painting. `render_backend` picks how
WebGL draws: `swiftshader` (on the CPU), `gpu` (ANGLE on Vulkan), or `auto` (the GPU when the
machine has a GPU device node). At start-up the pool asks WebGL which renderer it really got
(`WEBGL_debug_renderer_info`), logs it and keeps it in `RenderPool.renderer`; a GPU path that
fails or lands on a software renderer falls back to SwiftShader with a warning.

Whose fault is a failure (the rules, in order):
- A sketch alone on its browser (no other page painting there at any moment of its render: the
  default on SwiftShader, one browser per page) is judged by its own time: wall clock minus the
  time its browser's threads waited for a CPU in the kernel's run queue
  (/proc/<pid>/task/*/schedstat). It is a `timeout` when that own time reaches the limit, or
  when the wall clock reaches SOLO_BACKSTOP times the limit. A machine's load therefore
  stretches the wall clock, not the sketch's time.
- A render that ran past its limit beside other pages of its browser, or alone on a browser whose
  GPU process then fails a canary (a fresh page clearing a WebGL canvas and reading a pixel back
  within CANARY_TIMEOUT_S), whose page crashed, or whose browser's GPU process was replaced while
  it painted, may have been hurt by its
  neighbours (a shader that starves the shared GPU process, a wedged GPU process) or by the load.
  It is run again alone, in a fresh browser of its own, and that run decides, by the rule above.
- A browser on which a render timed out is retired (no new pages; closed when its last render
  ends): its GPU process may be wedged.
- Alone, a page crash or a GPU-process crash is the sketch's own: it fails (a runtime error
  that names the memory cap), is not retried again and is not infra.
- A browser that dies under a render (killed, crashed) is the infrastructure's: the render is
  retried on another page once, then reported as `infra_error`.
- A sketch that navigates or destroys its page fails with a `dom` violation.

Memory. Every browser process (browser, renderers, GPU process) starts under an RLIMIT_DATA of
`memory_cap_gib` (a soft limit set by a wrapper script around the executable, inherited by the
children). cgroup v2 is not used: on the build box cgroups are v1 and read-only, and a
per-process limit already stops one page from taking the machine. A sketch that allocates past
the cap gets a JS RangeError or loses its renderer, and the rules above make that its own failure.

Teardown. Every await in `close()` is bounded, then the browser's process group is killed, so
`close()` returns within CLOSE_BUDGET_S even with a wedged GPU process.

`ThreadedRenderPool` runs the pool on a background event loop for Lightning's synchronous
training loop: `submit` returns a `concurrent.futures.Future`, so renders overlap scoring.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import io
import logging
import os
import shlex
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image
from playwright.async_api import Browser, BrowserContext, CDPSession, Error as PlaywrightError, Page, async_playwright

from lit_watercolour.records import CANVAS_RANGE, RenderResult

log = logging.getLogger(__name__)

RENDERER_DIR = Path(__file__).resolve().parent.parent / "renderer"
ORIGIN = "http://sketch.invalid"
CHROMIUM_ENV = "LIT_WATERCOLOUR_CHROMIUM"
DEBIAN_CHROMIUM = "/usr/bin/chromium"

# p5.brush rasterises every fill into an offscreen Canvas2D mask, and GPU-rasterised Canvas2D
# is far slower than the software path under SwiftShader (README, "Rendering"). The host-resolver
# rule makes any request that escapes routing fail at DNS. The background flags keep timers and rAF at full rate in pages that are
# not in front; the V8 heap cap makes a runaway allocation kill its own renderer early.
COMMON_ARGS: tuple[str, ...] = (
    "--disable-accelerated-2d-canvas",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--mute-audio",
    "--js-flags=--max-old-space-size=1024",
)
# SwiftShader must be opted into since Chrome 139. Captures are read off the canvas, never composited:
# software compositing spares SwiftShader's GPU process ~40% of its CPU a render (README, "Rendering").
SWIFTSHADER_ARGS: tuple[str, ...] = ("--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--disable-gpu-compositing")
# ANGLE on Vulkan: what renders on an H200 node's GPU (../shared/tools/gpu-chromium/README.md).
GPU_ARGS: tuple[str, ...] = (
    "--use-angle=vulkan", "--enable-features=Vulkan", "--disable-vulkan-surface", "--enable-gpu", "--ignore-gpu-blocklist",
)
LAUNCH_ARGS: tuple[str, ...] = SWIFTSHADER_ARGS + COMMON_ARGS
BACKEND_ARGS: dict[str, tuple[str, ...]] = {"swiftshader": LAUNCH_ARGS, "gpu": GPU_ARGS + COMMON_ARGS}
Backend = Literal["auto", "swiftshader", "gpu"]
SOFTWARE_RENDERERS = ("swiftshader", "llvmpipe", "softpipe", "software")
RENDERER_PROBE = """() => {
  const gl = document.createElement("canvas").getContext("webgl");
  if (!gl) return null;
  const info = gl.getExtension("WEBGL_debug_renderer_info");
  return info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
}"""

GPU_CANARY = """() => {
  const gl = document.createElement("canvas").getContext("webgl");
  if (!gl) return false;
  gl.clearColor(1, 0, 0, 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
  const pixel = new Uint8Array(4);
  gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, pixel);
  return pixel[0] === 255;
}"""

PAINT_DISTANCE = 32.0  # RGB distance from the modal colour that counts as paint (recipe)
WARM_TIMEOUT_S = 60.0  # warming a page takes ~1 s; a minute means its browser is wedged
LAUNCH_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 5.0  # a DevTools call that answers in ms; longer means the browser is unwell
CLOSE_TIMEOUT_S = 3.0  # one browser's close() before its processes are killed
CLOSE_BUDGET_S = 10.0  # the whole of RenderPool.close()
SOLO_BACKSTOP = 4.0  # a sketch alone is cut off at this many times its limit of wall clock
SOLO_POLL_S = 0.1
RELOAD_TIMEOUT_S = 10.0  # a new document in a used page takes ~0.2 s; longer means its last sketch left a loop running
CANARY_TIMEOUT_S = 10.0  # a one-pixel WebGL page; longer means the GPU process is wedged or starved


def chromium_executable(explicit: str | None = None) -> str | None:
    """The Chromium to drive: an explicit path, $LIT_WATERCOLOUR_CHROMIUM, Debian's
    /usr/bin/chromium, or None for Playwright's own browser (users who ran `playwright install`)."""
    path = explicit or os.environ.get(CHROMIUM_ENV)
    if path:
        return path
    return DEBIAN_CHROMIUM if shutil.which(DEBIAN_CHROMIUM) else None


def gpu_present() -> bool:
    """Whether the machine shows a GPU to user space: an NVIDIA device node or a DRI render node."""
    dev = Path("/dev")
    return any(dev.glob("nvidia[0-9]*")) or any(dev.glob("dri/renderD*"))


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_browsers(backend: str, size: int, cores: int | None = None) -> int:
    """Browsers for `size` pages. SwiftShader rasterises in each browser's one GPU process, so it
    gains from more browsers, and a page alone in its browser is judged by its own time without a
    second run: one browser per page. A real GPU does not gain: one browser per 16 cores (README,
    "Rendering")."""
    if backend != "gpu":
        return size
    return max(1, min(size, (cores or available_cores()) // 16))


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


def _assets(page_dir: Path = RENDERER_DIR) -> dict[str, tuple[bytes, str]]:
    js = "application/javascript"
    modules = RENDERER_DIR / "node_modules"
    return {
        "/index.html": ((page_dir / "sandbox.html").read_bytes(), "text/html"),
        "/prelude.js": ((page_dir / "prelude.js").read_bytes(), js),
        "/p5.min.js": ((modules / "p5" / "lib" / "p5.min.js").read_bytes(), js),
        "/p5.brush.js": ((modules / "p5.brush" / "dist" / "p5.brush.js").read_bytes(), js),
        "/harness.js": ((page_dir / "harness.js").read_bytes(), js),
    }


def _thread_times(pids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Per thread of these processes: (ns on a CPU, ns runnable but waiting for one)."""
    times = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    on_cpu, waiting, _ = f.read().split()
                times[int(tid)] = (int(on_cpu), int(waiting))
            except (OSError, ValueError):
                continue
    return times


class _OwnClock:
    """A sketch's own time alone in its browser: wall clock minus the time that browser's threads
    spent in the run queue (summed over threads, so overlapping waits favour the sketch)."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = list(pids)
        self.start = time.monotonic()
        self.base = _thread_times(self.pids)

    def waited_s(self) -> float:
        now = _thread_times(self.pids)
        return sum(w - self.base.get(tid, (0, 0))[1] for tid, (_, w) in now.items()) / 1e9

    def wall_s(self) -> float:
        return time.monotonic() - self.start

    def own_s(self) -> float:
        wall = self.wall_s()
        return wall - min(wall, self.waited_s())


def _process_group(pid: int | None) -> int | None:
    """The browser's own process group (Playwright starts each browser as a group leader), or None."""
    try:
        return pid if pid and os.getpgid(pid) == pid and pid != os.getpgid(0) else None
    except ProcessLookupError:
        return None


def _kill_group(pgid: int | None) -> None:
    """SIGKILL what is left of a browser's process group, even once the browser itself has exited
    (a utility child can outlive it)."""
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass(eq=False)
class _Lane:
    """One render painting on a browser."""

    shared: bool = False  # another page of the same browser painted at some moment of this render


class _PageCrashed(Exception):
    pass


class _Retired(Exception):
    """A page was warming on a browser that has been retired since."""


class _Suspect(Exception):
    """The render may have been spoiled by its neighbours: it is decided alone."""


@dataclass(eq=False)
class _Browser:
    browser: Browser
    cdp: CDPSession
    pid: int | None  # the browser process
    pgid: int | None  # its process group, killed at shutdown
    gpu_pid: int | None  # its GPU process, as last seen
    disconnected: asyncio.Future  # done when the browser is gone: calls on it may then never return
    retired: asyncio.Future  # done when it takes no new pages; it is closed when the last one is done
    busy: int = 0  # pages warming or painting on it
    renders: int = 0
    painting: set[_Lane] = field(default_factory=set)

    def usable(self) -> bool:
        return not self.retired.done() and not self.disconnected.done() and self.browser.is_connected()


@dataclass
class _WarmPage:
    """A context with the sandbox loaded and p5 + p5.brush parsed, waiting for one sketch."""

    context: BrowserContext
    page: Page | None
    crashed: asyncio.Future
    violations: list[str]  # requests the router refused, seen outside the page
    owner: _Browser
    destroyed: list[str] = field(default_factory=list)  # frames navigated away after load
    loaded: bool = False  # the sandbox document is in; a later request for it is the sketch's


class RenderPool:
    """`async with RenderPool(size=4) as pool: result = await pool.render(code, seed)`.

    size: renders in flight at once (and warm pages kept ready).
    canvas: (min, max) side in canvas units of the sketch's one createCanvas(w, h, WEBGL); the
        capture has the size the sketch made, times pixel_density.
    pixel_density: pixels per canvas unit of the capture; 0.5 paints a 512 sketch as a 256x256
        image in about two thirds of the time (scripts/bench_render.py), for scorers that look
        at 256 px anyway.
    timeout_s: limit of one render, from the moment it has a page (see the module's rules).
    max_frames: animated sketches are stopped after this many draw() frames.
    executable_path: Chromium binary; see `chromium_executable`.
    launch_args: Chromium flags; None for the backend's (BACKEND_ARGS). Given flags are used as
        they are, with no fallback.
    relaunch_every: renders after which a browser is replaced (Chrome gives up on GL after
        repeated GPU-process crashes; a fresh browser also bounds memory growth).
    browsers: browsers the pages are spread over; None for `default_browsers`.
    render_backend: auto | swiftshader | gpu (see the module docstring).
    memory_cap_gib: RLIMIT_DATA of every browser process, in GiB; 0 for none.
    accelerated_canvas2d: on the gpu backend, let Canvas2D (p5.brush's fill masks) draw on the
        GPU too (never on SwiftShader, where it is ~25x slower).
    reuse_pages: after a clean render, load a new sandbox document into the same page (same
        context and renderer process, code cache warm) instead of opening a new context: about a
        fifth of the CPU of a new page (README, "Rendering"). False: a new context per render.
    page_dir: folder of the sandbox page's own files (sandbox.html, prelude.js, harness.js);
        default renderer/. scripts/bench_render.py points it at an earlier revision's copy.
    """

    def __init__(
        self,
        size: int = 4,
        canvas: tuple[int, int] = CANVAS_RANGE,
        pixel_density: float = 1.0,
        timeout_s: float = 60.0,
        max_frames: int = 5,
        executable_path: str | None = None,
        launch_args: Sequence[str] | None = None,
        relaunch_every: int = 500,
        browsers: int | None = None,
        render_backend: Backend = "auto",
        memory_cap_gib: float = 4.0,
        accelerated_canvas2d: bool = False,
        reuse_pages: bool = True,
        page_dir: str | Path | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        if not 0 < pixel_density <= 1:
            raise ValueError("pixel_density must be in (0, 1]")
        if render_backend not in ("auto", "swiftshader", "gpu"):
            raise ValueError(f"render_backend must be auto, swiftshader or gpu, not {render_backend!r}")
        if browsers is not None and browsers < 1:
            raise ValueError("browsers must be >= 1")
        if memory_cap_gib < 0:
            raise ValueError("memory_cap_gib must be >= 0")
        self.size = size
        if not 0 < canvas[0] <= canvas[1]:
            raise ValueError("canvas must be (min_side, max_side) with 0 < min_side <= max_side")
        self.canvas = tuple(canvas)
        self.pixel_density = pixel_density
        self.timeout_s = timeout_s
        self.max_frames = max_frames
        self.executable_path = chromium_executable(executable_path)
        self.launch_args = None if launch_args is None else list(launch_args)
        self.relaunch_every = relaunch_every
        self.requested_backend = render_backend
        self.backend = "gpu" if render_backend == "auto" and gpu_present() else render_backend.replace("auto", "swiftshader")
        self._browsers_asked = browsers
        self.browsers = browsers or default_browsers(self.backend, size)
        self.memory_cap_gib = memory_cap_gib
        self.accelerated_canvas2d = accelerated_canvas2d
        self.reuse_pages = reuse_pages
        self.pages_reused = 0  # renders that got a reloaded page rather than a new context
        self.renderer: str | None = None  # what WebGL reported at start-up
        self._assets = _assets(Path(page_dir) if page_dir else RENDERER_DIR)
        self._playwright = None
        self._executable: str | None = None
        self._wrapper_dir: str | None = None
        self._active: list[_Browser] = []
        self._retired: set[_Browser] = set()
        self._alone: set[_Browser] = set()  # browsers of renders judged alone
        self._closing: set[asyncio.Future] = set()  # retired browsers being shut down
        self._browser_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(size)
        self._warm: asyncio.Queue[asyncio.Future] = asyncio.Queue()
        self._warming: set[asyncio.Future] = set()  # pages being opened or reloaded
        self._closed = False

    async def __aenter__(self) -> RenderPool:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def args(self) -> list[str]:
        if self.launch_args is not None:
            return self.launch_args
        if self.backend == "gpu" and self.accelerated_canvas2d:
            return [a for a in BACKEND_ARGS["gpu"] if a != "--disable-accelerated-2d-canvas"]
        return list(BACKEND_ARGS[self.backend])

    async def start(self) -> None:
        try:
            self._playwright = await async_playwright().start()
            self._executable = self._capped_executable()
            first = await self._launch()
            try:
                self.renderer = await self._probe(first)
            except (PlaywrightError, asyncio.TimeoutError):
                if self.backend != "gpu":
                    raise
                self.renderer = None  # the GPU path broke: fall back below
            software = self.renderer is None or any(s in self.renderer.lower() for s in SOFTWARE_RENDERERS)
            if self.backend == "gpu" and self.launch_args is None and software:
                log.warning("render backend gpu: WebGL got %r, falling back to SwiftShader", self.renderer)
                await self._shutdown(first)
                self.backend = "swiftshader"
                self.browsers = self._browsers_asked or default_browsers("swiftshader", self.size)
                first = await self._launch()
                self.renderer = await self._probe(first)
            log.info("render pool: %s backend, %d browsers x %d pages, WebGL renderer %r",
                     self.backend, self.browsers, self.size, self.renderer)
            self._active = [first]
            for _ in range(self.size):
                self._queue_page(self._new_page())
            await self.settled()  # the pool is warm when start() returns
        except BaseException:
            await self.close()
            raise

    def _capped_executable(self) -> str | None:
        """The executable behind a shell wrapper that lowers RLIMIT_DATA before exec (children inherit it)."""
        real = self.executable_path
        if real is None and self.memory_cap_gib:
            real = self._playwright.chromium.executable_path
        if not self.memory_cap_gib or not real:
            return real
        self._wrapper_dir = tempfile.mkdtemp(prefix="lw-render-")
        wrapper = Path(self._wrapper_dir) / "capped-browser"
        kib = int(self.memory_cap_gib * 1024 * 1024)
        wrapper.write_text(f"#!/bin/sh\nulimit -S -d {kib} && exec {shlex.quote(real)} \"$@\"\n")
        wrapper.chmod(0o700)
        return str(wrapper)

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
        await asyncio.gather(*(self._shutdown(b) for b in everyone), *self._closing)
        if self._playwright is not None:
            try:
                await asyncio.wait_for(self._playwright.stop(), CLOSE_TIMEOUT_S)
            except (PlaywrightError, asyncio.TimeoutError):
                pass
            self._playwright = None
        if self._wrapper_dir is not None:
            shutil.rmtree(self._wrapper_dir, ignore_errors=True)
            self._wrapper_dir = None

    async def _launch(self) -> _Browser:
        browser = await asyncio.wait_for(
            self._playwright.chromium.launch(executable_path=self._executable, headless=True, args=self.args),
            LAUNCH_TIMEOUT_S,
        )
        gone = asyncio.get_running_loop().create_future()
        browser.on("disconnected", lambda _: gone.done() or gone.set_result(None))
        try:
            cdp = await asyncio.wait_for(browser.new_browser_cdp_session(), CALL_TIMEOUT_S)
            processes = await self._processes(cdp)
        except BaseException:
            await asyncio.shield(self._close_bounded(browser))
            raise
        pid = next((p for kind, p in processes if kind == "browser"), None)
        gpu = next((p for kind, p in processes if kind == "GPU"), None)
        return _Browser(browser, cdp, pid, _process_group(pid), gpu, gone, asyncio.get_running_loop().create_future())

    @staticmethod
    async def _processes(cdp: CDPSession) -> list[tuple[str, int]]:
        info = await asyncio.wait_for(cdp.send("SystemInfo.getProcessInfo"), CALL_TIMEOUT_S)
        return [(p["type"], int(p["id"])) for p in info["processInfo"]]

    async def _gpu_pid(self, owner: _Browser) -> int | None:
        try:
            return next((p for kind, p in await self._processes(owner.cdp) if kind == "GPU"), None)
        except (PlaywrightError, asyncio.TimeoutError):
            return None

    async def _gpu_answers(self, owner: _Browser) -> bool:
        """A canary: a fresh page of this browser clears a WebGL canvas and reads a pixel back in time."""
        async def canary() -> bool:
            context = await owner.browser.new_context()
            try:
                page = await context.new_page()
                return await page.evaluate(GPU_CANARY) is True
            finally:
                await self._close_context(context)

        try:
            return await asyncio.wait_for(canary(), CANARY_TIMEOUT_S)
        except (PlaywrightError, asyncio.TimeoutError):
            return False

    async def _probe(self, owner: _Browser) -> str | None:
        """The WebGL renderer string a page of this browser gets."""
        context = await asyncio.wait_for(owner.browser.new_context(), WARM_TIMEOUT_S)
        try:
            page = await asyncio.wait_for(context.new_page(), WARM_TIMEOUT_S)
            return await asyncio.wait_for(page.evaluate(RENDERER_PROBE), WARM_TIMEOUT_S)
        finally:
            await self._close_context(context)

    @staticmethod
    async def _close_bounded(browser: Browser) -> None:
        try:
            await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT_S)
        except (PlaywrightError, asyncio.TimeoutError):
            pass

    async def _shutdown(self, owner: _Browser) -> None:
        await self._close_bounded(owner.browser)
        _kill_group(owner.pgid)  # whatever close() left behind (a wedged GPU process, a lingering utility)

    @staticmethod
    async def _close_context(context: BrowserContext) -> bool:
        try:
            await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)
            return True
        except (PlaywrightError, asyncio.TimeoutError):
            return False

    async def _pick_browser(self) -> _Browser:
        """The usable browser with the fewest pages warming or painting, launching replacements."""
        async with self._browser_lock:
            for owner in self._active:
                if owner.usable() and owner.renders >= self.relaunch_every:
                    await self._retire(owner)
            self._active = [b for b in self._active if b.usable()]
            while len(self._active) < self.browsers:
                if self._closed:
                    raise RuntimeError("the render pool is closed")
                self._active.append(await self._launch())
            return min(self._active, key=lambda b: b.busy)

    async def _retire(self, owner: _Browser) -> None:
        """No new pages on this browser; it is closed when its last page is done."""
        if owner in self._alone:
            return
        if not owner.retired.done():
            owner.retired.set_result(None)
        self._retired.add(owner)
        if owner in self._active:
            self._active.remove(owner)
        await self._close_if_idle(owner)

    async def _close_if_idle(self, owner: _Browser) -> None:
        if (owner.retired.done() or owner.disconnected.done()) and owner.busy <= 0 and owner in self._retired | set(self._active):
            self._retired.discard(owner)
            if owner in self._active:
                self._active.remove(owner)
            closing = asyncio.ensure_future(self._shutdown(owner))  # in the background: renders go on
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _new_page(self) -> _WarmPage:
        """A warm page on the least busy browser, or an error as soon as its browser dies
        (Playwright can leave a call on a killed browser pending for ever, e.g. `new_page`) or
        it takes over WARM_TIMEOUT_S."""
        owner = await self._pick_browser()
        owner.busy += 1
        try:
            return await self._warm_on(owner)
        except BaseException:
            owner.busy -= 1
            await asyncio.shield(self._close_if_idle(owner))
            raise

    async def _warm_on(self, owner: _Browser) -> _WarmPage:
        opening = asyncio.ensure_future(self._open_page(owner))
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
                raise _Retired("browser retired while a page was warming")
            raise RuntimeError("page warm-up timed out")
        return opening.result()

    async def _open_page(self, owner: _Browser) -> _WarmPage:
        context = await owner.browser.new_context(
            viewport={"width": self.canvas[1], "height": self.canvas[1]},
            device_scale_factor=1,
            service_workers="block",
            accept_downloads=False,
        )
        try:
            warm = _WarmPage(context, None, asyncio.get_running_loop().create_future(), [], owner)

            async def route(route):
                path = route.request.url.removeprefix(ORIGIN).split("?")[0]
                asset = self._assets.get(path) if route.request.url.startswith(ORIGIN + "/") else None
                if asset is None or (path == "/index.html" and warm.loaded):
                    warm.violations.append("network:request")
                    await route.abort()
                else:
                    await route.fulfill(status=200, body=asset[0], content_type=asset[1])

            await context.route("**/*", route)
            warm.page = page = await context.new_page()
            page.on("crash", lambda _: warm.crashed.done() or warm.crashed.set_exception(_PageCrashed("page crashed")))
            page.on("framenavigated", lambda frame: warm.destroyed.append(frame.url))
            await self._load(warm)
        except BaseException:
            await asyncio.shield(self._close_context(context))
            raise
        return warm

    @staticmethod
    async def _load(warm: _WarmPage) -> None:
        """A fresh sandbox document in the page: a new JS realm with p5 + p5.brush parsed (from the
        context's code cache when the page is reused) and the harness armed."""
        warm.loaded = False  # the router lets exactly this navigation fetch the sandbox page
        await warm.page.goto(ORIGIN + "/index.html", wait_until="load")
        warm.loaded = True
        if not await warm.page.evaluate("() => window.__lw && window.__lw.ready === true"):
            raise RuntimeError("sandbox page did not load its harness")
        # what the previous document and this navigation left behind is not the next sketch's
        warm.violations.clear()
        warm.destroyed.clear()
        if warm.crashed.done():
            warm.crashed = asyncio.get_running_loop().create_future()

    async def _reload_or_new(self, warm: _WarmPage) -> _WarmPage:
        """The page of a render that finished cleanly, with a new document; a page that does not
        reload in time (its last sketch left a loop running) is closed and a new one warmed. Memory
        that a renderer gathers over many documents goes with its browser (`relaunch_every`)."""
        if warm.owner.usable():
            try:
                await asyncio.wait_for(self._load(warm), RELOAD_TIMEOUT_S)
                self.pages_reused += 1
                return warm
            except (PlaywrightError, RuntimeError, asyncio.TimeoutError):
                pass
        await self._discard(warm)
        return await self._new_page()

    def _queue_page(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)
        self._warm.put_nowait(task)

    async def settled(self) -> None:
        """Wait until no page is being opened or reloaded (the pool's work of past renders is done:
        scripts/bench_render.py reads the CPU time then)."""
        while self._warming:
            await asyncio.wait(set(self._warming))

    async def _take_page(self) -> _WarmPage:
        """A warm page, counted busy until `_discard`. When it was the last one ready or warming, a
        new one starts warming at once (pages of clean renders come back reloaded, `_recycle`).
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
            except _Retired:
                continue
            except (PlaywrightError, RuntimeError, asyncio.TimeoutError):
                failures += 1
                if failures > self.size:  # every warm page failed: the browser itself cannot start
                    raise
                continue
            if warm.owner.usable():
                return warm
            await self._discard(warm)

    async def _recycle(self, warm: _WarmPage, clean: bool) -> None:
        """After a render: the page of a clean one (no error, no violation: the sketch did nothing
        the gate forbids) is reloaded for the next sketch, up to `size` + 1 spare pages; others are closed."""
        if clean and self.reuse_pages and not self._closed and warm.owner.usable() and self._warm.qsize() <= self.size:
            self._queue_page(self._reload_or_new(warm))
        else:
            await self._discard(warm)

    async def render(self, code: str, seed: int = 0, timeout_s: float | None = None) -> RenderResult:
        """Render one sketch (the rules of whose fault a failure is: the module docstring).
        `timeout_s` overrides the pool's limit for this render."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        async with self._slots:
            for _ in range(2):
                try:
                    result = await self._render_once(code, seed, limit)
                except _Suspect as exc:
                    return await self._render_alone(code, seed, limit, str(exc))
                except (PlaywrightError, RuntimeError, asyncio.TimeoutError) as exc:
                    failure = f"{type(exc).__name__}: {exc}"
                    continue
                return result
            return RenderResult(png=None, error=f"render failed twice: {failure}"[:500], infra_error=True)

    async def _render_once(self, code: str, seed: int, timeout_s: float) -> RenderResult:
        warm = await self._take_page()
        owner = warm.owner
        owner.renders += 1
        if owner.gpu_pid is None:  # Chromium starts its GPU process lazily
            owner.gpu_pid = await self._gpu_pid(owner)
        gpu_before = owner.gpu_pid
        lane = _Lane(shared=bool(owner.painting))
        clean = False
        for other in owner.painting:
            other.shared = True
        owner.painting.add(lane)
        try:
            # a page that starts beside others is judged by wall clock: no run-queue reading to pay for
            clock = None if lane.shared else _OwnClock([p for kind, p in await self._processes(owner.cdp) if kind != "browser"])
            result = await self._paint(warm, code, seed, timeout_s, clock, lane)
            if result.timed_out:
                await self._retire(owner)  # its GPU process may be wedged
                if lane.shared:
                    raise _Suspect("timed out beside other pages")
                if not await self._gpu_answers(owner):
                    raise _Suspect("timed out on a GPU process that does not answer")
                return result
            gpu_now = await self._gpu_pid(owner)
            if gpu_before is not None and gpu_now is not None and gpu_now != gpu_before:
                owner.gpu_pid = gpu_now
                await self._retire(owner)
                raise _Suspect("the GPU process was replaced while the sketch painted")
            clean = result.png is not None and result.error is None and not result.violations
            return result
        except _PageCrashed as exc:
            raise _Suspect(str(exc)) from exc
        finally:
            owner.painting.discard(lane)
            await self._recycle(warm, clean)

    async def _paint(self, warm: _WarmPage, code: str, seed: int, timeout_s: float, clock: _OwnClock | None, lane: _Lane | None = None) -> RenderResult:
        """Run the sketch on a warm page. Beside other pages of its browser (`lane.shared`): cut
        off after `timeout_s` of wall clock. Alone: when its own time reaches `timeout_s`, or at
        the backstop. Raises _PageCrashed, or RuntimeError when the browser died."""
        start = time.monotonic()
        run = asyncio.ensure_future(
            warm.page.evaluate(
                "(options) => __lw.run(options)",
                {"code": code, "seed": seed & 0x7FFFFFFF, "maxFrames": self.max_frames, "minSide": self.canvas[0],
                 "maxSide": self.canvas[1], "density": self.pixel_density},
            )
        )
        watched = {run, warm.crashed, warm.owner.disconnected}
        done, _ = await asyncio.wait(watched, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        # the run queue is read only past the limit: until then own time <= wall clock < limit
        while not done and clock is not None and not (lane and lane.shared) and clock.own_s() < timeout_s and clock.wall_s() < SOLO_BACKSTOP * timeout_s:
            done, _ = await asyncio.wait(watched, timeout=SOLO_POLL_S, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            run.cancel()
            return RenderResult(png=None, error="timeout", elapsed_s=time.monotonic() - start, timed_out=True)
        if run not in done and warm.owner.disconnected in done:
            run.cancel()
            raise RuntimeError("browser died mid-render")
        if warm.crashed in done:
            run.cancel()
            warm.crashed.result()  # raises _PageCrashed
        try:
            report = run.result()
        except PlaywrightError as exc:
            if warm.crashed.done() or warm.owner.disconnected.done() or not (warm.violations or warm.destroyed or _navigated(exc)):
                raise  # the page died by itself
            # the sketch navigated or was cut off by the router: its own doing, not retried
            violations = set(warm.violations) | ({"dom:navigation"} if warm.destroyed or _navigated(exc) else set())
            return RenderResult(png=None, error=f"{exc}"[:500], elapsed_s=time.monotonic() - start, violations=sorted(violations))
        png = None
        if (report.get("png") or "").startswith("data:image/png;base64,"):
            png = base64.b64decode(report["png"].split(",", 1)[1])
        # off the event loop (PNG decoding and numpy release the GIL): tens of ms a 512 image
        fraction = await asyncio.to_thread(painted_fraction, png) if png else 0.0
        return RenderResult(
            png=png,
            error=report.get("error"),
            console=list(report.get("console", [])),
            elapsed_s=time.monotonic() - start,
            js_s=float(report.get("js_ms", 0.0)) / 1000.0,
            calls={str(k): int(v) for k, v in report.get("calls", {}).items()},
            painted_fraction=fraction,
            violations=sorted(set(report.get("violations", [])) | set(warm.violations)),
            width=int(report.get("width", 0)),
            height=int(report.get("height", 0)),
        )

    async def _render_alone(self, code: str, seed: int, timeout_s: float, why: str) -> RenderResult:
        """The deciding run of a sketch that failed beside others: its own fresh browser, one page."""
        try:
            owner = await self._launch()
        except (PlaywrightError, RuntimeError, asyncio.TimeoutError) as exc:
            return RenderResult(png=None, error=f"{why}; its own browser did not start: {exc}"[:500], infra_error=True)
        self._alone.add(owner)
        cap = f"each browser process is capped at {self.memory_cap_gib:g} GiB" if self.memory_cap_gib else "no memory cap"
        try:
            warm = await self._warm_on(owner)
            processes = await self._processes(owner.cdp)
            gpu_before = next((p for kind, p in processes if kind == "GPU"), None)
            result = await self._paint(warm, code, seed, timeout_s, _OwnClock([p for kind, p in processes if kind != "browser"]))
            if not result.timed_out and gpu_before is not None and await self._gpu_pid(owner) not in (gpu_before, None):
                return RenderResult(png=None, error=f"the sketch crashed its own GPU process, alone in its browser ({cap})", elapsed_s=result.elapsed_s)
            return result
        except _PageCrashed:
            return RenderResult(png=None, error=f"the sketch crashed its page alone in its browser: out of memory or a renderer fault ({cap})")
        except (PlaywrightError, RuntimeError, asyncio.TimeoutError) as exc:
            return RenderResult(png=None, error=f"{why}; alone: {type(exc).__name__}: {exc}"[:500], infra_error=True)
        finally:
            self._alone.discard(owner)
            await asyncio.shield(self._shutdown(owner))

    async def _discard(self, warm: _WarmPage) -> None:
        """Close a used context; a close that hangs means the browser is unwell: retire it."""
        if not warm.crashed.done():
            warm.crashed.cancel()
        if warm.owner.usable() and not await self._close_context(warm.context):
            await self._retire(warm.owner)  # a retired or dead browser's contexts go with it
        warm.owner.busy -= 1
        await self._close_if_idle(warm.owner)


def _navigated(exc: PlaywrightError) -> bool:
    """Playwright's word for a page whose document was replaced under a running evaluate."""
    return "context was destroyed" in str(exc) or "navigation" in str(exc).lower()


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
            self._call(self.pool.close()).result(timeout=CLOSE_BUDGET_S + 5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def __enter__(self) -> ThreadedRenderPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
