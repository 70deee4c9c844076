"""One rollout batch: sample n completions per prompt, extract each sketch, gate it, render it.

Rendering overlaps sampling: the sampler reports each row the moment it ends and its sketch
goes to the render pool at once, so what is left after sampling is the wait for the last
renders. A sketch the static gate rejects is never rendered. Scoring overlaps rendering: a
streaming reward term (`RewardTerm.streams`) starts on each row as soon as the row is gated.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lit_watercolour.gate import gate, static_gate
from lit_watercolour.records import RenderResult, Rollout, RolloutBatch
from lit_watercolour.sketch import extract_code

if TYPE_CHECKING:
    from lit_watercolour.data import Prompt
    from lit_watercolour.overlap import Timeline
    from lit_watercolour.sandbox import ThreadedRenderPool
    from lit_watercolour.rewards.mix import RewardMix
    from lit_watercolour.sampling import SampleBatch, Sampler


@dataclass
class Sampled:
    """A batch whose rows are sampled, while its renders (and streaming scores) may still be under way:
    `finish` waits for them. Sampling needs the policy; finishing only the render pool and the scorer."""

    samples: SampleBatch
    rollouts: list[Rollout]
    settled: list[Future[None]]  # rendered rows: render and gate done
    streamed: list[dict[str, Future]]
    sampling_span: list | None
    executor: ThreadPoolExecutor  # the rows' render waits and streaming scores


def collect(sampler: Sampler, renderer: ThreadedRenderPool, prompts: list[Prompt], n: int,
            timeline: Timeline | None = None, scorer: RewardMix | None = None) -> RolloutBatch:
    """n completions of each prompt, each extracted, gated and (when the static gate lets it) rendered."""
    return finish(sample(sampler, renderer, prompts, n, timeline, scorer))


def sample(sampler: Sampler, renderer: ThreadedRenderPool, prompts: list[Prompt], n: int,
           timeline: Timeline | None = None, scorer: RewardMix | None = None) -> Sampled:
    """Sample n completions of each prompt; each row's sketch is gated and sent to render as it ends.
    `timeline`: records the sampling span and each render's, from submission to result.
    `scorer`: its streaming terms start on each row once it is gated (`RolloutBatch.streamed`)."""
    rows = len(prompts) * n
    rollouts: list[Rollout | None] = [None] * rows  # indexed by row: rows may end in any order
    streamed: list[dict[str, Future]] = [{} for _ in range(rows)]
    settled: dict[int, Future[None]] = {}  # rendered rows: render and gate done
    # a thread per wait (a render, a judge's reply), so no row's scoring queues behind another row's render
    waits = max(rows, 1) * (1 + len(scorer.streaming() if scorer else []))
    executor = ThreadPoolExecutor(waits, thread_name_prefix="rollout")
    start_scoring = scorer.streamer(executor, timeline) if scorer is not None else None

    def gated(row: int) -> None:
        if start_scoring is not None:
            streamed[row] = start_scoring(rollouts[row])

    def settle(row: int, render: Future[RenderResult]) -> None:
        r = rollouts[row]
        try:
            r.render = render.result()
        except Exception as e:  # a harness failure is the renderer's, not the sketch's
            r.render = RenderResult(png=None, error=f"{type(e).__name__}: {e}", infra_error=True)
        r.gate = gate(r.code, r.render)
        gated(row)

    def on_completion(row: int, text: str) -> None:
        p = prompts[row // n]
        code = extract_code(text)
        r = rollouts[row] = Rollout(prompt=p.subject, completion=text, group=row // n, seed=p.seed, code=code)
        r.gate = static_gate(code, text)
        if r.gate is not None:
            gated(row)
            return
        render = renderer.submit(code, p.seed)
        if timeline is not None:
            span = timeline.begin("render")
            render.add_done_callback(lambda _, span=span: timeline.end(span))
        settled[row] = executor.submit(settle, row, render)

    try:
        sampling = timeline.begin("sampling") if timeline is not None else None
        samples = sampler.sample([p.text for p in prompts], n, on_completion)
        if timeline is not None:
            timeline.end(sampling)
        if None in rollouts:
            missing = [row for row, r in enumerate(rollouts) if r is None]
            raise RuntimeError(f"the sampler reported no completion for rows {missing}")
    except BaseException:
        executor.shutdown(wait=False)
        raise
    for row, r in enumerate(rollouts):
        r.num_tokens = int(samples.completion_mask[row].sum())
    return Sampled(samples, rollouts, list(settled.values()), streamed, sampling, executor)


def finish(batch: Sampled) -> RolloutBatch:
    """The batch once every render is in and gated; streaming scores may still run (RewardMix.score waits)."""
    t0 = time.perf_counter()
    try:
        for job in batch.settled:
            job.result()
    finally:
        batch.executor.shutdown(wait=False)  # the scoring under way goes on: RewardMix.score waits for it
    wait_s = time.perf_counter() - t0
    samples, rollouts = batch.samples, batch.rollouts
    rendered = [r.render for r in rollouts if r.render is not None]
    tokens = float(samples.num_tokens.sum())
    metrics = {
        "time/sampling_s": samples.seconds,
        "time/sampling_tokens_per_s": tokens / max(samples.seconds, 1e-9),
        "time/render_wait_s": wait_s,  # rendering left when the wait began
        "time/render_mean_s": sum(x.elapsed_s for x in rendered) / max(1, len(rendered)),
        "time/renders": float(len(rendered)),
    }
    if batch.sampling_span is not None:  # when this batch was sampled, for checking what overlapped what
        metrics.update({"time/at/sampling_start_s": batch.sampling_span[1],
                        "time/at/sampling_end_s": batch.sampling_span[2]})
    return RolloutBatch(samples, rollouts, metrics, streamed=batch.streamed)
