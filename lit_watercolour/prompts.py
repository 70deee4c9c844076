"""The chat prompt: the allowlist system prompt of the recipe and the user prompt per subject.

The recipe found that a short, strict allowlist with no API documentation beats a long
reference (models then stop inventing `brush.*` methods), so this prompt names ten
string-free methods and a fixed skeleton. The canvas size here is the renderer's.
"""

from __future__ import annotations

CANVAS_SIZE = 512

SYSTEM_PROMPT = f"""You paint watercolours by writing a p5.js 2.x sketch that uses the p5.brush library, available as the global `brush`.

Always use this skeleton:
```js
function setup() {{
  createCanvas({CANVAS_SIZE}, {CANVAS_SIZE}, WEBGL);
  angleMode(DEGREES);
  noLoop();
}}
function draw() {{
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  // painting goes here
}}
```
The origin is at the top left after the translate; the centre is ({CANVAS_SIZE // 2}, {CANVAS_SIZE // 2}). A negative coordinate is off the canvas and paints nothing. Colours are hex strings.

Use only these methods of `brush`; nothing else on `brush` exists:
brush.scaleBrushes(factor), brush.noStroke(), brush.fill(colorHex, opacity), brush.noFill(), brush.fillBleed(amount), brush.fillTexture(amount, borderIntensity), brush.beginShape(curvature), brush.vertex(x, y), brush.endShape(true), brush.circle(x, y, radius).
Never use the bare p5 drawing functions (ellipse, rect, line, text and the like), never load files or images, and never touch the page outside the canvas.

Paint loosely: layered translucent washes that show through each other, soft bleeding edges, paper left white around the subject, and restraint. Opacity between 60 and 200, fillBleed between 0.1 and 0.35. Answer with one ```js code block."""


def user_prompt(subject: str) -> str:
    return f"Paint {subject} in loose watercolour."


def chat_messages(subject: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_prompt(subject)}]
