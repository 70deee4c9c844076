"""Pages: a browser context serving the sandbox page from memory, warmed with p5 + p5.brush
before its sketch arrives, and given a fresh document between sketches so that nothing a sketch
started or changed outlives it.

Every request is routed: the sandbox page and its scripts are served from memory at ORIGIN,
anything else is aborted and recorded (`network:request`). A page whose sketch finished cleanly is
renewed by navigating it to a new sandbox document in the same renderer process: the old document,
its JS realm and everything it scheduled (timers, animation frames, promises, its WebGL context)
are discarded when the new one commits, while the process keeps V8's compilation cache, so the
libraries are not compiled again. Work still running blocks that navigation: a renewal that does
not finish in RENEW_TIMEOUT_S fails, and the pool then closes the whole context, renderer and all.
The back-forward cache, which would keep the old document, is off (sandbox.browser). Any page
whose render was not clean has its whole context closed.

Nothing a sketch stores outlives it: a renewed page's origin has all its stored data (local storage,
IndexedDB, cookies, caches, file systems, ...) erased by the browser once the old document is gone
and before the next sketch runs (`Storage.clearDataForOrigin`), and the prelude empties the tab's
session storage and name; a page that is not renewed goes with its context.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from playwright.async_api import BrowserContext, CDPSession, Error as PlaywrightError, Page

from lit_watercolour import allowlist
from lit_watercolour.sandbox.browser import CLOSE_TIMEOUT_S, BrowserHandle
from lit_watercolour.sandbox.faults import PageCrashed

RENDERER_DIR = Path(__file__).resolve().parent.parent.parent / "renderer"
ORIGIN = "http://sketch.invalid"
WARM_TIMEOUT_S = 60.0  # warming a page takes ~1 s; a minute means its browser is wedged
RENEW_TIMEOUT_S = 30.0  # a new document in a warm page (seconds on a box loaded 15 to a core); longer: work left running there


def assets(page_dir: Path = RENDERER_DIR) -> dict[str, tuple[bytes, str]]:
    """The sandbox page's files by path: the page's own (from `page_dir`), the installed libraries and the
    sketch's world (lit_watercolour.allowlist)."""
    js = "application/javascript"
    modules = RENDERER_DIR / "node_modules"
    return {
        "/index.html": ((page_dir / "sandbox.html").read_bytes(), "text/html"),
        "/prelude.js": ((page_dir / "prelude.js").read_bytes(), js),
        "/p5.min.js": ((modules / "p5" / "lib" / "p5.min.js").read_bytes(), js),
        "/p5.brush.js": ((modules / "p5.brush" / "dist" / "p5.brush.js").read_bytes(), js),
        "/ses.js": ((modules / "ses" / "dist" / "ses.umd.min.js").read_bytes(), js),
        "/allowlist.js": (allowlist.page_script(), js),
        "/harness.js": ((page_dir / "harness.js").read_bytes(), js),
    }


@dataclass
class WarmPage:
    """A context with the sandbox loaded and p5 + p5.brush parsed, waiting for one sketch."""

    context: BrowserContext
    page: Page | None
    crashed: asyncio.Future  # fails when the page's renderer dies; a new one for each document
    violations: list[str]  # requests the router refused, seen outside the page
    owner: BrowserHandle
    destroyed: list[str] = field(default_factory=list)  # frames navigated away after load
    cdp: CDPSession | None = None  # the page's DevTools session, opened at its first renewal
    loaded: bool = False  # the sandbox document is in; a later request for it is the sketch's


async def close_context(context: BrowserContext) -> bool:
    try:
        await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)
        return True
    except (PlaywrightError, asyncio.TimeoutError):
        return False


async def open_page(owner: BrowserHandle, files: dict[str, tuple[bytes, str]], side: int) -> WarmPage:
    """A new context on `owner` with its router, and a warm sandbox page in it."""
    context = await owner.browser.new_context(
        viewport={"width": side, "height": side}, device_scale_factor=1, service_workers="block", accept_downloads=False,
    )
    try:
        warm = WarmPage(context, None, asyncio.get_running_loop().create_future(), [], owner)

        async def route(route):
            path = route.request.url.removeprefix(ORIGIN).split("?")[0]
            asset = files.get(path) if route.request.url.startswith(ORIGIN + "/") else None
            if asset is None or (path == "/index.html" and warm.loaded):
                warm.violations.append("network:request")
                await route.abort()
            else:
                await route.fulfill(status=200, body=asset[0], content_type=asset[1])

        await context.route("**/*", route)
        warm.page = page = await context.new_page()
        page.on("crash", lambda _: warm.crashed.done() or warm.crashed.set_exception(PageCrashed("page crashed")))
        page.on("framenavigated", lambda frame: warm.destroyed.append(frame.url))
        await _new_document(warm)
    except BaseException:
        await asyncio.shield(close_context(context))
        raise
    return warm


async def _new_document(warm: WarmPage) -> None:
    """A fresh sandbox document in the warm page: a new JS realm, p5 + p5.brush run and the harness armed."""
    warm.loaded = False  # the router lets exactly this navigation fetch the sandbox page
    await warm.page.goto(ORIGIN + "/index.html", wait_until="load")
    warm.loaded = True
    if not await warm.page.evaluate("() => window.__lw && window.__lw.ready === true"):
        raise RuntimeError("sandbox page did not load its harness")
    warm.violations.clear()  # what this navigation left behind is not the sketch's
    warm.destroyed.clear()


async def renew(warm: WarmPage) -> WarmPage:
    """The used page navigated to a new sandbox document (the old one, and all it scheduled, discarded)
    and its origin's stored data erased; fails after RENEW_TIMEOUT_S when the old document still runs
    work that blocks the navigation."""
    if not warm.crashed.done():
        warm.crashed.cancel()
    warm.crashed = asyncio.get_running_loop().create_future()

    async def fresh() -> None:
        await _new_document(warm)
        if warm.cdp is None:
            warm.cdp = await warm.context.new_cdp_session(warm.page)
        await warm.cdp.send("Storage.clearDataForOrigin", {"origin": ORIGIN, "storageTypes": "all"})

    await asyncio.wait_for(fresh(), RENEW_TIMEOUT_S)
    return warm
