"""A procedural corpus of p5.brush watercolour sketches, used to pre-train the tiny policy.

Every sketch follows the skeleton of `lit_watercolour.prompts` and calls only its allowlisted
`brush` methods. Quality varies on purpose (sparse, balanced, layered, muddy, opaque) so that a
policy trained on it writes sketches whose rewards differ within a GRPO group. Each sketch is
either literal (one shape per block of vertices) or looped (petals from `cos`/`sin`), so the
policy sees both short and long ways of writing the same painting. Deterministic given a seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from lit_watercolour.prompts import skeleton

# subject -> (petal colours, centre colours, leaf colours); flowers dominate the corpus
FLOWERS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "a peach hibiscus": (["#f6a57f", "#f08a6c", "#fbc4a0", "#e8735a"], ["#c2185b", "#8e244d"], ["#6b8e4e", "#4f7a3a"]),
    "a red poppy": (["#e63b2e", "#d62828", "#f25c54", "#b71c1c"], ["#2b2118", "#3d2c2e"], ["#6a8d52", "#557a46"]),
    "a pink peony": (["#f4a6c1", "#ee82a8", "#f9c6d7", "#e06c9f"], ["#f7d774", "#e9b949"], ["#5f8f57", "#7aa36b"]),
    "a yellow sunflower": (["#f6c90e", "#f4b400", "#fddb6d", "#e5a100"], ["#5b3a1a", "#7a4b21"], ["#6f8f3a", "#4e7a2c"]),
    "a blue iris": (["#5b6ee1", "#7b8cf0", "#3f51b5", "#9fa8f0"], ["#f7d046", "#e9b949"], ["#5a8a5e", "#6f9f6a"]),
    "a white magnolia": (["#f3e9ef", "#e8d3de", "#f7eef2", "#dcbfd0"], ["#b5838d", "#9c6b7a"], ["#6d8b5a", "#587a4a"]),
    "a purple anemone": (["#8e5bb5", "#a070c8", "#6c3f99", "#b58ad6"], ["#1f1a2e", "#2e2440"], ["#5e8c61", "#4a7a4f"]),
    "an orange marigold": (["#f39c12", "#e67e22", "#f5b041", "#d35400"], ["#9c4a12", "#7a3a0e"], ["#5d8a3c", "#4b7531"]),
    "a coral rose": (["#f27f72", "#e8675f", "#f7a399", "#d9534f"], ["#a83a3a", "#8a2d2d"], ["#5b8a4f", "#6e9c5d"]),
    "a lilac cosmos": (["#c8a2e0", "#b48ad4", "#dcc0ec", "#9f72c4"], ["#f2c14e", "#e0a93b"], ["#6a9a5b", "#58884b"]),
}
LANDSCAPES: dict[str, list[str]] = {
    "a misty hillside at dawn": ["#f7c59f", "#9bb7d4", "#7d9b76", "#5c7f67", "#b9c9a3"],
    "a lake under an evening sky": ["#f4a261", "#e76f51", "#8fb9d9", "#4d7ea8", "#2a4d69"],
    "green fields under a summer sky": ["#a8d0e6", "#f9e79f", "#8fbf6a", "#6a9f4b", "#4c7f3a"],
}
STILL_LIFES: dict[str, list[str]] = {
    "a bowl of lemons": ["#f7dc4a", "#f2c12e", "#8aa8c7", "#c9b79c", "#7f9a55"],
    "three pears on a table": ["#b5c84a", "#d4c25a", "#9c7a4e", "#c9a27e", "#6f8a3a"],
    "a blue jug and two apples": ["#4f74b8", "#6f93d0", "#d6453d", "#e8a23b", "#b89f82"],
}
SUBJECTS: list[str] = [*FLOWERS, *LANDSCAPES, *STILL_LIFES]
# how often each kind of painting comes up (flowers mostly)
KIND_WEIGHTS = {"flower": 0.7, "landscape": 0.15, "still_life": 0.15}
# quality -> (weight, layers per shape, opacity range, bleed range, texture range)
QUALITIES: dict[str, tuple[float, tuple[int, int], tuple[int, int], tuple[float, float], tuple[float, float]]] = {
    "sparse": (0.15, (1, 1), (50, 100), (0.05, 0.2), (0.2, 0.5)),
    "balanced": (0.35, (1, 2), (110, 180), (0.15, 0.3), (0.3, 0.6)),
    "layered": (0.25, (2, 3), (130, 200), (0.2, 0.35), (0.4, 0.7)),
    "muddy": (0.12, (3, 3), (170, 230), (0.3, 0.5), (0.6, 0.9)),
    "opaque": (0.13, (1, 2), (220, 255), (0.0, 0.08), (0.0, 0.2)),
}
MAX_LINES = 130  # longer sketches are redrawn: sampling and rendering on a CPU must stay quick
PAPERS = ["#fbf7ee", "#fbf7ee", "#fbf7ee", "#fdf9f0", "#f8f3e6"]
MUD = ["#6b5b4b", "#7a6a55", "#5e5346", "#847160"]
SENTENCES = [
    "Here is {subject} in loose, layered washes.",
    "A loose watercolour of {subject}, with soft bleeding edges.",
    "{Subject}, painted in translucent washes on white paper.",
    "Translucent washes for {subject}.",
    "Here is my painting.",
    "",
    "",
]


@dataclass(frozen=True)
class Sample:
    subject: str
    completion: str  # an optional sentence, then one ```js fenced sketch


class Sketch:
    """Collects the lines of the `draw()` body and wraps them in the prompt's skeleton."""

    def __init__(self, rng: random.Random, paper: str) -> None:
        self.rng = rng
        self.paper = paper
        self.lines: list[str] = []
        self.washes = 0

    def add(self, line: str, indent: int = 1) -> None:
        self.lines.append("  " * indent + line)

    def wash(self, colour: str, opacity: int, bleed: float, texture: tuple[float, float]) -> None:
        # bleed and texture are sticky brush state: set them for the first wash, then now and then
        if not self.washes or self.rng.random() < 0.3:
            self.add(f"brush.fillBleed({bleed:.2f});")
            self.add(f"brush.fillTexture({texture[0]:.2f}, {texture[1]:.2f});")
        self.add(f'brush.fill("{colour}", {opacity});')
        self.washes += 1

    def shape(self, points: list[tuple[float, float]], curvature: float, indent: int = 1) -> None:
        self.add(f"brush.beginShape({curvature:.1f});", indent)
        for x, y in points:
            self.add(f"brush.vertex({round(x)}, {round(y)});", indent)
        self.add("brush.endShape(true);", indent)

    def code(self) -> str:
        return skeleton("\n".join(["  brush.noStroke();", *self.lines]), self.paper)


