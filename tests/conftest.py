"""Shared fixtures: one warm render pool for the whole session, the fixture sketches, and a tiny painter.

Other test files reuse `render_pool` (a ThreadedRenderPool: `.submit(code, seed)`,
`.render_many(codes, seeds)`) instead of launching their own Chromium.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lit_watercolour.sandbox import ThreadedRenderPool
from tiny_painter import save_tiny_painter

SKETCH_DIR = Path(__file__).resolve().parent.parent / "renderer" / "sketches"


@pytest.fixture(scope="session")
def render_pool():
    with ThreadedRenderPool(size=3, timeout_s=60.0) as pool:
        yield pool


@pytest.fixture(scope="session")
def sketches() -> dict[str, str]:
    """The hand-written fixture sketches, by file stem."""
    return {path.stem: path.read_text() for path in sorted(SKETCH_DIR.glob("*.js"))}


@pytest.fixture(scope="session")
def painter(tmp_path_factory):
    """A tiny Qwen3 that writes a few sketches (`tiny_painter`), trained once per session on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield save_tiny_painter(tmp_path_factory.mktemp("painter"), steps=300)
    torch.set_num_threads(threads)


def pytest_terminal_summary(terminalreporter):
    """Say loudly when the real-vLLM tests did not run: a plain `pytest` skips them where vLLM is not
    installed, and a summary line of skips is easy to read past."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "vllm" in getattr(r, "keywords", {})]
    if not skipped:
        return
    reasons = sorted({str(r.longrepr[2]).removeprefix("Skipped: ") for r in skipped if isinstance(r.longrepr, tuple)})
    terminalreporter.write_sep("!", f"{len(skipped)} REAL-vLLM TESTS WERE NOT RUN", red=True, bold=True)
    for reason in reasons:
        terminalreporter.write_line(f"  why: {reason}", red=True)
    terminalreporter.write_line("  `make test` runs them in .venv-vllm, where a missing vLLM fails them instead.", red=True)
