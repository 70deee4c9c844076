"""Scoring overlaps rendering: the rollout pipeline scores each row with the streaming terms as its render
arrives, with the batch path's result; failures of a row (a judge's, the browser's) stay that row's."""

import math
import threading

import pytest
import torch

from judge_server import JudgeServer, always, completion, prefers_less_ink, request_images
from lit_watercolour.data import Prompt, chat_prompt
from lit_watercolour.records import GateResult, RenderResult, Rollout
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.image_stats import ImageStatsTerm
from lit_watercolour.rewards.judge import JudgeTerm, fit_image
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.rewards.mix import RewardMix
from lit_watercolour.rewards.openai_judge import OpenAIJudge
from lit_watercolour.rollout import RolloutPipeline
from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.sketch import extract_code
from lit_watercolour.sampling.base import ImagePrompt
from lit_watercolour.turns import SHOWN, Conversation, TurnsConfig
from lit_watercolour.offline.tiny_models import tiny_processor, tiny_tokenizer
from scripted_sampler import ScriptedSampler
from terms import ready
from tiny_painter import COMPLETIONS

PROMPTS = [Prompt("a peach hibiscus", "p0", seed=11), Prompt("a blue iris", "p1", seed=22),
           Prompt("a red poppy", "p2", seed=33)]


@pytest.fixture(scope="module")
def pipeline():
    """One pipeline (one warm pool) for the module; each test gives it its sampler and reward mix."""
    pipeline = RolloutPipeline(None, render=RenderConfig(timeout_s=60.0), pool_size=3)
    yield pipeline
    pipeline.close()


