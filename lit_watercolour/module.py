"""The GRPO LightningModule: it wires the step to Lightning; the step itself is plain code.

    training_step = take a scored batch (rollout.RolloutPipeline) -> gather (DDP) -> advantages (grpo.py)
                    -> update (update.py) -> sync the sampler -> log

Manual optimisation, because one batch of prompts makes one rollout batch that is split into
micro-batches (gradient accumulation) and may be reused for `num_iterations` optimizer steps.
The reward is `model.rewards`, an explicit list of terms; their models load in the `RewardModels`
callback this module contributes (`configure_callbacks`), for fit and validate only. The step returns a
`StepResult` (`outputs["step"]` in `on_train_batch_end`): the gallery, the run log and the checkpoint
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

Overlap (`max_staleness=k`, `lit_watercolour.overlap`): each step keeps the next k batches sampled ahead,
sampling the newest before its own update (with the weights of the update before) and leaving its renders
and scores to finish while the step waits for its own scores and updates; the update of that batch, k steps
later, takes the sampler's log-probs as the old policy. A step's wall time is then about max(sampling +
update, render + score) instead of their sum; with `sample_during_update` (a vLLM engine) the newest is sampled
during the update instead, for about max(sampling, render + score + update). A run's first step, and a resumed run's first step, sample
on-policy (the prefetched batches are not checkpointed): `train/staleness` and `policy_version` in
rollouts.jsonl say which. Every step logs each phase's busy and idle time within its wall window
(`time/busy/*`, `time/idle/*`) and when sampling and the update began and ended (`time/at/*`, seconds since
the pipeline opened).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, replace
from typing import Literal

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.throughput import Throughput, get_available_flops
from torch import Tensor

from lit_watercolour import grpo
from lit_watercolour.bounds import require
from lit_watercolour.callbacks.paintings import PaintingWriter, slug
from lit_watercolour.callbacks.rewards import RewardModels
from lit_watercolour.data import Prompt
from lit_watercolour.flops import update_flops
from lit_watercolour.overlap import AdapterVersions, busy_idle_metrics
from lit_watercolour.policy import PolicyConfig, load_policy, load_processor, trainable_state_dict, update_defaults
from lit_watercolour.records import RolloutBatch, StepResult
from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.mix import RewardMix
from lit_watercolour.rng import rng_state, set_rng_state
from lit_watercolour.rollout import Job, RolloutPipeline
from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.turns import Feedback, TurnsConfig, check_policy
from lit_watercolour.sampling import SamplingConfig, VLLMConfig, build_sampler
from lit_watercolour.sampling.base import completion_metrics, with_policy_logps
from lit_watercolour.update import (GRPOConfig, OptimConfig, ThreadsConfig, configure_optimizer, policy_update,
                                   skip_step)


class GRPOModule(pl.LightningModule):
    def __init__(
        self,
        rewards: list[RewardTerm] | None = None,
        policy: PolicyConfig = PolicyConfig(),
        sampling: SamplingConfig = SamplingConfig(),
        grpo: GRPOConfig = GRPOConfig(),
        optim: OptimConfig = OptimConfig(),
        sampler: Literal["hf", "vllm", "vllm-server"] = "hf",
        vllm: VLLMConfig = VLLMConfig(),
        render_pool_size: int = 2,
        render: RenderConfig = RenderConfig(),
        predict_generations: int = 1,
        predict_dir: str = "paintings",
        threads: ThreadsConfig = ThreadsConfig(),
        max_staleness: int = 0,
        sample_during_update: bool = False,
        turns: int = 1,
        feedback: Feedback = "text",
        turn1_weight: float = 0.0,
    ) -> None:
        """
        Args:
            rewards: the reward mix's terms, each with its weight.
            policy: the model, its LoRA adapter and its memory settings.
            sampling: temperature, top-p/top-k, completion length and the hf sampler's settings.
            grpo: group size, loss, clipping, KL and reward scaling.
            optim: optimizer, learning rate and its schedule.
            sampler: the sampling backend.
            vllm: vllm / vllm-server: GPU share, sleep mode, server URL, adapter folder.
            render_pool_size: warm Chromium pages.
            render: how each sketch renders: canvas, limits, browser, backend (docs/rendering.md).
            predict_generations: paintings per subject in `predict`.
            predict_dir: where `predict` writes each painting's .js, .png and .txt.
            threads: torch intra-op threads for the update and for decoding.
            max_staleness: batches sampled ahead of the update (0: on-policy); the update of a batch sampled
                ahead is that many optimizer steps behind the policy that sampled it.
            sample_during_update: max_staleness >= 1 with a vLLM sampler: the engine samples the batch ahead while
                the trainer updates (on the pipeline's sampling thread), not before; the engine stays awake beside
                the update (vllm.enable_sleep_mode: false). Its old-policy log-probs are one forward of the adapter
                that sampled it, while it is scored (lit_watercolour/overlap.py).
            turns: 1: one sketch per trajectory; 2: the sketch is rendered and fed back and the policy revises it
                in the same conversation, the trajectory scored on the revision (lit_watercolour/turns.py).
            feedback: what turn 2 is shown: text (gate verdict, painted fraction, scorer parts), image (the render, to
                a vision-language policy through its processor) or both.
            turn1_weight: two turns: the reward is the revision's plus this times the first sketch's.
        """
        super().__init__()
        require(max_staleness >= 0, "model.max_staleness", ">= 0 (0: on-policy)", max_staleness)
        require(not sample_during_update or (max_staleness >= 1 and sampler != "hf"), "model.sample_during_update",
                "off unless max_staleness >= 1 and the sampler is vllm or vllm-server (hf decodes with the weights "
                "being updated)", f"{sample_during_update} with max_staleness {max_staleness}, sampler {sampler}")
        require(render_pool_size >= 1, "model.render_pool_size", ">= 1", render_pool_size)
        require(predict_generations >= 1, "model.predict_generations", ">= 1", predict_generations)
        self.automatic_optimization = False
        self.strict_loading = False  # checkpoints hold the adapter only; the base comes from `policy`
        self.policy_config = as_config(PolicyConfig, policy)
        self.sampling_config = as_config(SamplingConfig, sampling)
        self.grpo_config = as_config(GRPOConfig, grpo)
        self.optim_config = as_config(OptimConfig, optim)
        # What defines the trained policy, as plain dicts (checkpoints load with weights_only=True).
        # LightningCLI applies these over the config on `--ckpt_path`, so run-time settings
        # (render pool, predict outputs) stay out and can be changed when painting.
        self.save_hyperparameters({
            "policy": asdict(self.policy_config), "sampling": asdict(self.sampling_config),
            "grpo": asdict(self.grpo_config), "optim": asdict(self.optim_config), "sampler": sampler,
            "max_staleness": max_staleness, "sample_during_update": sample_during_update, "turns": turns, "feedback": feedback, "turn1_weight": turn1_weight,
        })
        self.max_staleness = max_staleness
        # the adapters batches sampled beside the update were sampled with (their old-policy log-probs)
        self.adapter_versions = AdapterVersions(max_staleness + 1) if sample_during_update else None
        self.turns = TurnsConfig(turns, feedback, turn1_weight)
        if self.turns.turns == 2 and max_staleness > 0:
            warnings.warn("turns=2 with max_staleness > 0 does not overlap: a batch sampled ahead waits on the policy's "
                          "thread for its first sketches' renders and scores before its revisions (docs/turns.md)",
                          stacklevel=2)
        self.num_iterations = self.grpo_config.num_iterations
        self.sampler_backend = sampler
        self.vllm_config = as_config(VLLMConfig, vllm)  # run-time, not part of the trained policy
        # an engine woken on the sampling thread would read the trainer's weights (sleep level 2) mid-update
        require(not (sample_during_update and sampler == "vllm" and self.vllm_config.enable_sleep_mode is not False),
                "model.vllm.enable_sleep_mode", "false with model.sample_during_update (the engine samples beside "
                "the update, awake)", self.vllm_config.enable_sleep_mode)
        check_policy(self.turns, self.policy_config, sampler, self.vllm_config)
        self.render_pool_size, self.render_config = render_pool_size, as_config(RenderConfig, render)
        self.predict_generations, self.predict_dir = predict_generations, predict_dir
        self.threads = as_config(ThreadsConfig, threads)
        self.reward_mix = RewardMix(rewards or [])
        self.policy_model, self.tokenizer, self.processor, self.sampler = None, None, None, None
        self.pipeline: RolloutPipeline | None = None
        self._resumed_rng: dict | None = None
        self.step_rows, self.step_tokens, self.flops_per_batch = 0, 0.0, 0.0  # the last batch's, for `throughput_metrics`
        self.throughput: Throughput | None = None
        self.throughput_totals: dict[str, float] = {}

    # --- setup ---------------------------------------------------------------------------------

    def configure_callbacks(self) -> list[pl.Callback]:
        return [RewardModels(self.reward_mix.terms, predict=self.turns.turns == 2),
                PaintingWriter(self.predict_dir, self.predict_generations)]

    def configure_model(self) -> None:
        # Lightning calls this before the dataloaders are built, so the data module can use the tokenizer
        if self.policy_model is None:
            if self.threads.update > 0:
                # a tiny model's kernels are too small to split: extra threads only fight the renderer
                torch.set_num_threads(self.threads.update)
            device = self.trainer.strategy.root_device.type if self._trainer is not None else None
            settings = update_defaults(self.policy_config, device, self.grpo_config.micro_batch_size)  # the one resolution
            pl.utilities.rank_zero_info(f"update settings: {settings}")
            self.grpo_config = replace(self.grpo_config, micro_batch_size=settings.micro_batch_size)
            self.policy_model, self.tokenizer = load_policy(self.policy_config, device, settings)
            self.policy_model.train()  # from_pretrained leaves it in eval, where gradient checkpointing is off
            if self.turns.shows_image:
                self.processor = load_processor(self.policy_config, self.tokenizer)
        if self.sampler is None:  # built again after a teardown closed it
            self.sampler = build_sampler(self.sampling_config, self.policy_model, self.tokenizer, self.sampler_backend,
                                         self.vllm_config, self.needs_sampler_logps(),
                                         self.processor, threads=self.threads.sampling)

    def needs_sampler_logps(self) -> bool:
        """Whether each batch comes with the policy's log-probs from the sampler: a batch used for several optimizer
        steps or sampled ahead needs them, unless it is sampled beside the update (they are computed here then)."""
        return (self.grpo_config.num_iterations > 1 or self.max_staleness > 0) and self.adapter_versions is None

    def on_fit_start(self) -> None:
        if self.grpo_config.num_generations % self.trainer.world_size:
            raise ValueError(f"num_generations={self.grpo_config.num_generations} must be a multiple of the "
                             f"world size ({self.trainer.world_size}): each rank samples an equal share of a group")
        self._open_pipeline(self.reward_mix, depth=self.max_staleness)
        # Lightning's rollouts/s, tokens/s and MFU (where it knows the device's peak) over the last two steps
        peak = get_available_flops(self.device, next(self.policy_model.parameters()).dtype)
        self.throughput = Throughput(available_flops=peak, world_size=self.trainer.world_size, window_size=2)
        self.throughput_totals = {"time": 0.0, "batches": 0, "samples": 0, "lengths": 0}

    def on_validation_start(self) -> None:
        if self.pipeline is not None:  # a stale run's batches in flight finish first, so validation's timings are its own
            self.pipeline.prefetched.wait()
        self._open_pipeline(self.reward_mix)

    def on_predict_start(self) -> None:  # two turns are scored: the feedback shows the scorer's parts, as in training
        self._open_pipeline(self.reward_mix if self.turns.turns == 2 else None, pixel_density=1.0)  # full-size paintings

    def _open_pipeline(self, rewards: RewardMix | None, depth: int = 0, **overrides) -> None:
        if self.pipeline is None:
            self.pipeline = RolloutPipeline(
                self.sampler, rewards=rewards, render=replace(self.render_config, **overrides),
                pool_size=self.render_pool_size, device=self.device, rank=self.global_rank, depth=depth,
                turns=self.turns, tokenizer=self.tokenizer, processor=self.processor)

    def teardown(self, stage: str) -> None:
        if self.pipeline is not None:  # a batch still in flight finishes first: it renders with the pool
            self.pipeline.close()
            self.pipeline = None
        if self.sampler is not None:  # a vLLM engine's processes end here, not at interpreter exit
            self.sampler.close()
            self.sampler = None

    def configure_optimizers(self):
        return configure_optimizer(self.policy_model, self.optim_config, self.trainer.max_steps)

    # --- checkpoints: the adapter only -----------------------------------------------------------

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["state_dict"] = trainable_state_dict(self)
        checkpoint["rng_states"] = rng_state()  # Lightning keeps loops and optimizers, not generators

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.configure_model()  # `load_from_checkpoint` needs the model before the state dict arrives
        # loading is not strict (the base weights are not in the checkpoint), so a mismatched adapter must fail here
        check_adapter_keys(checkpoint["state_dict"], trainable_state_dict(self))
        # applied at the first resumed batch: creating the dataloader iterator draws from torch's RNG
        self._resumed_rng = checkpoint.get("rng_states")

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        if self._resumed_rng is not None:
            set_rng_state(self._resumed_rng)
            self._resumed_rng = None

    def save_adapter(self, path: str) -> None:
        """The adapter in peft format (adapter_config.json + safetensors), with the tokenizer."""
        self.policy_model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)

    # --- the step -----------------------------------------------------------------------------------

    def training_step(self, prompts: list[Prompt], batch_idx: int) -> dict[str, StepResult]:
        timeline, start = self.pipeline.timeline, self.pipeline.timeline.now()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        batch = self.take_batch(prompts)
        group_rewards = self.gather_groups(batch.rewards, len(prompts))
        advantages, stats = self.advantages(group_rewards, len(prompts))
        with timeline.span("update") as update:
            metrics = self.update(batch, advantages, skip=bool(torch.isnan(group_rewards).all()))
        self.pipeline.wait_sampled()  # the engine takes new weights once the batch it samples is done
        self.sampler.sync_weights(self.policy_model)
        end = timeline.now()
        phases = ["sampling", "render", *(f"score_{t.name}" for t in self.reward_mix.terms), "update"]
        metrics.update(batch.metrics, **stats, **completion_metrics(batch.samples),
                       **busy_idle_metrics(timeline, start, end, phases), **{
                           "time/step_s": end - start, "time/at/update_start_s": update[1],
                           "time/at/update_end_s": update[2]})
        if self.device.type == "cuda":  # the step's high-water mark: sampling, scoring on the same GPU, and the update
            metrics["memory/peak_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        self.log_step(metrics, len(batch.rollouts))
        return {"step": StepResult(batch, batch.scores, batch.rewards, group_rewards, advantages, metrics)}

    def take_batch(self, prompts: list[Prompt]) -> RolloutBatch:
        """This step's batch, scored: the one sampled ahead for these prompts, or one sampled now; then the
        batches `max_staleness` steps ahead are sampled, with the weights before this step's update."""
        n, version = self.grpo_config.num_generations // self.trainer.world_size, self.global_step
        if self.adapter_versions is not None:
            self.adapter_versions.save(version, self.policy_model)  # what this step's batches are sampled with
        job = self.pipeline.take(prompts, n, version, keep_logps=self.num_iterations > 1)
        index = self.global_step // self.num_iterations
        while len(self.pipeline.prefetched) < self.max_staleness:
            ahead = index + 1 + len(self.pipeline.prefetched)
            if 0 < self.trainer.max_steps <= ahead * self.num_iterations:
                break  # past the run's last step
            self.pipeline.prefetch(self.stream_prompts(ahead), n, version, beside=self.adapter_versions is not None)
        if self.adapter_versions is not None:
            self.old_logps(job, version)
        batch = job.result()
        batch.metrics["train/staleness"] = float(version - batch.policy_version)
        return self.counted(batch)

    def old_logps(self, job: Job, version: int) -> None:
        """A batch sampled beside an update: its policy's log-probs (`old_logps`), from one forward of the adapter it
        was sampled with, while it renders and is scored; none on-policy with one optimizer step."""
        job.sampled.wait()
        batch = job.batch
        if batch is None or (batch.policy_version == version and self.num_iterations == 1):
            return
        start = time.perf_counter()
        with self.adapter_versions.applied(batch.policy_version, self.policy_model):
            batch.old_logps = with_policy_logps(self.policy_model, batch.samples, self.sampling_config).logps
        batch.metrics["time/old_logps_s"] = time.perf_counter() - start

    def stream_prompts(self, batch_index: int) -> list[Prompt]:
        datamodule = self.trainer.datamodule
        if not hasattr(datamodule, "train_prompts"):
            raise ValueError("max_staleness > 0 reads later steps' prompts ahead: it needs a data module with "
                             "train_prompts(step), such as lit_watercolour.data.PromptDataModule")
        return datamodule.train_prompts(batch_index)

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

    def update(self, batch: RolloutBatch, advantages: Tensor, skip: bool) -> dict[str, float]:
        """`num_iterations` optimizer steps on the batch; skipped (still counted) when no rollout has a score."""
        world, metrics, t0 = self.trainer.world_size, {}, time.perf_counter()
        # DDP averages the ranks' gradients: the DAPO normaliser is all ranks' tokens / world (TRL)
        world_tokens = (lambda n: self.trainer.strategy.reduce(n, reduce_op="sum") / world) if world > 1 else (lambda n: n)
        for _ in range(self.num_iterations):
            if skip:  # the same on every rank: they step together
                skip_step(self.optimizers(), self.lr_schedulers())
            else:
                metrics.update(policy_update(self.policy_model, batch.samples, advantages, self.grpo_config,
                                             self.sampling_config, self.optim_config, self.optimizers(),
                                             self.lr_schedulers(), self.manual_backward, world_tokens, batch.old_logps))
        samples = batch.samples
        tokens = token_count(samples) * self.num_iterations
        rows, seq_len = samples.completion_ids.shape[0], samples.prompt_ids.shape[1] + samples.completion_ids.shape[1]
        self.flops_per_batch = 0.0 if skip else update_flops(self.policy_model, rows, seq_len) * self.num_iterations
        return {**metrics, **rate("update", t0, tokens, "tokens"), "train/skipped_missing": float(skip)}

    def counted(self, batch: RolloutBatch) -> RolloutBatch:
        """The batch, its rows and tokens noted for `throughput_metrics` (its FLOPs: those of an update on it)."""
        self.step_rows, self.flops_per_batch = len(batch.rollouts), 0.0
        self.step_tokens = token_count(batch.samples)
        return batch

    def throughput_metrics(self, step_s: float) -> dict[str, float]:
        """The step's figures from Lightning's `Throughput`, in the step's own row of the logs (its callback,
        `ThroughputMonitor`, logs them one row early), timed by the steps alone, validation left out."""
        totals = self.throughput_totals
        totals.update(time=totals["time"] + step_s, batches=totals["batches"] + 1,
                      samples=totals["samples"] + self.step_rows, lengths=totals["lengths"] + int(self.step_tokens))
        self.throughput.update(**totals, flops=self.flops_per_batch)
        return {f"train/{k}": v for k, v in self.throughput.compute().items()}

    def log_step(self, metrics: dict[str, float], batch_size: int) -> None:
        metrics.update(self.throughput_metrics(metrics["time/step_s"]))
        shown = ("reward", "gate/pass_rate", "time/step_s")  # on the progress bar
        finite = {k: v for k, v in metrics.items() if not math.isnan(v)}
        self.log_dict({k: v for k, v in finite.items() if k in shown}, prog_bar=True, batch_size=batch_size)
        self.log_dict({k: v for k, v in finite.items() if k not in shown}, batch_size=batch_size)

    # --- evaluation and painting ----------------------------------------------------------------

    def validation_step(self, prompts: list[Prompt], batch_idx: int) -> None:
        """The reward, gate pass rate and each term's mean, over the batch (`val/...`) and per subject
        (`val/<subject>/...`: trained and unseen subjects apart)."""
        batch = self.counted(self.pipeline.collect(prompts, self.grpo_config.num_generations))
        groups = {"": list(range(len(batch.rollouts)))}
        for i, r in enumerate(batch.rollouts):
            groups.setdefault(f"{slug(r.prompt)}/", []).append(i)
        for prefix, rows in groups.items():
            n, index = len(rows), torch.tensor(rows)
            self.log(f"val/{prefix}reward", torch.nanmean(batch.rewards[index]).item(), batch_size=n)
            self.log(f"val/{prefix}gate_pass_rate", sum(batch.rollouts[i].gate.passed for i in rows) / n, batch_size=n)
            for name, s in batch.scores.items():
                self.log(f"val/{prefix}reward/{name}", torch.nanmean(s[index]).item(), batch_size=n)

    def predict_step(self, prompts: list[Prompt], batch_idx: int) -> RolloutBatch:
        """Each subject painted `predict_generations` times (two turns: first sketch, feedback, revision, both scored);
        `PaintingWriter` writes them to `predict_dir`."""
        return self.counted(self.pipeline.collect(prompts, self.predict_generations))


def check_adapter_keys(saved: dict, expected: dict) -> None:
    """Raise, naming them, where a checkpoint's adapter tensors and the policy's differ (another `target_modules`,
    model or adapter): loaded as it is, the policy would paint with part of the adapter or none of it."""
    extra, missing = sorted(set(saved) - set(expected)), sorted(set(expected) - set(saved))
    named = lambda keys: ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")  # noqa: E731
    problems = ([f"{len(extra)} tensors the policy has no parameter for ({named(extra)})"] if extra else []) + (
        [f"no tensor for {len(missing)} of the policy's adapter parameters ({named(missing)})"] if missing else [])
    if problems:
        raise ValueError("the checkpoint's adapter does not match the policy: it holds " + "; and ".join(problems) +
                         ". Load it with the policy settings it was trained with (model.policy: model, target_modules, "
                         "exclude_modules).")


def token_count(samples) -> float:
    """The batch's prompt and completion tokens, padding left out."""
    return float(samples.completion_mask.sum() + samples.prompt_mask.sum())


def as_config(cls, value):
    """A config dataclass from itself, None (the defaults) or a dict (hyper-parameters of a checkpoint)."""
    if value is None:
        return cls()
    return cls(**value) if isinstance(value, dict) else value


def rate(phase: str, t0: float, count: float, unit: str) -> dict[str, float]:
    seconds = time.perf_counter() - t0
    return {f"time/{phase}_s": seconds, f"time/{phase}_{unit}_per_s": count / max(seconds, 1e-9)}
