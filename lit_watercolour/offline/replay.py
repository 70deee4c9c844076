"""Scripted completions for rehearsals: recipe-format sketches stand in for a random-init policy's text.

A random-init policy writes no sketches, so a rehearsal on random weights would render and
score nothing. `ReplaySampler` lets the policy sample as usual (its tokens and log-probs are
what the update trains on, at whatever length it sampled) and hands the renderer and the
reward terms a scripted completion per row instead of the decoded noise, at the moment the
policy finishes that row, so rendering overlaps sampling as in a real run.

`recipe_sketch` writes those completions in the recipe's format (`prompts.RECIPE_SYSTEM_PROMPT`):
the 600x600 skeleton, only the ten allowlisted methods, five petals painted in passes, and a
quality that varies by seed so a group's rewards differ: "layered" follows the prompt's three
numbers (each petal two or three times over, 15-30 filled shapes, reach 200-240, opacity
180-230, fillBleed 0.2-0.3); "once" paints each petal once, smaller and paler; "flat" is opaque
with almost no bleed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import torch

from lit_watercolour.prompts import RECIPE_CANVAS_SIZE
from lit_watercolour.sampling import OnCompletion, Sampler, SampleBatch

PETALS = ["#f6a57f", "#f08a6c", "#fbc4a0", "#e8735a", "#f29e8e", "#f7b267"]
CENTRES = ["#c2185b", "#8e244d", "#a4133c"]
LEAVES = ["#6b8e4e", "#4f7a3a", "#7aa35a"]
PAPERS = ["#fbf5e9", "#fdf8ef", "#f8f1e3"]
# quality -> (passes per petal, reach range, opacity range, bleed range)
QUALITIES = {
    "layered": ((2, 3), (200, 240), (180, 230), (0.2, 0.3)),
    "once": ((1, 1), (130, 170), (150, 175), (0.2, 0.3)),
    "flat": ((1, 2), (180, 220), (235, 255), (0.0, 0.05)),
}


def _lobe(rng: random.Random, cx: float, cy: float, angle: float, reach: float, width: float) -> list[tuple[int, int]]:
    """Eight vertices of a petal from near the centre out to `reach`, `width` wide at its middle."""
    pts = []
    for t, side in ((0.15, 0), (0.45, 1), (0.8, 1), (1.0, 0.3), (1.0, -0.3), (0.8, -1), (0.45, -1), (0.15, 0)):
        r = reach * t * rng.uniform(0.95, 1.05)
        a = math.radians(angle + side * math.degrees(math.atan2(width * (1 - abs(t - 0.55)), max(r, 1.0))))
        pts.append((round(cx + math.cos(a) * r), round(cy + math.sin(a) * r)))
    return pts


def recipe_sketch(seed: int, quality: str | None = None) -> str:
    """A completion (a sentence and one ```js block) painting a hibiscus in the recipe's format."""
    rng = random.Random(seed)
    quality = quality or rng.choice(list(QUALITIES))
    (lo, hi), reach_range, alpha, bleed = QUALITIES[quality]
    size = RECIPE_CANVAS_SIZE
    cx, cy = size / 2 + rng.uniform(-20, 20), size / 2 + rng.uniform(-20, 20)
    lines = [
        "async function setup() {", f"  createCanvas({size}, {size}, WEBGL);", "  brush.scaleBrushes(3);",
        "  angleMode(DEGREES);", "  noLoop();", "}", "", "function draw() {", "  translate(-width / 2, -height / 2);",
        f'  background("{rng.choice(PAPERS)}");', "  brush.noStroke();",
    ]

    def shape(colour: str, opacity: int, points: list[tuple[int, int]], comment: str) -> None:
        lines.append(f"  // {comment}")
        lines.append(f'  brush.fill("{colour}", {opacity});')
        lines.append(f"  brush.fillBleed({rng.uniform(*bleed):.2f});")
        lines.append(f"  brush.fillTexture({rng.uniform(0.3, 0.6):.2f}, {rng.uniform(0.2, 0.5):.2f});")
        lines.append(f"  brush.beginShape({rng.uniform(0.4, 0.8):.1f});")
        lines.extend(f"  brush.vertex({x}, {y});" for x, y in points)
        lines.append("  brush.endShape(true);")

    leaf = rng.choice(LEAVES)
    stem = [(round(cx - 6), round(cy + 40)), (round(cx + 6), round(cy + 40)), (round(cx + 14), size - 20), (round(cx - 2), size - 20)]
    shape(leaf, rng.randint(*alpha), stem, "the stem: a long narrow filled shape")
    for side in (-1, 1):
        shape(leaf, rng.randint(*alpha), _lobe(rng, cx, cy + 150, 90 - side * 60, 150, 40), "a leaf")
    start = rng.uniform(0, 72)
    for i in range(5):
        angle, reach = start + 72 * i, rng.uniform(*reach_range)
        colour = rng.choice(PETALS)
        for p in range(rng.randint(lo, hi)):  # each pass smaller and more opaque than the last
            shape(colour, min(255, rng.randint(*alpha) + 10 * p), _lobe(rng, cx, cy, angle, reach * (1 - 0.3 * p), 70 * (1 - 0.25 * p)),
                  f"petal {i + 1}, pass {p + 1}")
    lines.append(f'  brush.fill("{rng.choice(CENTRES)}", {rng.randint(*alpha)});')
    lines.append(f"  brush.circle({round(cx)}, {round(cy)}, {rng.randint(18, 30)}, {rng.uniform(0.1, 0.4):.2f});")
    lines.append("}")
    return "Here is a peach hibiscus in loose watercolour.\n\n```js\n" + "\n".join(lines) + "\n```"


class ReplaySampler:
    """Samples with `inner` (the real backend); rows report `completion(k)` instead of their text,
    k counting rows across calls, so every step paints new sketches."""

    def __init__(self, inner: Sampler, completion: Callable[[int], str] = recipe_sketch) -> None:
        self.inner, self.completion = inner, completion
        self.rows_done = 0

    def sync_weights(self, model) -> None:
        self.inner.sync_weights(model)

    def close(self) -> None:
        self.inner.close()

    def sample(self, prompts: list[str], n: int, on_completion: OnCompletion | None = None,
               generator: torch.Generator | None = None) -> SampleBatch:
        first = self.rows_done

        def report(row: int, _policy_text: str) -> None:
            if on_completion is not None:
                on_completion(row, self.completion(first + row))

        batch = self.inner.sample(prompts, n, report, generator=generator)
        batch.texts = [self.completion(first + row) for row in range(len(batch.texts))]
        self.rows_done += len(batch.texts)
        return batch
