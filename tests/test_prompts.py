import re
from pathlib import Path

import pytest
import yaml

from lit_watercolour.data import PromptDataModule, chat_prompt
from lit_watercolour.gate import BRUSH_EXPORTS, static_gate
from lit_watercolour.prompts import (RECIPE_METHODS, RECIPE_SYSTEM_PROMPT, SYSTEM_PROMPT, SYSTEM_PROMPTS, chat_messages,
                                     system_prompt, user_prompt)
from lit_watercolour.offline.replay import QUALITIES, recipe_sketch
from lit_watercolour.sketch import brush_methods, extract_code, scan_source
from lit_watercolour.offline.tiny_models import tiny_tokenizer

RECIPE_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "hibiscus_qwen35_a3b.yaml"


def named_methods(prompt: str) -> set[str]:
    return set(re.findall(r"\bbrush\.(\w+)\s*\(", prompt))


@pytest.mark.parametrize("name", sorted(SYSTEM_PROMPTS))
def test_every_method_a_prompt_names_is_a_real_p5_brush_export(name):
    # BRUSH_EXPORTS is Object.keys(brush) of the real page (tests/test_gate.py reads it from Chromium)
    named = named_methods(SYSTEM_PROMPTS[name])
    assert named and named <= BRUSH_EXPORTS, named - BRUSH_EXPORTS


def test_recipe_allowlist_is_ten_string_free_methods():
    assert len(RECIPE_METHODS) == 10
    listed = [line.strip() for line in RECIPE_SYSTEM_PROMPT.splitlines() if line.startswith("  brush.")]
    assert listed == [f"brush.{m}" for m in RECIPE_METHODS]
    assert {m.split("(")[0] for m in RECIPE_METHODS} == {
        "scaleBrushes", "noStroke", "fill", "noFill", "fillBleed", "fillTexture", "beginShape", "vertex", "endShape", "circle"}
    # nothing that takes a brush, field or hatch name, the family models invent names for
    assert not named_methods(RECIPE_SYSTEM_PROMPT) & {"set", "field", "hatchStyle", "stroke", "line", "hatch", "pick"}


def test_recipe_prompt_has_the_skeleton_frame_and_three_numbers():
    p = RECIPE_SYSTEM_PROMPT
    for text in ("async function setup() {", "createCanvas(600, 600, WEBGL);", "brush.scaleBrushes(3);",
                 "angleMode(DEGREES);", "noLoop();", "translate(-width / 2, -height / 2);", "background(hex);",
                 "origin at the top LEFT", "The centre of the canvas is (300, 300)",
                 "a negative coordinate is off the canvas and paints nothing at all", 'hex strings like "#e08a72"',
                 "Paint one flower, centred", "do not paint on a dark ground",
                 "two or three times over", "fifteen to thirty filled shapes", "200 to 240 units from the centre",
                 "Opacity never below 150, and 180 to 230 on the petals, with brush.fillBleed between 0.2 and 0.3",
                 "A stem is a long narrow filled shape, not a line"):
        assert text in p, text
    # setup comes before draw, and the frame is set up in that order
    assert p.index("createCanvas") < p.index("brush.scaleBrushes(3)") < p.index("angleMode") < p.index("translate")
    assert user_prompt("a peach hibiscus") == "Paint a peach hibiscus in loose watercolour."


def test_the_recipe_skeleton_filled_in_passes_the_static_gate():
    block = RECIPE_SYSTEM_PROMPT.split("Use exactly this skeleton:")[1].split("Angles are in degrees")[0]
    painting = ('brush.noStroke(); brush.fill("#f08a6c", 200); brush.fillBleed(0.25); brush.beginShape(0.5);'
                " brush.vertex(300, 80); brush.vertex(420, 300); brush.vertex(300, 320); brush.endShape(true);")
    code = block.replace("background(hex);", 'background("#fbf5e9");').replace("// painting goes here", painting)
    assert static_gate(code) is None


@pytest.mark.parametrize("quality", sorted(QUALITIES))
def test_replayed_recipe_sketches_keep_to_the_allowlist(quality):
    code = extract_code(recipe_sketch(7, quality))
    assert static_gate(code) is None
    assert brush_methods(scan_source(code)) <= {m.split("(")[0] for m in RECIPE_METHODS}
    assert "createCanvas(600, 600, WEBGL)" in code and code.startswith("async function setup()")


def test_system_prompt_presets_files_and_bad_names(tmp_path):
    assert system_prompt() == SYSTEM_PROMPT and system_prompt("recipe") == RECIPE_SYSTEM_PROMPT
    mine = tmp_path / "mine.txt"
    mine.write_text("Paint with brush.circle only.\n")
    assert system_prompt(str(mine)) == "Paint with brush.circle only."
    with pytest.raises(ValueError, match="neither a preset"):
        system_prompt("recpie")
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match="empty"):
        system_prompt(str(tmp_path / "empty.txt"))
    with pytest.raises(ValueError, match="neither a preset"):
        PromptDataModule(system_prompt=str(tmp_path / "missing.txt"))


def test_recipe_config_uses_the_recipe_prompt_with_thinking_off():
    data = yaml.safe_load(RECIPE_CONFIG.read_text())["data"]
    dm = PromptDataModule(**data, tokenizer=None)
    assert data["system_prompt"] == "recipe" and dm.system == RECIPE_SYSTEM_PROMPT
    tok = tiny_tokenizer()  # Qwen's template with its enable_thinking switch
    text = chat_prompt(tok, "a peach hibiscus", dm.system)
    assert text == tok.apply_chat_template(chat_messages("a peach hibiscus", RECIPE_SYSTEM_PROMPT), tokenize=False,
                                           add_generation_prompt=True, enable_thinking=False)
    assert text.endswith("<think>\n\n</think>\n\n") and "Paint a peach hibiscus in loose watercolour." in text
