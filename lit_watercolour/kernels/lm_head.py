"""The LM head's per-token log-probs and entropies in token chunks: no [tokens, V] logits tensor, forward or backward.

`linear_logps_and_entropy` is what every log-prob of the project goes through (sampling, the old-policy
and reference passes, the loss); `tests/test_grpo.py` checks it against TRL's `selective_log_softmax` /
`entropy_from_logits` and against the model's full logits.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from lit_watercolour.kernels.compile import compiled_or_eager


class _LinearTokenLogpsAndEntropy(torch.autograd.Function):
    """log_softmax(z)[id] and the entropy of softmax(z), z = (hidden @ weight.T + bias) / temperature, in token chunks.

    The logits exist one [chunk_size, V] tile at a time: forward keeps per-token statistics
    (the log-normaliser and E_p[z]) and backward recomputes each tile's projection, turns it
    into d loss/d logits and multiplies it back into the hidden states' (and, if it trains,
    the head's) gradient. Gradients, with p = softmax(z):
    d logp/dz = onehot(id) - p,  dH/dz = -p * (z - E_p[z]).
    """

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, ids: Tensor, temperature: float,
                chunk_size: int, compile: bool):
        ctx.set_materialize_grads(False)  # entropy is often only logged: skip its zero gradient
        stats, _ = _tile_kernels(compile)
        dtype = torch.promote_types(weight.dtype, torch.float32)
        lse = hidden.new_empty(ids.shape, dtype=dtype)
        mean_z, target_z = torch.empty_like(lse), torch.empty_like(lse)
        for s in _token_chunks(ids.numel(), chunk_size):
            lse[s], mean_z[s], target_z[s] = stats(_project(hidden[s], weight, bias), ids[s], temperature)
        ctx.save_for_backward(hidden, weight, bias, ids, lse, mean_z)
        ctx.temperature, ctx.chunk_size, ctx.compile = temperature, chunk_size, compile
        return target_z - lse, lse - mean_z

    @staticmethod
    def backward(ctx, grad_logps: Tensor | None, grad_entropy: Tensor | None):
        hidden, weight, bias, ids, lse, mean_z = ctx.saved_tensors
        _, logits_grad = _tile_kernels(ctx.compile)
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        # the head's gradient sums over every token: accumulate in float32 (bf16 partial sums drift)
        acc = torch.promote_types(weight.dtype, torch.float32)
        grad_weight = torch.zeros_like(weight, dtype=acc) if need_weight else None
        grad_bias = torch.zeros_like(bias, dtype=acc) if need_bias else None
        for s in _token_chunks(ids.numel(), ctx.chunk_size):
            x = hidden[s].to(weight.dtype)
            g = logits_grad(_project(x, weight, bias), ids[s], lse[s], mean_z[s],
                            None if grad_logps is None else grad_logps[s],
                            None if grad_entropy is None else grad_entropy[s], ctx.temperature)
            if need_hidden:
                grad_hidden[s] = g @ weight
            if need_weight:
                grad_weight.addmm_(g.t().to(acc), x.to(acc))
            if need_bias:
                grad_bias += g.sum(0, dtype=acc)
        return (grad_hidden, grad_weight if grad_weight is None else grad_weight.to(weight.dtype),
                grad_bias if grad_bias is None else grad_bias.to(bias.dtype), None, None, None, None)


def _project(hidden: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """One tile of logits in the head's dtype, whatever autocast says (forward and backward must agree)."""
    with torch.autocast(hidden.device.type, enabled=False):
        return torch.nn.functional.linear(hidden.to(weight.dtype), weight, bias)


def _tile_stats(logits: Tensor, ids: Tensor, temperature: float) -> tuple[Tensor, Tensor, Tensor]:
    """(log-normaliser, E_p[z], z[id]) of one [n, V] tile, in float32 (float64 for float64 logits)."""
    z = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature
    lse = torch.logsumexp(z, -1)
    mean_z = (torch.exp(z - lse[:, None]) * z).sum(-1)
    return lse, mean_z, z.gather(-1, ids[:, None]).squeeze(-1)


def _tile_logits_grad(logits: Tensor, ids: Tensor, lse: Tensor, mean_z: Tensor, grad_logps: Tensor | None,
                      grad_entropy: Tensor | None, temperature: float) -> Tensor:
    """d(sum grad_logps * logp + grad_entropy * H)/d logits of one tile, in the logits' dtype."""
    z = logits.to(lse.dtype) / temperature
    p = torch.exp(z - lse[:, None])
    g = torch.zeros_like(z)
    if grad_entropy is not None:
        g = g - grad_entropy[:, None] * p * (z - mean_z[:, None])
    if grad_logps is not None:
        onehot = torch.arange(z.shape[-1], device=z.device) == ids[:, None]
        g = g + grad_logps[:, None] * (onehot.to(z.dtype) - p)
    return (g / temperature).to(logits.dtype)


@functools.cache
def _tile_kernels(compile: bool):
    """The two tile functions, fused by torch.compile into a couple of passes over each tile when asked."""
    if not compile:
        return _tile_stats, _tile_logits_grad
    return compiled_or_eager(_tile_stats), compiled_or_eager(_tile_logits_grad)


def _token_chunks(n: int, chunk_size: int):
    for lo in range(0, n, chunk_size):
        yield slice(lo, lo + chunk_size)


def linear_logps_and_entropy(
    hidden: Tensor,
    weight: Tensor,
    ids: Tensor,
    temperature: float = 1.0,
    bias: Tensor | None = None,
    chunk_size: int = 2048,
    compile: bool | None = None,
) -> tuple[Tensor, Tensor]:
    """Log-prob of each `ids` token and the entropy of each position's distribution, from hidden states.

    hidden [..., H] are the last hidden states aligned with ids [...]: hidden[..., t, :] predicts
    ids[..., t]; weight [V, H] (and bias [V]) is the LM head. Both outputs are computed on
    logits / temperature, the distribution the sampler drew from, so the log-probs match the
    sampler's (TRL's `selective_log_softmax` / `entropy_from_logits` with the same temperature).
    Results are float32 (float64 for a float64 head), shaped like ids, differentiable in hidden
    (and weight and bias when they require grad). Memory beyond the inputs and their gradients is
    O(tokens) plus a few [chunk_size, V] tiles; the full [..., V] logits never exist, forward or
    backward, at the price of one more head projection in backward. Padding positions are
    computed too; mask them downstream. `compile` (None: on CUDA) fuses each tile's softmax
    arithmetic with torch.compile.
    """
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    if hidden.shape[:-1] != ids.shape or weight.ndim != 2 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(f"hidden {tuple(hidden.shape)}, weight {tuple(weight.shape)} and ids {tuple(ids.shape)} "
                         "must be [..., H], [V, H] and [...]")
    if compile is None:
        compile = hidden.device.type == "cuda"
    flat = hidden.reshape(-1, hidden.shape[-1])
    logps, entropy = _LinearTokenLogpsAndEntropy.apply(flat, weight, bias, ids.reshape(-1), temperature, chunk_size,
                                                       compile)
    return logps.view(ids.shape), entropy.view(ids.shape)
