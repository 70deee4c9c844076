"""Tiny random-init policies built offline: a locally trained BPE tokenizer and a small config.

No weights can be downloaded where this project is built and tested, so tests, the CPU
config and the GPU benchmark build models from a config instead. `save_tiny_policy` writes
a standard transformers folder (config, weights, tokenizer, chat template), so the very
code that loads a Hub id or a local folder loads these too.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, PreTrainedModel, PreTrainedTokenizerFast

from lit_watercolour.prompts import SYSTEM_PROMPT

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

# Qwen3's template reduced to what single-turn GRPO needs, keeping its `enable_thinking` switch.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)

# Text the tokenizer learns its merges from: the prompt and the code a painter writes.
SAMPLE_SKETCH = """```js
function setup() {
  createCanvas(512, 512, WEBGL);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.scaleBrushes(2);
  brush.noStroke();
  brush.fill("#f2a07b", 120);
  brush.fillBleed(0.25);
  brush.fillTexture(0.4, 0.3);
  brush.beginShape(0.5);
  brush.vertex(200, 180);
  brush.vertex(320, 170);
  brush.vertex(340, 300);
  brush.vertex(210, 330);
  brush.endShape(true);
  brush.fill("#7aa35a", 90);
  brush.circle(256, 380, 60);
}
```"""


def tiny_tokenizer(vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """A byte-level BPE (any text round-trips) with Qwen's special tokens and chat template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([SYSTEM_PROMPT, SAMPLE_SKETCH] * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def tiny_config(arch: str, vocab_size: int, hidden_size: int = 64, num_layers: int = 2, **overrides):
    """A small config of a supported architecture: "qwen3", "qwen3_moe", "qwen3_5_moe"."""
    from transformers import Qwen3_5MoeConfig, Qwen3Config, Qwen3MoeConfig

    heads = max(2, hidden_size // 32)
    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=hidden_size // heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    if arch == "qwen3":
        return Qwen3Config(intermediate_size=2 * hidden_size, **common, **overrides)
    if arch == "qwen3_moe":
        moe = dict(moe_intermediate_size=hidden_size, num_experts=4, num_experts_per_tok=2)
        return Qwen3MoeConfig(intermediate_size=2 * hidden_size, **moe, **common, **overrides)
    if arch == "qwen3_5_moe":
        # the real model interleaves three linear-attention (Gated DeltaNet) layers per full one;
        # `overrides` win over these small defaults, so the real shapes can be given too
        text = {
            **common,
            "moe_intermediate_size": hidden_size // 2,
            "shared_expert_intermediate_size": hidden_size // 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "linear_num_key_heads": heads,
            "linear_num_value_heads": 2 * heads,
            "linear_key_head_dim": hidden_size // heads,
            "linear_value_head_dim": hidden_size // heads,
            # the last layer is full attention so that even a 2-layer model has a KV cache
            "layer_types": [
                "full_attention" if (i + 1) % 4 == 0 or i == num_layers - 1 else "linear_attention"
                for i in range(num_layers)
            ],
            **overrides,
        }
        # a one-block vision tower: the policy is trained text-only and LoRA skips the tower
        vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=text["hidden_size"])
        return Qwen3_5MoeConfig(text_config=text, vision_config=vision, tie_word_embeddings=text["tie_word_embeddings"])
    raise ValueError(f"unknown tiny architecture {arch!r}; expected qwen3, qwen3_moe or qwen3_5_moe")


def build_tiny_model(arch: str, tokenizer: PreTrainedTokenizerFast, seed: int = 0, dtype: torch.dtype = torch.float32,
                     **config) -> PreTrainedModel:
    """A random-init model of `arch` sized by `config`, in `dtype` on the current default device.

    The vocabulary is the tokenizer's unless `config` gives `vocab_size` (a real model's shapes:
    ids past the tokenizer's decode to nothing)."""
    config.setdefault("vocab_size", len(tokenizer))
    cfg = tiny_config(arch, **config)
    for c in (cfg, getattr(cfg, "text_config", None)):
        if c is not None:
            c.eos_token_id, c.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    torch.manual_seed(seed)
    auto = AutoModelForImageTextToText if hasattr(cfg, "vision_config") else AutoModelForCausalLM
    model = auto.from_config(cfg, dtype=dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def save_tiny_policy(path: str | Path, arch: str = "qwen3", seed: int = 0, **config) -> Path:
    """Write a tiny random-init policy as a standard transformers folder and return its path."""
    path = Path(path)
    tokenizer = tiny_tokenizer()
    build_tiny_model(arch, tokenizer, seed=seed, **config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
