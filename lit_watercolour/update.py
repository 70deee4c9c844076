"""The update of one GRPO step: the clipped policy-gradient loss over micro-batches of the rollout
batch (gradient accumulation), one clipped optimizer step, or a skipped one.

Plain torch: the module hands in its optimizer, scheduler and backward (Lightning's, which
knows DDP and precision). A non-finite loss or gradient norm skips the step with the
gradients dropped; a skipped step still advances the optimizer's step count and the LR schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor
from torchmetrics.aggregation import MaxMetric, MeanMetric, MinMetric, SumMetric

from lit_watercolour import grpo
from lit_watercolour.bounds import one_of, require
from lit_watercolour.kernels.compile import compile_seconds
from lit_watercolour.policy import adapter_in_model_dtype, completion_logps, require_bitsandbytes
from lit_watercolour.sampling import SampleBatch, SamplingConfig


@dataclass
class GRPOConfig:
    num_generations: int = 8
    """Completions per prompt: one group."""
    micro_batch_size: int | None = None
    """Rows per forward/backward; the step accumulates over all rows. None: the measured best for the
    policy's family and device (`lit_watercolour.kernels.defaults`), resolved and logged as the run starts."""
    num_iterations: int = 1
    """Optimizer steps per rollout batch (>1 reuses it with old log-probs)."""
    loss_type: grpo.LossType = "dapo"
    """The loss's normalisation (`grpo.grpo_loss`)."""
    epsilon: float = 0.2
    """The ratio's clip below (and above, unless `epsilon_high`)."""
    epsilon_high: float | None = None
    """The ratio's clip above; None: epsilon (DAPO's clip-higher uses 0.28)."""
    beta: float = 0.0
    """Weight of the k3 KL to the reference (the adapter switched off)."""
    use_bias_correction_kl: bool = True
    """KL times the importance ratio (TRL 1.16's default)."""
    scale_rewards: grpo.ScaleRewards = "group"
    """Divide advantages by the group's std, the batch's, or nothing."""
    mask_truncated_completions: bool = False
    """Leave completions that hit the length limit out of the loss."""
    importance_sampling_cap: float | None = None
    """Truncated importance sampling (TRL's vllm_importance_sampling_cap; 2.0 there): where a sampling engine
    reported its own log-probs (vLLM), each token's loss is weighted by min(p_old / p_engine, cap); None: off."""

    def __post_init__(self) -> None:
        o = "model.grpo."
        require(self.num_generations >= 2, o + "num_generations", "at least 2 (a group of one has no advantage)",
                self.num_generations)
        require(self.micro_batch_size is None or self.micro_batch_size >= 1, o + "micro_batch_size", "None or >= 1",
                self.micro_batch_size)
        require(self.num_iterations >= 1, o + "num_iterations", ">= 1", self.num_iterations)
        one_of(self.loss_type, grpo.LossType, o + "loss_type")
        require(self.epsilon > 0, o + "epsilon", "> 0 (the ratio's clip range)", self.epsilon)
        require(self.epsilon_high is None or self.epsilon_high > 0, o + "epsilon_high", "None or > 0", self.epsilon_high)
        require(self.beta >= 0, o + "beta", ">= 0", self.beta)
        one_of(self.scale_rewards, grpo.ScaleRewards, o + "scale_rewards")
        require(self.importance_sampling_cap is None or self.importance_sampling_cap > 0, o + "importance_sampling_cap",
                "None or > 0", self.importance_sampling_cap)


@dataclass
class OptimConfig:
    optimizer: Literal["adamw", "adamw_8bit"] = "adamw"
    """"adamw": torch's (fused on CUDA); "adamw_8bit": bitsandbytes' AdamW8bit, its moments in 8 bits (the
    `bnb` extra). A LoRA adapter's optimizer state is small, so 8 bits saves little there."""
    lr: float = 1e-5
    """Learning rate of the LoRA adapter."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    eps: float = 1e-8
    """AdamW epsilon."""
    lr_scheduler: str = "constant_with_warmup"
    """A transformers.get_scheduler name, e.g. constant_with_warmup or cosine."""
    warmup_steps: int = 0
    """Optimizer steps of linear warm-up."""
    max_grad_norm: float = 1.0
    """Clip the gradient norm to this; 0: no clipping."""

    def __post_init__(self) -> None:
        o = "model.optim."
        one_of(self.optimizer, ("adamw", "adamw_8bit"), o + "optimizer")
        require(self.lr > 0, o + "lr", "> 0", self.lr)
        require(self.weight_decay >= 0, o + "weight_decay", ">= 0", self.weight_decay)
        require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), o + "betas", "two values in [0, 1)",
                self.betas)
        require(self.eps > 0, o + "eps", "> 0", self.eps)
        require(self.warmup_steps >= 0, o + "warmup_steps", ">= 0", self.warmup_steps)
        require(self.max_grad_norm >= 0, o + "max_grad_norm", ">= 0 (0: no clipping)", self.max_grad_norm)


@dataclass
class ThreadsConfig:
    """torch's intra-op threads, per phase."""

    update: int = 0
    """Threads for the update and everything but decoding; 0 keeps torch's default. On a CPU, tiny models
    beside Chromium want 1-2."""
    sampling: int = 0
    """Threads while the hf sampler decodes; 0: as `update`. On a CPU the render pool's Chromium works
    meanwhile, and a tiny model's kernels gain nothing from a second thread."""

    def __post_init__(self) -> None:
        require(self.update >= 0, "model.threads.update", ">= 0 (0: torch's default)", self.update)
        require(self.sampling >= 0, "model.threads.sampling", ">= 0 (0: as update)", self.sampling)


