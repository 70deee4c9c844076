"""What the update benchmarks run on: random-init models of named shapes (`--preset`), saved as a checkpoint
folder so the code that loads a Hub checkpoint loads them, and random full-length completions.
Used by scripts/bench_step.py and scripts/bench_sampler.py."""

from __future__ import annotations

from pathlib import Path

import torch

from lit_watercolour.policy import DTYPES, model_class
from lit_watercolour.offline.tiny_models import tiny_config, tiny_tokenizer

QWEN3_VOCAB = 151936
QWEN35_A3B = dict(num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
                  num_attention_heads=16, num_key_value_heads=2, head_dim=256, linear_num_value_heads=32,
                  linear_num_key_heads=16, linear_key_head_dim=128, linear_value_head_dim=128)
# Qwen3 dense shapes from the public model cards / configs; the MoE one is a small stand-in, not a release
PRESETS = {
    "tiny": dict(arch="qwen3", hidden=64, layers=2),
    "qwen3-1.7b": dict(arch="qwen3", hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128,
                       intermediate=6144, vocab=QWEN3_VOCAB, tie=True),
    "qwen3-4b": dict(arch="qwen3", hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128,
                     intermediate=9728, vocab=QWEN3_VOCAB, tie=True),
    "qwen3.5-moe-small": dict(arch="qwen3_5_moe", hidden=1024, layers=8, vocab=QWEN3_VOCAB),
    # the recipe's family (hybrid linear/full attention, 3:1) at a few billion parameters, ~0.6B active
    "qwen3.5-moe-3b": dict(arch="qwen3_5_moe", hidden=1536, layers=24, vocab=QWEN3_VOCAB, moe=dict(
        num_experts=64, num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
        num_attention_heads=16, num_key_value_heads=2, head_dim=128, linear_num_value_heads=16,
        linear_num_key_heads=8, linear_key_head_dim=128, linear_value_head_dim=128)),
    # the recipe's policy, Qwen3.5-35B-A3B's text model (its public config): ~70 GB in bf16, more than a node's disk
    "qwen3.5-35b-a3b": dict(arch="qwen3_5_moe", hidden=2048, layers=40, vocab=248320, moe=QWEN35_A3B),
    # a slice of it: the same widths and layer pattern, 8 of its 40 layers (per-layer figures scale by 5)
    "qwen3.5-35b-a3b-8layers": dict(arch="qwen3_5_moe", hidden=2048, layers=8, vocab=248320, moe=QWEN35_A3B),
}
PROMPT = "a peach hibiscus"


def model_config(spec: dict, tokenizer):
    """A transformers config: `tiny_config`'s shapes (with the preset's overrides), or a dense Qwen3 with every dimension given."""
    vocab = spec.get("vocab") or len(tokenizer)  # ids past the tokenizer's decode to nothing: fine, nothing renders
    if "heads" in spec:
        from transformers import Qwen3Config

        cfg = Qwen3Config(vocab_size=vocab, hidden_size=spec["hidden"], num_hidden_layers=spec["layers"],
                          num_attention_heads=spec["heads"], num_key_value_heads=spec["kv_heads"],
                          head_dim=spec["head_dim"], intermediate_size=spec["intermediate"],
                          tie_word_embeddings=spec.get("tie", False), max_position_embeddings=40960)
    else:
        cfg = tiny_config(spec["arch"], vocab, hidden_size=spec["hidden"], num_layers=spec["layers"])
        text = cfg.get_text_config()
        for key, value in spec.get("moe", {}).items():
            setattr(text, key, value)
        for c in (cfg, getattr(cfg, "text_config", None)):
            if c is not None:
                c.max_position_embeddings = 40960
    for c in (cfg, getattr(cfg, "text_config", None)):
        if c is not None:
            c.eos_token_id, c.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    return cfg


def save_random_model(spec: dict, dtype: str, path: Path, device: torch.device) -> str:
    tokenizer = tiny_tokenizer()
    cfg = model_config(spec, tokenizer)
    torch.manual_seed(0)
    with device:  # random init of billions of weights: seconds on a GPU, minutes on its host's CPU
        model = model_class(cfg).from_config(cfg, dtype=DTYPES[dtype])
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def random_completions(tokenizer, n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """[n, length] token ids drawn uniformly from the tokenizer's ordinary tokens: no row ends early."""
    ordinary = torch.tensor(sorted(set(range(len(tokenizer))) - set(tokenizer.all_special_ids)))
    return ordinary[torch.randint(len(ordinary), (n, length), generator=generator)]
