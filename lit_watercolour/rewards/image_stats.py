"""The image-statistics scorer: hand-made measures of a render that need no weights, so the loop runs anywhere.

What it is: a stand-in for the judge and HPSv3 on a CPU box with no models. It measures a few
things watercolours tend to have and that a p5.brush sketch can get visibly wrong:
  - soft edges: the share of edge energy in gentle gradients rather than hard steps;
  - layering: many distinct intermediate tones among the painted pixels (translucent washes
    over each other), measured as the entropy of their colour histogram;
  - paper white left open: painted coverage inside a target band (not blank, not edge to edge);
  - palette spread: the spread of hues among the saturated painted pixels;
  - clean colour: the share of painted pixels that are not mud: grey or greyed-brown ink of middle or
    dark value (what overworked, over-mixed washes turn into); light tints and muted greens are clean;
  - style distance: closeness of those statistics to the reference pool's.
Every part is a smooth function of the pixels (soft masks, sigmoids, Gaussians, no thresholds
with plateaus), so renders in a GRPO group get different scores. The score is the mean of the parts on
the pool's scale: 0 for an empty sheet, 1 for the pool's best reference (clipped to [0, 1]). The raw
mean gives an empty sheet ~0.4 and the shipped policy's sketches 0.6-0.75, so a gate failure (0) would
sit far below every passing sketch and drown the differences GRPO can learn from (docs/offline-run.md, "The pool's scale").

What it is not: a judgement of taste or beauty. It can be gamed by any image with the right
statistics; use the judge and HPSv3 for real training.
"""

from __future__ import annotations

import io
import time

import numpy as np
import torch
from PIL import Image

from lit_watercolour.rewards.base import RewardTerm, TermScores, summary_metrics
from lit_watercolour.rewards.pool import SHIPPED_POOL, ReferencePool
from lit_watercolour.records import Rollout

SIZE = 256  # statistics are computed at 256x256: enough for edges and tones, a few ms per image
FEATURES = ("coverage", "softness", "layering", "palette", "saturation", "ink_luma")
PARTS = ("paper", "softness", "layering", "palette", "clean", "style")


def _sigmoid(x: np.ndarray | float) -> np.ndarray | float:
    return 1.0 / (1.0 + np.exp(-x))


def paper_colour(rgb: np.ndarray, luma: np.ndarray) -> np.ndarray:
    """The most common light colour (the sheet, whatever its tint), white if nothing is light."""
    light = rgb[luma > 0.8]
    if len(light) == 0:
        return np.ones(3, dtype=np.float32)
    q = (light * 31).astype(np.int32)
    bins = q[:, 0] * 1024 + q[:, 1] * 32 + q[:, 2]
    return light[bins == np.bincount(bins).argmax()].mean(0)


def image_stats(png: bytes) -> dict[str, float]:
    """The raw statistics of one render, each in [0, 1]."""
    img = Image.open(io.BytesIO(png)).convert("RGB").resize((SIZE, SIZE), Image.BILINEAR)
    rgb = np.asarray(img, dtype=np.float32) / 255.0
    luma = rgb @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    mx, mn = rgb.max(-1), rgb.min(-1)
    sat = (mx - mn) / (mx + 1e-6)
    # soft "is painted" mask: distance from the paper colour, ~0 on paper, ~1 from 0.1 on
    dist = np.linalg.norm(rgb - paper_colour(rgb, luma), axis=-1) / np.sqrt(3.0)
    ink = _sigmoid((dist - 0.06) / 0.015)
    ink_sum = ink.sum() + 1e-6
    coverage = float(ink.mean())

    gy, gx = np.gradient(luma)
    grad = np.hypot(gx, gy)
    edge = _sigmoid((grad - 0.01) / 0.004)  # any visible change
    hard = _sigmoid((grad - 0.12) / 0.03)  # a step no wash would leave
    softness = float(1.0 - (hard * grad).sum() / ((edge * grad).sum() + 1e-6))

    # colour histogram (8 levels per channel) of the painted pixels, weighted by the mask
    q = np.clip((rgb * 8).astype(np.int32), 0, 7)
    bins = (q[..., 0] * 64 + q[..., 1] * 8 + q[..., 2]).ravel()
    hist = np.bincount(bins, weights=ink.ravel(), minlength=512) / ink_sum
    layering = float(-(hist * np.log(hist + 1e-12)).sum() / np.log(64.0))  # 64 well-used tones = 1

    hue = np.arctan2(np.sqrt(3.0) * (rgb[..., 1] - rgb[..., 2]), 2 * rgb[..., 0] - rgb[..., 1] - rgb[..., 2])
    w = ink * sat
    resultant = np.hypot((w * np.cos(hue)).sum(), (w * np.sin(hue)).sum()) / (w.sum() + 1e-6)
    palette = float(1.0 - resultant)  # 0: one hue, 1: hues all round the wheel

    # mud: grey (saturation under ~0.12, any hue) or a greyed warm brown (under ~0.4, hue near 30 degrees),
    # of middle or dark value; a clean pigment keeps its saturation, a thin clean wash is light (value > 0.8),
    # and muted greens and blues are not mud
    warm = _sigmoid((np.cos(hue - np.pi / 6) - 0.8) / 0.05)
    greyed = np.maximum(_sigmoid((0.12 - sat) / 0.03), _sigmoid((0.4 - sat) / 0.06) * warm)
    mud = greyed * _sigmoid((0.8 - mx) / 0.05)
    clean = float(1.0 - (ink * mud).sum() / ink_sum)

    return {
        "coverage": coverage,
        "softness": float(np.clip(softness, 0.0, 1.0)),
        "layering": float(np.clip(layering, 0.0, 1.0)),
        "palette": palette,
        "clean": clean,
        "saturation": float((ink * sat).sum() / ink_sum),
        "ink_luma": float((ink * luma).sum() / ink_sum),
    }


