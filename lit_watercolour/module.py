"""The GRPO LightningModule: it wires the step to Lightning; the step itself is plain code.

    training_step = sample -> finish (rollout.py) -> score (rewards.mix.RewardMix) -> gather (DDP)
                    -> advantages (grpo.py) -> update (update.py)

Manual optimisation, because one batch of prompts makes one rollout batch that is split into
micro-batches (gradient accumulation) and may be reused for `num_iterations` optimizer steps.
The reward is `model.rewards`, an explicit list of terms. The step returns a `StepResult`
(`outputs["step"]` in `on_train_batch_end`): the gallery, the run log and the checkpoint
callbacks read it, not the module.

Failures, and what a step does with them:
- A missing score (NaN: a judge or scorer that failed after its retries, or a render the
  browser failed twice) leaves its rollout out of its group's baseline and gives it advantage
  0 (`grpo.group_advantages`); the share is logged as `frac_reward_missing`. When every
  rollout of the step is missing there is nothing to learn from: the update is skipped.
- A non-finite loss or gradient norm skips the update too, with the gradients dropped.
- A skipped update still counts as a step: global_step and the LR schedule advance, so
  `max_steps`, checkpoints and the prompt stream stay aligned, but no weight or optimizer
  state changes. `train/skipped_missing` and `train/skipped_nonfinite` are 1 on such steps.

Several ranks (Lightning's DDP): every rank reads the same prompts and samples its share of
each group (`num_generations / world_size` rows, drawn with a per-rank seed); rewards are
gathered before advantages, so a group's baseline is the whole group's. Gradients are
averaged by DDP, so the DAPO normaliser is the all-rank token count over the world size (as
TRL). Each rank renders with its own pool.

Overlap (`max_staleness=1`, `lit_watercolour.overlap`): step N samples step N+1's batch before its own
update (with the weights of update N-1) and leaves that batch's renders and scores to finish while step N
waits for its own scores and updates; the update of N+1 then takes the sampler's log-probs as the old
policy (one optimizer step behind). A step's wall time is then about max(sampling + update,
render + score) instead of their sum. A run's first step, and a resumed run's first step, sample on-policy
(the prefetched batch is not checkpointed):
`train/staleness` and `policy_version` in rollouts.jsonl say which. Every step logs each phase's busy and
idle time within its wall window (`time/busy/*`, `time/idle/*`) and when sampling and the update began and
ended (`time/at/*`, seconds since fit began).
"""

from __future__ import annotations

import math
import re
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import lightning.pytorch as pl
import torch
from torch import Tensor

from lit_watercolour import grpo
from lit_watercolour.data import Prompt, group_seed
from lit_watercolour.overlap import Prefetched, Timeline, busy_idle_metrics
from lit_watercolour.policy import PolicyConfig, load_policy, require_bitsandbytes, trainable_state_dict
from lit_watercolour.records import RolloutBatch, StepResult
from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.mix import RewardMix
from lit_watercolour.rng import rng_state, set_rng_state
from lit_watercolour.rollout import Sampled, collect, finish, sample
from lit_watercolour.sandbox import RenderConfig, ThreadedRenderPool
from lit_watercolour.sampling import SampleBatch, SamplingConfig, VLLMConfig, build_sampler
from lit_watercolour.update import GRPOConfig, OptimConfig, policy_update, skip_step


