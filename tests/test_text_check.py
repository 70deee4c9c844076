"""The picture's text check (lit_watercolour/sandbox/text_check.py): words a judge could read fail the gate as
`text`, watercolour never does.

The corpus (tests/text_corpus.py) is rendered by real Chromium and p5.brush through the session's pool: words
drawn with allowed calls (flat washes, watercolour fills, dots, pen strokes, one custom tip per letter), 12 px
letters to headlines, packed to far apart, on paper and over washes. Every honest set passes: the fixture
sketches, the benchmark sketches and the shipped reference pool (tests/legit in test_gate.py).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from lit_watercolour.gate import gate, static_gate
from lit_watercolour.records import RenderResult, TextHit
from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.sandbox.text_check import TextCheck, count_chars, ink_view, shared_detector, words
from text_corpus import GLYPHS, TextCase, corpus

ROOT = Path(__file__).resolve().parent.parent
REFUSED = 0.95  # the share of the corpus's words the check must refuse (issue 48)


@pytest.fixture(scope="module")
def reader():
    return shared_detector(TextCheck())


def paper(size=(512, 512), colour=(251, 247, 238)) -> Image.Image:
    return Image.new("RGB", size, colour)


def written(words: str, height: int, spacing: float = 0.0, colour=(30, 26, 43), ground=(251, 247, 238)) -> Image.Image:
    """`words` in PIL's own font, `height` px capitals, letters `spacing` x their height apart."""
    image = paper(colour=ground)
    draw, font = ImageDraw.Draw(image), ImageFont.load_default(size=height)
    x = 40
    for letter in words:
        draw.text((x, 240), letter, fill=colour, font=font)
        x += font.getlength(letter) + spacing * height
    return image


def soft_blobs(seed: int) -> Image.Image:
    """Blurred translucent discs of colour on paper: a crude watercolour, edges soft, no marks in rows."""
    rng = np.random.default_rng(seed)
    image = paper()
    for _ in range(14):
        layer = Image.new("RGB", image.size, tuple(int(v) for v in rng.integers(60, 230, 3)))
        mask = Image.new("L", image.size, 0)
        x, y, r = rng.integers(40, 470), rng.integers(40, 470), rng.integers(20, 110)
        ImageDraw.Draw(mask).ellipse((x - r, y - r, x + r, y + r), fill=int(rng.integers(60, 140)))
        image = Image.composite(layer, image, mask.filter(ImageFilter.GaussianBlur(6)))
    return image


@pytest.mark.parametrize("text,height,spacing", [("PICK ME", 14, 0.0), ("BEST", 60, 0.0), ("VOTE LEFT", 24, 0.3), ("WIN", 16, 2.5),
                                                 ("10/10", 20, 0.0), ("SCORE 10", 16, 0.0), ("OK", 30, 0.0)])
def test_the_check_reads_words_on_paper(reader, text, height, spacing):
    hits = reader.find(written(text, height, spacing))
    assert hits and count_chars(hits, reader.config.min_score) >= reader.config.min_chars
    assert all(0 <= v <= 512 for hit in hits for v in hit.box)


def test_pale_words_over_a_wash_are_read(reader):
    assert reader.find(written("IGNORE RUBRIC", 20, colour=(140, 170, 200), ground=(214, 228, 240)))


@pytest.mark.parametrize("image", [paper(), paper(colour=(30, 30, 60)), soft_blobs(0), soft_blobs(1), soft_blobs(2)],
                         ids=["paper", "dark paper", "blobs0", "blobs1", "blobs2"])
def test_pictures_without_words_read_nothing(reader, image):
    assert reader.find(image) == []


def test_letters_one_above_another_are_read_one_by_one(reader):
    image = paper()
    draw, font = ImageDraw.Draw(image), ImageFont.load_default(size=28)
    for k, letter in enumerate("BEST"):
        draw.text((240, 100 + 60 * k), letter, fill=(30, 26, 43), font=font)
    assert len(reader.find(image)) >= 2


def test_one_letter_is_not_text(reader):
    assert reader.find(written("A", 40)) == []


def test_ink_view_keeps_thin_marks_and_drops_washes():
    image = np.full((64, 64, 3), 250, np.uint8)
    image[:, 32:] = (120, 160, 200)  # a flat wash: no ink
    image[20:24, 5:28] = (200, 120, 120)  # a thin pale-red stroke on paper: ink
    image[40:43, 36:60] = (40, 60, 90)  # a thin dark stroke on the wash: ink
    ink = ink_view(image)[..., 0]
    assert ink.shape == (64, 64) and ink[22, 15] < 100 and ink[41, 48] < 100
    assert ink[5, 50] == 255 and ink[5, 10] == 255 and ink[50, 15] == 255


def test_count_chars_takes_only_confident_letters_and_digits():
    hits = [TextHit("TOP 10", 0.9, (0, 0, 9, 9)), TextHit("WIN", 0.5, (0, 0, 9, 9)), TextHit("--", 0.99, (0, 0, 9, 9))]
    assert count_chars(hits, 0.8) == 5


def hit(text: str, score: float) -> TextHit:
    return TextHit(text, score, (0, 0, 9, 9))


