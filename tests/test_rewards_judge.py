import asyncio
import io
import logging
import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from judge_server import JudgeServer, always, completion, failing_first, prefers_less_ink, request_images, serving, slow
from lit_watercolour.records import RenderResult, Rollout
from lit_watercolour.rewards.judge import JudgeTerm, fit_image, parse_winner, reference_score
from lit_watercolour.rewards.openai_judge import OpenAIJudge
from lit_watercolour.rewards.pool import DEFAULT_MIX, ReferencePool
from lit_watercolour.rewards.transformers_judge import TransformersJudge
from lit_watercolour.offline.tiny_models import tiny_qwen2_vl, tiny_qwen3_vl
from terms import ready


def blot(n: int, size: int = 96) -> bytes:
    """A PNG with n translucent blots: more n, more ink."""
    img = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(img, "RGBA")
    rng = np.random.default_rng(n)
    for _ in range(n):
        x, y = rng.integers(0, size, 2)
        draw.ellipse([x - 20, y - 20, x + 20, y + 20], fill=(40, 90, 200, 120))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def pool_dir(tmp_path):
    for tier, ns in (("love", (3, 4, 5)), ("okay", (6, 7, 8))):
        (tmp_path / tier).mkdir()
        for n in ns:
            (tmp_path / tier / f"{n}.png").write_bytes(blot(n))
    return str(tmp_path)


def rollouts(pngs, seed=0):
    return [Rollout("a peach hibiscus", "", 0, seed, code="", render=RenderResult(png=p)) for p in pngs]


def http(url, **kw):
    kw = {"max_retries": 2, "timeout_s": 5.0, **kw}
    return OpenAIJudge(base_url=url, **kw)


def judge_term(backend, **kw):
    return ready(JudgeTerm(backend, **kw))


def test_parse_winner():
    assert parse_winner("A. Softer bleeds.") == "A"
    assert parse_winner("**B** - more paper white") == "B"
    assert parse_winner('{"winner": "B", "reason": "translucent"}') == "B"
    assert parse_winner("```json\n{\"winner\": \"A\"}\n```") == "A"
    assert parse_winner("Winner: B") == "B"
    assert parse_winner("Image A") == "A"
    for bad in ("", None, "Both are lovely.", "I cannot decide", '{"winner": "C"}', "Apples"):
        assert parse_winner(bad) is None
    assert reference_score("A", "B") == 1.0 and reference_score("B", "A") == 0.0
    assert reference_score("A", "A") == 0.5 and reference_score("A", None) is None


def test_both_orders_swap_the_images(pool_dir):
    cand = blot(1)
    with JudgeServer(prefers_less_ink()) as server:
        judge = judge_term(http(server.base_url), pool=pool_dir, references=4)
        scores, m = judge.score(rollouts([cand]))
        refs = [fit_image(r.png, 600) for r in judge.pool.draw(4, seed=0, mix=judge.mix)]
        sent = sorted(tuple(request_images(body)) for body in server.received)
    cand = fit_image(cand, 600)  # both images of a pair at the judge's size
    assert sent == sorted([(cand, r) for r in refs] + [(r, cand) for r in refs])
    assert {Image.open(io.BytesIO(png)).size for pair in sent for png in pair} == {(600, 600)}
    assert scores.tolist() == [1.0]  # least ink wins every comparison in both orders
    assert m["win_rate"] == 1.0 and m["first_position_rate"] == 0.5
    body = server.received[0]
    assert "Ignore what the paintings depict" in body["messages"][0]["content"][0]["text"]
    assert body["temperature"] == 0.0


def test_content_judge_ranks_and_group_shares_references(pool_dir):
    with JudgeServer(prefers_less_ink()) as server:
        judge = judge_term(http(server.base_url), pool=pool_dir, references=4)
        s, m = judge.score(rollouts([blot(1), blot(40)], seed=3))
    assert s.tolist() == [1.0, 0.0]
    assert len(server.received) == 16  # 2 rollouts x 4 references x 2 orders
    assert m["order_disagreement"] == 0.0  # a judge of the pictures alone answers both orders alike


def scaled(png: bytes, side: int) -> bytes:
    buf = io.BytesIO()
    Image.open(io.BytesIO(png)).resize((side, side), Image.LANCZOS).save(buf, format="PNG")
    return buf.getvalue()


