"""Render throughput: this project's pool against the recipe's renderer design, and SwiftShader
against the GPU over a grid of pages x browsers, side by side in one run on the same sketches.

    # (i) ours vs the recipe's design on every suite (this box: SwiftShader both sides)
    python scripts/bench_render.py --compare --renders 12
    # (ii) the grid, on a GPU node (the SwiftShader rows need a browser that does not see the GPU)
    python scripts/bench_render.py --no-compare --suites heavy --backends swiftshader,gpu \\
        --grid 1x1,4x1,8x2,16x4,32x8 --swiftshader-executable /opt/chr/chrome.sh
    # (iii) the sandbox page (harness, prelude) of a git revision against this tree's, same pool; with
    # --no-baseline-text-check, 'before' skips the picture's text check (its cost alone: --baseline HEAD)
    python scripts/bench_render.py --no-compare --suites heavy,recipe --baseline main --rounds 2
    # (iv) a sketch's start-up: a new context with its page against a new document in a used page
    python scripts/bench_render.py --no-compare --suites hibiscus --startup 5

Suites: `fixtures` (renderer/sketches, 512 px), `heavy` (renderer/bench/heavy512.js: 20 filled
shapes), `recipe` (renderer/bench/*600.js: the recipe's skeleton at 600x600, 21-25 filled shapes
with fillBleed and fillTexture; `hibiscus` is one of them). A measurement renders `--renders` sketches of the suite (cycled),
all submitted at once, from warm: browser launches are outside the clock for both designs.

The recipe's renderer design, written from its description: N = min(4, cores - 2) browsers (at
least 1) with `RECIPE_ARGS`, each rendering one sketch at a time on a new page (700x700 viewport)
whose HTML inlines p5, p5.brush and the sketch; readiness is polled every 40 ms (a flag set after
p5.brush's last flush) and the canvas is read with toDataURL.

Every pool logs the WebGL renderer string it got; read it before reading a row (see
scripts/gpu/chromium/README.md: under chrome-gpu.sh even SwiftShader flags land on the GPU).
Measurements are in docs/results.md; what they mean in docs/rendering.md.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np
from _bench_cpu import cpu_parts, per_render, tree_cpu  # scripts/ is on sys.path when run
from _bench_recipe_renderer import RECIPE_ARGS, recipe_run
from PIL import Image
from playwright.async_api import async_playwright

from lit_watercolour.sandbox import RenderPool
from lit_watercolour.sandbox.browser import LAUNCH_ARGS, available_cores, chromium_executable, launch, shutdown
from lit_watercolour.sandbox.pages import RENDERER_DIR, assets, close_context, open_page, renew
from lit_watercolour.sandbox.text_check import TextCheck

SUITES = {
    "fixtures": sorted((RENDERER_DIR / "sketches").glob("*.js")),
    "heavy": [RENDERER_DIR / "bench" / "heavy512.js"],
    "recipe": sorted((RENDERER_DIR / "bench").glob("*600.js")),
    "hibiscus": [RENDERER_DIR / "bench" / "hibiscus600.js"],
}
# Grid backends as RenderPool arguments. gpu-canvas2d: GPU Canvas2D as well as WebGL, fastest
# alone and slowest with 16 pages on one browser; the grid measures whether several browsers
# (several GPU processes) change that.
BACKENDS = {
    "swiftshader": {"render_backend": "swiftshader"},
    "gpu": {"render_backend": "gpu"},
    "gpu-canvas2d": {"render_backend": "gpu", "accelerated_canvas2d": True},
}


class PoolRun(NamedTuple):
    wall: float  # seconds
    failed: int  # renders that did not pass cleanly
    renderer: str  # WebGL renderer string
    js: float  # mean in-page seconds
    cpu: str  # core-seconds per render, as per_render prints it
    parts: Counter  # core-seconds per render by process kind
    pngs: list[bytes | None]


async def pool_run(codes: list[str], **pool_kwargs) -> PoolRun:
    """This project's pool, sketch i with seed i. The CPU window runs from the first submit until the
    pool has warmed (or reloaded) the pages the next renders would take: it starts and ends warm."""
    async with RenderPool(timeout_s=300.0, **pool_kwargs) as pool:
        cpu, start = tree_cpu(), time.monotonic()
        results = await asyncio.gather(*(pool.render(c, i) for i, c in enumerate(codes)))
        wall = time.monotonic() - start
        await pool.settled()
        after = tree_cpu()
        failed = sum(r.error is not None or r.png is None or bool(r.violations) for r in results)
        return PoolRun(wall, failed, pool.renderer or "", sum(r.js_s for r in results) / len(results),
                       per_render(cpu, after, len(codes)), cpu_parts(cpu, after, len(codes)), [r.png for r in results])


async def startup_run(code: str, times: int, executable: str | None) -> None:
    """Core-seconds by process kind (medians of `times`) of what a sketch's page costs before and with
    its render, on one SwiftShader browser: a new context with a sandbox page (a renderer process
    started, the libraries compiled), a new document in a used page (sandbox.pages.renew), and a render."""
    async with async_playwright() as playwright:
        owner = await launch(playwright, executable, list(LAUNCH_ARGS))
        warm = await open_page(owner, assets(), 1024)
        options = {"code": code, "seed": 1, "maxFrames": 5, "minSide": 256, "maxSide": 1024, "density": 1}

        async def new_context():
            nonlocal warm
            await close_context(warm.context)
            warm = await open_page(owner, assets(), 1024)

        async def render():
            await renew(warm)
            assert (await warm.page.evaluate("(o) => __lw.run(o)", options))["error"] is None

        for label, step in (("new context + page", new_context), ("new document (renew)", lambda: renew(warm)),
                            ("new document + render", render)):
            parts = []
            for _ in range(times):
                before = tree_cpu()
                await step()
                await asyncio.sleep(0.5)  # a closed page's renderer is reaped into its zygote's time
                parts.append(cpu_parts(before, tree_cpu(), 1))
            median = Counter({k: float(np.median([p[k] for p in parts])) for k in set().union(*parts)})
            shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(median.items(), key=lambda kv: -kv[1]) if v >= 0.01)
            print(f"| {label} | {float(np.median([sum(p.values()) for p in parts])):.2f} | {shown} |", flush=True)
        await shutdown(owner)


def page_files(ref: str, into: Path) -> Path:
    """The sandbox page's own files (sandbox.html, prelude.js, harness.js) as of git revision `ref`, or
    the folder `ref` holding them (a machine without the repository's history)."""
    if Path(ref).is_dir():
        return Path(ref)
    for name in ("sandbox.html", "prelude.js", "harness.js"):
        shown = subprocess.run(["git", "show", f"{ref}:renderer/{name}"], cwd=RENDERER_DIR.parent, check=True, capture_output=True)
        (into / name).write_bytes(shown.stdout)
    return into


def pixel_gap(a: list[bytes | None], b: list[bytes | None]) -> tuple[float, int]:
    """Over renders of the same sketches and seeds: the largest mean absolute difference of decoded
    RGB (levels per channel) and the most pixels that differ at all."""
    gaps = [np.abs(_rgb(x) - _rgb(y)) for x, y in zip(a, b) if x and y]
    return max((g.mean() for g in gaps), default=float("nan")), max((int((g.max(axis=2) > 0).sum()) for g in gaps), default=0)


def _rgb(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def compare_pages(name: str, codes: list[str], before_dir: Path, rounds: int, before_text_check: bool = True, **pool_kwargs) -> None:
    """One table row: the pool with `before_dir`'s page files (and the picture's text check only if
    `before_text_check`) against this tree's, same sketches and seeds, alternating which goes first each
    round so both see the machine's load alike."""
    runs: dict[str, list[PoolRun]] = {"before": [], "after": []}
    before = {"page_dir": before_dir} | ({} if before_text_check else {"text_check": TextCheck(enabled=False)})
    for r in range(rounds):
        for label in ("before", "after") if r % 2 == 0 else ("after", "before"):
            runs[label].append(asyncio.run(pool_run(codes, **(before if label == "before" else {}), **pool_kwargs)))

    def rate(label: str) -> float:
        return len(codes) * len(runs[label]) / sum(run.wall for run in runs[label])

    def core_s(label: str, kind: str | None = None) -> float:
        return sum(sum(run.parts.values()) if kind is None else run.parts[kind] for run in runs[label]) / len(runs[label])

    moved, moved_px = pixel_gap(runs["before"][0].pngs, runs["after"][0].pngs)
    jitter, jitter_px = pixel_gap(runs["before"][0].pngs, runs["before"][-1].pngs) if rounds > 1 else (float("nan"), 0)
    failed = "/".join(str(sum(run.failed for run in runs[label])) for label in runs)
    print(f"| {name} | {rate('before'):.3f} | {rate('after'):.3f} | {core_s('before'):.2f} | {core_s('after'):.2f} "
          f"| {core_s('before', 'renderer'):.2f} | {core_s('after', 'renderer'):.2f} | {failed} "
          f"| {moved:.4f} ({moved_px} px) | {jitter:.4f} ({jitter_px} px) |", flush=True)
    for label in runs:
        print(f"  {label}: " + "; ".join(run.cpu for run in runs[label]), flush=True)


def suite_codes(name: str, renders: int) -> list[str]:
    sources = [p.read_text() for p in SUITES[name]]
    return [sources[i % len(sources)] for i in range(renders)]


def parse_grid(text: str) -> list[tuple[int, int]]:
    """'16x4,32x8' -> [(pages, browsers), ...]."""
    cells = []
    for cell in text.split(","):
        pages, browsers = (int(v) for v in cell.lower().split("x"))
        if browsers > pages:
            raise SystemExit(f"grid cell {cell}: more browsers than pages")
        cells.append((pages, browsers))
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default="fixtures,heavy,recipe", help=f"comma list of {sorted(SUITES)}")
    parser.add_argument("--renders", type=int, default=16, help="renders per measurement (at least 2 per page in the grid)")
    parser.add_argument("--compare", action=argparse.BooleanOptionalAction, default=True, help="ours vs the recipe's design")
    parser.add_argument("--size", type=int, default=None, help="our pool's pages (default: 2 per core, at least 4)")
    parser.add_argument("--backend", default="auto", help="our pool's render_backend in the comparison")
    parser.add_argument("--density", type=float, default=1.0, help="our pool's pixel density in the comparison")
    parser.add_argument("--recipe-browsers", type=int, default=None, help="default min(4, cores - 2), at least 1")
    parser.add_argument("--recipe-renders", type=int, default=None, help="renders of the recipe's design (default --renders)")
    parser.add_argument("--recipe-suites", default=None, help="suites the recipe's design runs on (default all; "
                        "it takes about a minute a render on a node)")
    parser.add_argument("--memory-cap-gib", type=float, default=4.0, help="our pool's memory cap (0: none)")
    parser.add_argument("--reuse-pages", action=argparse.BooleanOptionalAction, default=True,
                        help="our pool reloads the page of a clean render instead of opening a new context")
    parser.add_argument("--ablate-reuse", action="store_true", help="also run ours with the other --reuse-pages setting")
    parser.add_argument("--grid", default="", help="pages x browsers cells for (ii), e.g. 1x1,4x1,8x2,16x4,32x8")
    parser.add_argument("--backends", default="swiftshader", help=f"comma list of {sorted(BACKENDS)} for the grid")
    parser.add_argument("--swiftshader-executable", default=None, help="browser for SwiftShader rows and the recipe design")
    parser.add_argument("--gpu-executable", default=None, help="browser for GPU rows and our pool in the comparison")
    parser.add_argument("--baseline", default="", help="(iii): git revision (or folder) whose renderer page files "
                        "(sandbox.html, prelude.js, harness.js) run as 'before' against this tree's")
    parser.add_argument("--baseline-text-check", action=argparse.BooleanOptionalAction, default=True,
                        help="(iii): 'before' reads its captures for words too (off: the text check's cost is in the gap)")
    parser.add_argument("--rounds", type=int, default=2, help="(iii): before/after measurements per suite, each")
    parser.add_argument("--startup", type=int, default=0, help="(iv): measurements of a sketch's start-up, each (0: none)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    cores = available_cores()
    size = args.size or max(4, 2 * cores)
    recipe_browsers = args.recipe_browsers or max(1, min(4, cores - 2))
    swiftshader_exe = chromium_executable(args.swiftshader_executable)
    gpu_exe = chromium_executable(args.gpu_executable)
    print(f"{cores} cores; {args.renders} renders a measurement")

    if args.compare:
        print(f"\n(i) ours ({size} pages, backend {args.backend}, density {args.density:g}) vs the recipe's design "
              f"({recipe_browsers} browsers x 1 page, SwiftShader)")
        print("The recipe's design as described, and with --disable-accelerated-2d-canvas added (its flags leave "
              "Canvas2D on SwiftShader's GPU path): how much of the gap is that one flag. core-s: CPU seconds of "
              "every process involved (browsers, driver, Python) per render.")
        print("| suite | ours renders/s | recipe renders/s | ours / recipe | recipe + 2d flag renders/s | ours / that "
              "| core-s per render ours / recipe / +flag | failures ours / recipe / +flag | ours in-page s |")
        print("|---|---|---|---|---|---|---|---|---|")
        renderers = set()
        recipe_suites = args.recipe_suites.split(",") if args.recipe_suites else None
        for name in args.suites.split(","):
            codes = suite_codes(name, args.renders)
            recipe_codes = codes[: args.recipe_renders or len(codes)]
            ours_kwargs = dict(size=size, render_backend=args.backend, pixel_density=args.density, memory_cap_gib=args.memory_cap_gib,
                               executable_path=gpu_exe if args.backend != "swiftshader" else swiftshader_exe)
            o_wall, o_failed, o_renderer, js, o_cpu = asyncio.run(pool_run(codes, reuse_pages=args.reuse_pages, **ours_kwargs))[:5]
            ours = len(codes) / o_wall
            renderers.add(f"ours: {o_renderer}")
            if recipe_suites is None or name in recipe_suites:
                # the designs run one after the other on the same sketches, so both see about the same load
                r_wall, r_failed, r_renderer, r_cpu = asyncio.run(recipe_run(recipe_codes, recipe_browsers, swiftshader_exe))
                f_wall, f_failed, _, f_cpu = asyncio.run(recipe_run(
                    recipe_codes, recipe_browsers, swiftshader_exe, RECIPE_ARGS + ("--disable-accelerated-2d-canvas",)))
                renderers.add(f"recipe: {r_renderer}")
                recipe, flagged = len(recipe_codes) / r_wall, len(recipe_codes) / f_wall
                print(f"| {name} | {ours:.2f} | {recipe:.3f} | x{ours / recipe:.2f} | {flagged:.3f} | x{ours / flagged:.2f} "
                      f"| {o_cpu} / {r_cpu} / {f_cpu} | {o_failed} / {r_failed} / {f_failed} | {js:.2f} |", flush=True)
            else:
                print(f"| {name} | {ours:.2f} | | | | | {o_cpu} | {o_failed} | {js:.2f} |", flush=True)
            if args.ablate_reuse:
                a_wall, a_failed, _, a_js, a_cpu = asyncio.run(pool_run(codes, reuse_pages=not args.reuse_pages, **ours_kwargs))[:5]
                print(f"| {name}, ours with reuse_pages={not args.reuse_pages} | {len(codes) / a_wall:.2f} | | "
                      f"| | | {a_cpu} | {a_failed} | {a_js:.2f} |", flush=True)
        for line in sorted(renderers):
            print(f"  WebGL renderer, {line}")

    if args.grid:
        cells = parse_grid(args.grid)
        print("\n(ii) renders/s by backend, pages x browsers (core-s: CPU seconds of all processes per render)")
        print("| suite | backend | pages x browsers | renders/s | in-page s | core-s per render | failures | WebGL renderer |")
        print("|---|---|---|---|---|---|---|---|")
        for name in args.suites.split(","):
            for backend in args.backends.split(","):
                exe = swiftshader_exe if backend == "swiftshader" else gpu_exe
                for pages, browsers in cells:
                    codes = suite_codes(name, max(args.renders, 2 * pages))
                    wall, failed, renderer, js, cpu = asyncio.run(pool_run(
                        codes, size=pages, browsers=browsers, executable_path=exe, memory_cap_gib=args.memory_cap_gib,
                        reuse_pages=args.reuse_pages, **BACKENDS[backend]))[:5]
                    print(f"| {name} | {backend} | {pages}x{browsers} | {len(codes) / wall:.2f} | {js:.2f} | {cpu} "
                          f"| {failed} | {renderer} |", flush=True)

    if args.baseline:
        print(f"\n(iii) the page files of {args.baseline} (before) against this tree's (after): our pool ({size} pages, "
              f"backend {args.backend}), {args.rounds} measurements each, alternating which goes first. core-s: CPU "
              "seconds of every process per render, and of the renderer processes alone (the page's JS and Canvas2D); "
              "pixels: decoded RGB, same sketch and seed, largest mean absolute difference in levels (pixels that differ), "
              "after vs before, and before vs before (the rasteriser's own run-to-run jitter)")
        print("| suite | before renders/s | after renders/s | before core-s | after core-s | before renderer core-s "
              "| after renderer core-s | failures before/after | pixels after vs before | before vs before |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        with tempfile.TemporaryDirectory() as tmp:
            before_dir = page_files(args.baseline, Path(tmp))
            for name in args.suites.split(","):
                compare_pages(name, suite_codes(name, args.renders), before_dir, args.rounds, args.baseline_text_check, size=size, render_backend=args.backend,
                              memory_cap_gib=args.memory_cap_gib, reuse_pages=args.reuse_pages,
                              executable_path=gpu_exe if args.backend != "swiftshader" else swiftshader_exe)

    if args.startup:
        print(f"\n(iv) a sketch's start-up on one SwiftShader browser: core-s by process kind, medians of {args.startup}")
        print("| step | core-s | by process |")
        print("|---|---|---|")
        asyncio.run(startup_run(suite_codes(args.suites.split(",")[0], 1)[0], args.startup, swiftshader_exe))


if __name__ == "__main__":
    main()
