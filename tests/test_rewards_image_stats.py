import io
import math

import numpy as np
import pytest
import torch
from PIL import Image

from terms import ready
from lit_watercolour.rewards.image_stats import SIZE, ImageStatsTerm, image_stats
from lit_watercolour.rewards.pool import ReferencePool
from lit_watercolour.records import RenderResult, Rollout


@pytest.fixture(scope="module")
def scorer():
    return ready(ImageStatsTerm())


def as_rollouts(pngs):
    return [Rollout("x", "", 0, 0, render=RenderResult(png=p)) for p in pngs]


def blend(a: bytes, b: bytes, t: float) -> bytes:
    ia, ib = (Image.open(io.BytesIO(x)).convert("RGB") for x in (a, b))
    buf = io.BytesIO()
    Image.blend(ia, ib, t).save(buf, format="PNG")
    return buf.getvalue()


def test_tiers_of_the_shipped_pool_are_ordered(scorer):
    pool = ReferencePool.load()
    scored = {t: scorer.score(as_rollouts([r.png for r in pool.by_tier[t]])) for t in pool.tiers}
    mean = {t: s.values.mean().item() for t, s in scored.items()}
    assert mean["love"] > mean["meh"] + 0.15 and mean["okay"] > mean["meh"] + 0.15
    assert set(scored["love"].metrics) >= {"mean", "std", "paper", "softness", "layering", "palette", "style"}


def test_scores_vary_smoothly_without_plateaus(scorer):
    pool = ReferencePool.load()
    love, meh = pool.by_tier["love"][0].png, pool.by_tier["meh"][0].png
    s = scorer.score(as_rollouts([blend(love, meh, t) for t in np.linspace(0, 1, 11)])).values.tolist()
    steps = np.diff(s)
    assert len(set(round(v, 6) for v in s)) == 11  # every step of the blend changes the score
    assert np.abs(steps).max() < 0.12  # and none jumps
    group = scorer.score(as_rollouts([r.png for r in pool.by_tier["love"]])).values.tolist()
    assert len(set(round(v, 6) for v in group)) == len(group)  # a group of similar paintings still spreads


def test_blank_and_missing_renders(scorer):
    buf = io.BytesIO()
    Image.new("RGB", (512, 512), "#fbf7ee").save(buf, format="PNG")
    s, metrics = scorer.score([*as_rollouts([buf.getvalue(), ReferencePool.load().by_tier["love"][0].png]),
                      Rollout("x", "", 0, 0, render=RenderResult(png=None))])
    assert s[0] < s[1] - 0.2 and math.isnan(s[2].item())
    assert s.dtype == torch.float32 and metrics["missing"] == 1


def test_statistics_are_computed_at_a_fixed_size():
    """A render's statistics are taken at SIZE px whatever its size (what bounds their cost per image): a 512-px
    reference and the same picture already shrunk to SIZE give the very same numbers."""
    png = ReferencePool.load().by_tier["love"][0].png
    assert Image.open(io.BytesIO(png)).size == (512, 512)
    buf = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").resize((SIZE, SIZE), Image.BILINEAR).save(buf, format="PNG")
    assert image_stats(png) == pytest.approx(image_stats(buf.getvalue()), abs=1e-12)


def washes(colours: list[str], alpha: int = 150) -> bytes:
    """Soft translucent blobs on cream paper: the same shapes in whatever colours are given."""
    from PIL import ImageDraw, ImageFilter

    paper = Image.new("RGB", (256, 256), "#fbf7ee")
    for i, colour in enumerate(colours):
        layer = Image.new("RGBA", paper.size, (0, 0, 0, 0))
        ImageDraw.Draw(layer).ellipse((30 + 40 * i, 50 + 20 * i, 130 + 40 * i, 170 + 20 * i), fill=colour + f"{alpha:02x}")
        paper.paste(layer.filter(ImageFilter.GaussianBlur(4)), (0, 0), layer.filter(ImageFilter.GaussianBlur(4)))
    buf = io.BytesIO()
    paper.save(buf, format="PNG")
    return buf.getvalue()


def test_clean_colour_penalises_mud_not_light_tints_or_greens(scorer):
    """The corpus's mud (greyed browns) scores low; its flowers' pigments, strong or as light tints,
    and its muted leaf greens score high; the part falls smoothly with the share of muddy ink."""
    clean = scorer.parts(washes(["#f08a6c", "#e8735a", "#c2185b"]))["clean"]
    tints = scorer.parts(washes(["#f6a57f", "#fbc4a0", "#f4a6c1"], alpha=90))["clean"]
    greens = scorer.parts(washes(["#6b8e4e", "#4f7a3a"]))["clean"]
    one_mud = scorer.parts(washes(["#f08a6c", "#7a6a55", "#c2185b"]))["clean"]
    two_mud = scorer.parts(washes(["#f08a6c", "#7a6a55", "#5e5346"]))["clean"]
    mud = scorer.parts(washes(["#6b5b4b", "#7a6a55", "#5e5346"]))["clean"]
    assert min(clean, tints, greens) > 0.85 and mud < 0.3
    assert mud < two_mud < one_mud < clean
    s = scorer.score(as_rollouts([washes(["#f08a6c", "#e8735a", "#c2185b"]), washes(["#6b5b4b", "#7a6a55", "#5e5346"])])).values
    assert s[0] > s[1]
    pool = ReferencePool.load()
    tier = {t: np.mean([scorer.parts(r.png)["clean"] for r in pool.by_tier[t]]) for t in pool.tiers}
    assert tier["love"] > tier["okay"]


BLANK = 'function setup() {\n  createCanvas(512, 512, WEBGL);\n  noLoop();\n}\nfunction draw() {\n  background("#fbf7ee");\n}\n'


def test_pool_scale_puts_a_blank_render_at_zero_and_the_pools_best_at_one(scorer, render_pool):
    """On the pool's scale a gate failure (0) and a sketch that paints nothing are worth the same, the pool's
    best (love or okay) reference is 1, and every render between maps linearly from the raw mean of the parts.
    The anchors are the test's own: Chromium's render of an empty sketch, and the raw scores' best reference."""
    blank = render_pool.submit(BLANK, 0).result()
    assert blank.error is None and blank.png
    pool = ReferencePool.load()
    refs = [r.png for t in ("love", "okay") for r in pool.by_tier[t]]
    others = [r.png for r in pool.by_tier["meh"]] + [blend(blank.png, refs[0], t) for t in (0.2, 0.5, 0.8)]
    pngs = [blank.png, *refs, *others]
    raw = ready(ImageStatsTerm(pool_scale=False)).score(as_rollouts(pngs)).values
    zero, one = raw[0].item(), raw[1:1 + len(refs)].max().item()
    assert one - zero > 0.2
    scaled = scorer.score(as_rollouts(pngs)).values
    torch.testing.assert_close(scaled, ((raw - zero) / (one - zero)).clamp(0, 1), atol=1e-5, rtol=0)
    assert scaled[0].item() == 0.0 and scaled[1:1 + len(refs)].max().item() == pytest.approx(1.0)
    assert 0 < scaled[-2].item() < scaled[-1].item() < 1  # part-way blends land in between, in order
