"""A tiny Qwen3 taught a handful of short sketches, so GRPO tests see rewards that differ.

A random-init model never writes a sketch, every rollout fails the gate and the advantages are
all zero. A few hundred full-weight steps on four completions (three that pass the gate, one
that paints with bare p5 shapes and fails) make sampling at temperature 1 mix them. The washes are
strong enough (1-7% of the canvas past the blank rule's distance, whatever the seed) that a render seed
never turns a good sketch into a blank one.
"""

from __future__ import annotations

from pathlib import Path

import torch

from lit_watercolour.data import chat_prompt
from lit_watercolour.offline.tiny_models import build_tiny_model, tiny_tokenizer

SUBJECT = "a peach hibiscus"
HEAD = 'function setup() {\n  createCanvas(512, 512, WEBGL);\n  noLoop();\n}\nfunction draw() {\n  translate(-width / 2, -height / 2);\n  background("#fbf7ee");\n'
COMPLETIONS = [
    "```js\n" + HEAD + '  brush.noStroke();\n  brush.fill("#e8735a", 230);\n  brush.fillBleed(0.3);\n  brush.circle(256, 256, 120);\n}\n```',
    "```js\n" + HEAD + '  brush.noStroke();\n  brush.fill("#4f7a3a", 200);\n  brush.circle(200, 300, 60);\n  brush.fill("#c0392b", 230);\n  brush.circle(300, 220, 90);\n}\n```',
    "```js\n" + HEAD + '  brush.noStroke();\n  brush.fill("#c2185b", 230);\n  brush.beginShape(0.5);\n  brush.vertex(150, 150);\n  brush.vertex(360, 170);\n  brush.vertex(300, 360);\n  brush.endShape(true);\n}\n```',
    "```js\n" + HEAD + '  fill("#f6a57f");\n  ellipse(256, 256, 200, 200);\n}\n```',
]


def sketch_rows(tokenizer) -> tuple[list[int], list[list[int]]]:
    """The prompt's token ids and each of COMPLETIONS' (with its end of turn), prompt first."""
    prompt = tokenizer(chat_prompt(tokenizer, SUBJECT), add_special_tokens=False).input_ids
    return prompt, [prompt + tokenizer(c + "<|im_end|>", add_special_tokens=False).input_ids for c in COMPLETIONS]


def save_tiny_painter(path: str | Path, steps: int = 150, seed: int = 0) -> Path:
    path = Path(path)
    tokenizer = tiny_tokenizer()
    model = build_tiny_model("qwen3", tokenizer, seed=seed, hidden_size=64, num_layers=2)
    prompt, rows = sketch_rows(tokenizer)
    width = max(map(len, rows))
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    labels = ids.clone()
    labels[:, : len(prompt)] = -100
    for i, r in enumerate(rows):
        labels[i, len(r) :] = -100
    mask = (labels != -100) | (torch.arange(width) < len(prompt))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask.long(), labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
