"""The pre-training corpus: deterministic, fenced, balanced, and inside the prompt's allowlist."""

import re

from lit_watercolour.offline.corpus import QUALITIES, SUBJECTS, make_corpus, make_sample
from lit_watercolour.gate import static_gate
from lit_watercolour.prompts import SYSTEM_PROMPT
from lit_watercolour.sketch import brackets_balance, brush_methods, extract_code, is_truncated, scan_source

ALLOWED = set(re.findall(r"brush\.(\w+)\(", SYSTEM_PROMPT))  # the ten methods the prompt names
CORPUS = make_corpus(300, seed=3)


def test_prompt_allowlist_parsed():
    assert len(ALLOWED) == 10 and {"fill", "fillBleed", "vertex", "circle"} <= ALLOWED


def test_deterministic_given_seed():
    assert make_corpus(20, seed=3) == CORPUS[:20]
    assert make_sample(12345) == make_sample(12345)
    assert make_corpus(20, seed=4) != CORPUS[:20]


def test_every_sample_is_one_fenced_sketch_that_passes_the_static_gate():
    for sample in CORPUS:
        assert sample.completion.count("```js\n") == 1 and sample.completion.endswith("```")
        assert not is_truncated(sample.completion)
        code = extract_code(sample.completion)
        assert code is not None and code.startswith("function setup() {")
        src = scan_source(code)
        assert brackets_balance(src)
        assert brush_methods(src) <= ALLOWED, sample.subject
        assert static_gate(code, sample.completion) is None, (sample.subject, static_gate(code, sample.completion))


def test_skeleton_and_ranges():
    for sample in CORPUS:
        code = extract_code(sample.completion)
        assert "createCanvas(512, 512, WEBGL);" in code and "angleMode(DEGREES);" in code and "noLoop();" in code
        assert "translate(-width / 2, -height / 2);" in code and "brush.scaleBrushes(2);" in code
        assert 25 <= code.count("\n") <= 135
        for opacity in re.findall(r'brush\.fill\("#[0-9a-f]{6}", (\d+)\)', code):
            assert 0 < int(opacity) <= 255
        for bleed in re.findall(r"brush\.fillBleed\(([\d.]+)\)", code):
            assert 0 <= float(bleed) <= 1
        # every colour is a full hex string, every fill names one
        assert len(re.findall(r"brush\.fill\(", code)) == len(re.findall(r'brush\.fill\("#[0-9a-f]{6}", \d+\)', code))


def test_variety():
    """Subjects, layouts and opacity all vary, so rewards can differ within a GRPO group."""
    assert {s.subject for s in CORPUS} == set(SUBJECTS)
    codes = [extract_code(s.completion) for s in CORPUS]
    assert len(set(codes)) == len(codes)
    assert any("for (let i = 0;" in c for c in codes) and any("for (" not in c for c in codes)
    opacities = [int(o) for c in codes for o in re.findall(r'brush\.fill\("#\w+", (\d+)\)', c)]
    assert min(opacities) < 100 and max(opacities) > 220  # sparse and opaque qualities both occur
    assert len(QUALITIES) == 5
    assert any(not s.completion.startswith("```") for s in CORPUS) and any(s.completion.startswith("```") for s in CORPUS)
