"""Render a sketch (.js) or a model completion (.txt / .md) to PNG and print the gate verdict.

    python scripts/render.py renderer/sketches/hibiscus.js --out hibiscus.png --seed 3
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from lit_watercolour.gate import gate, static_gate
from lit_watercolour.sandbox import ThreadedRenderPool
from lit_watercolour.sketch import extract_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a .js sketch or a completion text file")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default: next to the input)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for the render")
    parser.add_argument("--chromium", type=str, default=None, help="Chromium binary (default: see render.py)")
    parser.add_argument("--backend", choices=("auto", "swiftshader", "gpu"), default="auto", help="how WebGL draws")
    args = parser.parse_args(argv)

    text = args.path.read_text()
    completion = None if args.path.suffix == ".js" else text
    code = text if completion is None else extract_code(completion)
    verdict = static_gate(code, completion)
    report: dict = {}
    if verdict is None:
        with ThreadedRenderPool(size=1, timeout_s=args.timeout, executable_path=args.chromium, render_backend=args.backend) as pool:
            result = pool.submit(code, args.seed).result()
            report["webgl_renderer"] = pool.pool.renderer
        verdict = gate(code, result)
        if result.png:
            out = args.out or args.path.with_suffix(".png")
            out.write_bytes(result.png)
            report["png"] = str(out)
        report.update({k: v for k, v in asdict(result).items() if k != "png"})
    print(json.dumps({"gate": asdict(verdict), "render": report}, indent=2))
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
