"""Build the tiny embedded policy: a tokenizer and a small Qwen3 pre-trained on the sketch corpus.

The offline default config needs a policy that already writes valid p5.brush sketches, so that
GRPO has something to improve on a laptop with no Hub access. This script learns a tokenizer, writes a
random-init Qwen3 with it, and trains every weight on `lit_watercolour.offline.corpus` with
`python -m lit_watercolour sft --model.full true` (prompts exactly as `fit` builds them, the loss on the
sketch's tokens); then saves a standard transformers folder (config, bf16 safetensors, tokenizer, generation
config).

    python scripts/make_tiny_policy.py --out lit_watercolour/assets/tiny_policy  # add --device cuda where a GPU is

The shipped checkpoint is these defaults with --device cuda (timings in docs/results.md). Fewer steps
give a policy that writes valid sketches but blurs the corpus's qualities into one average wash,
which leaves GRPO little to learn.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from tokenizers import Regex, pre_tokenizers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from lit_watercolour.__main__ import SFT_CONFIG
from lit_watercolour.__main__ import main as sft_main
from lit_watercolour.offline.corpus import make_corpus
from lit_watercolour.prompts import chat_messages
from lit_watercolour.offline.tiny_models import QWEN_TOKENS, THINK_TOKENS, bpe_tokenizer


def build_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE over pieces cut at line breaks (with their indent), digit runs (up to 3) and
    hex colours. Within a line the templated code merges into long tokens (`brush.vertex(`), so
    sketches stay a few hundred tokens; a colour is one token, so a sampled one is always valid."""
    split = pre_tokenizers.Split(Regex(r"#[0-9a-fA-F]{6}|\n *|\p{N}{1,3}"), "isolated")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    fast = bpe_tokenizer(texts, vocab_size, QWEN_TOKENS, pre_tokenizer=pre_tokenizers.Sequence([split, byte_level]),
                         padding_side="left")
    fast.add_special_tokens({"additional_special_tokens": QWEN_TOKENS})
    fast.add_tokens(THINK_TOKENS)  # ordinary tokens here, as in Qwen3's vocabulary
    return fast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("lit_watercolour/assets/tiny_policy"))
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--vocab-size", type=int, default=3000)  # an upper bound: merges run out near 2.3k
    parser.add_argument("--tokenizer-samples", type=int, default=3000)
    parser.add_argument("--hidden-size", type=int, default=192)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", type=str, default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    # the tokenizer sees what the model will: each turn's text without its special tokens
    samples = make_corpus(args.tokenizer_samples, seed=args.seed)
    texts = ["assistant\n"] + [f"{m['role']}\n{m['content']}" for s in samples for m in chat_messages(s.subject)]
    texts += [s.completion for s in samples]
    tok = build_tokenizer(texts, args.vocab_size)
    print(f"tokenizer: {len(tok)} tokens")

    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=args.hidden_size,
        intermediate_size=args.hidden_size * 3,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=max(1, args.heads // 2),
        head_dim=args.hidden_size // args.heads,
        max_position_embeddings=2048,
        rope_theta=10_000.0,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    start = time.time()
    with tempfile.TemporaryDirectory() as work:
        init, runs = Path(work) / "init", Path(work) / "runs"
        Qwen3ForCausalLM(config).save_pretrained(init)
        tok.save_pretrained(init)
        # the corpus sketches past the tokenizer's seeds: one fresh batch a step, nothing repeats
        cli = sft_main(["sft", "--config", str(SFT_CONFIG), "--model.full", "true", "--model.policy.model", str(init),
                        "--model.policy.dtype", "float32", "--model.policy.gradient_checkpointing", "false",
                        "--model.optim.lr", str(args.lr), "--model.optim.warmup_steps", str(args.warmup),
                        "--model.optim.lr_scheduler", "cosine", "--model.optim.betas", "[0.9, 0.95]",
                        "--model.optim.weight_decay", "0.01", "--model.samples_per_subject", "0", "--model.rewards", "[]",
                        "--model.threads.update", str(args.threads), "--data.source", "corpus",
                        "--data.num_samples", str(args.steps * args.batch_size + 1), "--data.val_fraction",
                        str(1 / (args.steps * args.batch_size + 1)), "--data.batch_size", str(args.batch_size),
                        "--data.seed", str(args.seed + 1), "--seed_everything", str(args.seed),
                        "--trainer.accelerator", args.device, "--trainer.max_steps", str(args.steps),
                        "--trainer.max_epochs", "1", "--trainer.val_check_interval", "null", "--trainer.check_val_every_n_epoch", "1",
                        "--trainer.enable_checkpointing", "false", "--trainer.default_root_dir", str(runs),
                        "--trainer.logger.init_args.save_dir", str(runs)])
        model = Qwen3ForCausalLM.from_pretrained(cli.model.run_dir() / "model")
    args.out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out)
    tok.save_pretrained(args.out)
    GenerationConfig(
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=1024
    ).save_pretrained(args.out)
    print(f"saved to {args.out} after {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
