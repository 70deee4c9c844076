"""Shared fixtures: one warm render pool for the whole session and the fixture sketches.

Other test files reuse `render_pool` (a ThreadedRenderPool: `.submit(code, seed)`,
`.render_many(codes, seeds)`) instead of launching their own Chromium.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_watercolour.render import ThreadedRenderPool

SKETCH_DIR = Path(__file__).resolve().parent.parent / "renderer" / "sketches"


@pytest.fixture(scope="session")
def render_pool():
    with ThreadedRenderPool(size=3, timeout_s=60.0) as pool:
        yield pool


@pytest.fixture(scope="session")
def sketches() -> dict[str, str]:
    """The hand-written fixture sketches, by file stem."""
    return {path.stem: path.read_text() for path in sorted(SKETCH_DIR.glob("*.js"))}
