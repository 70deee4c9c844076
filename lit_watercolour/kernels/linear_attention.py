"""Gated DeltaNet's glue on flash-linear-attention's kernels (the Qwen3.5 family, MoE or not).

transformers takes the chunked and one-token delta rule from fla where it imports, but the layer's short causal
convolution only from the `causal-conv1d` package (a CUDA build per torch version), else a PyTorch fallback: a
channels-first copy of the projections, a depthwise conv1d, SiLU and casts, each its own kernel forward and
backward; and its gated RMSNorm from the kernels hub, else a chain of float32 elementwise kernels. fla ships both
as Triton kernels with their backward: `causal_conv1d` on the projections' own [B, T, D] layout,
`causal_conv1d_update` for a decoding step on the same [B, D, W] state transformers' caches keep, and
`rms_norm_gated` (norm, weight and SiLU gate in one pass).

`use_fla_glue(model)` marks the model's Gated DeltaNet layers to run them. The convolution is a pair of functions of
the modeling module (`causal_conv1d_fn`, `causal_conv1d_update`: transformers resolves them once, at import, and
every version since 5.17 calls them with the layer's conv weight), so each becomes a dispatcher that sends a marked
layer's call (its weight's parameter carries the mark) to fla and any other (another model in the process, tensors
off CUDA, packed sequences) to transformers' own; the norm is swapped per layer. Off CUDA (unless under Triton's
interpreter), without fla, or with a transformers whose modeling module lacks those functions, nothing changes.

fla's kernels compute what transformers' code does: in float32 they agree to rounding (tests/test_linear_attention.py,
under the interpreter). In bf16 they round in other places (fla once per kernel; transformers after the convolution,
after SiLU, and before the norm's weight), and on a random-init MoE such a difference flips a few tokens' experts,
which reroutes more in every later layer: there the two differ as much as bf16 differs from float32 (docs/results.md).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch

FLAG = "_fla_glue"  # set on a marked layer's conv weight and norm


def fla_available() -> bool:
    return importlib.util.find_spec("fla") is not None and importlib.util.find_spec("triton") is not None


def triton_runs_on(t: torch.Tensor) -> bool:
    """Whether fla's Triton kernels take `t`: on CUDA, or anywhere under Triton's interpreter (how tests run them on a
    CPU)."""
    return t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def gated_deltanet_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's Gated DeltaNet layers (transformers' `*GatedDeltaNet` with a depthwise conv1d and a gated norm)."""
    return [m for m in model.modules() if type(m).__name__.endswith("GatedDeltaNet")
            and isinstance(getattr(m, "conv1d", None), torch.nn.Conv1d) and hasattr(m, "norm")]


def use_fla_glue(model: torch.nn.Module, enabled: bool = True) -> bool:
    """Mark (or with `enabled` False unmark) `model`'s Gated DeltaNet layers to run their convolution and gated norm
    on fla's kernels where their tensors are on CUDA; False where the model has no such layer, fla is missing or
    transformers' modeling module has no convolution functions to dispatch."""
    layers = gated_deltanet_layers(model)
    modules = {sys.modules[type(layer).__module__] for layer in layers}
    if not layers or (enabled and not (fla_available() and all(map(install_dispatchers, modules)))):
        return False
    for layer in layers:
        setattr(layer.conv1d.weight, FLAG, enabled)
        setattr(layer.norm, FLAG, enabled)
        if enabled and "forward" not in vars(layer.norm):
            layer.norm.forward = gated_norm_forward(layer.norm)
    return enabled


def install_dispatchers(modeling) -> bool:
    """The modeling module's `causal_conv1d_fn` and `causal_conv1d_update` replaced, once, by dispatchers over the
    originals; False where it has not both."""
    originals = [getattr(modeling, name, None) for name in ("causal_conv1d_fn", "causal_conv1d_update")]
    if not all(map(callable, originals)):
        return False
    for name, original, dispatcher in zip(("causal_conv1d_fn", "causal_conv1d_update"), originals,
                                          (conv_dispatcher, update_dispatcher)):
        if not getattr(original, FLAG, False):
            wrapped = dispatcher(original)
            setattr(wrapped, FLAG, True)
            setattr(modeling, name, wrapped)
    return True


def marked(weight: torch.Tensor) -> bool:
    """Whether a call's conv weight (the layer's parameter, or the [D, W] view of it the layer passes) is a marked
    layer's."""
    return getattr(weight if weight._base is None else weight._base, FLAG, False)


def conv_dispatcher(original):
    """transformers' `causal_conv1d_fn(hidden_states [B, D, T], weight [D, W], bias, activation)`: fla's `causal_conv1d`
    for a marked layer (no initial state: the caller prepends a cache's), transformers' own otherwise."""

    def causal_conv1d_fn(hidden_states, weight, bias=None, activation=None, **kwargs):
        packed = kwargs.get("cu_seq_lens_q") is not None  # the name transformers passes packed rows' bounds by
        if packed or not (triton_runs_on(hidden_states) and marked(weight)):
            return original(hidden_states, weight, bias, activation=activation, **kwargs)
        from fla.modules.causal_conv1d import causal_conv1d

        x = hidden_states.transpose(1, 2).to(weight.dtype)  # [B, T, D]: the projections' own layout, no copy
        y, _ = causal_conv1d(x=x if x.stride(-1) == 1 else x.contiguous(), weight=weight, bias=bias,
                             activation=activation)
        return y.transpose(1, 2).to(hidden_states.dtype)

    return causal_conv1d_fn


def update_dispatcher(original):
    """transformers' `causal_conv1d_update(hidden_states [B, D, 1], conv_state [B, D, W], weight, bias, activation)`, one
    decoding step that shifts the state in place: fla's `causal_conv1d_update` (the same state layout) for a marked
    layer with a contiguous state, transformers' own otherwise."""

    def causal_conv1d_update(hidden_states, conv_state, weight, bias=None, activation=None):
        one_step = hidden_states.shape[-1] == 1 and conv_state.is_contiguous() and conv_state.shape[-1] == weight.shape[-1]
        if not (one_step and triton_runs_on(hidden_states) and marked(weight)):
            return original(hidden_states, conv_state, weight, bias, activation)
        from fla.modules.causal_conv1d import causal_conv1d_update as fla_update

        y, _ = fla_update(x=hidden_states.transpose(1, 2).to(weight.dtype), cache=conv_state, weight=weight, bias=bias,
                          activation=activation)
        return y.transpose(1, 2).to(hidden_states.dtype)

    return causal_conv1d_update
def gated_norm_forward(norm: torch.nn.Module):
    """`norm`'s forward (transformers' `RMSNormGated`: rms_norm(x) * weight * silu(gate)) through fla's fused kernel
    while it is marked and its input is on CUDA, else its class's own."""
    own = type(norm).forward.__get__(norm)

    def forward(hidden_states: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        if not getattr(norm, FLAG, False) or not triton_runs_on(hidden_states):
            return own(hidden_states, gate)
        from fla.modules.norm.fused_norm_gate import rms_norm_gated

        return rms_norm_gated(hidden_states, gate, norm.weight, None, activation=norm.activation,
                              eps=norm.variance_epsilon)

    return forward
