import io
import math
import time

import numpy as np
import pytest
import torch
from PIL import Image

from lit_watercolour.rewards.embedded import EmbeddedScorer, image_stats
from lit_watercolour.rewards.pool import ReferencePool
from lit_watercolour.rollout import RenderResult, Rollout


@pytest.fixture(scope="module")
def scorer():
    return EmbeddedScorer()


def as_rollouts(pngs):
    return [Rollout("x", "", 0, 0, render=RenderResult(png=p)) for p in pngs]


def blend(a: bytes, b: bytes, t: float) -> bytes:
    ia, ib = (Image.open(io.BytesIO(x)).convert("RGB") for x in (a, b))
    buf = io.BytesIO()
    Image.blend(ia, ib, t).save(buf, format="PNG")
    return buf.getvalue()


def test_tiers_of_the_shipped_pool_are_ordered(scorer):
    pool = ReferencePool.load()
    mean = {t: scorer.score(as_rollouts([r.png for r in pool.by_tier[t]])).mean().item() for t in pool.tiers}
    assert mean["love"] > mean["meh"] + 0.15 and mean["okay"] > mean["meh"] + 0.15
    assert set(scorer.last_metrics) >= {"mean", "std", "paper", "softness", "layering", "palette", "style"}


def test_scores_vary_smoothly_without_plateaus(scorer):
    pool = ReferencePool.load()
    love, meh = pool.by_tier["love"][0].png, pool.by_tier["meh"][0].png
    s = scorer.score(as_rollouts([blend(love, meh, t) for t in np.linspace(0, 1, 11)])).tolist()
    steps = np.diff(s)
    assert len(set(round(v, 6) for v in s)) == 11  # every step of the blend changes the score
    assert np.abs(steps).max() < 0.12  # and none jumps
    group = scorer.score(as_rollouts([r.png for r in pool.by_tier["love"]])).tolist()
    assert len(set(round(v, 6) for v in group)) == len(group)  # a group of similar paintings still spreads


def test_blank_and_missing_renders(scorer):
    buf = io.BytesIO()
    Image.new("RGB", (512, 512), "#fbf7ee").save(buf, format="PNG")
    s = scorer.score([*as_rollouts([buf.getvalue(), ReferencePool.load().by_tier["love"][0].png]),
                      Rollout("x", "", 0, 0, render=RenderResult(png=None))])
    assert s[0] < s[1] - 0.2 and math.isnan(s[2].item())
    assert s.dtype == torch.float32 and scorer.last_metrics["missing"] == 1


def test_fast_on_512_renders():
    pngs = [r.png for r in ReferencePool.load().references]
    assert Image.open(io.BytesIO(pngs[0])).size == (512, 512)
    image_stats(pngs[0])
    t0 = time.process_time()  # CPU time of this process: other tests sharing the cores do not count
    for p in pngs:
        image_stats(p)
    assert (time.process_time() - t0) / len(pngs) < 0.05
