"""The GRPO math: group-relative advantages and the clipped surrogate (the log-probs it takes come from
`lit_watercolour.kernels.lm_head`).

Plain torch functions, no Lightning, no I/O. Each one reproduces the corresponding piece of
TRL 1.16's `GRPOTrainer` (`trl/trainer/grpo_trainer.py`) and is tested against TRL's own code
in `tests/test_grpo.py`, so a run here and a TRL run of the recipe optimise the same objective.

Shapes: N rollouts (one optimizer step's generation batch), B rows of a micro-batch, T
completion tokens (right-padded), V vocabulary.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

ScaleRewards = Literal["group", "batch", "none"]
LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo"]

STD_EPS = 1e-4  # TRL adds this to the std before dividing


# --- advantages -------------------------------------------------------------------------------


def nanstd(x: Tensor, dim: int | None = None) -> Tensor:
    """Bessel-corrected std ignoring NaNs; NaN where fewer than two values remain (as TRL's)."""
    if dim is None:
        x, dim = x.reshape(-1), 0
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim)
    count = (~torch.isnan(x)).sum(dim=dim)
    return (var * torch.where(count > 1, count / (count - 1), torch.nan)).sqrt()


def group_advantages(
    rewards: Tensor, num_generations: int, scale_rewards: ScaleRewards = "group"
) -> tuple[Tensor, dict[str, Tensor]]:
    """Group-relative advantages of `rewards` [N], rows i*G .. i*G+G-1 forming group i (G = `num_generations`).

    A_i = R_i - mean_group(R), then divided by (std + 1e-4) where std is the group's
    (`"group"`) or the whole batch's (`"batch"`); `"none"` does not divide (Dr. GRPO; the
    recipe's setting). Means and stds are NaN-aware, stds Bessel-corrected (n - 1): TRL's
    `sum_then_normalize` path exactly.

    Missing scores: a NaN reward (a judge that failed after its retries) is left out of its
    group's mean and std and of the batch std, and its rollout gets advantage 0, so it moves
    the policy neither way. A group left with a single valid reward has std NaN and gives
    advantage 0 to all its rows. This is TRL's rule for a completion all of whose reward
    functions returned None. Fold any partial failure into NaN (or a number) before calling.

    Returns (advantages [N], stats) with 0-dim tensors, named as TRL logs them:
      reward, reward_std: NaN-aware mean and Bessel std of the batch's rewards;
      frac_reward_zero_std: share of rollouts whose group has zero reward std (such groups
        give no gradient). Under "batch" TRL reports whether the batch std is zero instead;
        here it is always the per-group figure, which is the one that diagnoses dead groups;
      frac_reward_missing: share of NaN rewards.
    """
    if rewards.ndim != 1 or rewards.numel() % num_generations:
        raise ValueError(f"rewards must be [N] with N a multiple of num_generations={num_generations}")
    grouped = rewards.view(-1, num_generations)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
    if num_generations > 1:
        group_std = nanstd(grouped, dim=1).repeat_interleave(num_generations)
    else:
        group_std = torch.zeros_like(rewards)
    advantages = rewards - mean
    if scale_rewards == "group":
        advantages = advantages / (group_std + STD_EPS)
    elif scale_rewards == "batch":
        batch_std = nanstd(rewards) if rewards.numel() > 1 else rewards.new_zeros(())
        advantages = advantages / (batch_std + STD_EPS)
    elif scale_rewards != "none":
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', not {scale_rewards!r}")
    stats = {
        "reward": torch.nanmean(rewards),
        "reward_std": nanstd(rewards),
        "frac_reward_zero_std": torch.isclose(group_std, torch.zeros_like(group_std)).float().mean(),
        "frac_reward_missing": torch.isnan(rewards).float().mean(),
    }
    return torch.nan_to_num(advantages, nan=0.0), stats


# --- groups spread over ranks --------------------------------------------------------------------
# Under DDP every rank sees the same prompts and samples a share of each group: rank r holds
# generations r*k .. r*k+k-1 of every group (k = G / world), so advantages need the gathered group.


def groups_from_ranks(gathered: Tensor, num_groups: int) -> Tensor:
    """[world, P*k] rows per rank (group-major on each) -> [P*G] rows group-major, G = world*k."""
    world = gathered.shape[0]
    return gathered.view(world, num_groups, -1).transpose(0, 1).reshape(-1)


