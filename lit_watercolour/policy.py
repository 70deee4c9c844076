"""The policy: a transformers causal LM with a LoRA adapter; the adapter-free model is the reference.

Qwen3.5 checkpoints are vision-language models (`Qwen3_5MoeForConditionalGeneration`). Loading
them with `AutoModelForCausalLM` renames the modules (`model.language_model.*` becomes
`model.*`), so adapters trained that way miss most tensors when loaded into the full class
(the recipe lost 700 of 920). Such checkpoints therefore load with their own class
(`AutoModelForImageTextToText`), text-only, and LoRA skips the vision tower.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch.utils.checkpoint import create_selective_checkpoint_contexts
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer, PreTrainedModel

from lit_watercolour.experts import use_frozen_experts
from lit_watercolour.grpo import linear_logps_and_entropy
from lit_watercolour.tiny_models import build_tiny_model, tiny_tokenizer

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
CheckpointKeep = Literal["inputs", "attention", "attention+out_proj"]
AttentionBackend = Literal["default", "flash", "cudnn", "efficient"]


@dataclass
class PolicyConfig:
    model: str = "Qwen/Qwen3.5-35B-A3B"  # a Hub id or a local transformers folder
    """The policy's weights: a Hub id or a local transformers folder."""
    tiny: str | None = None  # build a tiny random-init model of this architecture instead (CPU runs)
    """Build a tiny random-init model of this architecture instead of loading `model` (CPU tests and smoke runs)."""
    tiny_config: dict = field(default_factory=dict)  # sizes for `tiny`, e.g. {hidden_size: 64}
    """Sizes for `tiny`, e.g. {hidden_size: 64, num_layers: 2}."""
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    """The base weights' dtype; the LoRA adapter's weights stay float32."""
    attn_implementation: str | None = None  # e.g. "sdpa", "flash_attention_2"; None: transformers' choice
    """transformers' attention implementation, e.g. sdpa or flash_attention_2; None: transformers' choice."""
    attention_backend: AttentionBackend = "default"  # sdpa's kernel tried first (the others stay fallbacks); default: torch's order
    """The sdpa kernel tried first (the others stay fallbacks); default: torch's order."""
    gradient_checkpointing: bool = True
    """Recompute each decoder layer in backward instead of keeping its activations."""
    # what each checkpointed decoder layer keeps besides its input, so backward need not recompute it:
    # "attention": the attention kernel's output; "attention+out_proj": also the o_proj and down_proj matmuls
    checkpoint_keep: CheckpointKeep = "inputs"
    """What a checkpointed layer keeps besides its input: inputs, attention (the attention output) or
    attention+out_proj (also the o_proj and down_proj outputs)."""
    fused_lora: bool = True  # each LoRA linear as one autograd node (`fuse_lora_linears`); False: peft's forward
    """Run each LoRA linear as one autograd node; False: peft's own forward."""
    compile_layers: bool = False  # torch.compile each decoder layer (fuses norms, RoPE, SwiGLU; minutes to compile; dense models)
    """torch.compile each decoder layer (fuses norms, RoPE, SwiGLU); dense models; minutes to compile."""
    frozen_experts: bool = True  # MoE experts as one autograd node with no weight gradients (`experts.py`); False: transformers'
    """MoE experts as one autograd node with frozen weights (lit_watercolour/experts.py); False: transformers'
    experts."""
    quantization: Literal["none", "4bit", "8bit"] = "none"  # bitsandbytes base weights (QLoRA)
    """Quantise the base weights with bitsandbytes (QLoRA): none, 4bit or 8bit."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling numerator: the update is scaled by lora_alpha / lora_r."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input during training."""
    target_modules: str | list[str] = "all-linear"
    """Modules that get a LoRA adapter: all-linear, or a list of module names."""
    exclude_modules: str | None = r".*visual.*"  # never adapt a vision tower
    """A regex of modules never adapted (a vision tower)."""
    adapter: str | None = None  # a trained peft adapter folder to start from (predict, fine-tune)
    """A trained peft adapter folder to start from (painting, or training further)."""
    revision: str | None = None
    """The Hub revision (branch, tag or commit) of `model`."""
    trust_remote_code: bool = False
    """Let transformers run the model repository's own code."""


