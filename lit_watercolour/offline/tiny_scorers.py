"""Tiny random-init scorer models: HPSv3's reward head on a tiny Qwen2-VL (tests, benchmarks, the rehearsal)."""

from __future__ import annotations

import torch

from lit_watercolour.offline.tiny_models import tiny_qwen2_vl
from lit_watercolour.rewards.hpsv3 import HPSv3Model, add_reward_token


def tiny_hpsv3(seed: int = 0, **sizes):
    """(HPSv3Model, processor): HPSv3's reward head on a tiny random-init Qwen2-VL, with `<|Reward|>` added."""
    backbone, processor = tiny_qwen2_vl(seed=seed, **sizes)
    token = add_reward_token(processor)
    backbone.resize_token_embeddings(len(processor.tokenizer))
    torch.manual_seed(seed + 1)
    return HPSv3Model(backbone, token).eval(), processor