def rows_of_rank(rows: Tensor, num_groups: int, world: int, rank: int) -> Tensor:
    """The inverse for one rank: [P*G] group-major -> that rank's [P*k] share."""
    return rows.view(num_groups, world, -1)[:, rank].reshape(-1)


# --- the loss ---------------------------------------------------------------------------------


def mask_truncated_completions(completion_mask: Tensor, truncated: Tensor) -> Tensor:
    """Zero the mask rows of completions that did not end in an end-of-turn token (`truncated` [B] bool).

    TRL's `mask_truncated_completions`: a cut-off sketch is then no evidence either way. Apply
    it before counting `num_items_in_batch`, so the removed tokens leave the DAPO normaliser too.
    """
    return completion_mask * (~truncated.bool()).unsqueeze(1).to(completion_mask.dtype)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of x over the tokens where mask is set (0 if none): TRL's token-weighted metric mean."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def truncated_importance_weights(old_logps: Tensor, sampler_logps: Tensor, cap: float) -> Tensor:
    """TRL 1.16's `vllm_importance_sampling_correction` ("token_truncate"): per token
    min(exp(old_logps - sampler_logps), cap), the weight of a token drawn from the sampling engine's
    distribution in a loss whose ratio denominator is `old_logps`; truncation bounds its variance."""
    return torch.exp(old_logps - sampler_logps).clamp(max=cap)


def importance_weight_stats(weights: Tensor, mask: Tensor, cap: float) -> dict[str, Tensor]:
    """mean / min / max of the weights over masked-in tokens, and the share truncated at `cap`."""
    on = mask > 0
    return {
        "is_weight/mean": masked_mean(weights, mask),
        "is_weight/min": _nan_extreme(torch.where(on, weights, float("nan")), torch.min),
        "is_weight/max": _nan_extreme(torch.where(on, weights, float("nan")), torch.max),
        "is_weight/truncated_frac": masked_mean((weights >= cap).to(mask.dtype), mask),
    }