# How each figure of the update combines over micro-batches. Rank-local, as the rest of the step's log.
AGGREGATORS = {"sum": SumMetric, "token_mean": MeanMetric, "min": MinMetric, "max": MaxMetric}
UPDATE_METRICS = {
    "loss": "sum",  # each micro-batch's loss is its share of the step's
    "entropy": "token_mean", "kl": "token_mean", "ratio/mean": "token_mean", "ratio/min": "min", "ratio/max": "max",
    "clip_ratio/low_mean": "token_mean", "clip_ratio/high_mean": "token_mean", "clip_ratio/region_mean": "token_mean",
    "clip_ratio/low_min": "min", "clip_ratio/high_max": "max",  # per-sequence extremes stay extremes
    "sampling/logp_diff_mean": "token_mean",
    "is_weight/mean": "token_mean", "is_weight/truncated_frac": "token_mean",
    "is_weight/min": "min", "is_weight/max": "max",
}


def configure_optimizer(model: torch.nn.Module, o: OptimConfig, max_steps: int) -> dict:
    """Lightning's optimizer and per-step LR schedule for `model`'s trainable parameters (`max_steps` <= 0: a
    schedule with no end)."""
    from transformers import get_scheduler

    params = [p for p in model.parameters() if p.requires_grad]
    kwargs = dict(lr=o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas), eps=o.eps)
    if o.optimizer == "adamw_8bit":
        require_bitsandbytes("optimizer='adamw_8bit'")
        import bitsandbytes as bnb

        optimizer = bnb.optim.AdamW8bit(params, **kwargs)
    else:  # fused: one kernel for all trainable tensors (Lightning has moved them to the device by now)
        optimizer = torch.optim.AdamW(params, fused=bool(params) and params[0].is_cuda, **kwargs)
    total = max_steps if max_steps > 0 else None
    scheduler = get_scheduler(o.lr_scheduler, optimizer, num_warmup_steps=o.warmup_steps, num_training_steps=total)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def micro_batches(samples: SampleBatch, size: int):
    """Row slices of `size`, with the prompt columns they use and their longest completion."""
    for lo in range(0, samples.completion_mask.shape[0], size):
        sl = slice(lo, lo + size)
        p_keep = samples.prompt_mask[sl].any(0)  # prompts are left-padded
        c_len = max(1, int(samples.completion_mask[sl].sum(1).max()))
        yield sl, p_keep, c_len


