"""Render a tiered reference pool from p5.brush sketches.

Sketches come from another pool (`--rerender`: a folder or a Hub dataset in the recipe's layout,
keeping its names and tiers), from `lit_watercolour.offline.corpus` (the tiny policy's generator, one
painting quality per tier: love layered, okay balanced, meh opaque), and from `--extra` files.
Sketches the gate rejects (lit_watercolour.gate) are left out, so the pool never holds an image
the policy would be punished for producing.

    python scripts/build_pool.py --out pools/mine --per-tier 8 --extra 'renderer/sketches/*.js' --extra-tier love

The shipped pool (renderer/pool/) keeps its sketches as data: its metadata names each one's source
(`sources/*.js`, or `../sketches/*.js` for the hand-written ones), and `--rerender renderer/pool --out
<dir>` renders them again. The recipe's Hub pool (`images/<tier>_<name>.png` from
`sources/<tier>_<name>.js`, 600-px canvases), or a local copy:

    python scripts/build_pool.py --rerender HuggingEnvs/watercolour-reference-pool --out pools/recipe
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
from pathlib import Path

from lit_watercolour.offline.corpus import FLOWERS, make_sketch

TIER_QUALITY = {"love": "layered", "okay": "balanced", "meh": "opaque"}


def sketch(tier: str, index: int) -> str:
    """A corpus flower painted with the tier's quality, the same for the same tier and index."""
    rng = random.Random(f"{tier}-{index}")
    return make_sketch(rng, rng.choice(list(FLOWERS)), TIER_QUALITY[tier])


def rerender_jobs(source: str, revision: str | None = None) -> list[tuple[str, str, str, None]]:
    """(tier, image path, sketch, None) for every image of a pool with its sketch: the one its metadata
    row names as `source`, else `sources/<image stem>.js` (the recipe's layout); a folder or a Hub dataset."""
    from lit_watercolour.rewards.pool import ReferencePool, metadata_rows, pool_folder

    root = pool_folder(source, revision, sources=True)
    named = {row["file_name"]: row["source"] for row in metadata_rows(root) or [] if row.get("source")}
    jobs = []
    for ref in ReferencePool.from_folder(root).references:
        sketch_path = root / named.get(ref.name, f"sources/{Path(ref.name).stem}.js")
        if sketch_path.is_file():
            jobs.append((ref.tier, ref.name, sketch_path.read_text(), None))
        else:
            print(f"skip {ref.name}: no {sketch_path}")
    if not jobs:
        raise SystemExit(f"{source}: no image has its sketch")
    return jobs


def write_pool(out: Path, jobs: list[tuple[str, str, str, str | None]], results, seed: int) -> list[dict]:
    """The renders that pass the gate, each at its image path under `out`; a job's sketch is named by its
    source (a path relative to `out`) or, without one, written to out/sources/."""
    from lit_watercolour.gate import gate

    if out.exists():
        shutil.rmtree(out)
    (out / "sources").mkdir(parents=True)
    rows = []
    for (tier, image, code, source), res in zip(jobs, results):
        name = Path(image).stem
        verdict = gate(code, res)
        if not verdict.passed:
            print(f"skip {name}: {verdict.reason} {verdict.detail}")
            continue
        (out / image).parent.mkdir(parents=True, exist_ok=True)
        (out / image).write_bytes(res.png)
        if source is None:
            source = f"sources/{name}.js"
            (out / source).write_text(code)
        rows.append({"file_name": image, "tier": tier, "source": source,
                     "painted_fraction": round(res.painted_fraction, 4), "seed": seed})
        print(f"{name}: painted {res.painted_fraction:.3f}, {res.elapsed_s:.1f}s")
    (out / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} renders in {out}")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--per-tier", type=int, default=8, help="generated variants per tier")
    ap.add_argument("--extra", default="", help="glob of more sketches, e.g. 'renderer/sketches/*.js' (named, not copied)")
    ap.add_argument("--extra-tier", default="okay")
    ap.add_argument("--rerender", default=None, help="re-render this pool's sketches instead (a folder or a Hub "
                    "dataset id in the recipe's layout, e.g. HuggingEnvs/watercolour-reference-pool)")
    ap.add_argument("--revision", default=None, help="Hub revision for --rerender")
    ap.add_argument("--workers", type=int, default=2, help="Chromium pages rendering in parallel")
    ap.add_argument("--seed", type=int, default=0, help="render seed (the harness's Math.random)")
    args = ap.parse_args(argv)

    from lit_watercolour.sandbox import ThreadedRenderPool

    if args.rerender:
        jobs = rerender_jobs(args.rerender, args.revision)
    else:
        jobs = [(tier, f"{tier}/{tier}_{i:02d}.png", sketch(tier, i), None) for tier in TIER_QUALITY for i in range(args.per_tier)]
        for path in sorted(glob.glob(args.extra)) if args.extra else []:
            image = f"{args.extra_tier}/{args.extra_tier}_{Path(path).stem}.png"
            jobs.append((args.extra_tier, image, Path(path).read_text(), os.path.relpath(path, args.out)))
    with ThreadedRenderPool(size=args.workers) as pool:  # the page takes each sketch's own canvas size
        results = pool.render_many([code for _, _, code, _ in jobs], [args.seed] * len(jobs))
    write_pool(args.out, jobs, results, args.seed)


if __name__ == "__main__":
    main()