def require_bitsandbytes(feature: str) -> None:
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError(f"{feature} needs bitsandbytes: `pip install bitsandbytes` (or the `bnb` extra).")


def model_class(config) -> type:
    """The auto class whose module names match the checkpoint: the VLM class for VLM checkpoints."""
    return AutoModelForImageTextToText if hasattr(config, "vision_config") else AutoModelForCausalLM


def load_base_model(cfg: PolicyConfig, tokenizer) -> PreTrainedModel:
    dtype = DTYPES[cfg.dtype]
    if cfg.tiny is not None:
        return build_tiny_model(cfg.tiny, tokenizer, dtype=dtype, **cfg.tiny_config)  # built in dtype: no fp32 copy
    kwargs: dict = dict(dtype=dtype, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    if cfg.attn_implementation is not None:
        kwargs["attn_implementation"] = cfg.attn_implementation
    if cfg.quantization != "none":
        require_bitsandbytes(f"quantization={cfg.quantization!r}")
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=cfg.quantization == "4bit",
            load_in_8bit=cfg.quantization == "8bit",
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=dtype,
        )
    config = AutoConfig.from_pretrained(cfg.model, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    return model_class(config).from_pretrained(cfg.model, **kwargs)


def load_tokenizer(cfg: PolicyConfig):
    if cfg.tiny is not None:
        tokenizer = tiny_tokenizer()
    else:
        tokenizer = AutoTokenizer.from_pretrained(cfg.model, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    tokenizer.padding_side = "left"  # generation appends on the right
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(cfg: PolicyConfig) -> tuple[PeftModel, object]:
    """The LoRA-wrapped policy and its tokenizer. Only adapter weights require grad."""
    tokenizer = load_tokenizer(cfg)
    model = load_base_model(cfg, tokenizer)
    use_attention_backend(model, cfg.attention_backend)
    if cfg.frozen_experts:
        use_frozen_experts(model)
    if cfg.quantization != "none":
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    if cfg.gradient_checkpointing:
        # non-reentrant: works with frozen embeddings and needs no enable_input_require_grads
        kwargs = {"use_reentrant": False}
        if cfg.checkpoint_keep != "inputs":
            kwargs["context_fn"] = functools.partial(create_selective_checkpoint_contexts,
                                                     checkpoint_policy(cfg.checkpoint_keep, model.config))
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if cfg.adapter is not None:
        model = PeftModel.from_pretrained(model, cfg.adapter, is_trainable=True)
    else:
        exclude = cfg.exclude_modules
        if exclude is not None and not any(re.fullmatch(exclude, n) for n, _ in model.named_modules()):
            exclude = None  # nothing to exclude (a text-only model); peft would warn
        lora = LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules=cfg.target_modules,
            exclude_modules=exclude,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    if cfg.fused_lora:
        fuse_lora_linears(model)
    if cfg.compile_layers:
        for layer in decoder_layers(model):
            layer.compile(dynamic=True)  # sequence lengths vary by micro-batch
    return model, tokenizer


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The repeated transformer blocks (the text model's `layers`)."""
    return next(m for n, m in model.named_modules() if n.endswith("layers") and isinstance(m, torch.nn.ModuleList))


def use_attention_backend(model: PreTrainedModel, backend: str) -> None:
    """Make `model`'s sdpa attention try `backend`'s kernel first, in forward and in checkpointed recomputation.

    Registered with transformers as an attention implementation "sdpa_<backend>_first": transformers' own sdpa
    function (and its masks) inside `torch.nn.attention.sdpa_kernel`, so the choice holds wherever the
    layer runs, with no context for callers to enter around backward.
    """
    if backend == "default":
        return
    if model.config._attn_implementation != "sdpa":
        raise ValueError(f"attention_backend={backend!r} needs attn_implementation 'sdpa', not {model.config._attn_implementation!r}")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    order = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    first = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]

    def attention(*args, **kwargs):
        with sdpa_kernel([first] + [b for b in order if b != first], set_priority=True):
            return sdpa_attention_forward(*args, **kwargs)

    name = f"sdpa_{'fa2' if backend == 'flash' else backend}_first"  # transformers reads "flash" in a name as FlashAttention's
    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, sdpa_mask)
    model.set_attn_implementation(name)


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


class _LoraLinear(torch.autograd.Function):
    """y = x W^T + bias + scaling * (x A^T) B^T, one autograd node in one dtype.

    peft runs LoRA as four more ops a layer (A, B, the scaling, the add), each a pass over a
    [tokens, out] tensor; here the B product is added by the base output's own matmul epilogue
    (addmm), and backward shares d y's passes between the input, A and B gradients. Saves x and
    x A^T (r numbers a token), as peft does.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, lora_b, scaling: float, dtype: torch.dtype):
        with torch.autocast(x.device.type, enabled=False):
            x2 = x.reshape(-1, x.shape[-1]).to(dtype)
            w, a, b = weight.to(dtype), lora_a.to(dtype), lora_b.to(dtype)
            xa = x2 @ a.t()
            base = x2 @ w.t() if bias is None else torch.addmm(bias.to(dtype), x2, w.t())
            y = torch.addmm(base, xa, b.t(), alpha=scaling)  # out of place: selective checkpointing may keep `base`
        ctx.save_for_backward(x2, xa, weight, bias, lora_a, lora_b)
        ctx.scaling, ctx.dtype, ctx.x_shape, ctx.x_dtype = scaling, dtype, x.shape, x.dtype
        return y.view(*x.shape[:-1], -1)

    @staticmethod
    def backward(ctx, grad_y):
        x2, xa, weight, bias, lora_a, lora_b = ctx.saved_tensors
        need_x, need_w, need_bias, need_a, need_b = ctx.needs_input_grad[:5]
        dtype, s = ctx.dtype, ctx.scaling
        grad_x = grad_w = grad_bias = grad_a = grad_b = None
        with torch.autocast(grad_y.device.type, enabled=False):
            g = grad_y.reshape(-1, grad_y.shape[-1]).to(dtype)
            a, b = lora_a.to(dtype), lora_b.to(dtype)
            gb = g @ (b * s)  # d loss / d (x A^T), [tokens, r]
            if need_x:
                grad_x = (g @ weight.to(dtype)).addmm_(gb, a).view(ctx.x_shape).to(ctx.x_dtype)
            if need_a:
                grad_a = (gb.t() @ x2).to(lora_a.dtype)
            if need_b:
                grad_b = (g.t() @ (xa * s)).to(lora_b.dtype)
            if need_w:
                grad_w = (g.t() @ x2).to(weight.dtype)
            if need_bias:
                grad_bias = g.sum(0).to(bias.dtype)
        return grad_x, grad_w, grad_bias, grad_a, grad_b, None, None


def _fused_lora_forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """peft's `lora.Linear.forward` as one `_LoraLinear` where the layer is plain LoRA; peft's own otherwise."""
    names = [n for n in self.active_adapters if n in self.lora_A]
    base = self.base_layer
    if (args or kwargs or self.disable_adapters or self.merged or len(names) != 1 or names[0] in self.lora_variant
            or getattr(self, "fan_in_fan_out", False) or type(base) is not torch.nn.Linear
            or not base.weight.is_floating_point() or self.lora_B[names[0]].bias is not None
            or (self.training and not isinstance(self.lora_dropout[names[0]], torch.nn.Identity))):
        return type(self).forward(self, x, *args, **kwargs)
    name = names[0]
    lora_a, lora_b = self.lora_A[name].weight, self.lora_B[name].weight
    device = x.device.type
    if torch.is_autocast_enabled(device):  # as peft + autocast: every matmul in the autocast dtype
        dtype = torch.get_autocast_dtype(device)
    elif x.dtype == base.weight.dtype == lora_a.dtype == lora_b.dtype:
        dtype = x.dtype
    else:  # peft's mixed precision (float32 adapter on a 16-bit base): left to peft
        return type(self).forward(self, x)
    return _LoraLinear.apply(x, base.weight, base.bias, lora_a, lora_b, float(self.scaling[name]), dtype)


def fuse_lora_linears(model: torch.nn.Module) -> int:
    """Run every peft LoRA linear layer of `model` through `_LoraLinear` (in place; returns how many).

    The same function as peft's forward (tested against it), with fewer passes over the activations;
    layers peft runs differently (adapter off or merged, several adapters, DoRA and other variants,
    dropout in training, quantised or non-Linear base) fall back to peft's forward call by call.
    """
    from peft.tuners.lora import Linear as LoraLinear

    layers = [m for m in model.modules() if type(m) is LoraLinear]
    for m in layers:
        m.forward = types.MethodType(_fused_lora_forward, m)
    return len(layers)


def merged_weight(layer: torch.nn.Module) -> torch.Tensor:
    """The weight a linear layer (LoRA-wrapped or not) applies now, its active adapters folded in.

    The one place the adapter is merged: lean decoding, `adapter_merged` and vLLM's merged-weight sync
    all read it. A folded weight is a new tensor (the sum in float32, rounded once to the base dtype);
    the base weight, which is also the KL reference, is never written. peft's merge/unmerge adds and
    subtracts in place in the base dtype, which drifts a bf16 base a little every step.
    """
    from peft.tuners.lora import LoraLayer

    if not isinstance(layer, LoraLayer):
        return layer.weight
    weight = layer.get_base_layer().weight
    names = [a for a in layer.active_adapters if a in layer.lora_A]
    if layer.merged or layer.disable_adapters or not names:
        return weight
    if not weight.is_floating_point():
        raise ValueError("folding the adapter into the weights needs unquantised base weights: set "
                         "sampling.merge_adapter false, or use weight_sync: lora")
    with torch.no_grad():
        return (weight.float() + sum(layer.get_delta_weight(a).float() for a in names)).to(weight.dtype)


def merged_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The base model's weights under the base model's names, with the adapter folded in (`merged_weight`),
    one at a time: for engines that take whole weights (vLLM) instead of an adapter."""
    from peft.tuners.lora import LoraLayer

    adapted = {id(m.get_base_layer().weight): m for m in model.modules() if isinstance(m, LoraLayer)}
    for name, param in model.named_parameters():
        if "lora_" in name or "modules_to_save" in name:
            continue
        name = name.removeprefix("base_model.model.").replace(".base_layer", "").replace(".original_module", "")
        yield name, merged_weight(adapted[id(param)]) if id(param) in adapted else param.detach()


@contextmanager
def adapter_merged(model: PeftModel) -> Iterator[None]:
    """The LoRA adapter folded into the base weights for the duration: decoding then skips the
    adapter's extra matmuls (README, "Benchmarks"). Each adapted layer's
    weight is swapped for its `merged_weight` and its adapter switched off; the original weight
    tensors, never written, are put back afterwards, so the base stays bit-identical. A model without an
    adapter is left as it is."""
    from peft.tuners.lora import LoraLayer

    if not isinstance(model, PeftModel):
        yield
        return
    swaps = []
    for m in model.modules():
        if isinstance(m, LoraLayer) and (merged := merged_weight(m)) is not m.get_base_layer().weight:
            swaps.append((m.get_base_layer(), m.get_base_layer().weight, torch.nn.Parameter(merged, requires_grad=False)))
    for base, _, merged in swaps:
        base.weight = merged
    try:
        with model.disable_adapter():
            yield
    finally:
        for base, original, _ in swaps:
            base.weight = original


@contextmanager
def adapter_in_model_dtype(model: torch.nn.Module, enabled: bool = True) -> Iterator[None]:
    """The adapter's matmuls in the base model's 16-bit dtype, its weights staying float32 for the optimizer.

    peft keeps adapter weights in float32 and casts each layer's input up to them, so every LoRA
    layer of a bf16 model reads, multiplies and adds float32 copies of its activations. Under
    autocast (what TRL's bf16 training runs in), with peft's input casting off, they run in bf16
    and autograd still delivers float32 gradients to the float32 weights. A no-op for float32 models.
    `completion_logps` enters it; enter it around backward too, where gradient checkpointing
    recomputes the layers (else peft's casts come back there: the same values, a copy per layer).
    """
    dtype = next((p.dtype for p in model.parameters() if not p.requires_grad), torch.float32)
    if not enabled or not isinstance(model, PeftModel) or dtype not in (torch.bfloat16, torch.float16):
        yield
        return
    from peft.helpers import disable_input_dtype_casting

    device = next(model.parameters()).device.type
    with torch.autocast(device, dtype=dtype), disable_input_dtype_casting(model):
        yield


def trainable_state_dict(model: torch.nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    """The parameters that train (the adapter), keyed as in `model.state_dict()` with `prefix`."""
    return {prefix + n: p.detach() for n, p in model.named_parameters() if p.requires_grad}


def completion_logps(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float,
    batch_size: int,
    lora_autocast: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropies [N, C] of the completion tokens, `batch_size` rows a forward.

    Sampling, the old-policy pass, the reference pass and the loss all go through here, so
    they agree token for token (checked against `generate`'s own logits, left padding included).
    The LM head is applied by `linear_logps_and_entropy` in token chunks, to the last hidden
    states of the completion positions only: no [B, C, V] logits tensor exists, forward or backward.
    `lora_autocast`: see `adapter_in_model_dtype`.
    """
    base = model.get_base_model() if isinstance(model, PeftModel) else model
    head = base.get_output_embeddings()
    if type(head) is not torch.nn.Linear:
        raise ValueError(f"the LM head must be a plain nn.Linear (no adapter, no quantisation), not {type(head).__name__}")
    text_config = base.config.get_text_config()
    if any(getattr(text_config, k, None) not in (None, 1.0) for k in ("final_logit_softcapping", "logit_scale")):
        raise ValueError("models whose logits are scaled or soft-capped are not supported")
    # The last completion token is only ever a target: leaving it out of the input makes the last
    # `width` hidden states exactly the predicting positions.
    ids = torch.cat([prompt_ids, completion_ids[:, :-1]], 1)
    mask = torch.cat([prompt_mask, completion_mask[:, :-1]], 1)
    width = completion_ids.shape[1]
    logps, entropies = [], []
    for lo in range(0, ids.shape[0], batch_size):
        sl = slice(lo, lo + batch_size)
        # rows padded on the right only (prompts of one length) need no mask: a causal attention never sees
        # a row's padding before its end, and without a mask the kernel skips the upper triangle
        rows_mask = None if right_padded(mask[sl]) else mask[sl]
        with adapter_in_model_dtype(model, lora_autocast):
            hidden = base.base_model(input_ids=ids[sl], attention_mask=rows_mask, use_cache=False).last_hidden_state
        lp, ent = linear_logps_and_entropy(hidden[:, -width:], head.weight, completion_ids[sl], temperature, head.bias)
        logps.append(lp)
        entropies.append(ent)
    return torch.cat(logps), torch.cat(entropies)


def right_padded(mask: torch.Tensor) -> bool:
    """Whether each row of an attention mask [B, T] is ones, then zeros only."""
    return bool(mask[:, 0].all()) and bool((mask[:, 1:] <= mask[:, :-1]).all())
