"""The GRPO LightningModule: sample -> render -> score -> advantages -> clipped policy-gradient update.

Manual optimisation, because one batch of prompts makes one rollout batch that is split into
micro-batches (gradient accumulation) and may be reused for `num_iterations` optimizer steps.
Rendering overlaps sampling: each completion goes to the Chromium pool as soon as it is
decoded. Reward terms are the trainer's `RewardTerm` callbacks.

Failures, and what a step does with them:
- A missing score (NaN: a judge or scorer that failed after its retries, or a render the
  browser failed twice) leaves its rollout out of its group's baseline and gives it advantage
  0 (`grpo.group_advantages`); the share is logged as `frac_reward_missing`. When every
  rollout of the step is missing there is nothing to learn from: the update is skipped.
- A non-finite loss or gradient norm skips the update too, with the gradients dropped.
- A skipped update still counts as a step: global_step and the LR schedule advance, so
  `max_steps`, checkpoints and the prompt stream stay aligned, but no weight or optimizer
  state changes. `train/skipped_missing` and `train/skipped_nonfinite` are 1 on such steps.
- Each finished step appends its rollouts to `rollouts.jsonl` (`lit_watercolour.runlog`) in
  `rollout_log_dir`, by default the logger's root folder beside its version_N folders, after
  its update; a resumed run cuts the file back to the checkpoint's step first, so each step
  it keeps is there exactly once.
- SIGTERM: `AdapterCheckpoint` saves `last.ckpt` at the end of the current step and stops.

Several ranks (Lightning's DDP): every rank reads the same prompts and samples its share of
each group (`num_generations / world_size` rows, drawn with a per-rank seed); rewards are
gathered before advantages, so a group's baseline is the whole group's. Gradients are
averaged by DDP, so the DAPO normaliser is the all-rank token count over the world size (as
TRL). Each rank renders with its own pool; rank 0 writes every rank's rows to the run log.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import lightning.pytorch as pl
import torch
from torch import Tensor

from lit_watercolour import grpo
from lit_watercolour.checkpoint import rng_state, set_rng_state
from lit_watercolour.data import Prompt, group_seed
from lit_watercolour.gate import gate, static_gate
from lit_watercolour.policy import (
    PolicyConfig,
    adapter_in_model_dtype,
    completion_logps,
    load_policy,
    require_bitsandbytes,
    trainable_state_dict,
)
from lit_watercolour.render import ThreadedRenderPool
from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.mix import mix_rewards
from lit_watercolour.rollout import GateResult, RenderResult, Rollout
from lit_watercolour.runlog import ROLLOUTS_FILE, RolloutLog, rollout_records
from lit_watercolour.sampling import SampleBatch, SamplingConfig, build_sampler
from lit_watercolour.sampling_vllm import VLLMConfig
from lit_watercolour.sketch import extract_code


@dataclass
class GRPOConfig:
    num_generations: int = 8  # completions per prompt: one group
    micro_batch_size: int = 1  # rows per forward/backward; the step accumulates over all rows
    num_iterations: int = 1  # optimizer steps per rollout batch (>1 reuses it with old log-probs)
    loss_type: grpo.LossType = "dapo"
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None: epsilon; DAPO's clip-higher uses 0.28
    beta: float = 0.0  # k3 KL to the reference (the adapter switched off)
    use_bias_correction_kl: bool = True  # KL times the importance ratio (TRL 1.16's default)
    scale_rewards: grpo.ScaleRewards = "group"
    mask_truncated_completions: bool = False


@dataclass
class OptimConfig:
    optimizer: Literal["adamw", "adamw_8bit"] = "adamw"
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    lr_scheduler: str = "constant_with_warmup"  # any transformers.get_scheduler name, e.g. "cosine"
    warmup_steps: int = 0
    max_grad_norm: float = 1.0  # 0: no clipping


class GRPOModule(pl.LightningModule):
    def __init__(
        self,
        policy: PolicyConfig | None = None,
        sampling: SamplingConfig | None = None,
        grpo_config: GRPOConfig | None = None,
        optim: OptimConfig | None = None,
        sampler: Literal["hf", "vllm", "vllm-server"] = "hf",
        vllm: VLLMConfig | None = None,  # vllm / vllm-server: GPU share, sleep mode, server URL, adapter folder
        render_pool_size: int = 2,  # warm Chromium pages
        render_kwargs: dict | None = None,  # further ThreadedRenderPool arguments (timeouts, browser path)
        predict_generations: int = 1,  # paintings per subject in `predict`
        predict_dir: str = "paintings",
        cpu_threads: int = 0,  # torch intra-op threads; 0 keeps torch's default. 1 suits tiny models beside Chromium
        rollout_log_dir: str | None = None,  # folder of rollouts.jsonl; None: the logger's root (no logger: no log)
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
        })
        self.num_iterations = self.grpo_config.num_iterations
        self.sampler_backend = sampler
        self.vllm_config = as_config(VLLMConfig, vllm)  # run-time, not part of the trained policy
        self.render_pool_size, self.render_kwargs = render_pool_size, render_kwargs or {}
        self.predict_generations, self.predict_dir = predict_generations, predict_dir
        self.cpu_threads = cpu_threads
        self.rollout_log_dir = rollout_log_dir
        self.rollout_log: RolloutLog | None = None
        self.policy_model = None
        self.tokenizer = None
        self.sampler = None
        self.pool: ThreadedRenderPool | None = None
        self.last_rollouts: list[Rollout] = []  # the latest step's rollouts, for galleries
        self.last_scores: dict[str, Tensor] = {}  # term name -> [N] scores of `last_rollouts`
        self.last_rewards: Tensor | None = None
        self.last_group_rewards: Tensor | None = None  # whole groups, every rank's rows
        self._resumed_rng: dict | None = None

    # --- setup ---------------------------------------------------------------------------------

    def configure_model(self) -> None:
        # Lightning calls this before the dataloaders are built, so the data module can use the tokenizer
        if self.policy_model is None:
            if self.cpu_threads > 0:
                # a tiny model's kernels are too small to split: extra threads only fight the renderer
                torch.set_num_threads(self.cpu_threads)
            self.policy_model, self.tokenizer = load_policy(self.policy_config)
            self.policy_model.train()  # from_pretrained leaves it in eval, where gradient checkpointing is off
        if self.sampler is None:  # built again after a teardown closed it
            self.sampler = build_sampler(
                self.sampler_backend, self.policy_model, self.tokenizer, self.sampling_config, self.vllm_config
            )

    def on_fit_start(self) -> None:
        if self.grpo_config.num_generations % self.trainer.world_size:
            raise ValueError(f"num_generations={self.grpo_config.num_generations} must be a multiple of the "
                             f"world size ({self.trainer.world_size}): each rank samples an equal share of a group")
        self._open_pool()

    def on_train_start(self) -> None:
        # the checkpoint's loop state is restored by now: steps after it will be trained again.
        # The logger's root, not its version folder: a resumed run gets a new version, one log.
        logger = self.trainer.logger
        folder = self.rollout_log_dir or (logger and (getattr(logger, "root_dir", None) or logger.save_dir))
        if folder is None:
            return
        self.rollout_log = RolloutLog(Path(folder) / ROLLOUTS_FILE)
        if self.trainer.is_global_zero:
            self.rollout_log.truncate(self.trainer.global_step)

    def on_validation_start(self) -> None:
        self._open_pool()

    def on_predict_start(self) -> None:
        self._open_pool(pixel_density=1.0)  # paintings at the canvas's full size, whatever training rendered at

    def _open_pool(self, **overrides) -> None:
        if self.pool is None:
            self.pool = ThreadedRenderPool(size=self.render_pool_size, **{**self.render_kwargs, **overrides})

    def teardown(self, stage: str) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        if self.sampler is not None:  # a vLLM engine's processes end here, not at interpreter exit
            self.sampler.close()
            self.sampler = None

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

    # --- one rollout batch ------------------------------------------------------------------------

    def rollout(self, prompts: list[Prompt], n: int) -> tuple[SampleBatch, list[Rollout], dict[str, float]]:
        """Sample n completions per prompt, rendering each as soon as it is decoded; gate them all."""
        # indexed by row: a backend may finish rows in any order
        rollouts: list[Rollout | None] = [None] * (len(prompts) * n)
        futures: dict[int, object] = {}
        static: dict[int, GateResult] = {}

        def on_completion(row: int, text: str) -> None:
            p = prompts[row // n]
            code = extract_code(text)
            rollouts[row] = Rollout(prompt=p.subject, completion=text, group=row // n, seed=p.seed, code=code)
            verdict = static_gate(code, text)
            if verdict is not None:
                static[row] = verdict
            else:
                futures[row] = self.pool.submit(code, p.seed)

        batch = self.sampler.sample([p.text for p in prompts], n, on_completion)
        if None in rollouts:
            missing = [row for row, r in enumerate(rollouts) if r is None]
            raise RuntimeError(f"the sampler reported no completion for rows {missing}")
        t0 = time.perf_counter()
        for row, r in enumerate(rollouts):
            r.num_tokens = int(batch.completion_mask[row].sum())
            if row in static:
                r.gate = static[row]
            else:
                try:
                    r.render = futures[row].result()
                except Exception as e:  # a harness failure is the renderer's, not the sketch's
                    r.render = RenderResult(png=None, error=f"{type(e).__name__}: {e}", infra_error=True)
                r.gate = gate(r.code, r.render)
        wait_s = time.perf_counter() - t0
        renders = [r.render for r in rollouts if r.render is not None]
        tokens = float(batch.num_tokens.sum())
        timing = {
            "time/sampling_s": batch.seconds,
            "time/sampling_tokens_per_s": tokens / max(batch.seconds, 1e-9),
            "time/render_wait_s": wait_s,  # rendering left after sampling finished
            "time/render_mean_s": sum(x.elapsed_s for x in renders) / max(1, len(renders)),
            "time/renders": float(len(renders)),
        }
        return batch, rollouts, timing

    def score(self, rollouts: list[Rollout]) -> tuple[Tensor, dict[str, Tensor], dict[str, float]]:
        """Reward per rollout: the gate term scores all, the others only gate-passed ones (0 otherwise)."""
        terms = [c for c in self.trainer.callbacks if isinstance(c, RewardTerm)]
        if not terms:
            raise RuntimeError("no RewardTerm among trainer.callbacks: configure reward terms as callbacks")
        passed = torch.tensor([r.gate.passed for r in rollouts])
        idx = passed.nonzero().flatten().tolist()
        scores, metrics = {}, {}
        for term in terms:
            t0 = time.perf_counter()
            if term.name == "gate":
                s = term.score(rollouts).float()
            else:
                s = torch.zeros(len(rollouts))
                if idx:
                    s[idx] = term.score([rollouts[i] for i in idx]).float()
            scores[term.name] = s
            metrics[f"time/score_{term.name}_s"] = time.perf_counter() - t0
            metrics.update({f"reward/{term.name}/{k}": float(v) for k, v in term.last_metrics.items()})
        rewards = mix_rewards(scores, {t.name: t.weight for t in terms}, passed)
        # a browser failure says nothing about the sketch: leave it out of the baseline (NaN)
        infra = torch.tensor([r.render is not None and r.render.infra_error for r in rollouts])
        rewards = torch.where(infra, torch.full_like(rewards, math.nan), rewards)
        metrics["gate/pass_rate"] = passed.float().mean().item()
        metrics["render/infra_error_frac"] = infra.float().mean().item()
        return rewards, scores, metrics

    # --- the update --------------------------------------------------------------------------------

    def micro_batches(self, batch: SampleBatch, mask: Tensor):
        """Row slices of `micro_batch_size`, padding columns no row uses trimmed off."""
        size = self.grpo_config.micro_batch_size
        for lo in range(0, mask.shape[0], size):
            sl = slice(lo, lo + size)
            p_keep = batch.prompt_mask[sl].any(0)  # prompts are left-padded
            c_len = max(1, int(batch.completion_mask[sl].sum(1).max()))
            yield sl, p_keep, c_len

    def policy_step(self, batch: SampleBatch, advantages: Tensor) -> dict[str, float]:
        """One optimizer step over the whole rollout batch, accumulating micro-batch gradients."""
        g, c = self.grpo_config, self.sampling_config
        opt, sched = self.optimizers(), self.lr_schedulers()
        mask = batch.completion_mask.float()
        if g.mask_truncated_completions:
            mask = grpo.mask_truncated_completions(mask, batch.truncated)
        accumulation = math.ceil(mask.shape[0] / g.micro_batch_size)
        num_items = mask.sum()
        if self.trainer.world_size > 1:  # DDP averages the ranks' gradients: all tokens / world (TRL)
            num_items = self.trainer.strategy.reduce(num_items, reduce_op="sum") / self.trainer.world_size
        sums: dict[str, float] = {}
        extremes: dict[str, float] = {}
        entropy_sum = tokens = 0.0
        finite = True
        opt.zero_grad()
        for sl, p_keep, c_len in self.micro_batches(batch, mask):
            prompt_ids, prompt_mask = batch.prompt_ids[sl][:, p_keep], batch.prompt_mask[sl][:, p_keep]
            ids, m = batch.completion_ids[sl, :c_len], mask[sl, :c_len]
            args = (prompt_ids, prompt_mask, ids, batch.completion_mask[sl, :c_len], c.temperature, g.micro_batch_size)
            logps, entropy = completion_logps(self.policy_model, *args)
            ref = None
            if g.beta != 0.0:
                with torch.no_grad(), self.policy_model.disable_adapter():
                    ref = completion_logps(self.policy_model, *args)[0]
            # on-policy (num_iterations 1) the ratio is exactly 1, as in TRL; the sampler's own
            # log-probs are the old policy only when the batch is reused
            old = batch.logps[sl, :c_len] if g.num_iterations > 1 else None
            loss, metrics = grpo.grpo_loss(
                logps, advantages[sl].to(logps.device), m.to(logps.device),
                old_logps=old, ref_logps=ref, loss_type=g.loss_type, epsilon=g.epsilon,
                epsilon_high=g.epsilon_high, beta=g.beta, use_bias_correction_kl=g.use_bias_correction_kl,
                num_items_in_batch=num_items,
                max_completion_length=c.max_completion_length, gradient_accumulation_steps=accumulation,
            )
            finite = finite and bool(torch.isfinite(loss))
            with adapter_in_model_dtype(self.policy_model):  # the checkpointed layers recompute in here
                self.manual_backward(loss)
            n_tok = float(m.sum())
            sums["loss"] = sums.get("loss", 0.0) + float(loss.detach())
            # trainer vs sampling-engine log-probs: ~0 for hf; for vLLM, its top-k/top-p renormalisation
            sampled = batch.logps if batch.sampler_logps is None else batch.sampler_logps
            metrics["sampling/logp_diff_mean"] = grpo.masked_mean((logps.detach() - sampled[sl, :c_len]).abs(), m)
            for k, v in metrics.items():
                if torch.isnan(v):
                    continue
                if k.endswith("_min") or k.endswith("_max"):  # per-sequence extremes stay extremes
                    pick = min if k.endswith("_min") else max
                    extremes[k] = pick(extremes.get(k, float(v)), float(v))
                else:
                    sums[k] = sums.get(k, 0.0) + float(v) * n_tok  # token-weighted over micro-batches
            entropy_sum += float((entropy.detach() * m).sum())
            tokens += n_tok
        params = [p for p in self.policy_model.parameters() if p.requires_grad]
        grads = [p.grad for p in params if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
        finite = finite and bool(torch.isfinite(grad_norm))
        if finite and self.optim_config.max_grad_norm > 0:
            # plain torch clipping: weights are already in policy.dtype, no loss scaler (no "16-mixed")
            torch.nn.utils.clip_grads_with_norm_(params, self.optim_config.max_grad_norm, grad_norm)
        sums["grad_norm"] = float(grad_norm)
        lr = sched.get_last_lr()[0]  # the rate this step uses
        if finite:
            opt.step()
            sched.step()
        else:
            self.skip_step()
        out = {k: v / max(tokens, 1.0) if "/" in k or k == "kl" else v for k, v in sums.items()}
        out.update(extremes, entropy=entropy_sum / max(tokens, 1.0), lr=lr)
        out["train/skipped_nonfinite"] = float(not finite)
        return out

    def skip_step(self) -> None:
        """Count a step without learning: gradients dropped, so the optimizer leaves every
        parameter and its state alone, while global_step and the LR schedule advance."""
        opt, sched = self.optimizers(), self.lr_schedulers()
        opt.zero_grad(set_to_none=True)  # torch (and bitsandbytes) optimizers skip params without .grad
        opt.step()
        sched.step()

    def gather_groups(self, rows: Tensor, num_groups: int) -> Tensor:
        """This rank's [P*k] rows -> every rank's, as [P*G] whole groups (the identity on one rank)."""
        if self.trainer.world_size == 1:
            return rows
        return grpo.groups_from_ranks(self.all_gather(rows).cpu(), num_groups)

    def training_step(self, prompts: list[Prompt], batch_idx: int) -> None:
        g = self.grpo_config
        world, rank = self.trainer.world_size, self.global_rank
        step_start = time.perf_counter()
        on_cuda = self.device.type == "cuda"
        if on_cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        if world > 1:  # each rank draws different rows of the same groups (seeded by the step's prompt)
            torch.manual_seed(group_seed(prompts[0].seed, rank))
        batch, rollouts, metrics = self.rollout(prompts, g.num_generations // world)
        t0 = time.perf_counter()
        rewards, scores, score_metrics = self.score(rollouts)
        metrics.update(score_metrics)
        metrics["time/scoring_s"] = time.perf_counter() - t0
        metrics["time/scoring_rollouts_per_s"] = len(rollouts) / max(metrics["time/scoring_s"], 1e-9)
        group_rewards = self.gather_groups(rewards, len(prompts))
        all_advantages, stats = grpo.group_advantages(group_rewards, g.num_generations, g.scale_rewards)
        advantages = grpo.rows_of_rank(all_advantages, len(prompts), world, rank) if world > 1 else all_advantages
        self.last_group_rewards = group_rewards
        metrics.update({k: float(v) for k, v in stats.items()})
        metrics.update({"advantage/mean": advantages.mean().item(), "advantage/std": advantages.std().item(),
                        "advantage/abs_max": advantages.abs().max().item()})
        lengths = batch.num_tokens.float()
        metrics.update({"completions/mean_length": lengths.mean().item(), "completions/max_length": lengths.max().item(),
                        "completions/clipped_ratio": batch.truncated.float().mean().item()})
        t0 = time.perf_counter()
        all_missing = bool(torch.isnan(group_rewards).all())  # the same on every rank: they step together
        metrics["train/skipped_missing"] = float(all_missing)
        for _ in range(g.num_iterations):
            if all_missing:  # no score at all: nothing to learn from this batch
                self.skip_step()
            else:
                metrics.update(self.policy_step(batch, advantages))
        update_s = time.perf_counter() - t0
        trained_tokens = float(batch.completion_mask.sum() + batch.prompt_mask.sum()) * g.num_iterations
        metrics.update({"time/update_s": update_s, "time/update_tokens_per_s": trained_tokens / max(update_s, 1e-9),
                        "time/step_s": time.perf_counter() - step_start})
        if on_cuda:  # the step's high-water mark: sampling, scoring on the same GPU, and the update
            metrics["memory/peak_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        self.sampler.sync_weights(self.policy_model)
        self.last_rollouts, self.last_scores, self.last_rewards = rollouts, scores, rewards
        if self.rollout_log is not None:
            records = rollout_records(self.trainer.global_step, rollouts, scores, rewards, advantages)
            if world > 1:
                for r in records:
                    r["rank"] = rank  # "row" is the row on its rank
                parts = [None] * world
                torch.distributed.all_gather_object(parts, records)
                records = [r for part in parts for r in part]
            if self.trainer.is_global_zero:
                self.rollout_log.append(records)
        shown = {k: metrics.pop(k) for k in ("reward", "gate/pass_rate", "time/step_s")}  # on the progress bar
        self.log_dict({k: v for k, v in shown.items() if not math.isnan(v)}, prog_bar=True, batch_size=len(rollouts))
        self.log_dict({k: v for k, v in metrics.items() if not math.isnan(v)}, batch_size=len(rollouts))

    # --- evaluation and painting ----------------------------------------------------------------

    def validation_step(self, prompts: list[Prompt], batch_idx: int) -> None:
        _, rollouts, _ = self.rollout(prompts, self.grpo_config.num_generations)
        rewards, scores, _ = self.score(rollouts)
        n = len(rollouts)
        self.log("val/reward", torch.nanmean(rewards).item(), batch_size=n)
        self.log("val/gate_pass_rate", float(sum(r.gate.passed for r in rollouts)) / n, batch_size=n)
        for name, s in scores.items():
            self.log(f"val/reward/{name}", torch.nanmean(s).item(), batch_size=n)

    def predict_step(self, prompts: list[Prompt], batch_idx: int) -> list[str]:
        """Paint each subject `predict_generations` times into predict_dir as .js, .png and .txt (raw)."""
        _, rollouts, _ = self.rollout(prompts, self.predict_generations)
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


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "painting"