class Style:
    """The quality knobs drawn once per sketch: layers, opacity, bleed and texture ranges."""

    def __init__(self, rng: random.Random, quality: str) -> None:
        _, self.layers, self.opacity, self.bleed, self.texture = QUALITIES[quality]
        self.rng = rng
        self.quality = quality

    def num_layers(self) -> int:
        return self.rng.randint(*self.layers)

    def alpha(self) -> int:
        return self.rng.randint(*self.opacity)

    def bleed_amount(self) -> float:
        return self.rng.uniform(*self.bleed)

    def tex(self) -> tuple[float, float]:
        return self.rng.uniform(*self.texture), self.rng.uniform(*self.texture)

    def colour(self, palette: list[str]) -> str:
        # muddy paintings mix in browns and greys
        if self.quality == "muddy" and self.rng.random() < 0.4:
            return self.rng.choice(MUD)
        return self.rng.choice(palette)


def petal_points(rng: random.Random, cx: float, cy: float, angle: float, length: float, width: float) -> list[tuple[float, float]]:
    """A teardrop from near the centre to a rounded tip, jittered so no two petals match."""
    local = [(0.1, 0.0), (0.45, -0.5), (0.85, -0.35), (1.0, 0.0), (0.85, 0.35), (0.45, 0.5)]
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    points = []
    for u, v in local:
        along = u * length * rng.uniform(0.92, 1.08)
        across = v * width * rng.uniform(0.85, 1.15)
        points.append((cx + along * c - across * s, cy + along * s + across * c))
    return points


def blob_points(rng: random.Random, cx: float, cy: float, rx: float, ry: float, n: int) -> list[tuple[float, float]]:
    """A lumpy ellipse: fruit, bushes, clouds."""
    return [
        (cx + rx * rng.uniform(0.85, 1.1) * math.cos(2 * math.pi * k / n), cy + ry * rng.uniform(0.85, 1.1) * math.sin(2 * math.pi * k / n))
        for k in range(n)
    ]


def paint_stem_and_leaves(sk: Sketch, rng: random.Random, style: Style, cx: float, cy: float, leaves: list[str]) -> None:
    bottom = rng.uniform(470, 505)
    sway = rng.uniform(-30, 30)
    half = rng.uniform(4, 8)
    sk.add("// stem")
    sk.wash(style.colour(leaves), style.alpha(), style.bleed_amount(), style.tex())
    sk.shape([(cx - half, cy + 40), (cx + half, cy + 40), (cx + sway + half, bottom), (cx + sway - half, bottom)], 0.3)
    for side in rng.sample([-1, 1], rng.randint(1, 2)):
        y = rng.uniform(cy + 110, bottom - 60)
        x = cx + sway * (y - cy) / (bottom - cy)
        length, lift = rng.uniform(70, 120), rng.uniform(20, 50)
        sk.add("// leaf")
        sk.wash(style.colour(leaves), style.alpha(), style.bleed_amount(), style.tex())
        sk.shape([(x, y), (x + side * length * 0.5, y - lift - 18), (x + side * length, y - lift), (x + side * length * 0.5, y - lift + 16)], 0.6)


