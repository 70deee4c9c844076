"""Every reward term on real renders: the shipped pool's own sketches painted by Chromium now."""

import math

import pytest
import torch

from judge_server import JudgeServer, prefers_less_ink
from lit_watercolour.gate import gate
from lit_watercolour.records import Rollout
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.hpsv3 import HPSv3Model, HPSv3Term, add_reward_token
from lit_watercolour.rewards.image_stats import ImageStatsTerm
from lit_watercolour.rewards.judge import JudgeTerm
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.rewards.mix import gate_monitors, mix_rewards
from lit_watercolour.rewards.openai_judge import OpenAIJudge
from lit_watercolour.rewards.pool import SHIPPED_POOL
from lit_watercolour.rewards.transformers_judge import TransformersJudge
from lit_watercolour.offline.tiny_models import tiny_qwen2_vl
from terms import ready

SOURCES = SHIPPED_POOL / "sources"
BROKEN = "function setup() {\n  createCanvas(512, 512, WEBGL);\n  brush.bleed(0.3);\n}\n"  # a 1.x name: throws


@pytest.fixture(scope="module")
def rendered(render_pool) -> list[Rollout]:
    codes = [(SOURCES / f"{n}.js").read_text() for n in ("love_01", "okay_02", "meh_03")] + [BROKEN]
    results = render_pool.render_many(codes, [7] * len(codes))  # the session's pool (conftest.py)
    out = []
    for code, res in zip(codes, results):
        r = Rollout("a peach hibiscus", f"```js\n{code}```", group=0, seed=11, code=code, render=res)
        r.gate = gate(code, res)
        out.append(r)
    return out


def test_gate_and_length_on_real_renders(rendered):
    gate_term, length = GateTerm(), LengthTerm()
    verdict = gate_term.score(rendered)
    assert verdict.values.tolist() == [1.0, 1.0, 1.0, 0.0]
    assert verdict.metrics["pass_rate"] == 0.75
    assert gate_monitors(rendered)["gate/reason_ok"] == 0.75
    s = length.score(rendered).values
    assert ((s > 0) & (s < 1))[:3].all()  # pool sketches sit on the ramp: ~300-400 code tokens
    assert s[3] == 0.0  # too short


def test_image_stats_on_real_renders(rendered):
    passed = [r for r in rendered if r.gate.passed]
    s = ready(ImageStatsTerm()).score(passed).values
    assert not torch.isnan(s).any() and ((s >= 0) & (s <= 1)).all()
    assert s[0] > s[2] and s[1] > s[2]  # the meh sketch (flat fills edge to edge) scores lowest


def test_judge_over_http_on_real_renders(rendered):
    passed = [r for r in rendered if r.gate.passed]
    with JudgeServer(prefers_less_ink()) as server:
        judge = ready(JudgeTerm(OpenAIJudge(base_url=server.base_url), references=4))
        scored = judge.score(passed)
    s = scored.values
    assert len(server.received) == 3 * 4 * 2
    assert s[2] < s[0] and s[2] < s[1]  # meh covers the sheet: it loses
    assert scored.metrics["failures"] == 0 and 0 < scored.metrics["win_rate"] < 1
    refs = {r.name for r in judge.pool.draw(4, seed=11, mix=judge.mix)}
    assert {r.tier for r in judge.pool.draw(4, seed=11, mix=judge.mix)} == {"love", "okay"} and len(refs) == 4


def test_vlm_judge_and_hpsv3_on_real_renders(rendered):
    passed = [r for r in rendered if r.gate.passed]
    model, processor = tiny_qwen2_vl()
    judge = ready(JudgeTerm(TransformersJudge.from_model(model, processor, max_pixels=224 * 224), references=2))
    scored = judge.score(passed)
    js = scored.values
    assert not torch.isnan(js).any() and scored.metrics["calls"] == 3 * 2 * 2

    backbone, processor = tiny_qwen2_vl(seed=3)
    token = add_reward_token(processor)
    backbone.resize_token_embeddings(len(processor.tokenizer), mean_resizing=False)
    hps = HPSv3Term.from_model(HPSv3Model(backbone, token), processor)
    hs = hps.score(passed).values
    assert hs.shape == (3,) and ((hs > 0) & (hs < 1)).all() and len(set(hs.tolist())) == 3

    scores = {"gate": GateTerm().score(rendered).values, "length": LengthTerm().score(rendered).values}
    passed_mask = torch.tensor([r.gate.passed for r in rendered])
    for name, s in (("judge", js), ("hpsv3", hs)):
        full = torch.zeros(len(rendered))
        full[passed_mask] = s  # the module puts 0 for gate-failed rollouts
        scores[name] = full
    weights = {"gate": 0.05, "length": 0.05, "judge": 0.60, "hpsv3": 0.30}
    r = mix_rewards(scores, weights, passed_mask)
    assert r[3] == 0 and ((r[:3] > 0) & (r[:3] <= 1)).all() and not math.isnan(r.sum().item())
