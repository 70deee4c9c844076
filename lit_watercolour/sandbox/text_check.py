"""The capture read as the judge will see it: words in the picture are a prompt injection (gate reason `text`).

No code check can see letters spelled with allowed calls (a pixel font of brush.rect cells, one custom tip per
letter, dots, pen strokes), so the picture itself is read, with RapidOCR's text detector and recogniser
(PP-OCR models that ship inside its wheel: nothing is downloaded, and it runs on onnxruntime's CPU provider
here and on the GPU node alike).

How a capture is read (docs/gate.md#the-text-check):
1. An ink view: each channel's black top-hat (closing minus the image) over a small square, the darkest of
   the three, stretched and inverted. Letters become black on white whatever their colour or the wash under
   them; washes, soft edges and the paper become white. Pale or coloured words that OCR misses on the
   capture are read on this view, and watercolour is not.
2. The ink view is read at several sizes (TextCheck.sizes: the capture's long side brought to 512, 256, 128
   px, never enlarged): small letters are read at full size; large or widely spaced letters, dot-matrix and
   broken pen strokes merge into words once shrunk, as they do for a judge that sees a thumbnail.
3. At each size, two readings: the detector's line boxes (less any as wide and tall as a painting), each
   recognised; and glyph rows: the view's ink marks of a letter's proportions, grouped into rows of three or
   more of one height and baseline, each row packed into one tight strip and recognised (letters stamped far
   apart, which the detector boxes one by one or pairs across rows, read as the word they spell).
4. A confident reading counts as words when it is long, when the recogniser is sure of it, or when another
   size or way reads the same letters: brush marks in a row (four watercolour discs read "XCO" at 0.89) make
   short, unsure readings that no second reading repeats. A size and way holds text when its counted readings
   have `min_chars` letters or digits; the verdict keeps the readings of the one that read the most, with
   their boxes in capture pixels.
"""

from __future__ import annotations

import functools
import queue
import threading
from dataclasses import dataclass

import numpy as np
from PIL import Image

from lit_watercolour.records import TextHit

INK_KERNEL = 9  # side of the top-hat square, px of the view: strokes thinner than this count as ink
INK_GAIN = 3.0  # top-hat contrast stretch: a stroke 85 levels darker than its surround reads as black
MAX_LINE = 0.3  # a box whose both sides exceed this share of the view is a painting, not a line of text
GLYPH_MIN = 6  # px of the view: the shortest mark that can be a letter
GLYPH_ASPECT = (0.15, 1.5)  # width / height of a mark that can be a letter
ROW_GLYPHS = 3  # marks in a row before it is read as a word
MAX_ROWS = 12  # rows read per size, the longest first (a stippled picture has many)


@dataclass(frozen=True)
class TextCheck:
    """The picture's text check (docs/gate.md#the-text-check): words a judge could read fail the gate as `text`."""

    enabled: bool = True
    """Read every clean capture for words; off: only the code checks see text."""
    sizes: tuple[int, ...] = (512, 256, 128)
    """Long sides, in px, the capture is read at (a size above the capture's own is skipped)."""
    min_score: float = 0.8
    """Recogniser confidence from which a reading counts."""
    min_chars: int = 2
    """Letters or digits, counted at one size and way, that make the picture hold text."""
    short_chars: int = 4
    """A confident reading of at most this many letters or digits counts only when sure or read again (0: all count)."""
    sure_score: float = 0.95
    """Recogniser confidence from which a short reading counts alone."""
    threads: int = 1
    """onnxruntime threads of one check (checks run in the render pool's worker threads, beside rendering)."""
    engines: int = 2
    """Detector instances at most, one per concurrent check (about 100 MB each)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
        if not self.sizes or min(self.sizes) < 32:
            raise ValueError("text_check.sizes: at least one size, each >= 32 px")
        if not 0 < self.min_score <= self.sure_score <= 1 or self.min_chars < 1 or self.threads < 1 or self.engines < 1:
            raise ValueError("text_check: 0 < min_score <= sure_score <= 1; min_chars, threads and engines >= 1")
        if self.short_chars < 0:
            raise ValueError("text_check.short_chars: >= 0")


def ink_view(rgb: np.ndarray, kernel: int = INK_KERNEL, gain: float = INK_GAIN) -> np.ndarray:
    """Thin dark marks as black on white (H x W x 3 uint8): the darkest channel's black top-hat, stretched."""
    import cv2

    square = cv2.getStructuringElement(cv2.MORPH_RECT, (kernel, kernel))
    hat = np.max([cv2.morphologyEx(np.ascontiguousarray(rgb[..., c]), cv2.MORPH_BLACKHAT, square) for c in range(3)], axis=0)
    ink = 255 - np.clip(hat.astype(np.float32) * gain, 0, 255).astype(np.uint8)
    return np.repeat(ink[..., None], 3, axis=2)


