"""One rollout batch: sample n completions per prompt, extract each sketch, gate it, render it.

Rendering overlaps sampling: the sampler reports each row the moment it ends and its sketch
goes to the render pool at once, so what is left after sampling is the wait for the last
renders. A sketch the static gate rejects is never rendered.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from lit_watercolour.gate import gate, static_gate
from lit_watercolour.records import GateResult, RenderResult, Rollout, RolloutBatch
from lit_watercolour.sketch import extract_code

if TYPE_CHECKING:
    from lit_watercolour.data import Prompt
    from lit_watercolour.overlap import Timeline
    from lit_watercolour.render import ThreadedRenderPool
    from lit_watercolour.sampling import Sampler


def collect(sampler: Sampler, renderer: ThreadedRenderPool, prompts: list[Prompt], n: int,
            timeline: Timeline | None = None) -> RolloutBatch:
    """n completions of each prompt, each extracted, gated and (when the static gate lets it) rendered.
    `timeline`: records the sampling span and each render's, from submission to result."""
    rollouts: list[Rollout | None] = [None] * (len(prompts) * n)  # indexed by row: rows may end in any order
    renders: dict[int, Future[RenderResult]] = {}
    static: dict[int, GateResult] = {}

    def on_completion(row: int, text: str) -> None:
        p = prompts[row // n]
        code = extract_code(text)
        rollouts[row] = Rollout(prompt=p.subject, completion=text, group=row // n, seed=p.seed, code=code)
        verdict = static_gate(code, text)
        if verdict is not None:
            static[row] = verdict
        else:
            renders[row] = renderer.submit(code, p.seed)
            if timeline is not None:
                span = timeline.begin("render")
                renders[row].add_done_callback(lambda _, span=span: timeline.end(span))

    sampling = timeline.begin("sampling") if timeline is not None else None
    samples = sampler.sample([p.text for p in prompts], n, on_completion)
    if timeline is not None:
        timeline.end(sampling)
    if None in rollouts:
        missing = [row for row, r in enumerate(rollouts) if r is None]
        raise RuntimeError(f"the sampler reported no completion for rows {missing}")
    t0 = time.perf_counter()
    for row, r in enumerate(rollouts):
        r.num_tokens = int(samples.completion_mask[row].sum())
        if row in static:
            r.gate = static[row]
            continue
        try:
            r.render = renders[row].result()
        except Exception as e:  # a harness failure is the renderer's, not the sketch's
            r.render = RenderResult(png=None, error=f"{type(e).__name__}: {e}", infra_error=True)
        r.gate = gate(r.code, r.render)
    wait_s = time.perf_counter() - t0
    rendered = [r.render for r in rollouts if r.render is not None]
    tokens = float(samples.num_tokens.sum())
    metrics = {
        "time/sampling_s": samples.seconds,
        "time/sampling_tokens_per_s": tokens / max(samples.seconds, 1e-9),
        "time/render_wait_s": wait_s,  # rendering left after sampling finished
        "time/render_mean_s": sum(x.elapsed_s for x in rendered) / max(1, len(rendered)),
        "time/renders": float(len(rendered)),
    }
    if timeline is not None:  # when this batch was sampled, for checking what overlapped what
        metrics.update({"time/at/sampling_start_s": sampling[1], "time/at/sampling_end_s": sampling[2]})
    return RolloutBatch(samples, rollouts, metrics)
