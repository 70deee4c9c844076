"""The hostile corpus (tests/hostile/*.js): every program fails the gate with its expected
reason within its time limit, and afterwards the pool still paints a good sketch exactly
as before, with no Chromium process or temp file left behind.

Each file starts with `// expect: reason[|reason]`. Static failures never reach the browser;
the rest go through one pool concurrently.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
from PIL import Image

from lit_watercolour.gate import REASONS, gate, static_gate
from lit_watercolour.render import ThreadedRenderPool
from processes import chromium_descendants

HOSTILE = Path(__file__).resolve().parent / "hostile"
LIMIT_S = 8.0


def load_corpus() -> dict[str, tuple[str, set[str]]]:
    corpus = {}
    for path in sorted(HOSTILE.glob("*.js")):
        code = path.read_text()
        first = code.splitlines()[0]
        assert first.startswith("// expect: "), path
        corpus[path.stem] = (code, set(first.removeprefix("// expect: ").split("|")))
    return corpus



def test_hostile_corpus(tmp_path, monkeypatch, sketches):
    corpus = load_corpus()
    assert len(corpus) >= 40
    for _, reasons in corpus.values():
        assert reasons <= set(REASONS)

    static = {name: static_gate(code) for name, (code, _) in corpus.items()}
    dynamic = [name for name, verdict in static.items() if verdict is None]
    assert len(dynamic) >= 30, "most of the corpus must exercise the page's own defences"

    before = chromium_descendants()
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # Playwright's driver puts browser profiles here
    good = sketches["iris"]
    with ThreadedRenderPool(size=3, timeout_s=LIMIT_S) as pool:
        reference = pool.submit(good, 5, timeout_s=60.0).result()
        start = time.monotonic()
        futures = {name: pool.submit(corpus[name][0], 1) for name in dynamic}
        results = {name: f.result() for name, f in futures.items()}
        wall = time.monotonic() - start
        after = pool.submit(good, 5, timeout_s=60.0).result()
        assert any("playwright" in p.name for p in tmp_path.iterdir())  # the temp check below is real

    wrong = {}
    for name, (code, expected) in corpus.items():
        verdict = static[name] or gate(code, results[name])
        if verdict.passed or verdict.reason not in expected:
            wrong[name] = (expected, verdict)
        if name in results:
            assert results[name].elapsed_s <= LIMIT_S + 3.0, name  # the limit holds, closing included
    assert not wrong, wrong

    assert gate(good, after).passed
    a, b = (np.asarray(Image.open(io.BytesIO(r.png)).convert("RGB"), dtype=np.int16) for r in (reference, after))
    assert np.abs(a - b).mean() < 0.05  # the same picture as before the corpus
    assert wall < 120

    deadline = time.monotonic() + 10
    while (chromium_descendants() - before) and time.monotonic() < deadline:
        time.sleep(0.1)  # processes exit asynchronously after close
    assert not chromium_descendants() - before
    assert not [p for p in tmp_path.iterdir() if "playwright" in p.name or "chrom" in p.name.lower()]