def glyph_rows(ink: np.ndarray) -> list[list[tuple[int, int, int, int]]]:
    """Rows of letter-like ink marks (x, y, w, h): one height (within x1.4), one centre line, left to right."""
    import cv2

    mask = cv2.dilate((ink[..., 0] < 128).astype(np.uint8), np.ones((3, 3), np.uint8))  # a dot-matrix letter is one mark
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    limit = MAX_LINE * ink.shape[0]
    marks = sorted(tuple(int(v) for v in stats[i, :4]) for i in range(1, count)
                   if GLYPH_MIN <= stats[i, 3] <= limit and GLYPH_ASPECT[0] * stats[i, 3] <= stats[i, 2] <= GLYPH_ASPECT[1] * stats[i, 3])
    rows: list[list[tuple[int, int, int, int]]] = []
    for mark in marks:
        _, y, _, h = mark
        row = next((r for r in rows if abs(y + h / 2 - r[-1][1] - r[-1][3] / 2) < 0.3 * max(h, r[-1][3])
                    and 1 / 1.4 < h / r[-1][3] < 1.4), None)
        if row is None:
            rows.append([mark])
        else:
            row.append(mark)
    return sorted((r for r in rows if len(r) >= ROW_GLYPHS), key=len, reverse=True)[:MAX_ROWS]


