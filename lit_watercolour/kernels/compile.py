"""torch.compile where it pays and where it works: a compiled function that falls back to itself."""

from __future__ import annotations

import warnings

import torch


def compiled_or_eager(fn):
    """fn compiled; where compiling fails (no working toolchain), fn itself, with a warning: same numbers, slower."""
    compiled = torch.compile(fn, dynamic=True)

    def run(*args):
        nonlocal compiled
        try:
            return compiled(*args)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:
            if compiled is fn:
                raise
            warnings.warn(f"torch.compile of {fn.__name__} failed ({type(e).__name__}: {str(e)[:300]}); running it eagerly")
            compiled = fn
            return fn(*args)

    return run
