"""The capture as a picture: decoded once (cached on the RenderResult), how much of it is paint, and the
words in it (sandbox.text_check)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from lit_watercolour.records import RenderResult
from lit_watercolour.sandbox.text_check import TextDetector

PAINT_DISTANCE = 32.0  # RGB distance from the modal colour that counts as paint (recipe)


def painted_fraction(image: Image.Image) -> float:
    """Share of pixels farther than PAINT_DISTANCE (RGB) from the most common colour."""
    flat = np.asarray(image.convert("RGB"), dtype=np.int16).reshape(-1, 3)
    packed = (flat[:, 0].astype(np.int32) << 16) | (flat[:, 1].astype(np.int32) << 8) | flat[:, 2]
    values, counts = np.unique(packed, return_counts=True)
    mode = values[counts.argmax()]
    background = np.array([(mode >> 16) & 255, (mode >> 8) & 255, mode & 255], dtype=np.float32)
    distance = np.linalg.norm(flat.astype(np.float32) - background, axis=1)
    return float((distance > PAINT_DISTANCE).mean())


def measured(result: RenderResult, reader: TextDetector | None = None) -> RenderResult:
    """The result with its picture decoded (RenderResult.image) and its painted fraction set; with a
    `reader`, a clean capture (no error, no violation) is also read for words (RenderResult.text_found)."""
    if result.image is not None:
        result.painted_fraction = painted_fraction(result.image)
        if reader is not None and result.error is None and not result.violations:
            result.text_found = reader.find(result.image)
    return result
