"""Browser launch: which Chromium, with which flags for which WebGL backend, under which memory
cap, and the probes that ask a browser what WebGL it really got and whether its GPU process answers.

Backends: `swiftshader` (WebGL on the CPU), `gpu` (ANGLE on Vulkan) or `auto` (the GPU when the
machine has a GPU device node). A GPU path that fails or lands on a software renderer falls back
to SwiftShader (sandbox.pool). One browser has one GPU process, which all of its pages share.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from playwright.async_api import Browser, CDPSession, Error as PlaywrightError

from lit_watercolour.sandbox.processes import kill_group, process_group

DEBIAN_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ENV = "LIT_WATERCOLOUR_CHROMIUM"

# p5.brush rasterises every fill into an offscreen Canvas2D mask, and GPU-rasterised Canvas2D
# is far slower than the software path under SwiftShader (docs/rendering.md). The host-resolver
# rule makes any request that escapes routing fail at DNS. The background flags keep timers and rAF at full rate in pages that are
# not in front; the V8 heap cap makes a runaway allocation kill its own renderer early. Without the back-forward cache a
# document navigated away from is destroyed, never kept (sandbox.pages renews a page by navigating it).
COMMON_ARGS: tuple[str, ...] = (
    "--disable-accelerated-2d-canvas",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--mute-audio",
    "--disable-back-forward-cache",
    "--js-flags=--max-old-space-size=1024",
)
# SwiftShader must be opted into since Chrome 139. Captures are read off the canvas, never composited:
# software compositing spares SwiftShader's GPU process much of its CPU a render (docs/rendering.md).
SWIFTSHADER_ARGS: tuple[str, ...] = ("--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--disable-gpu-compositing")
# ANGLE on Vulkan: what renders on an H200 node's GPU (scripts/gpu/chromium/README.md).
GPU_ARGS: tuple[str, ...] = (
    "--use-angle=vulkan", "--enable-features=Vulkan", "--disable-vulkan-surface", "--enable-gpu", "--ignore-gpu-blocklist",
)
LAUNCH_ARGS: tuple[str, ...] = SWIFTSHADER_ARGS + COMMON_ARGS
BACKEND_ARGS: dict[str, tuple[str, ...]] = {"swiftshader": LAUNCH_ARGS, "gpu": GPU_ARGS + COMMON_ARGS}
LAUNCH_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 5.0  # a DevTools call that answers in ms; longer means the browser is unwell
CLOSE_TIMEOUT_S = 3.0  # one context's or browser's close() before its processes are killed
CANARY_TIMEOUT_S = 10.0  # a one-pixel WebGL page; longer means the GPU process is wedged or starved
PROBE_TIMEOUT_S = 60.0
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


def resolve_backend(asked: str) -> str:
    """`auto` made concrete: the GPU when the machine shows one, else SwiftShader."""
    return "gpu" if asked == "auto" and gpu_present() else asked.replace("auto", "swiftshader")


def default_browsers(backend: str, size: int, cores: int | None = None) -> int:
    """Browsers for `size` pages. SwiftShader rasterises in each browser's one GPU process, so it
    gains from more browsers, and a page alone in its browser is judged by its own time without a
    second run: one browser per page. A real GPU does not gain: one browser per 16 cores
    (docs/rendering.md)."""
    if backend != "gpu":
        return size
    return max(1, min(size, (cores or available_cores()) // 16))


def launch_args(backend: str, explicit: tuple[str, ...] | None, accelerated_canvas2d: bool) -> list[str]:
    """Explicit flags as given; else the backend's, with GPU Canvas2D when asked on the gpu backend."""
    if explicit is not None:
        return list(explicit)
    if backend == "gpu" and accelerated_canvas2d:
        return [a for a in BACKEND_ARGS["gpu"] if a != "--disable-accelerated-2d-canvas"]
    return list(BACKEND_ARGS[backend])


def is_software(renderer: str | None) -> bool:
    return renderer is None or any(s in renderer.lower() for s in SOFTWARE_RENDERERS)


