"""Render a tiered reference pool from p5.brush sketches.

The shipped pool (renderer/pool/) is made by this script from sketch variants it writes itself,
in three tiers that differ in how they are painted, not in what they depict:
  love: many translucent, bleeding washes layered over each other, paper left open;
  okay: fewer, more opaque washes with little bleed and hard pen outlines;
  meh:  flat opaque fills (brush.wash) covering much of the sheet, plus a scribbled hatch.
Other sketches (e.g. renderer/sketches/*.js) can be added to a tier with --extra/--extra-tier.
Sketches the gate rejects (lit_watercolour.gate) are left out, so the pool never holds an image
the policy would be punished for producing.

    python scripts/build_pool.py --out renderer/pool --per-tier 8

`--rerender` renders another pool's sketches here instead, keeping its layout and tiers: the recipe's
Hub pool (`images/<tier>_<name>.png` from `sources/<tier>_<name>.js`, 600-px canvases), or a local copy:

    python scripts/build_pool.py --rerender HuggingEnvs/watercolour-reference-pool --out pools/recipe
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import shutil
from pathlib import Path

PALETTES = [
    ["#e07a8f", "#f2a65a", "#c94f6d", "#f6c5af"],
    ["#5b8fd6", "#8ec3e6", "#4a6fa5", "#b7d3f2"],
    ["#e9a23b", "#d9603b", "#f4d06f", "#b5452b"],
    ["#9b6fc4", "#d58bd6", "#6b4f9e", "#e7c6ef"],
    ["#d64550", "#f08a7e", "#f6b8a4", "#a8323e"],
    ["#e0c341", "#f2a541", "#d1793c", "#f7e08a"],
]
LEAF = ["#6a994e", "#8fb06f", "#4f7942", "#a7c080"]

# the skeleton of lit_watercolour.prompts.SYSTEM_PROMPT, so the pool looks like what the policy writes
HEADER = """function setup() {{
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}}
function draw() {{
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  randomSeed({seed});
  brush.scaleBrushes(2);
  const petals = {petals};
  const cx = {cx}, cy = {cy};
"""

LOVE = HEADER + """  // leaves first, so the petals wash over them
  brush.noStroke();
  brush.fill("{leaf}", 110); brush.fillBleed(0.35, "out"); brush.fillTexture(0.7, 0.6);
  brush.beginShape(0.6);
  brush.vertex(cx - 20, cy + 60); brush.vertex(cx - 120, cy + 150); brush.vertex(cx - 30, cy + 130);
  brush.endShape(true);
  // two layers of translucent petals that bleed into each other
  for (let layer = 0; layer < 2; layer++) {{
    for (let i = 0; i < petals; i++) {{
      const a = i * 360 / petals + layer * 180 / petals + random(-10, 10);
      const r = (layer == 0 ? {radius} : {radius} * 0.55);
      brush.fill(random({palette}), random(110, 150));
      brush.fillBleed(random(0.3, 0.5), "out");
      brush.fillTexture(0.6, 0.5);
      brush.circle(cx + cos(a) * r, cy + sin(a) * r, random(0.6, 0.8) * r);
    }}
  }}
  brush.fill("{centre}", 140); brush.fillBleed(0.3, "out");
  brush.circle(cx, cy, 14);
  brush.noFill();
  brush.set("2B", "{leaf}", 1);
  brush.line(cx + 6, cy + 40, cx + 30, 500);
}}
"""

OKAY = HEADER + """  for (let i = 0; i < petals; i++) {{
    const a = i * 360 / petals;
    const x = cx + cos(a) * {radius}, y = cy + sin(a) * {radius};
    brush.noStroke();
    brush.fill(random({palette}), random(120, 160));
    brush.fillBleed(random(0.05, 0.12), "out");
    brush.fillTexture(0.3, 0.3);
    brush.circle(x, y, {radius} * 0.5);
    brush.noFill();
    brush.set("pen", "#3a2e2a", 1.2);
    brush.circle(x, y, {radius} * 0.5);
  }}
  brush.noStroke();
  brush.fill("{centre}", 170); brush.fillBleed(0.05, "out");
  brush.circle(cx, cy, 20);
  brush.noFill();
  brush.set("HB", "{leaf}", 1.5);
  brush.line(cx, cy + 30, cx, 500);
}}
"""

MEH = HEADER + """  brush.noStroke();
  brush.wash("{leaf}", 230);
  brush.rect(0, cy, 512, 512 - cy);
  for (let i = 0; i < petals; i++) {{
    const a = i * 360 / petals;
    brush.wash(random({palette}), 240);
    brush.rect(cx + cos(a) * {radius} - 45, cy + sin(a) * {radius} - 45, 90, 90);
  }}
  brush.noWash();
  brush.hatch(6, 30);
  brush.hatchStyle("2B", "#2a2a2a", 1);
  brush.rect(cx - 70, cy - 70, 140, 140);
  brush.noHatch();
}}
"""
TEMPLATES = {"love": LOVE, "okay": OKAY, "meh": MEH}


def sketch(tier: str, index: int) -> str:
    rng = random.Random(f"{tier}-{index}")
    palette = rng.choice(PALETTES)
    return TEMPLATES[tier].format(
        seed=rng.randrange(1, 10_000), petals=rng.randint(5, 8), cx=rng.randint(200, 312), cy=rng.randint(190, 290),
        radius=rng.randint(70, 110), palette=json.dumps(palette), leaf=rng.choice(LEAF), centre=rng.choice(palette),
    )


def rerender_jobs(source: str, revision: str | None = None) -> list[tuple[str, str, str]]:
    """(tier, image path, sketch) for every image of a pool with a sketch beside it: a folder or a
    Hub dataset in the recipe's layout (`images/<tier>_<name>.png` rendered from `sources/<tier>_<name>.js`)."""
    from lit_watercolour.rewards.pool import ReferencePool, pool_folder

    root = pool_folder(source, revision, sources=True)
    jobs = []
    for ref in ReferencePool.from_folder(root).references:
        sketch_path = root / "sources" / f"{Path(ref.name).stem}.js"
        if sketch_path.is_file():
            jobs.append((ref.tier, ref.name, sketch_path.read_text()))
        else:
            print(f"skip {ref.name}: no {sketch_path.relative_to(root)}")
    if not jobs:
        raise SystemExit(f"{source}: no image has its sketch in sources/")
    return jobs


