"""The recipe's renderer design, written from its description, for scripts/bench_render.py to compare against:
N browsers with `RECIPE_ARGS`, each rendering one sketch at a time on a new page (700x700 viewport) whose HTML
inlines p5, p5.brush and the sketch; readiness polled every 40 ms (a flag set after p5.brush's last flush), the
canvas read with toDataURL."""

from __future__ import annotations

import asyncio
import time

from _bench_cpu import per_render, tree_cpu
from playwright.async_api import async_playwright

from lit_watercolour.sandbox.browser import RENDERER_PROBE
from lit_watercolour.sandbox.pages import RENDERER_DIR

RECIPE_ARGS = ("--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--disable-gpu-sandbox", "--no-sandbox")
READY = """(() => {
  p5.registerAddon((_p5, _fn, lifecycles) => { lifecycles.postdraw = function () { window.__done = true; }; });
})();"""


def recipe_html(code: str) -> str:
    modules = RENDERER_DIR / "node_modules"
    libs = [(modules / "p5" / "lib" / "p5.min.js").read_text(), (modules / "p5.brush" / "dist" / "p5.brush.js").read_text()]
    scripts = "".join(f"<script>{s}</script>" for s in [*libs, READY, code])
    return f"<!doctype html><html><head><meta charset='utf-8'>{scripts}</head><body><main></main></body></html>"


async def recipe_run(codes: list[str], browsers: int, executable: str | None, args: tuple[str, ...] = RECIPE_ARGS) -> tuple[float, int, str, str]:
    """The recipe's design: (wall seconds, failed renders, WebGL renderer, core-seconds per render)."""
    pages = [recipe_html(c) for c in codes]
    async with async_playwright() as p:
        launched = [await p.chromium.launch(executable_path=executable, headless=True, args=list(args)) for _ in range(browsers)]
        probe = await launched[0].new_page()
        renderer = await probe.evaluate(RENDERER_PROBE)
        await probe.close()
        queue: asyncio.Queue[str] = asyncio.Queue()
        for html in pages:
            queue.put_nowait(html)
        failed = 0

        async def worker(browser) -> None:
            nonlocal failed
            while not queue.empty():
                html = queue.get_nowait()
                page = await browser.new_page(viewport={"width": 700, "height": 700})
                try:
                    await page.set_content(html, timeout=300_000)
                    await page.wait_for_function("window.__done === true", polling=40, timeout=300_000)
                    png = await page.evaluate("document.querySelector('canvas').toDataURL('image/png')")
                    failed += not png.startswith("data:image/png;base64,")
                except Exception as exc:
                    failed += 1
                    print(f"  recipe design: a render failed: {type(exc).__name__}: {str(exc)[:200]}")
                finally:
                    await page.close()

        cpu, start = tree_cpu(), time.monotonic()
        await asyncio.gather(*(worker(b) for b in launched))
        wall, cpu = time.monotonic() - start, per_render(cpu, tree_cpu(), len(codes))
        for b in launched:
            await b.close()
    return wall, failed, renderer, cpu