def mean_of(parts: dict[str, float]) -> float:
    return float(np.mean(list(parts.values())))


def empty_sheet() -> bytes:
    """A render of nothing: paper only (any light tint scores the same: the paper is measured, not assumed)."""
    buf = io.BytesIO()
    Image.new("RGB", (SIZE, SIZE), "#fbf7ee").save(buf, format="PNG")
    return buf.getvalue()


def paper_score(coverage: float, low: float = 0.05, high: float = 0.6, softness: float = 0.03) -> float:
    """~1 with coverage inside [low, high], falling smoothly outside."""
    return float(_sigmoid((coverage - low) / softness) * _sigmoid((high - coverage) / softness))


def style_score(stats: dict[str, float], mean: np.ndarray, std: np.ndarray) -> float:
    """exp(-z^2/2) averaged over features: 1 at the pool's mean, smooth everywhere."""
    x = np.array([stats[f] for f in FEATURES])
    return float(np.exp(-0.5 * ((x - mean) / std) ** 2).mean())


class ImageStatsTerm(RewardTerm):
    """The offline stand-in for judge + HPSv3 (weight 0.90 takes their two slots). The reference pool's
    statistics and the scale are measured in `setup`."""

    name = "image_stats"
    streams = True  # per render, so each render is scored as it arrives

    def __init__(self, weight: float = 0.90, pool: str = str(SHIPPED_POOL), pool_tiers: list[str] | None = None,
                 coverage_low: float = 0.05, coverage_high: float = 0.6, min_style_std: float = 0.05,
                 pool_scale: bool = True) -> None:
        super().__init__(weight)
        self.coverage_low, self.coverage_high = coverage_low, coverage_high
        self.pool, self.pool_tiers, self.min_style_std, self.pool_scale = pool, pool_tiers, min_style_std, pool_scale
        self.style_mean = self.style_std = None

    def setup(self, device=None) -> None:
        if self.style_mean is not None:
            return
        refs = ReferencePool.load(self.pool)
        tiers = self.pool_tiers or [t for t in ("love", "okay") if t in refs.by_tier] or refs.tiers
        chosen = [r for t in tiers for r in refs.by_tier.get(t, [])]
        stats = np.array([[image_stats(r.png)[f] for f in FEATURES] for r in chosen])
        self.style_mean = stats.mean(0)
        self.style_std = np.maximum(stats.std(0), self.min_style_std)  # a tiny pool must not make style a spike
        self.zero, self.one = 0.0, 1.0  # pool_scale False: the raw mean of the parts
        if self.pool_scale:
            self.zero = mean_of(self.parts(empty_sheet()))
            self.one = max(mean_of(self.parts(r.png)) for r in chosen)

    def teardown(self) -> None:
        self.style_mean = self.style_std = None

    def parts(self, png: bytes) -> dict[str, float]:
        if self.style_mean is None:
            raise RuntimeError("ImageStatsTerm scores after setup(device): the RewardModels callback calls it")
        s = image_stats(png)
        return {
            "paper": paper_score(s["coverage"], self.coverage_low, self.coverage_high),
            "softness": s["softness"],
            "layering": s["layering"],
            "palette": s["palette"],
            "clean": s["clean"],
            "style": style_score(s, self.style_mean, self.style_std),
        }

    def on_scale(self, parts: dict[str, float]) -> float:
        """The score of a render's parts: their mean, 0 at an empty sheet, 1 at the pool's best (clipped)."""
        return float(np.clip((mean_of(parts) - self.zero) / (self.one - self.zero), 0.0, 1.0))

    def score_row(self, rollout: Rollout) -> tuple[dict[str, float] | None, float]:
        """The parts of one render (None: nothing rendered) and the seconds they took."""
        t0 = time.perf_counter()
        parts = self.parts(rollout.render.png) if rollout.render and rollout.render.png else None
        return parts, time.perf_counter() - t0

    def feedback(self, rollout: Rollout, score: float) -> dict[str, float]:
        """The render's parts (paper, softness, ...): what to change, not only how good it was."""
        return self.parts(rollout.render.png) if rollout.render and rollout.render.png else {}

    def combine(self, rows: list[tuple[dict[str, float] | None, float]]) -> TermScores:
        parts = [p for p, _ in rows]
        scores = torch.tensor([self.on_scale(p) if p else float("nan") for p in parts], dtype=torch.float32)
        metrics = summary_metrics(scores)
        done = [p for p in parts if p]
        for part in PARTS:
            metrics[part] = float(np.mean([p[part] for p in done])) if done else float("nan")
        metrics["ms_per_image"] = 1000 * sum(s for _, s in rows) / max(len(rows), 1)
        return TermScores(scores, metrics)
