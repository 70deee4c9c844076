"""The policy: a transformers causal LM with a LoRA adapter; the adapter-free model is the reference.

Qwen3.5 checkpoints are vision-language models (`Qwen3_5MoeForConditionalGeneration`). Loading
them with `AutoModelForCausalLM` renames the modules (`model.language_model.*` becomes
`model.*`), so adapters trained that way miss most tensors when loaded into the full class
(the recipe lost 700 of 920). Such checkpoints therefore load with their own class
(`AutoModelForImageTextToText`), text-only, and LoRA skips the vision tower.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer, PreTrainedModel

from lit_watercolour.grpo import token_logps_and_entropy
from lit_watercolour.tiny_models import build_tiny_model, tiny_tokenizer

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@dataclass
class PolicyConfig:
    model: str = "Qwen/Qwen3.5-35B-A3B"  # a Hub id or a local transformers folder
    tiny: str | None = None  # build a tiny random-init model of this architecture instead (CPU runs)
    tiny_config: dict = field(default_factory=dict)  # sizes for `tiny`, e.g. {hidden_size: 64}
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    attn_implementation: str | None = None  # e.g. "sdpa", "flash_attention_2"; None: transformers' choice
    gradient_checkpointing: bool = True
    quantization: Literal["none", "4bit", "8bit"] = "none"  # bitsandbytes base weights (QLoRA)
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"
    exclude_modules: str | None = r".*visual.*"  # never adapt a vision tower
    adapter: str | None = None  # a trained peft adapter folder to start from (predict, fine-tune)
    revision: str | None = None
    trust_remote_code: bool = False


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
    if cfg.quantization != "none":
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    if cfg.gradient_checkpointing:
        # non-reentrant: works with frozen embeddings and needs no enable_input_require_grads
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
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
    return model, tokenizer


@contextmanager
def adapter_merged(model: PeftModel) -> Iterator[None]:
    """The LoRA adapter folded into the base weights for the duration: decoding then skips the
    adapter's extra matmuls (1.25x the tokens/s for the tiny policy on a CPU). The base
    weights are restored from a copy afterwards, bit-exactly: unmerging subtracts in the weights'
    dtype and would drift a bf16 base (the KL reference) a little every step."""
    from peft.tuners.lora import LoraLayer

    bases = [m.get_base_layer() for m in model.modules() if isinstance(m, LoraLayer)]
    if any(not b.weight.is_floating_point() for b in bases):
        raise ValueError("merging the adapter needs unquantised base weights: set sampling.merge_adapter false")
    saved = [b.weight.detach().clone() for b in bases]
    model.merge_adapter()
    try:
        yield
    finally:
        model.unmerge_adapter()
        with torch.no_grad():
            for b, w in zip(bases, saved):
                b.weight.copy_(w)


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropies [N, C] of the completion tokens, `batch_size` rows a forward.

    Sampling, the old-policy pass, the reference pass and the loss all go through here, so
    they agree token for token (checked against `generate`'s own logits, left padding included).
    """
    # The last completion token is only ever a target: leaving it out of the input makes the last
    # `width` logits exactly the predictions needed, so no [B, C, V] slice and no zero-padded
    # gradient of the full logits are ever made (20 GB a micro-batch at 8 x 8192 x 152k in bf16).
    ids = torch.cat([prompt_ids, completion_ids[:, :-1]], 1)
    mask = torch.cat([prompt_mask, completion_mask[:, :-1]], 1)
    width = completion_ids.shape[1]
    logps, entropies = [], []
    for lo in range(0, ids.shape[0], batch_size):
        sl = slice(lo, lo + batch_size)
        logits = model(input_ids=ids[sl], attention_mask=mask[sl], logits_to_keep=width, use_cache=False).logits
        lp, ent = token_logps_and_entropy(logits, completion_ids[sl], temperature, overwrite_logits=True)  # used once
        logps.append(lp)
        entropies.append(ent)
    return torch.cat(logps), torch.cat(entropies)
