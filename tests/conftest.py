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
