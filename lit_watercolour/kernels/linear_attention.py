"""Gated DeltaNet's glue on flash-linear-attention's kernels (the Qwen3.5 family, MoE or not).

transformers takes the chunked and one-token delta rule from fla where it imports, but the layer's short causal
convolution only from the `causal-conv1d` package (a CUDA build per torch version), else a PyTorch fallback: a
channels-first copy of the projections, a depthwise conv1d, SiLU and casts, each its own kernel forward and
backward; and its gated RMSNorm from the kernels hub, else a chain of float32 elementwise kernels. fla ships both
as Triton kernels with their backward: `causal_conv1d` on the projections' own [B, T, D] layout,
`causal_conv1d_update` for a decoding step on the same [B, D, W] state transformers' caches keep, and
`rms_norm_gated` (norm, weight and SiLU gate in one pass).

`use_fla_glue(model)` marks the model's Gated DeltaNet layers to run them. The convolution is a function of the
modeling module (transformers resolves it once, at import), so the module's `causal_conv1d_forward` becomes a
dispatcher that sends a marked layer's convolution to fla and any other (another model in the process, tensors off
CUDA, packed sequences, a prefill into a cache) to transformers' own; the norm is swapped per layer. Off CUDA, or
without fla, nothing changes.
"""

from __future__ import annotations

import importlib.util
import sys

import torch

FLAG = "_fla_glue"  # set on a marked layer's conv1d and norm


def fla_available() -> bool:
    return importlib.util.find_spec("fla") is not None and importlib.util.find_spec("triton") is not None


def gated_deltanet_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's Gated DeltaNet layers (transformers' `*GatedDeltaNet` with a depthwise conv1d and a gated norm)."""
    return [m for m in model.modules() if type(m).__name__.endswith("GatedDeltaNet")
            and isinstance(getattr(m, "conv1d", None), torch.nn.Conv1d) and hasattr(m, "norm")]


def use_fla_glue(model: torch.nn.Module, enabled: bool = True) -> bool:
    """Mark (or with `enabled` False unmark) `model`'s Gated DeltaNet layers to run their convolution and gated norm
    on fla's kernels where their tensors are on CUDA; False where the model has no such layer or fla is missing."""
    layers = gated_deltanet_layers(model)
    if not layers or (enabled and not fla_available()):
        return False
    for layer in layers:
        if enabled:
            install_dispatcher(sys.modules[type(layer).__module__])
        setattr(layer.conv1d, FLAG, enabled)
        setattr(layer.norm, FLAG, enabled)
        if enabled and "forward" not in vars(layer.norm):
            layer.norm.forward = gated_norm_forward(layer.norm)
    return enabled


def install_dispatcher(modeling) -> None:
    """The modeling module's `causal_conv1d_forward` replaced, once, by `conv_dispatcher` over the original."""
    original = modeling.causal_conv1d_forward
    if getattr(original, FLAG, False):
        return
    dispatcher = conv_dispatcher(original)
    setattr(dispatcher, FLAG, True)
    modeling.causal_conv1d_forward = dispatcher


def conv_dispatcher(original):
    """transformers' `causal_conv1d_forward(conv1d, hidden_states [B, D, T], cache, layer_idx, activation, ...)`: fla's
    kernels for a marked conv1d on CUDA with no cache (training, log-probs) or a one-token step on a cache's
    contiguous state (decoding); transformers' own otherwise."""

    def causal_conv1d_forward(conv1d, hidden_states, cache, layer_idx, activation=None, state_idx=0, **kwargs):
        packed = kwargs.get("cu_seq_lens_q") is not None or kwargs.get("seq_idx") is not None
        if not getattr(conv1d, FLAG, False) or not hidden_states.is_cuda or packed:
            return original(conv1d, hidden_states, cache, layer_idx, activation=activation, state_idx=state_idx, **kwargs)
        from fla.modules.causal_conv1d import causal_conv1d, causal_conv1d_update

        weight = conv1d.weight.squeeze(1)  # [D, W]
        x = hidden_states.transpose(1, 2).to(weight.dtype)  # [B, T, D]: the projections' own layout, no copy
        if cache is None:
            y, _ = causal_conv1d(x=x if x.stride(-1) == 1 else x.contiguous(), weight=weight, bias=conv1d.bias,
                                 activation=activation)
            return y.transpose(1, 2).to(hidden_states.dtype)
        state = cache.get_conv_state(layer_idx, state_idx=state_idx)
        one_step = (state is not None and x.shape[1] == 1 and not cache.is_recording_past(layer_idx)
                    and state.is_contiguous() and state.shape[-1] == weight.shape[-1])
        if not one_step:  # a prefill: the cache's own state handling
            return original(conv1d, hidden_states, cache, layer_idx, activation=activation, state_idx=state_idx, **kwargs)
        cache.increase_count(layer_idx, state_idx)
        y, _ = causal_conv1d_update(x=x, cache=state, weight=weight, bias=conv1d.bias, activation=activation)
        return y.transpose(1, 2).to(hidden_states.dtype)

    return causal_conv1d_forward


def gated_norm_forward(norm: torch.nn.Module):
    """`norm`'s forward (transformers' `RMSNormGated`: rms_norm(x) * weight * silu(gate)) through fla's fused kernel
    while it is marked and its input is on CUDA, else its class's own."""
    own = type(norm).forward.__get__(norm)

    def forward(hidden_states: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        if not getattr(norm, FLAG, False) or not hidden_states.is_cuda:
            return own(hidden_states, gate)
        from fla.modules.norm.fused_norm_gate import rms_norm_gated

        return rms_norm_gated(hidden_states, gate, norm.weight, None, activation=norm.activation,
                              eps=norm.variance_epsilon)

    return forward
