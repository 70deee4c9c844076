"""Tiny random-init vision-language models of the real judge / HPSv3 architectures.

No weights can be downloaded where this project is built and tested, so the tests and
`scripts/bench_scorers.py` build Qwen2-VL / Qwen3-VL / Qwen3-VL-MoE from a config with a
tokenizer trained locally on a few sentences. Real users load Hub checkpoints instead; the
code paths after construction are the same.
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

# The Qwen2-VL chat template, reduced to what the scorers use (user/assistant turns, images).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>",
]
_CORPUS = [
    "You are judging two generative watercolour paintings, image A first and image B second.",
    "Which one is the better watercolour painting? Answer A or B. Textual prompt - a loose watercolour flower",
    "Please provide the overall ratings of this image: Visual Quality Text Alignment 0 to 10",
] * 4


def tiny_tokenizer(vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with the Qwen special tokens, trained on a few sentences."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                              "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"},
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_processor(processor_cls, tokenizer, patch_size: int, merge_size: int = 2):
    """A processor from a local tokenizer and the PIL image processor, with no video processor.

    ProcessorMixin checks every attribute's class, and the video processor's class is only
    importable with torchvision; the scorers never pass video, so that check is skipped here.
    """
    from unittest import mock

    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.processing_utils import ProcessorMixin

    image_processor = Qwen2VLImageProcessorPil(patch_size=patch_size, merge_size=merge_size)
    with mock.patch.object(ProcessorMixin, "check_argument_for_proper_class", lambda *a: None):
        return processor_cls(image_processor=image_processor, tokenizer=tokenizer, video_processor=None,
                             chat_template=tokenizer.chat_template)


def _token_ids(tok) -> dict[str, int]:
    ids = tok.convert_tokens_to_ids
    return dict(image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
                vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"))


def _heads(hidden: int) -> tuple[int, int]:
    """(attention heads, head_dim): 4 heads while tiny, 64-wide heads from 256 up."""
    return (4, hidden // 4) if hidden < 256 else (hidden // 64, 64)


def _rope(hidden: int, **extra) -> dict:
    half = _heads(hidden)[1] // 2  # mrope sections split head_dim / 2 into (t, h, w)
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

    tok = tiny_tokenizer()
    cfg = Qwen2VLConfig(
        text_config=_text(tok, hidden, layers, rope_parameters=_rope(hidden)),
        vision_config=dict(depth=vision_depth, embed_dim=vision_width, hidden_size=hidden, num_heads=max(vision_width // 64, 2), mlp_ratio=2,
                           patch_size=14, spatial_merge_size=2),
        tie_word_embeddings=False, **_token_ids(tok),
    )
    torch.manual_seed(seed)
    return Qwen2VLForConditionalGeneration(cfg).eval(), build_processor(Qwen2VLProcessor, tok, patch_size=14)


def tiny_qwen3_vl(hidden: int = 64, layers: int = 2, vision_depth: int = 2, vision_width: int = 32, moe: bool = False,
                  seed: int = 0):
    """(model, processor): Qwen3-VL (dense) or Qwen3-VL-MoE (the recipe judge's architecture), random weights."""
    from transformers import (Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLMoeConfig,
                              Qwen3VLMoeForConditionalGeneration, Qwen3VLProcessor)

    tok = tiny_tokenizer()
    text = _text(tok, hidden, layers, rope_parameters=_rope(hidden, mrope_interleaved=True))
    if moe:
        text.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=hidden, decoder_sparse_step=1)
    vision = dict(depth=vision_depth, hidden_size=vision_width, intermediate_size=2 * vision_width,
                  num_heads=max(vision_width // 64, 2), out_hidden_size=hidden,
                  patch_size=16, spatial_merge_size=2, num_position_embeddings=64, deepstack_visual_indexes=[0])
    config_cls, model_cls = (Qwen3VLMoeConfig, Qwen3VLMoeForConditionalGeneration) if moe else (Qwen3VLConfig, Qwen3VLForConditionalGeneration)
    cfg = config_cls(text_config=text, vision_config=vision, tie_word_embeddings=False, **_token_ids(tok))
    torch.manual_seed(seed)
    return model_cls(cfg).eval(), build_processor(Qwen3VLProcessor, tok, patch_size=16)


def tiny_hpsv3(seed: int = 0, **sizes):
    """(HPSv3Model, processor): HPSv3's reward head on a tiny random-init Qwen2-VL, with `<|Reward|>` added."""
    from lit_watercolour.rewards.hpsv3 import HPSv3Model, add_reward_token

    backbone, processor = tiny_qwen2_vl(seed=seed, **sizes)
    token = add_reward_token(processor)
    backbone.resize_token_embeddings(len(processor.tokenizer))
    torch.manual_seed(seed + 1)
    return HPSv3Model(backbone, token).eval(), processor