def paint_flower_literal(sk: Sketch, rng: random.Random, style: Style, cx: float, cy: float, size: float, palette: tuple[list[str], list[str], list[str]]) -> None:
    petals, centres, _ = palette
    layers = style.num_layers()
    n = rng.randint(3, 5) if style.quality == "sparse" else rng.randint(4, 12 // layers + 1)
    start = rng.uniform(0, 360)
    for layer in range(layers):
        scale = 1.0 - 0.25 * layer  # inner passes are smaller, like a glaze
        sk.add(f"// petals, pass {layer + 1}")
        sk.wash(style.colour(petals), style.alpha(), style.bleed_amount(), style.tex())
        for k in range(n):
            angle = start + 360 * k / n + rng.uniform(-8, 8)
            sk.shape(petal_points(rng, cx, cy, angle, size * scale, size * scale * rng.uniform(0.45, 0.7)), rng.choice([0.4, 0.5, 0.6, 0.7]))
    sk.add("// centre")
    sk.wash(rng.choice(centres), min(255, style.alpha() + 30), style.bleed_amount(), style.tex())
    sk.add(f"brush.circle({round(cx)}, {round(cy)}, {round(size * rng.uniform(0.1, 0.2))});")


def paint_flower_loop(sk: Sketch, rng: random.Random, style: Style, cx: float, cy: float, size: float, palette: tuple[list[str], list[str], list[str]]) -> None:
    petals, centres, _ = palette
    n = rng.choice([4, 5, 5, 6, 6, 8])
    step = 360 // n
    offset = rng.randint(0, step)
    for layer in range(style.num_layers()):
        length = round(size * (1.0 - 0.25 * layer))
        width = rng.uniform(0.2, 0.35)  # half-width of a petal, as a share of its length
        sk.add(f"// petals, pass {layer + 1}")
        sk.wash(style.colour(petals), style.alpha(), style.bleed_amount(), style.tex())
        sk.add(f"for (let i = 0; i < {n}; i++) {{")
        sk.add(f"const a = i * {step} + {offset};", 2)
        sk.add("const c = cos(a);", 2)
        sk.add("const s = sin(a);", 2)
        # the petal in the rotated frame (c, s): no nested calls, so brackets stay easy to balance
        x, y, near, mid, side = round(cx), round(cy), round(length * 0.1), round(length * 0.55), round(length * width)
        sk.add(f"brush.beginShape({rng.choice([0.4, 0.5, 0.6, 0.7]):.1f});", 2)
        sk.add(f"brush.vertex({x} + {near} * c, {y} + {near} * s);", 2)
        sk.add(f"brush.vertex({x} + {mid} * c - {side} * s, {y} + {mid} * s + {side} * c);", 2)
        sk.add(f"brush.vertex({x} + {length} * c, {y} + {length} * s);", 2)
        sk.add(f"brush.vertex({x} + {mid} * c + {side} * s, {y} + {mid} * s - {side} * c);", 2)
        sk.add("brush.endShape(true);", 2)
        sk.add("}")
    sk.add("// centre")
    sk.wash(rng.choice(centres), min(255, style.alpha() + 30), style.bleed_amount(), style.tex())
    sk.add(f"brush.circle({round(cx)}, {round(cy)}, {round(size * rng.uniform(0.1, 0.2))});")


def paint_flowers(sk: Sketch, rng: random.Random, style: Style, subject: str) -> None:
    palette = FLOWERS[subject]
    count = rng.choices([1, 2, 3], weights=[0.7, 0.2, 0.1])[0]
    if count == 1:
        spots = [(rng.uniform(220, 290), rng.uniform(200, 260), rng.uniform(130, 200))]
    else:
        spots = [(rng.uniform(120, 390), rng.uniform(140, 300), rng.uniform(70, 110)) for _ in range(count)]
    for cx, cy, _ in spots:
        if style.quality != "sparse" or rng.random() < 0.5:
            paint_stem_and_leaves(sk, rng, style, cx, cy, palette[2])
    # several literal flowers would make a sketch too long to sample quickly
    paint = paint_flower_loop if count > 1 or rng.random() < 0.4 else paint_flower_literal
    for cx, cy, size in spots:
        paint(sk, rng, style, cx, cy, size, palette)


def paint_landscape(sk: Sketch, rng: random.Random, style: Style, subject: str) -> None:
    sky, glow, *land = LANDSCAPES[subject]
    sk.add("// sky")
    sk.wash(style.colour([sky, glow]), style.alpha(), style.bleed_amount(), style.tex())
    sk.shape([(20, 20), (492, 20), (492, rng.uniform(230, 280)), (20, rng.uniform(230, 280))], 0.2)
    if rng.random() < 0.7:
        sk.add("// sun")
        sk.wash(glow, style.alpha(), style.bleed_amount(), style.tex())
        sk.add(f"brush.circle({rng.randint(90, 420)}, {rng.randint(70, 180)}, {rng.randint(25, 55)});")
    top = rng.uniform(200, 260)
    for band in range(rng.randint(2, 4) if style.quality != "sparse" else 2):
        sk.add(f"// hills, band {band + 1}")
        sk.wash(style.colour(land), style.alpha(), style.bleed_amount(), style.tex())
        xs = [20, 140, 260, 380, 492]
        ridge = [(x, top + rng.uniform(-40, 30)) for x in xs]
        sk.shape([*ridge, (492, 492), (20, 492)], rng.choice([0.4, 0.5, 0.6]))
        top += rng.uniform(45, 80)
    for _ in range(style.num_layers() - 1):
        sk.add("// trees")
        sk.wash(style.colour(land), style.alpha(), style.bleed_amount(), style.tex())
        sk.shape(blob_points(rng, rng.uniform(60, 450), rng.uniform(300, 400), rng.uniform(25, 50), rng.uniform(30, 60), 6), 0.6)


def paint_still_life(sk: Sketch, rng: random.Random, style: Style, subject: str) -> None:
    palette = STILL_LIFES[subject]
    table = rng.uniform(320, 370)
    sk.add("// table")
    sk.wash(style.colour(palette[3:]), style.alpha(), style.bleed_amount(), style.tex())
    sk.shape([(30, table), (482, table + rng.uniform(-10, 10)), (482, 480), (30, 480)], 0.2)
    count = rng.randint(2, 4) if style.quality != "sparse" else 2
    for k in range(count):
        cx = 100 + (312 * k) / max(1, count - 1) + rng.uniform(-25, 25)
        rx, ry = rng.uniform(45, 75), rng.uniform(45, 85)
        cy = table - ry * 0.6
        colour = style.colour(palette[:3])
        for layer in range(style.num_layers()):
            shrink = 1.0 - 0.2 * layer
            sk.add(f"// fruit {k + 1}, pass {layer + 1}")
            sk.wash(colour, style.alpha(), style.bleed_amount(), style.tex())
            sk.shape(blob_points(rng, cx - 5 * layer, cy - 5 * layer, rx * shrink, ry * shrink, rng.randint(5, 8)), rng.choice([0.6, 0.7, 0.8]))
        if rng.random() < 0.5:
            sk.add("// highlight")
            sk.wash("#fffaf0", style.alpha(), style.bleed_amount(), style.tex())
            sk.add(f"brush.circle({round(cx - rx * 0.3)}, {round(cy - ry * 0.3)}, {round(rx * 0.2)});")


def kind_of(subject: str) -> str:
    return "flower" if subject in FLOWERS else "landscape" if subject in LANDSCAPES else "still_life"


def make_sketch(rng: random.Random, subject: str, quality: str) -> str:
    sk = Sketch(rng, rng.choice(PAPERS))
    style = Style(rng, quality)
    {"flower": paint_flowers, "landscape": paint_landscape, "still_life": paint_still_life}[kind_of(subject)](sk, rng, style, subject)
    return sk.code()


def make_completion(rng: random.Random, subject: str, code: str) -> str:
    sentence = rng.choice(SENTENCES).format(subject=subject, Subject=subject[:1].upper() + subject[1:])
    fenced = f"```js\n{code}```"
    return f"{sentence}\n\n{fenced}" if sentence else fenced


def make_sample(seed: int) -> Sample:
    rng = random.Random(seed)
    kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
    subject = rng.choice([s for s in SUBJECTS if kind_of(s) == kind])
    quality = rng.choices(list(QUALITIES), weights=[q[0] for q in QUALITIES.values()])[0]
    code = make_sketch(rng, subject, quality)
    while code.count("\n") > MAX_LINES:  # redraw the rare overlong sketch, keeping determinism
        code = make_sketch(rng, subject, quality)
    return Sample(subject, make_completion(rng, subject, code))


def make_corpus(num_samples: int, seed: int = 0) -> list[Sample]:
    return [make_sample(seed * 1_000_003 + i) for i in range(num_samples)]