def capped_executable(real: str, memory_cap_gib: float, folder: str) -> str:
    """A shell wrapper around `real` that lowers RLIMIT_DATA before exec; every child process
    (renderers, GPU process) inherits it. cgroup v2 is not used: on the build box cgroups are v1 and
    read-only, and a per-process limit already stops one page from taking the machine."""
    wrapper = Path(folder) / "capped-browser"
    kib = int(memory_cap_gib * 1024 * 1024)
    wrapper.write_text(f"#!/bin/sh\nulimit -S -d {kib} && exec {shlex.quote(real)} \"$@\"\n")
    wrapper.chmod(0o700)
    return str(wrapper)


@dataclass(eq=False)
class BrowserHandle:
    browser: Browser
    cdp: CDPSession
    pid: int | None  # the browser process
    pgid: int | None  # its process group, killed at shutdown
    gpu_pid: int | None  # its GPU process, as last seen
    disconnected: asyncio.Future  # done when the browser is gone: calls on it may then never return
    retired: asyncio.Future  # done when it takes no new pages; it is closed when the last one is done
    busy: int = 0  # pages warming or painting on it
    renders: int = 0
    painting: set = field(default_factory=set)  # faults.Lane of the renders painting on it

    def usable(self) -> bool:
        return not self.retired.done() and not self.disconnected.done() and self.browser.is_connected()


async def processes(cdp: CDPSession) -> list[tuple[str, int]]:
    """(type, pid) of every process of a browser: "browser", "GPU", "renderer", "utility", ..."""
    info = await asyncio.wait_for(cdp.send("SystemInfo.getProcessInfo"), CALL_TIMEOUT_S)
    return [(p["type"], int(p["id"])) for p in info["processInfo"]]


async def launch(playwright, executable: str | None, args: list[str]) -> BrowserHandle:
    browser = await asyncio.wait_for(playwright.chromium.launch(executable_path=executable, headless=True, args=args), LAUNCH_TIMEOUT_S)
    gone = asyncio.get_running_loop().create_future()
    browser.on("disconnected", lambda _: gone.done() or gone.set_result(None))
    try:
        cdp = await asyncio.wait_for(browser.new_browser_cdp_session(), CALL_TIMEOUT_S)
        found = await processes(cdp)
    except BaseException:
        await asyncio.shield(close_bounded(browser))
        raise
    pid = next((p for kind, p in found if kind == "browser"), None)
    gpu = next((p for kind, p in found if kind == "GPU"), None)
    return BrowserHandle(browser, cdp, pid, process_group(pid), gpu, gone, asyncio.get_running_loop().create_future())


async def gpu_pid(owner: BrowserHandle) -> int | None:
    try:
        return next((p for kind, p in await processes(owner.cdp) if kind == "GPU"), None)
    except (PlaywrightError, asyncio.TimeoutError):
        return None


async def close_bounded(browser: Browser) -> None:
    try:
        await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT_S)
    except (PlaywrightError, asyncio.TimeoutError):
        pass


async def shutdown(owner: BrowserHandle) -> None:
    await close_bounded(owner.browser)
    kill_group(owner.pgid)  # whatever close() left behind (a wedged GPU process, a lingering utility)


async def _evaluate_fresh(owner: BrowserHandle, script: str, limit: float):
    """`script` in a fresh context of its own on this browser, bounded."""
    async def run():
        context = await owner.browser.new_context()
        try:
            page = await context.new_page()
            return await page.evaluate(script)
        finally:
            try:
                await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)
            except (PlaywrightError, asyncio.TimeoutError):
                pass

    return await asyncio.wait_for(run(), limit)


async def gpu_answers(owner: BrowserHandle) -> bool:
    """A canary: a fresh page of this browser clears a WebGL canvas and reads a pixel back in time."""
    try:
        return await _evaluate_fresh(owner, GPU_CANARY, CANARY_TIMEOUT_S) is True
    except (PlaywrightError, asyncio.TimeoutError):
        return False


async def probe(owner: BrowserHandle) -> str | None:
    """The WebGL renderer string a page of this browser gets."""
    return await _evaluate_fresh(owner, RENDERER_PROBE, PROBE_TIMEOUT_S)
