"""Frozen MoE experts as one autograd node: grouped matmuls over expert-sorted rows.

LoRA leaves the experts' 3-D weights frozen, so backward needs only the gradients of the tokens'
hidden states and of the routing weights. transformers' `grouped_mm` experts path records every
step (the gather, three sentinel masks kept for expert parallelism, the activation, the weighting,
the un-permute) as its own autograd node, and its gathers scatter back with atomics. Here forward
keeps only the expert-sorted gate/up rows; backward reads them once, gets the routing weights'
gradient from the down projection's input side (<g, a D^T> = <g D, a>, so the [pairs, hidden]
output is not kept), and sums each token's k rows with a reshape instead of a scatter-add.
SiLU-gated experts only (the Qwen MoE families); others run transformers' grouped_mm. Registered with
transformers as the experts implementation "frozen_grouped_mm".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NAME = "frozen_grouped_mm"


def _route(top_k_index: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(order, rank, offsets): the (token, slot) pairs sorted by expert, each pair's row in that order
    (the inverse permutation), and each expert's end row."""
    expert_ids = top_k_index.reshape(-1)
    order = expert_ids.argsort(stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device)
    # histc, not bincount: no host sync (CUDA graphs); CPU histc takes floats only
    ids = expert_ids.float() if expert_ids.device.type == "cpu" else expert_ids.int()
    offsets = torch.histc(ids, bins=num_experts, min=0, max=num_experts - 1).cumsum(0, dtype=torch.int32)
    return order, rank, offsets


def _unsort_sum(rows: torch.Tensor, rank: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """[pairs, d] rows in expert order -> [tokens, d], each token's k rows summed (deterministic: no atomics).
    A gather through the inverse permutation: coalesced writes, where a scatter through `order` is not."""
    return rows.index_select(0, rank).view(num_tokens, -1, rows.shape[-1]).sum(1)


class _FrozenExperts(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, top_k_index, top_k_weights, gate_up_proj, down_proj):
        num_tokens, k = top_k_index.shape
        order, rank, offsets = _route(top_k_index, gate_up_proj.shape[0])
        gate_up = F.grouped_mm(hidden[order // k].to(gate_up_proj.dtype), gate_up_proj.transpose(-2, -1), offs=offsets)
        gate, up = gate_up.chunk(2, dim=-1)
        weights = top_k_weights.reshape(-1)[order].to(gate_up.dtype)
        down = F.grouped_mm(F.silu(gate) * up, down_proj.transpose(-2, -1), offs=offsets)
        ctx.save_for_backward(gate_up, order, rank, offsets, weights, gate_up_proj, down_proj)
        ctx.k, ctx.hidden_dtype, ctx.weights_dtype = k, hidden.dtype, top_k_weights.dtype
        return _unsort_sum(down.mul_(weights[:, None]), rank, num_tokens).to(hidden.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        gate_up, order, rank, offsets, weights, gate_up_proj, down_proj = ctx.saved_tensors
        num_tokens = grad_out.shape[0]
        grad_act = F.grouped_mm(grad_out.to(gate_up.dtype)[order // ctx.k], down_proj, offs=offsets)  # before the weight
        gate, up = gate_up.chunk(2, dim=-1)
        silu_gate = F.silu(gate)
        grad_weights = (grad_act.float() * silu_gate * up).sum(-1)
        grad_act.mul_(weights[:, None])
        grad_gate_up = torch.cat((torch.ops.aten.silu_backward(grad_act * up, gate), grad_act * silu_gate), dim=-1)
        grad_hidden = _unsort_sum(F.grouped_mm(grad_gate_up, gate_up_proj, offs=offsets), rank, num_tokens)
        grad_top_k = grad_weights[rank].view(num_tokens, ctx.k).to(ctx.weights_dtype)
        return grad_hidden.to(ctx.hidden_dtype), None, grad_top_k, None, None


def frozen_grouped_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """transformers' experts forward signature; experts whose weights train, of another layout, or where torch's
    grouped_mm cannot run (compiled non-bf16, pre-Ampere GPUs) run transformers' path with its fallbacks."""
    from transformers.integrations.moe import _can_use_grouped_mm, _default_apply_gate, grouped_mm_experts_forward

    plain = (self.has_gate and self.is_concatenated and not self.is_transposed and not self.has_bias
             and not getattr(self, "has_post_expert_norm", False) and not getattr(self, "_is_expert_parallel", False)
             and self.config.hidden_act == "silu" and type(self)._apply_gate is _default_apply_gate
             and _can_use_grouped_mm(hidden_states, self.gate_up_proj, None))
    if not plain or self.gate_up_proj.requires_grad or self.down_proj.requires_grad:
        return grouped_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)
    return _FrozenExperts.apply(hidden_states, top_k_index, top_k_weights, self.gate_up_proj, self.down_proj)


def use_frozen_experts(model) -> bool:
    """Run `model`'s MoE experts through `_FrozenExperts` (in place); False where it has no experts to switch."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    if not model._can_set_experts_implementation() or not getattr(model.config.get_text_config(), "num_experts", 0):
        return False
    ALL_EXPERTS_FUNCTIONS.register(NAME, frozen_grouped_mm_experts_forward)
    model.set_experts_implementation(NAME)
    return True