def test_judge_sees_every_render_size_at_one_size(pool_dir):
    """A 600x600 and a 256x256 render (and 96-px references) all reach the judge at image_size."""
    big, small = scaled(blot(1), 600), scaled(blot(1), 256)
    with JudgeServer(prefers_less_ink()) as server:
        judge = judge_term(http(server.base_url), pool=pool_dir, references=4)
        s, m = judge.score(rollouts([big, small, scaled(blot(40), 256)]))
        sizes = {Image.open(io.BytesIO(png)).size for body in server.received for png in request_images(body)}
    assert sizes == {(600, 600)}
    assert s.tolist() == [1.0, 1.0, 0.0]  # the same painting scores the same at either size
    with JudgeServer(prefers_less_ink()) as server:
        judge_term(http(server.base_url), pool=pool_dir, references=1, image_size=0).score(rollouts([small]))
        sizes = sorted(Image.open(io.BytesIO(png)).size for png in request_images(server.received[0]))
    assert sizes == [(96, 96), (256, 256)]  # image_size 0: as rendered
    buf = io.BytesIO()
    Image.new("RGB", (200, 100), "white").save(buf, format="PNG")
    assert Image.open(io.BytesIO(fit_image(buf.getvalue(), 600))).size == (600, 300)  # aspect kept, longer side fitted


def test_position_biased_judge_scores_half(pool_dir):
    with JudgeServer(always("A")) as server:
        judge = judge_term(http(server.base_url), pool=pool_dir)
        s, m = judge.score(rollouts([blot(1), blot(20), blot(60)]))
    assert s.tolist() == [0.5, 0.5, 0.5]
    assert m["first_position_rate"] == 1.0 and m["win_rate"] == 0.5
    assert m["order_disagreement"] == 1.0  # every pair's two orders contradict each other


def test_server_errors_are_retried_then_missing(pool_dir):
    fast = {"Retry-After-Ms": "10"}  # the SDK waits what the server asks, so the test pays no backoff
    with JudgeServer(failing_first(10**9, 500, always("A"), headers=fast)) as server:
        judge = judge_term(http(server.base_url, max_retries=2), pool=pool_dir, references=2)
        s, m = judge.score(rollouts([blot(1)]))
    assert math.isnan(s[0].item())  # not a zero painting
    assert len(server.received) == 4 * 3  # every comparison tried 3 times
    assert m["failures"] == 4 and m["calls"] == 4 and m["retries"] == 8 and m["missing"] == 1


def test_transient_errors_recover(pool_dir):
    with JudgeServer(failing_first(2, 503, always("A"))) as server:  # no Retry-After: the SDK's backoff
        judge = judge_term(http(server.base_url), pool=pool_dir, references=1)
        s, m = judge.score(rollouts([blot(1)]))
    assert s.tolist() == [0.5] and m["failures"] == 0 and m["retries"] == 2


def test_timeouts_are_failures(pool_dir):
    with JudgeServer(slow(0.6, always("A"))) as server:
        judge = judge_term(http(server.base_url, timeout_s=0.15, max_retries=1), pool=pool_dir, references=1)
        s, m = judge.score(rollouts([blot(1)]))
    assert math.isnan(s[0].item())
    assert m["failures"] == 2 and m["retries"] == 2  # each order tried twice


def test_429_retry_after_is_honoured(pool_dir):
    policy = failing_first(1, 429, always("B"), headers={"Retry-After": "1"})
    with JudgeServer(policy) as server:
        judge = judge_term(http(server.base_url), pool=pool_dir, references=1)
        s, m = judge.score(rollouts([blot(1)]))
    first = server.received[0]
    again = [t for body, t in zip(server.received[1:], server.times[1:]) if body == first]
    assert len(again) == 1 and again[0] - server.times[0] >= 1.0  # waited Retry-After, not the first backoff (<= 0.5 s)
    assert s.tolist() == [0.5]


def test_malformed_replies_are_failures_not_wins(pool_dir):
    with JudgeServer(lambda body, i: (200, {}, completion("Both paintings are lovely."))) as server:
        judge = judge_term(http(server.base_url), pool=pool_dir, references=2)
        s, m = judge.score(rollouts([blot(1)]))
    assert math.isnan(s[0].item()) and m["failures"] == 4
    assert len(server.received) == 4  # a reply is not retried: at temperature 0 it would repeat
    with JudgeServer(lambda body, i: (200, {}, b"not json")) as server:
        judge = judge_term(http(server.base_url), pool=pool_dir, references=1)
        assert math.isnan(judge.score(rollouts([blot(1)])).values[0].item())


