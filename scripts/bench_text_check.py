"""The picture's text check, option by option: words refused on the text corpus, honest pictures read as words,
CPU seconds a check; or, with --rules, the rule that counts readings as words before and after short readings
had to be sure or read again, side by side on the same readings at several render seeds.

    python scripts/bench_text_check.py --renders runs/default/renders
    python scripts/bench_text_check.py --rules --seeds 0,1,2,3,4 --procedural 20

Renders (real Chromium, the text check off in the pool) the corpus of words drawn with allowed calls
(tests/text_corpus.py) and the honest sketch sets (tests/legit, renderer/sketches, renderer/bench), reads the
shipped pool's PNGs and any `--renders` folder (a run's renders), then reads every picture with each option:
RapidOCR as shipped (one call on the capture, its own sizing), or the text check's lines and glyph rows read on
the capture itself or on the ink view (sandbox.text_check.ink_view), at one size or several; each counted by the
check's rule. --rules renders the corpus, tests/legit, renderer/sketches + bench and the procedural corpus
(lit_watercolour.offline.corpus) at each seed, reads every picture once and judges the readings by both rules.
The figures are in docs/results.md; the method in docs/gate.md#the-text-check.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from PIL import Image

from lit_watercolour.gate import static_gate
from lit_watercolour.offline.corpus import make_corpus
from lit_watercolour.records import TextHit
from lit_watercolour.sandbox import ThreadedRenderPool, text_check
from lit_watercolour.sketch import extract_code
from lit_watercolour.sandbox.text_check import TextCheck, TextDetector, count_chars, words

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the corpus generator lives with the tests that assert on it
from text_corpus import corpus  # noqa: E402

HONEST_SKETCHES = {"tests/legit": ROOT / "tests" / "legit", "renderer/sketches": ROOT / "renderer" / "sketches",
                   "renderer/bench": ROOT / "renderer" / "bench"}
OPTIONS = {  # name -> (read the ink view?, sizes); None: RapidOCR as shipped
    "RapidOCR as shipped, one call on the capture": None,
    "lines + glyph rows on the capture, 512 px": (False, (512,)),
    "lines + glyph rows on the capture, 512/256/128 px": (False, (512, 256, 128)),
    "lines + glyph rows on the ink view, 512 px": (True, (512,)),
    "lines + glyph rows on the ink view, 512/256 px": (True, (512, 256)),
    "lines + glyph rows on the ink view, 512/256/128 px (default)": (True, (512, 256, 128)),
}


class ShippedOCR:
    """RapidOCR with its own settings, one call on the capture, judged by the text check's rule."""

    def __init__(self, config: TextCheck) -> None:
        from rapidocr import RapidOCR

        self.config = config
        self.engine = RapidOCR(params={"Global.log_level": "error", "EngineConfig.onnxruntime.intra_op_num_threads": 1})

    def find(self, image: Image.Image) -> list[TextHit]:
        import numpy as np

        read = self.engine(np.asarray(image))
        hits = [TextHit(t, float(s), (0, 0, 0, 0)) for t, s in zip(read.txts or (), read.scores or ()) if float(s) >= self.config.min_score]
        return hits if count_chars(hits, self.config.min_score) >= self.config.min_chars else []


RULES = {  # before: every confident reading counted; after: short readings only when sure or read again; then margins
    "before": TextCheck(short_chars=0), "after (default)": TextCheck(),
    "before, min_score 0.7": TextCheck(short_chars=0, min_score=0.7), "after, min_score 0.7": TextCheck(min_score=0.7),
    "after, sure_score 0.9": TextCheck(sure_score=0.9),
}