class GRPOModule(pl.LightningModule):
    def __init__(
        self,
        rewards: list[RewardTerm] | None = None,  # the reward mix's terms, each with its weight
        policy: PolicyConfig | None = None,
        sampling: SamplingConfig | None = None,
        grpo_config: GRPOConfig | None = None,
        optim: OptimConfig | None = None,
        sampler: Literal["hf", "vllm", "vllm-server"] = "hf",
        vllm: VLLMConfig | None = None,  # vllm / vllm-server: GPU share, sleep mode, server URL, adapter folder
        render_pool_size: int = 2,  # warm Chromium pages
        render: RenderConfig = RenderConfig(),  # how each sketch renders: canvas, limits, browser, backend
        render_kwargs: dict | None = None,  # deprecated: the fields of `render` as a dict
        predict_generations: int = 1,  # paintings per subject in `predict`
        predict_dir: str = "paintings",
        cpu_threads: int = 0,  # torch intra-op threads; 0 keeps torch's default. 1 suits tiny models beside Chromium
        max_staleness: Literal[0, 1] = 0,  # 1: sample step N+1 before update N; render and score it during
    ) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.strict_loading = False  # checkpoints hold the adapter only; the base comes from `policy`
        self.policy_config = as_config(PolicyConfig, policy)
        self.sampling_config = as_config(SamplingConfig, sampling)
        self.grpo_config = as_config(GRPOConfig, grpo_config)
        self.optim_config = as_config(OptimConfig, optim)
        # What defines the trained policy, as plain dicts (checkpoints load with weights_only=True).
        # LightningCLI applies these over the config on `--ckpt_path`, so run-time settings
        # (render pool, predict outputs) stay out and can be changed when painting.
        self.save_hyperparameters({
            "policy": asdict(self.policy_config), "sampling": asdict(self.sampling_config),
            "grpo_config": asdict(self.grpo_config), "optim": asdict(self.optim_config), "sampler": sampler,
            "max_staleness": max_staleness,
        })
        if max_staleness not in (0, 1):
            raise ValueError(f"max_staleness must be 0 or 1, not {max_staleness}")
        self.max_staleness = max_staleness
        self.num_iterations = self.grpo_config.num_iterations
        self.sampler_backend = sampler
        self.vllm_config = as_config(VLLMConfig, vllm)  # run-time, not part of the trained policy
        if render_kwargs is not None:
            warnings.warn("render_kwargs is deprecated: use render (a RenderConfig)", DeprecationWarning, stacklevel=2)
            render = RenderConfig(**{**asdict(as_config(RenderConfig, render)), **render_kwargs})
        self.render_pool_size, self.render_config = render_pool_size, as_config(RenderConfig, render)
        self.predict_generations, self.predict_dir = predict_generations, predict_dir
        self.cpu_threads = cpu_threads
        self.reward_mix = RewardMix(rewards or [])
        self.policy_model = None
        self.tokenizer = None
        self.sampler = None
        self.pool: ThreadedRenderPool | None = None
        self.prefetch: Prefetched | None = None
        self.finishing: ThreadPoolExecutor | None = None  # a batch's renders, gate and scores, after sampling
        self.timeline = Timeline()
        self._resumed_rng: dict | None = None

    # --- setup ---------------------------------------------------------------------------------

    def setup(self, stage: str) -> None:
        self.reward_mix.setup()  # a term's model loads as the trainer starts

    def configure_model(self) -> None:
        # Lightning calls this before the dataloaders are built, so the data module can use the tokenizer
        if self.policy_model is None:
            if self.cpu_threads > 0:
                # a tiny model's kernels are too small to split: extra threads only fight the renderer
                torch.set_num_threads(self.cpu_threads)
            self.policy_model, self.tokenizer = load_policy(self.policy_config)
            self.policy_model.train()  # from_pretrained leaves it in eval, where gradient checkpointing is off
        if self.sampler is None:  # built again after a teardown closed it
            self.sampler = build_sampler(self.sampling_config, self.policy_model, self.tokenizer, self.sampler_backend,
                                         self.vllm_config,
                                         need_logps=self.grpo_config.num_iterations > 1 or self.max_staleness > 0)

    def on_fit_start(self) -> None:
        if self.grpo_config.num_generations % self.trainer.world_size:
            raise ValueError(f"num_generations={self.grpo_config.num_generations} must be a multiple of the "
                             f"world size ({self.trainer.world_size}): each rank samples an equal share of a group")
        self._open_pool()
        self.timeline = Timeline()
        self.finishing = ThreadPoolExecutor(1, thread_name_prefix="finish")
        if self.max_staleness:
            self.prefetch = Prefetched()

    def on_validation_start(self) -> None:
        if self.prefetch is not None:  # its renders finish first, so validation's timings are its own
            self.prefetch.wait()
        self._open_pool()

    def on_predict_start(self) -> None:
        self._open_pool(pixel_density=1.0)  # paintings at the canvas's full size, whatever training rendered at

    def _open_pool(self, **overrides) -> None:
        if self.pool is None:
            self.pool = ThreadedRenderPool(self.render_pool_size, self.render_config, **overrides)

    def teardown(self, stage: str) -> None:
        if self.finishing is not None:  # before the pool: a batch still finishing renders with it
            self.finishing.shutdown()
            self.finishing, self.prefetch = None, None
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        if self.sampler is not None:  # a vLLM engine's processes end here, not at interpreter exit
            self.sampler.close()
            self.sampler = None
        self.reward_mix.teardown()

    def configure_optimizers(self):
        from transformers import get_scheduler

        o = self.optim_config
        params = [p for p in self.policy_model.parameters() if p.requires_grad]
        kwargs = dict(lr=o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas), eps=o.eps)
        if o.optimizer == "adamw_8bit":
            require_bitsandbytes("optimizer='adamw_8bit'")
            import bitsandbytes as bnb

            optimizer = bnb.optim.AdamW8bit(params, **kwargs)
        else:  # fused: one kernel for all adapter tensors (Lightning has moved them to the device by now)
            optimizer = torch.optim.AdamW(params, fused=bool(params) and params[0].is_cuda, **kwargs)
        total = self.trainer.max_steps if self.trainer.max_steps > 0 else None
        scheduler = get_scheduler(o.lr_scheduler, optimizer, num_warmup_steps=o.warmup_steps, num_training_steps=total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # --- checkpoints: the adapter only -----------------------------------------------------------

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["state_dict"] = trainable_state_dict(self)
        checkpoint["rng_states"] = rng_state()  # Lightning keeps loops and optimizers, not generators

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.configure_model()  # `load_from_checkpoint` needs the model before the state dict arrives
        # applied at the first resumed batch: creating the dataloader iterator draws from torch's RNG
        self._resumed_rng = checkpoint.get("rng_states")

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        if self._resumed_rng is not None:
            set_rng_state(self._resumed_rng)
            self._resumed_rng = None

    def save_adapter(self, path: str | Path) -> None:
        """The adapter in peft format (adapter_config.json + safetensors), with the tokenizer."""
        self.policy_model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)

    # --- the step -----------------------------------------------------------------------------------

    def training_step(self, prompts: list[Prompt], batch_idx: int) -> dict[str, StepResult]:
        g = self.grpo_config
        start = self.timeline.now()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        pending = self.prefetch.take(prompt_key(prompts)) if self.prefetch is not None else None
        if pending is None:  # on-policy: max_staleness 0, or the first step of a run (resumed or not)
            pending = self.start_rollout(prompts)
        if self.prefetch is not None:  # the next batch is sampled now, with the weights before this update
            self.prefetch_next(self.global_step // self.num_iterations + 1)
        batch, rewards, scores, metrics = pending.result()
        stale = batch.policy_version < self.global_step
        metrics["train/staleness"] = float(self.global_step - batch.policy_version)

        group_rewards = self.gather_groups(rewards, len(prompts))
        advantages, stats = self.advantages(group_rewards, len(prompts))
        metrics.update(stats, **completion_metrics(batch.samples))

        t0 = time.perf_counter()
        all_missing = bool(torch.isnan(group_rewards).all())  # the same on every rank: they step together
        with self.timeline.span("update") as update:
            for _ in range(g.num_iterations):
                if all_missing:  # no score at all: nothing to learn from this batch
                    skip_step(self.optimizers(), self.lr_schedulers())
                else:
                    metrics.update(self.update(batch.samples, advantages, stale))
        tokens = float(batch.samples.completion_mask.sum() + batch.samples.prompt_mask.sum()) * g.num_iterations
        metrics.update(rate("update", t0, tokens, "tokens"), **{"train/skipped_missing": float(all_missing)})
        if self.device.type == "cuda":  # the step's high-water mark: sampling, scoring on the same GPU, and the update
            metrics["memory/peak_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        self.sampler.sync_weights(self.policy_model)
        end = self.timeline.now()
        phases = ["sampling", "render", *(f"score_{t.name}" for t in self.reward_mix.terms), "update"]
        metrics.update(busy_idle_metrics(self.timeline, start, end, phases), **{
            "time/step_s": end - start, "time/at/update_start_s": update[1], "time/at/update_end_s": update[2]})
        self.log_step(metrics, len(batch.rollouts))
        return {"step": StepResult(batch, scores, rewards, group_rewards, advantages, metrics)}

    def start_rollout(self, prompts: list[Prompt]) -> Future:
        """Sample `prompts` here, with the weights as they are; their renders, gate and scores finish on the
        finishing thread. The future holds the batch, its [N] rewards, the term scores and the metrics so far."""
        if self.trainer.world_size > 1 or self.max_staleness:
            # ranks draw different rows of the same groups; a stream's batch draws the same whenever it is sampled
            torch.manual_seed(group_seed(prompts[0].seed, self.global_rank))
        sampled = sample(self.sampler, self.pool, prompts, self.grpo_config.num_generations // self.trainer.world_size,
                         self.timeline, self.reward_mix)
        return self.finishing.submit(self.finish_rollout, sampled, self.global_step)

    def finish_rollout(self, sampled: Sampled, policy_version: int) -> tuple[RolloutBatch, Tensor, dict, dict]:
        if self.device.type == "cuda":  # the current device is per thread: a new thread starts on device 0
            torch.cuda.set_device(self.device)
        batch = finish(sampled)
        batch.policy_version = policy_version
        t0 = time.perf_counter()
        rewards, scores, metrics = self.reward_mix.score(batch.rollouts, self.timeline, batch.streamed)
        metrics.update(batch.metrics, **rate("scoring", t0, len(batch.rollouts), "rollouts"))
        return batch, rewards, scores, metrics

    def prefetch_next(self, batch_index: int) -> None:
        """Sample the stream's batch `batch_index` now (before this step's update), to be finished while the
        update runs and taken by the step it is for."""
        if 0 < self.trainer.max_steps <= batch_index * self.num_iterations:
            return  # past the run's last step
        datamodule = self.trainer.datamodule
        if not hasattr(datamodule, "train_prompts"):
            raise ValueError("max_staleness 1 reads the next step's prompts ahead: it needs a data module with "
                             "train_prompts(step), such as lit_watercolour.data.PromptDataModule")
        prompts = datamodule.train_prompts(batch_index)
        self.prefetch.put(prompt_key(prompts), self.start_rollout(prompts))

    def gather_groups(self, rows: Tensor, num_groups: int) -> Tensor:
        """This rank's [P*k] rows -> every rank's, as [P*G] whole groups (the identity on one rank)."""
        if self.trainer.world_size == 1:
            return rows
        return grpo.groups_from_ranks(self.all_gather(rows).cpu(), num_groups)

    def advantages(self, group_rewards: Tensor, num_groups: int) -> tuple[Tensor, dict[str, float]]:
        """This rank's rows' advantages against their whole groups, and the reward statistics."""
        g, world = self.grpo_config, self.trainer.world_size
        advantages, stats = grpo.group_advantages(group_rewards, g.num_generations, g.scale_rewards)
        if world > 1:
            advantages = grpo.rows_of_rank(advantages, num_groups, world, self.global_rank)
        return advantages, {**{k: float(v) for k, v in stats.items()}, "advantage/mean": advantages.mean().item(),
                            "advantage/std": advantages.std().item(), "advantage/abs_max": advantages.abs().max().item()}

    def update(self, samples: SampleBatch, advantages: Tensor, stale: bool = False) -> dict[str, float]:
        world = self.trainer.world_size
        # DDP averages the ranks' gradients: the DAPO normaliser is all ranks' tokens / world (TRL)
        world_tokens = (lambda n: self.trainer.strategy.reduce(n, reduce_op="sum") / world) if world > 1 else (lambda n: n)
        return policy_update(self.policy_model, samples, advantages, self.grpo_config, self.sampling_config,
                             self.optim_config, self.optimizers(), self.lr_schedulers(), self.manual_backward, world_tokens,
                             stale)

    def log_step(self, metrics: dict[str, float], batch_size: int) -> None:
        shown = ("reward", "gate/pass_rate", "time/step_s")  # on the progress bar
        finite = {k: v for k, v in metrics.items() if not math.isnan(v)}
        self.log_dict({k: v for k, v in finite.items() if k in shown}, prog_bar=True, batch_size=batch_size)
        self.log_dict({k: v for k, v in finite.items() if k not in shown}, batch_size=batch_size)

    # --- evaluation and painting ----------------------------------------------------------------

    def validation_step(self, prompts: list[Prompt], batch_idx: int) -> None:
        batch = collect(self.sampler, self.pool, prompts, self.grpo_config.num_generations, scorer=self.reward_mix)
        rollouts = batch.rollouts
        rewards, scores, _ = self.reward_mix.score(rollouts, streamed=batch.streamed)
        n = len(rollouts)
        self.log("val/reward", torch.nanmean(rewards).item(), batch_size=n)
        self.log("val/gate_pass_rate", float(sum(r.gate.passed for r in rollouts)) / n, batch_size=n)
        for name, s in scores.items():
            self.log(f"val/reward/{name}", torch.nanmean(s).item(), batch_size=n)

    def predict_step(self, prompts: list[Prompt], batch_idx: int) -> list[str]:
        """Paint each subject `predict_generations` times into predict_dir as .js, .png and .txt (raw)."""
        rollouts = collect(self.sampler, self.pool, prompts, self.predict_generations).rollouts
        out = Path(self.predict_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for i, r in enumerate(rollouts):
            stem = out / f"{slug(r.prompt)}-{batch_idx}-{i % self.predict_generations}"
            stem.with_suffix(".txt").write_text(r.completion)
            if r.code is not None:
                stem.with_suffix(".js").write_text(r.code)
            if r.render is not None and r.render.png is not None:
                stem.with_suffix(".png").write_bytes(r.render.png)
            written.append(str(stem))
        return written


def as_config(cls, value):
    """A config dataclass from itself, None (the defaults) or a dict (hyper-parameters of a checkpoint)."""
    if value is None:
        return cls()
    return cls(**value) if isinstance(value, dict) else value


def prompt_key(prompts: list[Prompt]) -> tuple:
    """What a prefetched batch is for: its prompts' subjects and seeds."""
    return tuple((p.subject, p.seed) for p in prompts)


def rate(phase: str, t0: float, count: float, unit: str) -> dict[str, float]:
    seconds = time.perf_counter() - t0
    return {f"time/{phase}_s": seconds, f"time/{phase}_{unit}_per_s": count / max(seconds, 1e-9)}


def completion_metrics(samples: SampleBatch) -> dict[str, float]:
    lengths = samples.num_tokens.float()
    return {"completions/mean_length": lengths.mean().item(), "completions/max_length": lengths.max().item(),
            "completions/clipped_ratio": samples.truncated.float().mean().item()}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "painting"