def test_partial_failures_drop_only_that_reference(pool_dir):
    """Of the 4 references drawn, one fails in its reference-first order (unresolved: dropped); the other
    three score as the ink-counting judge decides, so the score is their mean, 2/3, and not 1/2 (the failed
    reference as a loss), 5/8 (as a tie) or 3/4 (its one resolved order taken as the whole)."""
    cand = blot(3)
    drawn = {r.name: fit_image(r.png, 600) for r in ReferencePool.load(pool_dir).draw(4, seed=0, mix=DEFAULT_MIX)}
    wins = {name: ink(fit_image(cand, 600)) < ink(png) for name, png in drawn.items()}
    assert wins == {"love/4.png": False, "love/5.png": True, "okay/6.png": True, "okay/7.png": True}
    judge_ink = prefers_less_ink()

    def policy(body, i):
        return (500, {}, b"{}") if request_images(body)[0] == drawn["love/5.png"] else judge_ink(body, i)

    with JudgeServer(policy) as server:
        judge = judge_term(http(server.base_url, max_retries=0), pool=pool_dir, references=4)
        s, metrics = judge.score(rollouts([cand]))
    assert s.tolist() == [pytest.approx(2 / 3)]
    assert metrics["failures"] == 1 and metrics["calls"] == 8 and len(server.received) == 8
    assert metrics["order_disagreement"] == 0.0  # of the three references whose two orders were both answered


def test_order_disagreement_is_the_share_of_answered_pairs_whose_orders_split():
    """Per reference, (candidate first, reference first): the orders agree when the candidate wins or loses
    both, disagree when one order's winner is the other's loser; a pair with an unanswered order is left out."""
    judge = JudgeTerm(backend=None)
    rows = [(["A", "B", "A", "A", "B", "B", None, "B"], []), (["B", "A", "B", "B"], [])]
    s, m = judge.combine(rows)
    # row 0: won both, split (A A), split (B B), unanswered; row 1: lost both, split (B B)
    assert s.tolist() == [pytest.approx(2 / 3), 0.25]
    assert m["order_disagreement"] == pytest.approx(3 / 5)
    assert math.isnan(judge.combine([([None, "A"], [])]).metrics["order_disagreement"])


def ink(png: bytes) -> float:
    """What `prefers_less_ink` compares: 255 minus the mean grey level."""
    return float(255 - np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float32).mean())


def test_token_from_env_is_sent_not_logged(pool_dir, monkeypatch, caplog):
    monkeypatch.setenv("JUDGE_TEST_TOKEN", "sekrit-123")
    caplog.set_level(logging.DEBUG)
    with JudgeServer(failing_first(1, 500, always("A"), headers={"Retry-After-Ms": "10"})) as server:
        judge = judge_term(http(server.base_url, api_key_env="JUDGE_TEST_TOKEN"), pool=pool_dir, references=1)
        judge.score(rollouts([blot(1)]))
    assert all(h.get("authorization") == "Bearer sekrit-123" for h in server.headers)
    assert "sekrit" not in caplog.text and "retry" in caplog.text


def test_http_backend_runs_on_the_callers_loop(pool_dir):
    with JudgeServer(always("A")) as server:
        backend = http(server.base_url)

        async def inside():  # the pipeline's case: the calls run on the caller's own loop
            return await backend.acompare([(blot(1), blot(2))], "which?")

        verdicts, calls = asyncio.run(inside())
    assert verdicts == ["A"] and calls[0].ok


@pytest.mark.parametrize("build", [tiny_qwen2_vl, lambda: tiny_qwen3_vl(moe=True)], ids=["qwen2_vl", "qwen3_vl_moe"])
def test_transformers_judge_tiny_model(build, pool_dir):
    model, processor = build()
    backend = TransformersJudge.from_model(model, processor, batch_size=3, max_pixels=112 * 112)
    pairs = [(blot(1), blot(9)), (blot(9), blot(1)), (blot(30), blot(2)), (blot(2), blot(5))]
    batched = backend.logits_ab(pairs, "Which is the better watercolour? A or B")
    single = torch.cat([backend.logits_ab([p], "Which is the better watercolour? A or B") for p in pairs])
    torch.testing.assert_close(batched, single, atol=1e-4, rtol=1e-4)  # left padding keeps rows independent
    assert not torch.allclose(batched[0], batched[1])  # the images reach the logits
    judge = judge_term(backend, pool=pool_dir, references=2)
    s, m = judge.score(rollouts([blot(1), blot(40)]))
    verdicts, _ = backend.compare(pairs, judge.prompt)
    assert set(verdicts) <= {"A", "B"}
    assert all(v in (0.0, 0.25, 0.5, 0.75, 1.0) for v in s.tolist())
    assert m["failures"] == 0 and m["calls"] == 8


def test_http_judge_serving_the_in_process_model(pool_dir):
    model, processor = tiny_qwen2_vl()
    local = TransformersJudge.from_model(model, processor, max_pixels=112 * 112)
    cands = rollouts([blot(1), blot(25)])
    direct, m = judge_term(local, pool=pool_dir, references=2).score(cands)
    with JudgeServer(serving(local)) as server:
        remote, m = judge_term(http(server.base_url), pool=pool_dir, references=2).score(cands)
    assert remote.tolist() == direct.tolist()
