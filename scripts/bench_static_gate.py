"""Time the static gate (tree-sitter parse + scope resolution + rules) per sketch.

    python scripts/bench_static_gate.py [--repeat 20]

Runs over the fixture sketches, tests/legit and tests/hostile, and reports milliseconds per
sketch (median and max over the corpus, each sketch timed `repeat` times, best taken) and per
kilobyte of source.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from lit_watercolour.gate import static_gate

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("renderer/sketches", "tests/legit", "tests/hostile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    sources = [p.read_text() for corpus in CORPORA for p in sorted((ROOT / corpus).glob("*.js"))]
    static_gate(sources[0])  # loads the grammar
    best = []
    for code in sources:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            static_gate(code)
            times.append(time.perf_counter() - start)
        best.append(min(times))
    kib = [len(code.encode()) / 1024 for code in sources]
    ms = [t * 1000 for t in best]
    print(f"{len(sources)} sketches, {sum(kib):.0f} KiB")
    print(f"static gate: median {statistics.median(ms):.2f} ms, max {max(ms):.2f} ms per sketch; "
          f"{sum(ms) / sum(kib):.2f} ms per KiB")


if __name__ == "__main__":
    main()