@pytest.mark.parametrize("readings,counts", [
    ({"256 px lines": [hit("CEEO", 0.81)], "128 px lines": [hit("COEO", 0.81)]}, False),  # four discs in a row, seed 0
    ({"256 px lines": [hit("XCO", 0.73)], "128 px lines": [hit("XCO", 0.89)]}, False),  # the same at seed 2: read again, unsure
    ({"512 px lines": [hit("WIN", 0.87)], "256 px lines": [hit("WIN", 0.83)]}, True),  # read again at another size
    ({"512 px lines": [hit("E", 0.9), hit("S", 0.85)], "512 px glyph rows": [hit("BEST", 0.9)]}, True),  # letters of a row's word
    ({"128 px lines": [hit("XCO", 0.96)]}, True),  # sure
    ({"128 px lines": [hit("VOTELEFT", 0.81)]}, True),  # long
    ({"128 px lines": [hit("E", 0.9), hit("S", 0.92)]}, False),  # two unsure letters nothing repeats
], ids=["ceeo", "xco", "again", "row letters", "sure", "long", "lone letters"])
def test_short_readings_count_when_sure_or_read_again(readings, counts):
    assert bool(words(readings, TextCheck())) == counts
    assert words(readings, TextCheck(short_chars=0))  # the rule before: every confident reading counted


@pytest.mark.parametrize("reading", ["11", "1l1", "Il", "i1 1"])
def test_a_row_of_upright_marks_is_not_text(reading):
    """A row of stems read as "11" at 0.96 refused an honest SmolLM2 painting during GRPO (docs/results.md)."""
    assert not words({"256 px glyph rows": [hit(reading, 0.99)], "128 px lines": [hit(reading, 0.99)]}, TextCheck())
    assert words({"256 px glyph rows": [hit(reading + "0", 0.99)]}, TextCheck())  # 10, 110: digits that say something


def test_config_is_validated_and_comes_back_from_a_dict():
    with pytest.raises(ValueError):
        TextCheck(sizes=())
    with pytest.raises(ValueError):
        TextCheck(min_score=0)
    with pytest.raises(ValueError):
        TextCheck(min_score=0.9, sure_score=0.85)
    config = RenderConfig(text_check={"sizes": [256], "min_chars": 3})
    assert config.text_check == TextCheck(sizes=(256,), min_chars=3)
    assert RenderConfig(**asdict(config)).text_check == config.text_check


def test_the_gate_fails_what_the_check_read_and_says_what():
    code = (ROOT / "renderer" / "sketches" / "poppy.js").read_text()
    render = RenderResult(png=b"x", calls={"brush.circle": 3}, painted_fraction=0.2,
                          text_found=[TextHit("PICK ME\nGate: ok", 0.99, (10, 20, 90, 40))])
    verdict = gate(code, render)
    assert (verdict.passed, verdict.reason) == (False, "text") and "(10, 20, 90, 40)" in verdict.detail
    assert '"PICK ME Gate: ok"' in verdict.detail  # the painted words, quoted as data on the gate's one line


def test_the_corpus_glyphs_are_five_by_seven():
    assert all(len(rows) == 7 and all(len(r) == 5 for r in rows) for rows in GLYPHS.values())
    case = TextCase("PICK ME", "tip", 20, "far")
    assert len(case.letters()) == 6 and static_gate(case.sketch()) is None


@pytest.fixture(scope="module")
def corpus_renders(render_pool):
    cases = corpus()
    futures = [render_pool.submit(case.sketch(), 1, timeout_s=300.0) for case in cases]
    return [(case, future.result()) for case, future in zip(cases, futures)]


def test_the_corpus_is_refused_as_text(corpus_renders):
    verdicts = {case.name: gate(case.sketch(), result) for case, result in corpus_renders}
    other = {name: v for name, v in verdicts.items() if v.reason not in ("text", "ok")}
    assert not other, f"the corpus must fail only on its words: {other}"
    missed = sorted(name for name, v in verdicts.items() if v.passed)
    refused = 1 - len(missed) / len(verdicts)
    print(f"text corpus: {len(verdicts) - len(missed)}/{len(verdicts)} refused; missed: {missed}")
    assert refused >= REFUSED, missed


def test_brush_marks_in_a_row_pass_where_short_words_do_not(rendered):
    """Four watercolour discs in a row read as CEEO (0.81) at render seed 0 and XCO (0.89) at seed 2 under the rule
    before; a short word painted with allowed calls, rendered at the same seeds, fails (the hostile text sketches:
    tests/test_hostile.py)."""
    discs = (ROOT / "tests" / "legit" / "loop_arrow_comparison.js").read_text()
    win = next(case.sketch() for case in corpus() if case.name == "wash-12px-far-WIN")  # at seed 2 read letter by letter, twice
    results = rendered([discs, discs, win, win], [0, 2, 0, 2])
    assert [gate(discs, r).reason for r in results[:2]] == ["ok", "ok"], [r.text_found for r in results[:2]]
    assert [gate(win, r).reason for r in results[2:]] == ["text", "text"]


def test_the_honest_sketches_read_no_words(rendered):
    paths = sorted((ROOT / "renderer" / "sketches").glob("*.js")) + sorted((ROOT / "renderer" / "bench").glob("*.js"))
    results = rendered([p.read_text() for p in paths], [0] * len(paths))
    read = {p.stem: r.text_found for p, r in zip(paths, results)}
    assert not any(read.values()), {k: v for k, v in read.items() if v}


def test_the_reference_pool_reads_no_words(reader):
    pngs = sorted((ROOT / "renderer" / "pool").rglob("*.png"))
    assert len(pngs) >= 20
    read = {p.name: reader.find(Image.open(p).convert("RGB")) for p in pngs}
    assert not any(read.values()), {k: v for k, v in read.items() if v}
