"""Chromium processes started by this test process, for leak checks."""

from __future__ import annotations

import psutil


def chromium_descendants() -> set[int]:
    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if "chrom" in child.name().lower():
                found.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return found
