"""Selective activation checkpointing: what a recomputed decoder layer keeps so backward need not run it again."""

from __future__ import annotations

import functools
from typing import Literal

import torch
from torch.utils.checkpoint import create_selective_checkpoint_contexts

CheckpointKeep = Literal["inputs", "attention", "attention+out_proj"]


def _aten_ops(*names: str) -> frozenset:
    """The default overloads of the aten ops of these names that this torch build has."""
    return frozenset(getattr(torch.ops.aten, n).default for n in names if hasattr(torch.ops.aten, n))


ATTENTION_OPS = _aten_ops("_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention",
                          "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu",
                          "_flash_attention_forward", "_efficient_attention_forward")
MATMUL_OPS = _aten_ops("mm", "addmm")


def checkpoint_policy(keep: str, config):
    """The selective-checkpointing policy (torch.utils.checkpoint) for `PolicyConfig.checkpoint_keep`.

    "attention" keeps every attention kernel's output (out and log-sum-exp, ~heads x head_dim numbers a
    token): backward recomputes the cheap q, k, v projections but not the quadratic attention.
    "attention+out_proj" keeps, besides, the outputs of the base matmuls that produce hidden-size rows
    from an input at least as wide: o_proj and down_proj (the widest inputs, so the most FLOPs per
    number kept), and q_proj where heads x head_dim equals the hidden size; a LoRA B matmul, with r
    inputs, is not one of them.
    """
    from torch.utils.checkpoint import CheckpointPolicy

    hidden = config.get_text_config().hidden_size

    def policy(ctx, op, *args, **kwargs):
        if op in ATTENTION_OPS:
            return CheckpointPolicy.MUST_SAVE
        if keep == "attention+out_proj" and op in MATMUL_OPS:
            a, b = args[-2:]
            if b.shape[1] == hidden and a.shape[1] >= hidden:
                return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def enable_gradient_checkpointing(model, keep: CheckpointKeep) -> None:
    """transformers' gradient checkpointing on `model`, non-reentrant (frozen embeddings need no
    `enable_input_require_grads`), keeping what `keep` names besides each layer's input."""
    kwargs = {"use_reentrant": False}
    if keep != "inputs":
        kwargs["context_fn"] = functools.partial(create_selective_checkpoint_contexts, checkpoint_policy(keep, model.config))
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
