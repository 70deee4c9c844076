"""Scoring overlaps rendering: streaming terms score each rollout as its render arrives, with the batch path's result."""

import math
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import pytest
import torch

from judge_server import JudgeServer, always, completion, failing_first, prefers_less_ink
from lit_watercolour.data import Prompt
from lit_watercolour.overlap import Timeline
from lit_watercolour.records import GateResult, RenderResult, Rollout
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.image_stats import ImageStatsScorer
from lit_watercolour.rewards.judge import PairwiseJudge
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.rewards.mix import RewardMix
from lit_watercolour.rewards.openai_judge import OpenAIJudge
from lit_watercolour.rollout import collect
from lit_watercolour.offline.tiny_models import tiny_tokenizer
from scripted_sampler import ScriptedSampler


def http(url, **kw):
    return OpenAIJudge(base_url=url, **{"attempts": 1, "timeout_s": 30.0, **kw})


def comparable(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics that do not time anything."""
    return {k: v for k, v in metrics.items()
            if not k.startswith("time/") and "latency" not in k and not k.endswith("ms_per_image")}


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def test_streamed_scores_equal_the_batch_path_and_start_before_the_last_render(render_pool, sketches):
    texts = [f"```js\n{code}\n```" for code in list(sketches.values())[:5]]
    texts.insert(3, "no code in this one")  # a static gate failure: gated terms never see it
    prompts = [Prompt("a peach hibiscus", "p0", seed=11), Prompt("a blue iris", "p1", seed=22),
               Prompt("a red poppy", "p2", seed=33)]
    with JudgeServer(prefers_less_ink()) as server:
        mix = RewardMix([GateTerm(0.05), LengthTerm(0.05), ImageStatsScorer(0.3),
                         PairwiseJudge(http(server.base_url, max_concurrency=4), references=2)])
        timeline = Timeline()
        batch = collect(ScriptedSampler(tiny_tokenizer(), texts), render_pool, prompts, 2, timeline, mix)
        rewards, scores, metrics = mix.score(batch.rollouts, timeline, batch.streamed)
        streamed_calls = len(server.received)
        batch_rewards, batch_scores, batch_metrics = mix.score(batch.rollouts)
    passed = [r.gate.passed for r in batch.rollouts]
    assert sum(passed) >= 3 and not passed[3]
    assert streamed_calls == sum(passed) * 2 * 2  # passed rows x references x both orders
    assert [set(s) for s in batch.streamed] == [{"image_stats", "judge"} if p else set() for p in passed]
    assert torch.equal(rewards, batch_rewards)
    assert scores.keys() == batch_scores.keys() and all(torch.equal(scores[k], batch_scores[k]) for k in scores)
    assert same(comparable(metrics), comparable(batch_metrics))
    assert not torch.isnan(rewards).any() and metrics["reward/judge/calls"] == streamed_calls
    # the first row's judging and image statistics began while a render was still under way
    spans = {phase: [s for s in timeline.spans if s[0] == phase] for phase in ("render", "score_judge", "score_image_stats")}
    last_render_end = max(end for _, _, end in spans["render"])
    assert min(start for _, start, _ in spans["score_judge"]) < last_render_end
    assert min(start for _, start, _ in spans["score_image_stats"]) < last_render_end


def streamed(mix: RewardMix, rollouts: list[Rollout]) -> list[dict]:
    """Every row's scoring started at once, as `collect` starts it when rows are gated together."""
    with ThreadPoolExecutor(len(rollouts) * 2) as executor:
        start = mix.streamer(executor)
        return [start(r) for r in rollouts]


def passed_rollouts(pngs: list[bytes | None]) -> list[Rollout]:
    return [Rollout("a peach hibiscus", "", 0, 7, code="", render=RenderResult(png=png), gate=GateResult(True, "ok"))
            for png in pngs]


def test_a_failed_row_is_missing_and_a_row_error_raises_as_in_the_batch_path(sketches, render_pool):
    pngs = [r.png for r in render_pool.render_many(list(sketches.values())[:2], [1, 2])]
    with JudgeServer(failing_first(4, 500, always("A"))) as server:  # the first row's 4 calls fail
        mix = RewardMix([PairwiseJudge(http(server.base_url), references=2)])
        rollouts = passed_rollouts(pngs)
        with ThreadPoolExecutor(2) as executor:
            start = mix.streamer(executor)
            first = start(rollouts[0])
            wait([first["judge"]])  # before the second row asks: the failures are the first row's
            rows = [first, start(rollouts[1])]
        _, scores, metrics = mix.score(rollouts, streamed=rows)
    assert math.isnan(scores["judge"][0].item()) and scores["judge"][1].item() == 0.5  # missing, never scored 0
    assert metrics["reward/judge/missing"] == 1 and metrics["reward/judge/failures"] == 4
    broken = passed_rollouts([None])  # a passed rollout with no picture: the judge refuses it in either path
    with pytest.raises(ValueError, match="rendered, gate-passed"):
        mix.score(broken)
    with pytest.raises(ValueError, match="rendered, gate-passed"):
        mix.score(broken, streamed=streamed(mix, broken))


def test_streamed_rows_share_the_judges_bound(sketches, render_pool):
    """Rows scored at once from several threads keep at most max_concurrency calls in flight, all together."""
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

    pngs = [r.png for r in render_pool.render_many(list(sketches.values())[:3], [1, 2, 3])]
    with JudgeServer(policy) as server:
        mix = RewardMix([PairwiseJudge(http(server.base_url, max_concurrency=2), references=2)])
        rollouts = passed_rollouts(pngs)
        _, scores, metrics = mix.score(rollouts, streamed=streamed(mix, rollouts))
    assert most[0] == 2 and metrics["reward/judge/failures"] == 0 and len(server.received) == 3 * 2 * 2
    assert scores["judge"].tolist() == [0.5] * 3  # always "A": a tie per reference
