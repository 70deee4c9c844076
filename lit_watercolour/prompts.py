"""The chat prompt: a system prompt chosen by name (or read from a file) and the user prompt per subject.

The recipe found that a short, strict allowlist with no API documentation beats a long
reference (models then stop inventing `brush.*` methods), so both prompts name ten
string-free methods and a fixed skeleton. Two presets:
  - "offline": this project's own, on the 512-px canvas the shipped tiny policy was trained on;
  - "recipe": the reference recipe's (HF blog "Training a coding model to paint watercolours",
    its `prompt.py` + hibiscus `domains.py`): the 600x600 skeleton with `async function setup`,
    `brush.scaleBrushes(3)` and `angleMode(DEGREES)`, the top-left origin with the centre at
    (300, 300), hex colours, the hibiscus composition block and its "three numbers".
Any other value of `system_prompt` is the path of a text file holding a prompt.
"""

from __future__ import annotations

from pathlib import Path

CANVAS_SIZE = 512


def skeleton(body: str, paper: str = "#fbf7ee", canvas: str = f"createCanvas({CANVAS_SIZE}, {CANVAS_SIZE}, WEBGL);") -> str:
    """The offline prompt's sketch, `body` (indented lines) painting inside draw()."""
    return (f"function setup() {{\n  {canvas}\n  angleMode(DEGREES);\n  noLoop();\n}}\nfunction draw() {{\n"
            f"  translate(-width / 2, -height / 2);\n  background(\"{paper}\");\n  brush.scaleBrushes(2);\n{body}\n}}\n")


SYSTEM_PROMPT = f"""You paint watercolours by writing a p5.js 2.x sketch that uses the p5.brush library, available as the global `brush`.

Always use this skeleton:
```js
{skeleton("  // painting goes here")}```
The origin is at the top left after the translate; the centre is ({CANVAS_SIZE // 2}, {CANVAS_SIZE // 2}). A negative coordinate is off the canvas and paints nothing. Colours are hex strings.

Use only these methods of `brush`; nothing else on `brush` exists:
brush.scaleBrushes(factor), brush.noStroke(), brush.fill(colorHex, opacity), brush.noFill(), brush.fillBleed(amount), brush.fillTexture(amount, borderIntensity), brush.beginShape(curvature), brush.vertex(x, y), brush.endShape(true), brush.circle(x, y, radius).
Never use the bare p5 drawing functions (ellipse, rect, line, text and the like), never load files or images, and never touch the page outside the canvas.

Paint loosely: layered translucent washes that show through each other, soft bleeding edges, paper left white around the subject, and restraint. Opacity between 60 and 200, fillBleed between 0.1 and 0.35. Answer with one ```js code block."""

RECIPE_CANVAS_SIZE = 600
# The recipe's allowlist: ten methods, none taking a brush or field name, so no invented name can be written.
RECIPE_METHODS = (
    "scaleBrushes(factor)", "noStroke()", "fill(colorHex, opacity)", "noFill()", "fillBleed(amount)",
    "fillTexture(amount, borderIntensity)", "beginShape(curvature)", "vertex(x, y)", "endShape(true)",
    "circle(x, y, radius, scribble)",
)
# The recipe's composition block for its one subject (a hibiscus), with its "three numbers".
RECIPE_COMPOSITION = """Paint one flower, centred, filling most of the frame, on a pale cream or off-white paper ground, in warm pinks, corals, yellows and magentas, with green leaves and a stem. Do not fill the canvas edge to edge, and do not paint on a dark ground.

Three numbers matter more than any adjective:
- Five petals. Paint each petal two or three times over: a first pass at full size, then a smaller and more opaque pass inside it, and a small dark one near the centre. That layering gives the painting its depth and puts the whole painting at fifteen to thirty filled shapes. Keep the petals as five broad lobes.
- Petals reaching 200 to 240 units from the centre, so the flower occupies the frame.
- Opacity never below 150, and 180 to 230 on the petals, with brush.fillBleed between 0.2 and 0.3."""

_RECIPE_METHOD_LINES = "\n".join(f"  brush.{m}" for m in RECIPE_METHODS)
_RECIPE_SIZE = RECIPE_CANVAS_SIZE
RECIPE_SYSTEM_PROMPT = f"""You paint watercolours by writing a p5.js 2.x sketch that uses the p5.brush library, available as the global `brush`.

Use exactly this skeleton:

  async function setup() {{
    createCanvas({_RECIPE_SIZE}, {_RECIPE_SIZE}, WEBGL);
    brush.scaleBrushes(3);
    angleMode(DEGREES);
    noLoop();
  }}

  function draw() {{
    translate(-width / 2, -height / 2);
    background(hex);
    // painting goes here
  }}

Angles are in degrees, and after the translate the canvas runs from 0 to {_RECIPE_SIZE} on both axes with the origin at the top LEFT, not the centre. The centre of the canvas is ({_RECIPE_SIZE // 2}, {_RECIPE_SIZE // 2}). Every coordinate you paint at must be between 0 and {_RECIPE_SIZE}: a negative coordinate is off the canvas and paints nothing at all. Colours are hex strings like "#e08a72".

{RECIPE_COMPOSITION}

These ten brush methods exist. Nothing else on `brush` exists, and there is no way to name or select a brush: everything is painted as a filled shape. Do not call any other brush method, and never use the bare p5 drawing functions such as ellipse, rect, vertex or beginShape:
{_RECIPE_METHOD_LINES}

colorHex is a string like "#e08a72". opacity runs 0 to 255. amount, curvature, borderIntensity and scribble run 0 to 1.

Every mark is a filled shape. Build petals and leaves with brush.beginShape, a run of at least three brush.vertex calls, then brush.endShape(true), and call brush.fill before each one. A stem is a long narrow filled shape, not a line. brush.circle fills a disc."""

SYSTEM_PROMPTS = {"offline": SYSTEM_PROMPT, "recipe": RECIPE_SYSTEM_PROMPT}
USER_PROMPT = "Paint {subject} in loose watercolour."


def system_prompt(source: str = "offline") -> str:
    """A preset's text (`SYSTEM_PROMPTS`), else the text of the file at `source`."""
    if source in SYSTEM_PROMPTS:
        return SYSTEM_PROMPTS[source]
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"system_prompt {source!r} is neither a preset ({', '.join(SYSTEM_PROMPTS)}) nor a file")
    text = path.read_text().strip()
    if not text:
        raise ValueError(f"system_prompt file {source} is empty")
    return text


def user_prompt(subject: str) -> str:
    return USER_PROMPT.format(subject=subject)


def chat_messages(subject: str, system: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user_prompt(subject)}]