def grpo_loss(
    logps: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    old_logps: Tensor | None = None,
    importance_weights: Tensor | None = None,
    ref_logps: Tensor | None = None,
    loss_type: LossType = "dapo",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    beta: float = 0.0,
    use_bias_correction_kl: bool = True,
    num_items_in_batch: Tensor | float | None = None,
    max_completion_length: int | None = None,
    gradient_accumulation_steps: int = 1,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The token-level clipped GRPO loss of one micro-batch, exactly as TRL 1.16's `_compute_loss`.

    Inputs, B rows by T completion tokens:
      logps [B, T]: log-probs of the completion tokens under the policy being trained (with grad).
      advantages [B]: from `group_advantages`, sliced to this micro-batch.
      mask [B, T]: 1 on completion tokens that count (after `mask_truncated_completions`).
      old_logps [B, T]: log-probs of the policy that sampled the tokens, the importance-ratio
        denominator; needed when the batch is reused (num_iterations > 1) or the sampler lags.
        None means on-policy: logps.detach() is used, the ratio is 1 and only its gradient acts.
      importance_weights [B, T]: `truncated_importance_weights`, multiplying the clipped term (not
        the KL), as TRL applies its `importance_sampling_ratio`; None: 1.
      ref_logps [B, T]: reference-policy log-probs, required when beta > 0.

    Per token, with r = exp(logps - old_logps):
      l = -min(r * A, clip(r, 1 - epsilon, 1 + epsilon_high) * A) + beta * KL,
      KL = exp(ref - logps) - (ref - logps) - 1  (the k3 estimator; unbiased, always >= 0),
      times r when use_bias_correction_kl (TRL 1.16's default, DeepSeek-V3.2): r is 1 on-policy
      but differentiable, which makes the KL gradient the unbiased reverse-KL gradient.
    epsilon_high=None means epsilon (DAPO's clip-higher uses 0.28).

    Normalisation, with S_i = sum_t mask*l of row i and M = the mask; GA = gradient_accumulation_steps:
      "grpo":    mean_i(S_i / max(1, sum_t M_i)) / GA   (each sequence weighs the same)
      "bnpo":    sum_i S_i / max(1, sum M) / GA          (token mean of this micro-batch)
      "dr_grpo": sum_i S_i / (B * max_completion_length) / GA
      "dapo":    sum_i S_i / max(1, num_items_in_batch)  (token mean of the whole step; no GA)

    Gradient accumulation: the returned loss is TRL's per-micro-batch loss, already scaled, so
    backward() on each of the GA micro-batches of one optimizer step, summing gradients, gives
    TRL's step. Do not divide it again: Lightning's automatic optimization with
    `accumulate_grad_batches=k` divides the training_step loss by k itself, so either use manual
    optimization or hand this function gradient_accumulation_steps=1 and, for "dapo",
    num_items_in_batch divided by k. For "dapo", num_items_in_batch is the number of mask tokens
    in all micro-batches of this optimizer step; under DDP (which averages gradients) pass the
    all-process total divided by the world size. TRL's value is inputs["num_items_in_batch"] /
    num_processes * GA / steps_per_generation (equal to the step's tokens when steps_per_generation
    == GA, TRL's default). For evaluation pass GA = 1 and the evaluated batch's own token count.

    Returns (loss, metrics): metrics are detached 0-dim tensors of this micro-batch, named as
    TRL logs them: "clip_ratio/low_mean" (share of tokens with r < 1 - epsilon and A < 0),
    "clip_ratio/high_mean" (r > 1 + epsilon_high and A > 0), "clip_ratio/region_mean" (either),
    "clip_ratio/low_min" and "clip_ratio/high_max" (the extreme per-sequence shares),
    "ratio/mean" (mean r over tokens), "ratio/min" / "ratio/max" (its extremes; not TRL's) and,
    when beta > 0, "kl" (mean KL over tokens, r-weighted under use_bias_correction_kl, as TRL logs it).
    """
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    mask = mask.to(logps.dtype)
    if advantages.ndim == 1:
        advantages = advantages.unsqueeze(1)
    old_logps = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)
    per_token = -torch.min(ratio * advantages, clipped * advantages)
    if importance_weights is not None:
        per_token = per_token * importance_weights
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs ref_logps")
        delta = ref_logps - logps
        kl = torch.exp(delta) - delta - 1
        if use_bias_correction_kl:
            kl = kl * ratio
        per_token = per_token + beta * kl

    total = (per_token * mask).sum()
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / gradient_accumulation_steps
    elif loss_type == "bnpo":
        loss = total / mask.sum().clamp(min=1.0) / gradient_accumulation_steps
    elif loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("loss_type='dr_grpo' needs max_completion_length")
        loss = total / (per_token.shape[0] * max_completion_length) / gradient_accumulation_steps
    elif loss_type == "dapo":
        if num_items_in_batch is None:
            raise ValueError("loss_type='dapo' needs num_items_in_batch, the mask tokens of the whole step")
        loss = total / torch.as_tensor(num_items_in_batch, dtype=total.dtype, device=total.device).clamp(min=1.0)
    else:
        raise ValueError(f"loss_type must be 'grpo', 'bnpo', 'dr_grpo' or 'dapo', not {loss_type!r}")

    with torch.no_grad():
        low = ((ratio < 1 - epsilon) & (advantages < 0)).to(mask.dtype)
        high = ((ratio > 1 + epsilon_high) & (advantages > 0)).to(mask.dtype)
        row_tokens = mask.sum(-1)  # a fully masked row gives NaN and is skipped, as in TRL
        metrics = {
            "clip_ratio/low_mean": masked_mean(low, mask),
            "clip_ratio/high_mean": masked_mean(high, mask),
            "clip_ratio/region_mean": masked_mean(torch.maximum(low, high), mask),
            "clip_ratio/low_min": _nan_extreme((low * mask).sum(-1) / row_tokens, torch.min),
            "clip_ratio/high_max": _nan_extreme((high * mask).sum(-1) / row_tokens, torch.max),
            "ratio/mean": masked_mean(ratio, mask),
            "ratio/min": _nan_extreme(torch.where(mask > 0, ratio, float("nan")), torch.min),
            "ratio/max": _nan_extreme(torch.where(mask > 0, ratio, float("nan")), torch.max),
        }
        if beta != 0.0:
            metrics["kl"] = masked_mean(kl, mask)
    return loss, metrics


def _nan_extreme(x: Tensor, reduce) -> Tensor:
    """min/max over the non-NaN entries of x; NaN when there are none. No host sync (boolean indexing would wait for the GPU)."""
    nan = torch.isnan(x)
    fill = float("inf") if reduce is torch.min else float("-inf")
    return torch.where(nan.all(), float("nan"), reduce(torch.where(nan, fill, x)))
