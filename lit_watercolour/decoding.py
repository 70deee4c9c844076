"""Lean KV-cached sampling for small dense Qwen3 policies, where `generate` is all overhead.

For the 2.2M-parameter tiny policy a decoding step is ~100 tiny kernels; transformers'
`generate` wraps them in ~100 module calls, logits processors, a cache that grows by `torch.cat`
(a copy of the whole cache every token) and attention over a padded static length. Here one
step is the same math written flat: q/k/v and gate/up projections fused into one matmul each,
the LoRA delta folded into the weights once per call (`adapter_merge.merged_weight`: the model's own are not touched),
keys and values written into a cache allocated once, attention over the filled part only, and
top-k / top-p sampling by the exponential race (argmax of p / Exp(1), a categorical draw).

Only the architecture it was checked against is accepted (`supports`); any other model samples
with `generate`. `tests/test_sampling.py` checks it token for token against `generate`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_watercolour.adapter_merge import merged_weight

LEAN_MODEL_TYPES = ("qwen3",)


def _core(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers `*ForCausalLM` inside a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def supports(model: torch.nn.Module) -> bool:
    from peft.tuners.lora import LoraLayer

    config = _core(model).config
    dora = any(isinstance(m, LoraLayer) and any(m.use_dora.values()) for m in model.modules())
    return (
        config.model_type in LEAN_MODEL_TYPES
        and config.hidden_act == "silu"
        and not getattr(config, "use_sliding_window", False)
        and not dora
    )


class LeanDecoder:
    """Decoding-time copy of a Qwen3 policy's effective weights; build one per `sample` call."""

    def __init__(self, model: torch.nn.Module) -> None:
        core = _core(model)
        cfg = core.config
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.rotary = core.model.rotary_emb  # the model's own rope (any position-only rope type)
        self.embed = core.model.embed_tokens.weight
        self.norm = core.model.norm.weight
        self.lm_head = merged_weight(core.lm_head)
        self.layers = []
        with torch.no_grad():
            for layer in core.model.layers:
                a, m = layer.self_attn, layer.mlp
                qkv = torch.cat([merged_weight(a.q_proj), merged_weight(a.k_proj), merged_weight(a.v_proj)])
                bias = None if a.q_proj.bias is None else torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias])
                self.layers.append(dict(
                    ln1=layer.input_layernorm.weight, ln2=layer.post_attention_layernorm.weight,
                    qkv=qkv, qkv_bias=bias, q_norm=a.q_norm.weight, k_norm=a.k_norm.weight,
                    o=merged_weight(a.o_proj),
                    gate_up=torch.cat([merged_weight(m.gate_proj), merged_weight(m.up_proj)]),
                    down=merged_weight(m.down_proj),
                ))

    def _rope(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    def _layers(self, x: Tensor, cos: Tensor, sin: Tensor, attend: Callable[[int, Tensor, Tensor, Tensor], Tensor]) -> Tensor:
        """x [B, T, hidden] through every layer; `attend(layer, q, k, v)` caches k/v and attends."""
        B, T, _ = x.shape
        H, KV, D = self.heads, self.kv_heads, self.head_dim
        for i, w in enumerate(self.layers):
            h = F.rms_norm(x, x.shape[-1:], w["ln1"], self.eps)
            q, k, v = F.linear(h, w["qkv"], w["qkv_bias"]).view(B, T, H + 2 * KV, D).split([H, KV, KV], 2)
            q = self._rope(F.rms_norm(q, (D,), w["q_norm"], self.eps), cos, sin).transpose(1, 2)
            k = self._rope(F.rms_norm(k, (D,), w["k_norm"], self.eps), cos, sin).transpose(1, 2)
            x = x + F.linear(attend(i, q, k, v.transpose(1, 2)).transpose(1, 2).reshape(B, T, H * D), w["o"])
            gate, up = F.linear(F.rms_norm(x, x.shape[-1:], w["ln2"], self.eps), w["gate_up"]).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, w["down"])
        return x

    def _logits(self, x: Tensor) -> Tensor:
        return F.linear(F.rms_norm(x, x.shape[-1:], self.norm, self.eps), self.lm_head).float()

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: Tensor,
        prompt_mask: Tensor,
        max_new_tokens: int,
        sample: Callable[[Tensor], Tensor],
        stop_ids: list[int],
        pad_id: int,
        on_step: Callable[[Tensor], None] | None = None,
        temperature: float = 1.0,
    ) -> tuple[Tensor, Tensor]:
        """Completion ids [B, <=max_new_tokens] after left-padded prompts, a row that has ended padded
        with `pad_id`, and each token's log-prob under softmax(logits / temperature) (no top-k/top-p:
        the trainer's log-probs; padding positions hold junk for the caller's mask), read off the
        logits that drew it, so no second forward is needed. `on_step(prompt and completion ids so
        far)` runs after every token."""
        B, P = prompt_ids.shape
        H, KV, D = self.heads, self.kv_heads, self.head_dim
        g, scale = H // KV, D**-0.5
        total = P + max_new_tokens
        dtype, device = self.embed.dtype, prompt_ids.device
        kcache = [torch.zeros(B, KV, total, D, dtype=dtype, device=device) for _ in self.layers]
        vcache = [torch.zeros_like(c) for c in kcache]
        valid = torch.ones(B, total, dtype=torch.bool, device=device)
        valid[:, :P] = prompt_mask.bool()
        key_bias = torch.zeros(B, 1, 1, total, dtype=dtype, device=device).masked_fill(~valid[:, None, None], float("-inf"))
        positions = (prompt_mask.cumsum(1) - 1).clamp(min=0)
        cos, sin = self.rotary(self.embed, torch.arange(total, device=device)[None])  # [1, total, D]
        cos, sin = cos[0], sin[0]

        # prompt: causal and padding mask; every position also sees itself, so a pad row has no empty softmax
        causal = torch.ones(P, P, dtype=torch.bool, device=device).tril()
        prompt_attn = (causal & prompt_mask.bool()[:, None, None, :]) | torch.eye(P, dtype=torch.bool, device=device)

        def attend_prompt(i: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            kcache[i][:, :, :P], vcache[i][:, :, :P] = k, v
            return F.scaled_dot_product_attention(q, k, v, attn_mask=prompt_attn, scale=scale, enable_gqa=True)

        x = self._layers(self.embed[prompt_ids], cos[positions][:, :, None], sin[positions][:, :, None], attend_prompt)
        logits = self._logits(x[:, -1])

        out = torch.full((B, total), pad_id, dtype=torch.long, device=device)
        out[:, :P] = prompt_ids
        logps = torch.zeros(B, max_new_tokens, dtype=torch.float32, device=device)
        stop = torch.tensor(stop_ids, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        pos = positions[:, -1]
        steps = 0
        for t in range(max_new_tokens):
            token = sample(logits).masked_fill(done, pad_id)
            logps[:, t] = (logits / temperature).log_softmax(-1).gather(-1, token[:, None])[:, 0]
            col = P + t
            out[:, col] = token
            steps = t + 1
            done |= torch.isin(token, stop)
            if on_step is not None:
                on_step(out[:, : col + 1])
            if bool(done.all()) or t == max_new_tokens - 1:
                break
            pos = pos + 1
            c, s = cos[pos][:, None, None], sin[pos][:, None, None]

            def attend_step(i: int, q: Tensor, k: Tensor, v: Tensor, col: int = col) -> Tensor:
                kcache[i][:, :, col : col + 1], vcache[i][:, :, col : col + 1] = k, v
                # the g query heads sharing a kv head become g query rows of one attention
                qg = q.reshape(B, KV, g, D)
                o = F.scaled_dot_product_attention(qg, kcache[i][:, :, : col + 1], vcache[i][:, :, : col + 1],
                                                   attn_mask=key_bias[..., : col + 1], scale=scale)
                return o.reshape(B, H, 1, D)

            logits = self._logits(self._layers(self.embed[token][:, None], c, s, attend_step)[:, 0])
        return out[:, P : P + steps], logps[:, :steps]


def capturing(t: Tensor) -> bool:
    """Whether `t`'s device is recording a CUDA graph now, so that no value of it can be read back to the host."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def sample_logits(logits: Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0, head: int = 64,
                  generator: torch.Generator | None = None) -> Tensor:
    """One token per row from logits [B, V]: temperature, then top-k (0: off), then top-p (1: off); the draw
    from `generator` (None: torch's global one).

    Top-p needs the tokens in order of probability; sorting the whole vocabulary every token is the
    dearest step of a tiny model's decoding, and the nucleus nearly always lies within the `head`
    likeliest tokens, so those are ordered first and the full sort is done only when it does not."""
    logits = logits / temperature
    V = logits.shape[-1]
    k = top_k if 0 < top_k < V else V
    if capturing(logits):
        head = k  # a graph cannot read back whether the head holds top_p: it orders all k
    if top_p >= 1.0 and k == V:
        vals, idx, lse = logits, None, logits.logsumexp(-1, keepdim=True)
    else:
        vals, idx = logits.topk(min(head, k) if top_p < 1.0 else k, -1)
        lse = (logits if k == V else logits.topk(k, -1).values).logsumexp(-1, keepdim=True)
        if vals.shape[-1] < k and not bool(((vals - lse).exp().sum(-1) >= top_p).all()):
            vals, idx = logits.topk(k, -1)
    p = (vals - lse).exp()  # probabilities after top-k, in descending order when idx is not None
    if top_p < 1.0:
        p = p.masked_fill(p.cumsum(-1) - p >= top_p, 0.0)  # keep the smallest prefix holding top_p
    choice = (p / torch.empty_like(p).exponential_(generator=generator)).argmax(-1)  # argmax p/Exp(1): a draw from p
    return choice if idx is None else idx.gather(-1, choice[:, None])[:, 0]