def render_all(named_codes: dict[str, str], pages: int, seed: int = 1) -> dict[str, Image.Image]:
    with ThreadedRenderPool(size=pages, timeout_s=300.0, text_check=TextCheck(enabled=False)) as pool:
        futures = {name: pool.submit(code, seed) for name, code in named_codes.items()}
        out = {}
        for name, future in futures.items():
            result = future.result()
            if result.image is None:
                raise SystemExit(f"{name} did not render: {result.error}")
            out[name] = result.image
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=Path, action="append", default=[], help="a folder of PNGs (searched recursively), honest")
    parser.add_argument("--pages", type=int, default=2, help="render pool pages")
    parser.add_argument("--options", default="", help=f"comma list of option numbers to run, 0-{len(OPTIONS) - 1} (default all)")
    parser.add_argument("--rules", action="store_true", help="compare the counting rules (RULES) instead of the options")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="render seeds, with --rules")
    parser.add_argument("--procedural", type=int, default=20, help="sketches of the procedural corpus (seed 0), with --rules")
    args = parser.parse_args()

    cases = corpus()
    codes = {f"corpus/{case.name}": case.sketch() for case in cases}
    for label, folder in HONEST_SKETCHES.items():
        codes |= {f"{label}/{p.stem}": p.read_text() for p in sorted(folder.glob("*.js"))}
    if args.rules:
        codes |= {f"procedural/{k:02d}": extract_code(sample.completion) for k, sample in enumerate(make_corpus(args.procedural, seed=0))}
        return compare_rules(codes, [int(v) for v in args.seeds.split(",")], args.pages)
    start = time.monotonic()
    pictures = render_all(codes, args.pages)
    print(f"rendered {len(pictures)} sketches in {time.monotonic() - start:.0f} s")
    assert all(static_gate(case.sketch()) is None for case in cases)  # only its words can fail the corpus
    folders = {"renderer/pool": ROOT / "renderer" / "pool"} | {str(f): f for f in args.renders}
    for label, folder in folders.items():
        pictures |= {f"{label}/{p.relative_to(folder)}": Image.open(p).convert("RGB") for p in sorted(folder.rglob("*.png"))}
    sets = ["corpus", *HONEST_SKETCHES, *folders]

    print("| option | " + " | ".join(f"{s} ({sum(n.startswith(s + '/') for n in pictures)})" for s in sets) + " | CPU s a check (mean, max) |")
    print("|---|" + "---|" * len(sets) + "---|")
    ink = text_check.ink_view
    chosen = {int(v) for v in args.options.split(",")} if args.options else set(range(len(OPTIONS)))
    for option, setting in [item for k, item in enumerate(OPTIONS.items()) if k in chosen]:
        if setting is None:
            reader = ShippedOCR(TextCheck())
        else:
            text_check.ink_view = ink if setting[0] else (lambda rgb: rgb)
            reader = TextDetector(TextCheck(sizes=setting[1], engines=1))
        found, seconds = {}, []
        for name, image in pictures.items():
            t0 = time.process_time()
            found[name] = reader.find(image)
            seconds.append(time.process_time() - t0)
        cells = []
        for s in sets:
            names = [n for n in pictures if n.startswith(s + "/")]
            hits = [n for n in names if found[n]]
            cells.append(f"{len(hits)} refused" if s == "corpus" else f"{len(hits)} read as words")
        print(f"| {option} | " + " | ".join(cells) + f" | {sum(seconds) / len(seconds):.3f}, {max(seconds):.3f} |", flush=True)
        missed = [n.removeprefix("corpus/") for n in pictures if n.startswith("corpus/") and not found[n]]
        wrong = {n: [h.text for h in found[n]] for n in pictures if not n.startswith("corpus/") and found[n]}
        print(f"  missed: {missed}" + (f"; honest read as words: {wrong}" if wrong else ""), flush=True)
    text_check.ink_view = ink


def compare_rules(codes: dict[str, str], seeds: list[int], pages: int) -> None:
    """Each set at each seed read once, judged by every rule: corpus pictures refused, honest ones read as words."""
    reader = TextDetector(TextCheck(engines=1))
    judged: dict[tuple[str, int], list[bool]] = {}
    for seed in seeds:
        start = time.monotonic()
        pictures = render_all(codes, pages, seed)
        rendered_s, t0 = time.monotonic() - start, time.process_time()
        for name, image in pictures.items():
            readings = reader.read(image)
            verdicts = {label: words(readings, rule) for label, rule in RULES.items()}
            judged[name, seed] = [bool(hits) for hits in verdicts.values()]
            for label, hits in verdicts.items():  # the pictures each rule gets wrong, and what it read
                if bool(hits) != name.startswith("corpus/"):
                    print(f"  seed {seed}, {label}: {name} {[(h.text, h.score) for h in hits] or 'missed'}", flush=True)
        print(f"seed {seed}: rendered {len(pictures)} in {rendered_s:.0f} s, read in "
              f"{time.process_time() - t0:.0f} CPU s", flush=True)
    sets = sorted({name.rsplit("/", 1)[0] for name, _ in judged}, key=lambda s: (s != "corpus", s))
    print(f"\n| set (sketches x seeds {','.join(map(str, seeds))}) | pictures | " + " | ".join(RULES) + " |")
    print("|---|---|" + "---|" * len(RULES))
    for s in sets:
        keys = [key for key in judged if key[0].startswith(s + "/")]
        cells = []
        for k in range(len(RULES)):
            hits = sum(judged[key][k] for key in keys)
            by_seed = "/".join(str(sum(judged[key][k] for key in keys if key[1] == seed)) for seed in seeds)
            cells.append(f"{hits} {'refused' if s == 'corpus' else 'read as words'} ({by_seed})")
        print(f"| {s} | {len(keys)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