def run(pipeline: RolloutPipeline, texts: list[str], mix: RewardMix, n: int = 2):
    pipeline.sampler, pipeline.rewards = ScriptedSampler(tiny_tokenizer(), texts), mix
    return pipeline.collect(PROMPTS[:len(texts) // n], n)


def http(url, **kw):
    return OpenAIJudge(base_url=url, **{"max_retries": 0, "timeout_s": 30.0, **kw})


def comparable(metrics: dict[str, float]) -> dict[str, float]:
    """The reward metrics that do not time anything."""
    return {k: v for k, v in metrics.items()
            if k.startswith(("reward/", "gate/", "render/")) and "latency" not in k and not k.endswith("ms_per_image")}


def serial(mix: RewardMix, rollouts: list[Rollout]):
    """The reference: every term scores the whole batch, one after another, then the mix."""
    return mix.mix(rollouts, {t.name: mix.score_term(t, rollouts) for t in mix.terms})


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def test_streamed_scores_equal_the_batch_path_and_start_before_the_last_render(pipeline, sketches):
    texts = [f"```js\n{code}\n```" for code in list(sketches.values())[:5]]
    texts.insert(3, "no code in this one")  # a static gate failure: gated terms never see it
    with JudgeServer(prefers_less_ink()) as server:
        mix = RewardMix([GateTerm(0.05), LengthTerm(0.05), ready(ImageStatsTerm(0.3)),
                         ready(JudgeTerm(http(server.base_url, max_concurrency=4), references=2))])
        batch = run(pipeline, texts, mix)
        streamed_calls = len(server.received)
        batch_rewards, batch_scores, batch_metrics = serial(mix, batch.rollouts)
    passed = [r.gate.passed for r in batch.rollouts]
    assert sum(passed) >= 3 and not passed[3]
    assert streamed_calls == sum(passed) * 2 * 2  # passed rows x references x both orders
    assert torch.equal(batch.rewards, batch_rewards)
    assert batch.scores.keys() == batch_scores.keys()
    assert all(torch.equal(batch.scores[k], batch_scores[k]) for k in batch.scores)
    assert same(comparable(batch.metrics), comparable(batch_metrics))
    assert not torch.isnan(batch.rewards).any() and batch.metrics["reward/judge/calls"] == streamed_calls
    # the first row's judging and image statistics began while a render was still under way
    spans = {phase: [s for s in pipeline.timeline.spans if s[0] == phase]
             for phase in ("render", "score_judge", "score_image_stats")}
    last_render_end = max(end for _, _, end in spans["render"])
    assert min(start for _, start, _ in spans["score_judge"]) < last_render_end
    assert min(start for _, start, _ in spans["score_image_stats"]) < last_render_end


def test_a_failed_row_is_missing_and_a_row_error_raises_as_in_the_batch_path(pipeline, sketches):
    texts = [f"```js\n{code}\n```" for code in list(sketches.values())[:2]]
    term = ready(JudgeTerm(http(""), references=2))
    references = {fit_image(r.png, term.image_size) for r in term.pool.references}
    first = []  # the candidate of the row that asks first: all its calls fail, the other row's are answered

    def policy(body, i):
        (candidate,) = set(request_images(body)) - references
        first.append(first[0] if first else candidate)
        return (500, {}, b"{}") if candidate == first[0] else always("A")(body, i)
    with JudgeServer(policy) as server:
        term.backend = http(server.base_url)
        mix = RewardMix([term])
        batch = run(pipeline, texts, mix, n=1)
    assert all(r.gate.passed for r in batch.rollouts)
    judged = batch.scores["judge"]
    assert sorted(math.isnan(v) for v in judged.tolist()) == [False, True]  # missing, never scored 0
    assert 0.5 in judged.tolist() and math.isnan(batch.rewards[judged.isnan()].item())
    assert batch.metrics["reward/judge/missing"] == 1 and batch.metrics["reward/judge/failures"] == 4
    broken = [Rollout("a peach hibiscus", "", 0, 7, code="", render=RenderResult(png=None), gate=GateResult(True, "ok"))]
    with pytest.raises(ValueError, match="rendered, gate-passed"):  # a passed rollout with no picture
        serial(mix, broken)


def test_streamed_rows_share_the_judges_bound(pipeline, sketches):
    """Rows scored at once on the pipeline's loop keep at most max_concurrency calls in flight, all together."""
    in_flight, most, lock = [0], [0], threading.Lock()
    pair_up = threading.Barrier(2, timeout=60)  # passes only when two calls are in flight at once

    def policy(body, i):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        pair_up.wait()
        with lock:
            in_flight[0] -= 1
        return 200, {}, completion("A")

    texts = [f"```js\n{code}\n```" for code in list(sketches.values())[:3]]
    with JudgeServer(policy) as server:
        mix = RewardMix([ready(JudgeTerm(http(server.base_url, max_concurrency=2), references=2))])
        batch = run(pipeline, texts, mix, n=1)
    assert most[0] == 2 and batch.metrics["reward/judge/failures"] == 0 and len(server.received) == 3 * 2 * 2
    assert batch.scores["judge"].tolist() == [0.5] * 3  # always "A": a tie per reference


def test_a_render_that_raises_is_an_infra_error_left_out_of_the_reward(pipeline, sketches):
    """The render future raises (the harness, not the sketch): that row is an infra_error, its reward NaN
    (out of its group's baseline), and the other rows are scored as usual."""
    texts = [f"```js\n{code}\n```" for code in list(sketches.values())[:2]]
    render, broken = pipeline.pool.render, extract_code(texts[1])

    async def failing(code, seed=0, timeout_s=None):
        if code == broken:
            raise RuntimeError("the browser went away")
        return await render(code, seed, timeout_s)
    pipeline.pool.render = failing
    try:
        batch = run(pipeline, texts, RewardMix([GateTerm(0.1), ready(ImageStatsTerm(0.9))]), n=1)
    finally:
        del pipeline.pool.render
    ok, failed = batch.rollouts
    assert failed.render.infra_error and "the browser went away" in failed.render.error
    assert failed.gate.reason == "infra_error" and ok.gate.passed
    assert math.isnan(batch.rewards[1].item()) and batch.rewards[0].item() > 0
    assert batch.metrics["render/infra_error_frac"] == 0.5


class TwoScripts:
    """Turn 1's texts, then turn 2's, through `ScriptedSampler`; records the prompts each turn was given."""

    def __init__(self, tokenizer, *turns: list[str]) -> None:
        self.tokenizer, self.scripts, self.prompts = tokenizer, [ScriptedSampler(tokenizer, t) for t in turns], []

    def sample(self, prompts, n, on_completion=None, generator=None):
        self.prompts.append(prompts)
        text = [p if isinstance(p, str) else self.tokenizer.decode(getattr(p, "ids", p)) for p in prompts]
        return self.scripts[len(self.prompts) - 1].sample(text, n, on_completion)


def test_two_turns_feed_the_verdict_back_and_score_the_revision(pipeline):
    """Issue 38: each first sketch's verdict goes back into its conversation (as token ids) and the revision
    is the trajectory's; a first sketch that failed the gate gets its turn 2 too."""
    tokenizer = tiny_tokenizer()
    sketch = f"```js\n{extract_code(COMPLETIONS[0])}\n```"  # one wash: a quick render
    sampler = TwoScripts(tokenizer, ["no code in this one", sketch], [sketch, "still no code"])
    pipeline.sampler, pipeline.rewards = sampler, RewardMix([GateTerm(0.4), LengthTerm(0.1), ready(ImageStatsTerm(0.5))])
    pipeline.turns, pipeline.conversation = TurnsConfig(2, "text", 0.25), Conversation(tokenizer)
    try:
        batch = pipeline.collect([Prompt("a peach hibiscus", chat_prompt(tokenizer, "a peach hibiscus"), seed=5)], 2)
    finally:
        pipeline.turns, pipeline.conversation = TurnsConfig(), None
    first, revised = batch.turn1.rollouts, batch.rollouts
    assert [r.gate.reason for r in first] == ["no_code", "ok"] and [r.gate.reason for r in revised] == ["ok", "no_code"]
    assert "failed the gate (no_code)" in revised[0].feedback and "Nothing was rendered" in revised[0].feedback
    assert "passed the gate" in revised[1].feedback and "of the canvas" in revised[1].feedback
    assert "softness" in revised[1].feedback  # the image-statistics term's feedback: its parts
    assert f"length {batch.turn1.scores['length'][1]:.2f}" in revised[1].feedback  # a term's default: its score
    assert "length" not in revised[0].feedback and "softness" not in revised[0].feedback  # gated terms: not scored
    # turn 2's prompt is turn 1's conversation with the feedback, as token ids
    assert all(isinstance(p, list) for p in sampler.prompts[1])
    assert revised[1].feedback in tokenizer.decode(sampler.prompts[1][1])
    final = 0.4 * batch.scores["gate"] + 0.1 * batch.scores["length"] + 0.5 * batch.scores["image_stats"]
    torch.testing.assert_close(batch.rewards, final + 0.25 * batch.turn1.rewards)
    assert batch.turn1.rewards[0] == 0 and batch.turn1.rewards[1] > 0
    assert batch.metrics["turns/gate_pass_rate_1"] == 0.5


def test_two_turns_show_the_render_to_a_vision_language_policy_and_score_both(pipeline):
    """Image feedback through the warm pool: the first sketch's render, patched by the tiny Qwen3.5 policy's own
    processor, is in its revision's prompt; a first sketch with nothing rendered gets text; both turns are scored."""
    tokenizer = tiny_tokenizer(vision=True)
    sketch = f"```js\n{extract_code(COMPLETIONS[0])}\n```"
    sampler = TwoScripts(tokenizer, [sketch, "no code in this one"], [sketch, "still no code"])
    pipeline.sampler, pipeline.rewards = sampler, RewardMix([GateTerm(0.5), ready(ImageStatsTerm(0.5))])
    pipeline.turns, pipeline.conversation = TurnsConfig(2, "image"), Conversation(tokenizer, tiny_processor(tokenizer))
    try:
        batch = pipeline.collect([Prompt("a peach hibiscus", chat_prompt(tokenizer, "a peach hibiscus"), seed=5)], 2)
    finally:
        pipeline.turns, pipeline.conversation = TurnsConfig(), None
    shown, told = sampler.prompts[1]
    render = batch.turn1.rollouts[0].render.image
    assert isinstance(shown, ImagePrompt) and shown.image is render and isinstance(told, list)
    image_tokens = shown.ids.count(tokenizer.convert_tokens_to_ids("<|image_pad|>"))
    assert image_tokens == int(shown.inputs.image_grid_thw.prod()) // 4 > 0  # 2x2 patches make one token
    assert batch.rollouts[0].feedback.startswith(SHOWN) and "Nothing was rendered" in batch.rollouts[1].feedback
    for scored in (batch.turn1, batch):
        assert set(scored.scores) == {"gate", "image_stats"} and not torch.isnan(scored.rewards).any()
    assert batch.turn1.scores["gate"].tolist() == [1.0, 0.0] and batch.scores["gate"].tolist() == [1.0, 0.0]
    assert batch.rewards[0] > 0 and batch.turn1.rewards[0] > 0
