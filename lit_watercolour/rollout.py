"""The rollout pipeline: prompts and a policy version in, a scored batch out; it owns everything in flight.

    sample (caller's thread: the policy's) --row ends--> extract, static gate
        --> render (event loop) --> gate (worker) --> streaming terms, per row (loop or worker)
    after the last row: wait for the rows --> the other terms, the mix (worker) --> RolloutBatch

Rendering overlaps sampling: the sampler reports each row the moment it ends and its sketch goes to the
render pool at once, so what is left after sampling is the wait for the last renders. A sketch the static
gate rejects is never rendered. Scoring overlaps rendering: a streaming reward term (`RewardTerm.streams`)
starts on each row as soon as it is gated. Concurrency is one event loop (the render pool's pages, every
HTTP scorer's calls and an HTTP sampler's requests, on one thread) and a small pool of worker threads for CPU and torch work (the gate's
parse, image statistics, HPSv3); the policy itself is used only on the caller's thread. The batches sampled
ahead (`GRPOModule.max_staleness`) wait in the pipeline's `PrefetchQueue`; a sampler whose engine runs apart from
the policy (vLLM) may sample them on the pipeline's sampling thread, beside the caller's update
(`GRPOModule.sample_during_update`). Two turns (`lit_watercolour.turns`):
once the first sketches are rendered and gated, each row's conversation goes on with its feedback and the
policy samples the revisions, which render as above; both turns are scored.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch

from lit_watercolour.data import group_seed
from lit_watercolour.gate import gate, static_gate
from lit_watercolour.overlap import PrefetchQueue, Timeline
from lit_watercolour.records import RenderResult, Rollout, RolloutBatch
from lit_watercolour.sandbox import RenderConfig, RenderPool
from lit_watercolour.sketch import extract_code
from lit_watercolour.turns import (
    Conversation,
    TurnsConfig,
    feedback_for,
    join_turns,
    trajectory_rewards,
    turn_metrics,
)

if TYPE_CHECKING:
    from lit_watercolour.data import Prompt
    from lit_watercolour.rewards.base import RewardTerm
    from lit_watercolour.rewards.mix import RewardMix
    from lit_watercolour.sampling import SampleBatch, Sampler
    from lit_watercolour.sampling.base import PromptInput

WORKERS = 2  # CPU work per row is milliseconds and mostly releases the GIL (numpy, PNG decoding)


class Job(Future):
    """A batch in flight: resolves to the scored `RolloutBatch`; `sampled` is set once its completions are in, with the
    batch as sampled, not yet scored, in `batch` (None where sampling failed)."""

    def __init__(self) -> None:
        super().__init__()
        self.sampled = threading.Event()
        self.batch: RolloutBatch | None = None

    def follow(self, scored: Future) -> None:
        """Resolve as `scored` did."""
        if scored.cancelled():
            self.cancel()
        elif scored.exception() is not None:
            self.set_exception(scored.exception())
        else:
            self.set_result(scored.result())


class RolloutPipeline:
    """Samples, renders, gates and scores batches. `rewards`: the mix (None: nothing is scored, as in
    predict). `render`, `pool_size`: how each sketch renders and how many Chromium pages render at once.
    `device`: the trainer's (a CUDA term's worker threads use its GPU). `rank`: each batch is sampled from the
    pipeline's own generator (`generator`, on `device`), seeded from its first prompt's seed and the rank, so ranks
    draw different rows of the same groups, a batch draws the same whenever it is sampled (DDP, batches sampled
    ahead, a resumed run) and torch's global random state is never touched. `depth`: how many batches may be
    sampled ahead. `turns`,
    `tokenizer`, `processor`: two-turn trajectories, their feedback in the policy's chat template (with its
    processor's images)."""

    def __init__(self, sampler: Sampler, *, rewards: RewardMix | None = None, render: RenderConfig = RenderConfig(),
                 pool_size: int = 2, device: torch.device | None = None, rank: int = 0, depth: int = 0,
                 turns: TurnsConfig = TurnsConfig(), tokenizer=None, processor=None) -> None:
        self.sampler, self.rewards, self.rank, self.device = sampler, rewards, rank, device
        cuda = device if device is not None and device.type == "cuda" else None
        self.generator = torch.Generator(cuda or "cpu")  # where the sampler draws: the policy's device
        self.turns = turns
        self.conversation = Conversation(tokenizer, processor) if turns.turns == 2 else None
        self.timeline = Timeline()
        self.prefetched = PrefetchQueue(depth)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rollout-loop", daemon=True)
        self.thread.start()
        if hasattr(sampler, "loop"):  # an HTTP sampler (vllm-server): its requests go on this loop too
            sampler.loop = self.loop
        # a thread starts on CUDA device 0: a term's "cuda" must be its rank's GPU
        on_device = dict(initializer=torch.cuda.set_device if cuda else None, initargs=(cuda,) if cuda else ())
        self.work = ThreadPoolExecutor(WORKERS, thread_name_prefix="rollout-work", **on_device)
        self.sampling = ThreadPoolExecutor(1, thread_name_prefix="rollout-sampling", **on_device)  # `prefetch(beside=True)`
        try:
            self.pool = self.call(self.open_pool(pool_size, render)).result()
        except BaseException:
            self.close()
            raise

    @staticmethod
    async def open_pool(size: int, render: RenderConfig) -> RenderPool:
        pool = RenderPool(size, render)
        await pool.start()
        return pool

    def call(self, coro) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    # --- a batch ---------------------------------------------------------------------------------

    def submit(self, prompts: list[Prompt], n: int, policy_version: int = 0, keep_logps: bool = False) -> Job:
        """Sample n completions of each prompt here, now (with two turns, their revisions too); the job holds
        the batch once its renders, gate and scores are in. `keep_logps`: the batch keeps the sampler's
        log-probs as `old_logps`. A sampling failure raises here."""
        job = Job()
        self.run_job(job, prompts, n, policy_version, keep_logps)
        if job.batch is None:
            job.result()
        return job

    def run_job(self, job: Job, prompts: list[Prompt], n: int, policy_version: int, keep_logps: bool) -> None:
        """Sample into `job` (`job.batch`, then `job.sampled`), then leave its scoring to the loop, which resolves it."""
        try:
            self.generator.manual_seed(group_seed(prompts[0].seed, self.rank))
            samples, rollouts, rows, sampling = self.sample_turn(
                [p.text for p in prompts], n,
                lambda row, text: Rollout(prompt=prompts[row // n].subject, completion=text, group=row // n,
                                          seed=prompts[row // n].seed))
            first, first_scored = None, None
            if self.turns.turns == 2:
                first = RolloutBatch(samples, rollouts, {}, policy_version)
                first_scored = self.call(self.score_batch(first, rows))
                samples, rollouts, rows, sampling = self.revise(first, rows, first_scored)
            job.batch = RolloutBatch(samples, rollouts, {"time/at/sampling_start_s": sampling[1],
                                                         "time/at/sampling_end_s": sampling[2]}, policy_version,
                                     samples.logps if keep_logps else None, turn1=first)
        except BaseException as e:
            job.set_exception(e)
            return
        finally:
            job.sampled.set()
        self.call(self.finish(job.batch, rows, first_scored)).add_done_callback(job.follow)

    def sample_turn(self, prompts: list[PromptInput], n: int, new_rollout: Callable[[int, str], Rollout]
                    ) -> tuple[SampleBatch, list[Rollout], dict[int, Future], tuple]:
        """Sample, and send each row to be rendered and gated the moment it ends: the samples, the rows'
        rollouts, their `settle` futures and the sampling span."""
        rows: dict[int, Future] = {}
        rollouts: list[Rollout | None] = [None] * (len(prompts) * n)  # indexed by row: rows may end in any order

        def on_completion(row: int, text: str) -> None:
            r = rollouts[row] = new_rollout(row, text)
            r.code = extract_code(text)
            r.gate = static_gate(r.code, text)
            rows[row] = self.call(self.settle(r))

        with self.timeline.span("sampling") as sampling:
            samples = self.sampler.sample(prompts, n, on_completion, generator=self.generator)
        if None in rollouts:
            missing = [row for row, r in enumerate(rollouts) if r is None]
            raise RuntimeError(f"the sampler reported no completion for rows {missing}")
        for row, r in enumerate(rollouts):
            r.num_tokens = int(samples.num_tokens[row])
        return samples, rollouts, rows, sampling

    def revise(self, first: RolloutBatch, rows: dict[int, Future], scored: Future
               ) -> tuple[SampleBatch, list[Rollout], dict[int, Future], tuple]:
        """Turn 2: once every first sketch is gated and rendered (and, for text feedback, scored: `scored`), each
        row's conversation goes on with its feedback and the policy writes a revision; returns the trajectories
        (`turns.join_turns`), the revisions' rollouts, their `settle` futures and the sampling span."""
        for f in rows.values():
            f.result()
        said = [None] * len(first.rollouts)
        if self.rewards is not None and self.turns.feedback != "image":  # the text tells each term's feedback
            scored.result()
            said = self.rewards.feedback(first.rollouts, first.scores)
        feedback, images = zip(*(feedback_for(r, s, self.turns) for r, s in zip(first.rollouts, said)))
        prompts, segments = self.conversation.next_prompts(first.samples, list(feedback), list(images))
        second, rollouts, second_rows, sampling = self.sample_turn(
            prompts, 1, lambda row, text: Rollout(prompt=first.rollouts[row].prompt, completion=text,
                                                  group=first.rollouts[row].group, seed=first.rollouts[row].seed,
                                                  feedback=feedback[row]))
        trajectories = join_turns(first.samples, segments, second, self.conversation.tokenizer.pad_token_id)
        return trajectories, rollouts, second_rows, sampling

    def collect(self, prompts: list[Prompt], n: int) -> RolloutBatch:
        return self.submit(prompts, n).result()

    async def settle(self, r: Rollout) -> dict[str, asyncio.Task]:
        """Render and gate one row (unless the static gate failed it); its streaming terms' work is started,
        not awaited: the batch's other terms need the renders, not these scores."""
        if r.gate is None:
            span = self.timeline.begin("render")
            try:
                r.render = await self.pool.render(r.code, r.seed)
            except Exception as e:  # a harness failure is the renderer's, not the sketch's
                r.render = RenderResult(png=None, error=f"{type(e).__name__}: {e}", infra_error=True)
            finally:
                self.timeline.end(span)
            r.gate = await self.loop.run_in_executor(self.work, gate, r.code, r.render)
        terms = self.rewards.streaming(r) if self.rewards is not None else []
        return {t.name: asyncio.ensure_future(self.score_row(t, r)) for t in terms}

    async def score_row(self, term: RewardTerm, r: Rollout) -> Any:
        if term.awaits:
            with self.timeline.span(f"score_{term.name}"):
                return await term.ascore_row(r)
        return await self.loop.run_in_executor(self.work, self.timed, term, r)

    def timed(self, term: RewardTerm, r: Rollout) -> Any:
        with self.timeline.span(f"score_{term.name}"):
            return term.score_row(r)

    async def score_batch(self, batch: RolloutBatch, rows: dict[int, Future]) -> dict[str, float]:
        """Once its rows are settled, the batch's rewards and scores (set on it) and their metrics ({}: no mix)."""
        started = await self.settled(rows)
        if self.rewards is None:
            return {}
        batch.rewards, batch.scores, metrics = await self.score(batch.rollouts, started)
        return metrics

    async def finish(self, batch: RolloutBatch, rows: dict[int, Future], first_scored: Future | None) -> RolloutBatch:
        t0 = time.perf_counter()
        started = await self.settled(rows)
        rendered = [r.render for b in (batch, batch.turn1) if b is not None for r in b.rollouts if r.render is not None]
        tokens = float(batch.samples.num_tokens.sum())
        batch.metrics.update({
            "time/sampling_s": batch.samples.seconds,
            "time/sampling_tokens_per_s": tokens / max(batch.samples.seconds, 1e-9),
            "time/render_wait_s": time.perf_counter() - t0,  # rendering left when the wait began
            "time/render_mean_s": sum(x.elapsed_s for x in rendered) / max(1, len(rendered)),
            "time/renders": float(len(rendered)),
        })
        if batch.turn1 is not None:  # time/sampling_s is both turns'
            batch.metrics["time/sampling_turn1_s"] = batch.turn1.samples.seconds
        if self.rewards is None:
            return batch
        t1 = time.perf_counter()
        batch.rewards, batch.scores, metrics = await self.score(batch.rollouts, started)
        if batch.turn1 is not None:
            first = batch.turn1
            await asyncio.wrap_future(first_scored)
            metrics.update(turn_metrics(batch.rewards, first.rewards, first.rollouts))
            batch.rewards = trajectory_rewards(batch.rewards, first.rewards, self.turns.turn1_weight)
        seconds = time.perf_counter() - t1
        batch.metrics.update(metrics, **{"time/scoring_s": seconds,
                                         "time/scoring_rollouts_per_s": len(batch.rollouts) / max(seconds, 1e-9)})
        return batch

    @staticmethod
    async def settled(rows: dict[int, Future]) -> dict[int, dict[str, asyncio.Task]]:
        """Each row's streaming terms' tasks, once the row is rendered and gated."""
        return dict(zip(rows, await asyncio.gather(*(asyncio.wrap_future(f) for f in rows.values()))))

    async def score(self, rollouts: list[Rollout], started: dict[int, dict[str, asyncio.Task]]
                    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, float]]:
        """The mix of every term: the batch terms (HPSv3) start now, while the streaming terms' last rows (a
        judge's replies) finish."""
        batch_terms = {t.name: self.loop.run_in_executor(self.work, self.rewards.score_term, t, rollouts, None,
                                                         self.timeline)
                       for t in self.rewards.terms if not t.streams}
        streamed = {t.name: {} for t in self.rewards.terms if t.streams}
        for row, tasks in started.items():
            for name, task in tasks.items():
                streamed[name][row] = await task
        scored = {t.name: await batch_terms[t.name] if t.name in batch_terms else
                  self.rewards.score_term(t, rollouts, streamed[t.name]) for t in self.rewards.terms}
        return self.rewards.mix(rollouts, scored)

    # --- batches sampled ahead -------------------------------------------------------------------

    def take(self, prompts: list[Prompt], n: int, policy_version: int, keep_logps: bool) -> Job:
        """The batch sampled ahead for these prompts, or, when none was (a run's first step, another order
        of prompts), one sampled now."""
        job = self.prefetched.take(prompt_key(prompts))
        return job if job is not None else self.submit(prompts, n, policy_version, keep_logps)

    def prefetch(self, prompts: list[Prompt], n: int, policy_version: int, beside: bool = False) -> None:
        """Sample a later step's batch: here, now; or, `beside`, on the pipeline's sampling thread while the caller
        goes on (to its update: an engine of its own samples beside it). It keeps its log-probs (an older policy
        sampled it)."""
        if beside:
            job = Job()
            self.sampling.submit(self.run_job, job, prompts, n, policy_version, True)
        else:
            job = self.submit(prompts, n, policy_version, keep_logps=True)
        self.prefetched.put(prompt_key(prompts), job)

    def wait_sampled(self) -> None:
        """Until every batch sampled ahead is sampled (its renders and scores may go on); a failed one raises here."""
        for _, job in self.prefetched.pending:
            job.sampled.wait()
            if job.batch is None:
                job.result()

    def close(self) -> None:
        """Wait for the batches in flight, then close the pool, the workers and the loop."""
        self.prefetched.drain()
        self.sampling.shutdown()
        if getattr(self, "pool", None) is not None:
            self.call(self.pool.close()).result()
            self.pool = None
        self.work.shutdown()
        if getattr(self.sampler, "loop", None) is self.loop:
            self.sampler.loop = None
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        self.loop.close()


def prompt_key(prompts: list[Prompt]) -> tuple:
    """What a prefetched batch is for: its prompts' subjects and seeds."""
    return tuple((p.subject, p.seed) for p in prompts)