def policy_update(model, samples: SampleBatch, advantages: Tensor, g: GRPOConfig, c: SamplingConfig,
                  optim: OptimConfig, optimizer, scheduler, backward: Callable[[Tensor], None],
                  world_tokens: Callable[[Tensor], Tensor] = lambda n: n, old_logps: Tensor | None = None) -> dict[str, float]:
    """One optimizer step over the whole rollout batch. `world_tokens`: this rank's token count ->
    the DAPO normaliser (under DDP, all ranks' tokens / world size, as TRL). `old_logps` [N, T]: the
    sampling policy's log-probs, the ratio's denominator, where the batch is reused or an older policy
    sampled it (`RolloutBatch.old_logps`); None on-policy."""
    mask = samples.policy_mask.float()  # a two-turn trajectory's feedback is attended, not learned
    if g.mask_truncated_completions:
        mask = grpo.mask_truncated_completions(mask, samples.truncated)
    mb = g.micro_batch_size
    if mb is None:
        raise ValueError("grpo.micro_batch_size is None: resolve it first (policy.update_defaults), as GRPOModule does")
    compiled_before = compile_seconds()
    accumulation = math.ceil(mask.shape[0] / mb)
    num_items = world_tokens(mask.sum())
    # Dr. GRPO's constant: the most tokens the policy may write in a row (a two-turn trajectory: two completions)
    most_tokens = c.max_completion_length * (1 if samples.sampled_mask is None else 2)
    metrics = {k: AGGREGATORS[kind](nan_strategy="ignore", sync_on_compute=False) for k, kind in UPDATE_METRICS.items()}
    finite = True
    optimizer.zero_grad()
    for sl, p_keep, c_len in micro_batches(samples, mb):
        ids, m = samples.completion_ids[sl, :c_len], mask[sl, :c_len]
        args = (samples.prompt_ids[sl][:, p_keep], samples.prompt_mask[sl][:, p_keep], ids,
                samples.completion_mask[sl, :c_len], c.temperature, mb)
        shown = {"images": samples.images[sl]} if samples.images else {}  # a render fed back (two turns)
        logps, entropy = completion_logps(model, *args, **shown)
        ref = None
        if g.beta != 0.0:
            with torch.no_grad(), model.disable_adapter():
                ref = completion_logps(model, *args, **shown)[0]
        # on-policy the ratio is exactly 1, as in TRL
        old = old_logps[sl, :c_len] if old_logps is not None else None
        m = m.to(logps.device)
        weights = None
        if g.importance_sampling_cap is not None and samples.sampler_logps is not None:
            weights = grpo.truncated_importance_weights((logps.detach() if old is None else old),
                                                        samples.sampler_logps[sl, :c_len], g.importance_sampling_cap)
        loss, step = grpo.grpo_loss(
            logps, advantages[sl].to(logps.device), m, old_logps=old, importance_weights=weights, ref_logps=ref,
            loss_type=g.loss_type,
            epsilon=g.epsilon, epsilon_high=g.epsilon_high, beta=g.beta, use_bias_correction_kl=g.use_bias_correction_kl,
            num_items_in_batch=num_items, max_completion_length=most_tokens,
            gradient_accumulation_steps=accumulation,
        )
        finite = finite and bool(torch.isfinite(loss))
        with adapter_in_model_dtype(model):  # the checkpointed layers recompute in here
            backward(loss)
        step.update(loss=loss.detach(), entropy=grpo.masked_mean(entropy.detach(), m))
        if weights is not None:
            step.update(grpo.importance_weight_stats(weights, m, g.importance_sampling_cap))
        sampled = samples.logps if samples.sampler_logps is None else samples.sampler_logps
        if sampled is not None:  # trainer vs sampling-engine log-probs: ~0 for hf; vLLM renormalises top-k/top-p
            step["sampling/logp_diff_mean"] = grpo.masked_mean((logps.detach() - sampled[sl, :c_len]).abs(), m)
        for k, v in step.items():
            weight = {"weight": float(m.sum())} if UPDATE_METRICS[k] == "token_mean" else {}
            metrics[k].update(v.float().cpu(), **weight)
    out = {k: float(metric.compute()) for k, metric in metrics.items() if metric.update_called}
    out = {k: v for k, v in out.items() if not (UPDATE_METRICS[k] in ("min", "max") and math.isinf(v))}  # all NaN
    out["time/compile_s"] = compile_seconds() - compiled_before  # a compiled policy's warm-up: its first steps
    return {**out, **optimizer_step(model, optimizer, scheduler, optim.max_grad_norm, finite)}


def optimizer_step(model, optimizer, scheduler, max_grad_norm: float, finite: bool) -> dict[str, float]:
    """Clip the accumulated gradients and step, unless the loss or the gradient norm is not finite."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [p.grad for p in params if p.grad is not None]
    grad_norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
    finite = finite and bool(torch.isfinite(grad_norm))
    if finite and max_grad_norm > 0:
        # plain torch clipping: weights are already in policy.dtype, no loss scaler (no "16-mixed")
        torch.nn.utils.clip_grads_with_norm_(params, max_grad_norm, grad_norm)
    lr = scheduler.get_last_lr()[0]  # the rate this step uses
    if finite:
        optimizer.step()
        scheduler.step()
    else:
        skip_step(optimizer, scheduler)
    return {"grad_norm": float(grad_norm), "lr": lr, "train/skipped_nonfinite": float(not finite)}


def skip_step(optimizer, scheduler) -> None:
    """Count a step without learning: gradients dropped, so the optimizer leaves every
    parameter and its state alone, while the step count and the LR schedule advance."""
    optimizer.zero_grad(set_to_none=True)  # torch (and bitsandbytes) optimizers skip params without .grad
    optimizer.step()
    scheduler.step()