def write_pool(out: Path, jobs: list[tuple[str, str, str]], results, seed: int) -> list[dict]:
    """The renders that pass the gate, each at its image path under `out`, its sketch in out/sources/."""
    from lit_watercolour.gate import gate

    if out.exists():
        shutil.rmtree(out)
    (out / "sources").mkdir(parents=True)
    rows = []
    for (tier, image, code), res in zip(jobs, results):
        name = Path(image).stem
        verdict = gate(code, res)
        if not verdict.passed:
            print(f"skip {name}: {verdict.reason} {verdict.detail}")
            continue
        (out / image).parent.mkdir(parents=True, exist_ok=True)
        (out / image).write_bytes(res.png)
        (out / "sources" / f"{name}.js").write_text(code)
        rows.append({"file_name": image, "tier": tier, "source": f"sources/{name}.js",
                     "painted_fraction": round(res.painted_fraction, 4), "seed": seed})
        print(f"{name}: painted {res.painted_fraction:.3f}, {res.elapsed_s:.1f}s")
    (out / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} renders in {out}")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("renderer/pool"))
    ap.add_argument("--per-tier", type=int, default=8, help="generated variants per tier")
    ap.add_argument("--extra", default="", help="glob of more sketches, e.g. 'renderer/sketches/*.js'")
    ap.add_argument("--extra-tier", default="okay")
    ap.add_argument("--rerender", default=None, help="re-render this pool's sources/*.js instead (a folder or a Hub "
                    "dataset id in the recipe's layout, e.g. HuggingEnvs/watercolour-reference-pool)")
    ap.add_argument("--revision", default=None, help="Hub revision for --rerender")
    ap.add_argument("--workers", type=int, default=2, help="Chromium pages rendering in parallel")
    ap.add_argument("--seed", type=int, default=0, help="render seed (the harness's Math.random)")
    args = ap.parse_args(argv)

    from lit_watercolour.render import ThreadedRenderPool

    if args.rerender:
        jobs = rerender_jobs(args.rerender, args.revision)
    else:
        jobs = [(tier, f"{tier}/{tier}_{i:02d}.png", sketch(tier, i)) for tier in TEMPLATES for i in range(args.per_tier)]
        for path in sorted(glob.glob(args.extra)) if args.extra else []:
            jobs.append((args.extra_tier, f"{args.extra_tier}/{args.extra_tier}_{Path(path).stem}.png", Path(path).read_text()))
    with ThreadedRenderPool(size=args.workers) as pool:  # the page takes each sketch's own canvas size
        results = pool.render_many([code for *_, code in jobs], [args.seed] * len(jobs))
    write_pool(args.out, jobs, results, args.seed)


if __name__ == "__main__":
    main()