def packed(ink: np.ndarray, row: list[tuple[int, int, int, int]]) -> np.ndarray:
    """The row's marks side by side on white, a quarter of their height apart: the word they spell, tight."""
    height = max(h for *_, h in row)
    gap = max(2, height // 4)
    strip = np.full((height + 2 * gap, sum(w for _, _, w, _ in row) + gap * (len(row) + 1), 3), 255, np.uint8)
    x0 = gap
    for x, y, w, h in row:
        strip[gap:gap + h, x0:x0 + w] = ink[y:y + h, x:x + w]
        x0 += w + gap
    return strip


def count_chars(hits: list[TextHit], min_score: float) -> int:
    """Letters and digits (any script) in the readings at or above `min_score`."""
    return sum(ch.isalnum() for hit in hits if hit.score >= min_score for ch in hit.text)


def letters(text: str) -> str:
    """The letters and digits of a reading, upper case: what two readings of one word share."""
    return "".join(ch for ch in text if ch.isalnum()).upper()


def upright_marks(text: str) -> bool:
    """A reading whose letters and digits are all what one upright stroke reads as (1, l, I, i): a row of stems or
    grass blades, the commonest marks a painting makes, says nothing to a judge."""
    return all(ch in "1lIi" for ch in text if ch.isalnum())


def counted(readings: dict[str, list[TextHit]], config: TextCheck) -> dict[str, list[TextHit]]:
    """By size and way, the readings that count as words: confident, more than upright marks, and long, sure, or
    read again (the same letters, one reading's within the other's) at another size or way."""
    confident = {way: [hit for hit in hits if hit.score >= config.min_score and letters(hit.text) and not upright_marks(hit.text)]
                 for way, hits in readings.items()}

    def again(way: str, mine: str) -> bool:
        return any(mine in theirs or theirs in mine for other, hits in confident.items() if other != way
                   for theirs in map(letters, (hit.text for hit in hits)))

    return {way: [hit for hit in hits if len(letters(hit.text)) > config.short_chars or hit.score >= config.sure_score
                  or again(way, letters(hit.text))] for way, hits in confident.items()}


def words(readings: dict[str, list[TextHit]], config: TextCheck) -> list[TextHit]:
    """The counted readings of the size and way with the most letters, when they reach min_chars; else []."""
    best = max(counted(readings, config).values(), key=lambda hits: count_chars(hits, config.min_score), default=[])
    return best if count_chars(best, config.min_score) >= config.min_chars else []


class TextDetector:
    """Reads a capture for words (`find`); thread-safe, each concurrent call on its own engine."""

    def __init__(self, config: TextCheck | None = None) -> None:
        self.config = config or TextCheck()
        try:
            import rapidocr  # noqa: F401  (imported here so a gate without the text check never loads it)
        except ImportError as exc:
            raise ImportError("the text check needs rapidocr and onnxruntime (pip install 'rapidocr>=3.10' onnxruntime); "
                              "or turn it off with render.text_check.enabled: false") from exc
        self._engines: queue.LifoQueue = queue.LifoQueue()
        self._made = 0
        self._lock = threading.Lock()
        self._release(self._engine())  # the first engine now: a broken install fails at start, not mid-run

    def _engine(self):
        from rapidocr import RapidOCR

        threads = self.config.threads
        engine = RapidOCR(params={
            "Global.log_level": "error", "Global.use_cls": False,
            "Det.limit_type": "max", "Det.limit_side_len": 4096,  # the view's own size: sizes are chosen here
            "EngineConfig.onnxruntime.intra_op_num_threads": threads, "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        })
        blank = np.full((64, 64, 3), 255, np.uint8)  # loads both models
        engine(blank, use_det=True, use_cls=False, use_rec=False)
        engine(blank, use_det=False, use_cls=False, use_rec=True)
        return engine

    def _acquire(self):
        try:
            return self._engines.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._made < self.config.engines:
                self._made += 1
                return self._engine()
        return self._engines.get()

    def _release(self, engine) -> None:
        self._engines.put(engine)

    def read(self, image: Image.Image) -> dict[str, list[TextHit]]:
        """Every reading, by size and way ("512 px lines", "512 px glyph rows", ...), boxes in capture pixels."""
        width, height = image.size
        sizes = sorted({min(s, max(width, height)) for s in self.config.sizes}, reverse=True)
        engine = self._acquire()
        try:
            out: dict[str, list[TextHit]] = {}
            for size in sizes:
                scale = size / max(width, height)
                view = image if scale == 1 else image.resize((max(32, round(width * scale)), max(32, round(height * scale))), Image.LANCZOS)
                ink = ink_view(np.asarray(view.convert("RGB")))
                found = engine(ink, use_det=True, use_cls=False, use_rec=False)
                lines = []
                for quad in [] if found.boxes is None else found.boxes:
                    x0, y0 = np.floor(quad.min(axis=0)).astype(int).clip(0)
                    x1, y1 = np.ceil(quad.max(axis=0)).astype(int)
                    if min(x1 - x0, y1 - y0) <= MAX_LINE * min(ink.shape[:2]) and min(x1 - x0, y1 - y0) >= 2:
                        lines.append((ink[y0:y1, x0:x1], (x0, y0, x1, y1)))
                rows = [(packed(ink, row), (row[0][0], min(y for _, y, _, _ in row), row[-1][0] + row[-1][2],
                                             max(y + h for _, y, _, h in row))) for row in glyph_rows(ink)]
                for way, crops in (("lines", lines), ("glyph rows", rows)):
                    out[f"{size} px {way}"] = hits = []
                    for crop, box in crops:
                        read = engine(crop, use_det=False, use_cls=False, use_rec=True)
                        hits += [TextHit(text, round(float(score), 3), tuple(int(round(v / scale)) for v in box))
                                 for text, score in zip(read.txts or (), read.scores) if text]
            return out
        finally:
            self._release(engine)

    def find(self, image: Image.Image) -> list[TextHit]:
        """The readings that make the picture hold text (`words`), or []."""
        return words(self.read(image), self.config)


@functools.lru_cache(maxsize=4)
def shared_detector(config: TextCheck) -> TextDetector:
    """One detector per configuration in a process: pools (and tests) that come and go share its engines."""
    return TextDetector(config)
