"""Build the tiny embedded policy: a tokenizer and a small Qwen3 pre-trained on the sketch corpus.

The offline default config needs a policy that already writes valid p5.brush sketches, so that
GRPO has something to improve on a laptop with no Hub access. This script trains one from
scratch on `lit_watercolour.offline.corpus` and saves a standard transformers folder (config, bf16
safetensors, tokenizer, generation config).

    python scripts/make_tiny_policy.py --out lit_watercolour/assets/tiny_policy  # add --device cuda where a GPU is

The shipped checkpoint is these defaults with --device cuda (timings in docs/results.md). Fewer steps
give a policy that writes valid sketches but blurs the corpus's qualities into one average wash,
which leaves GRPO little to learn.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path

import torch
from tokenizers import Regex, pre_tokenizers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from lit_watercolour.offline.corpus import Sample, make_corpus, make_sample
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


def encode(tok: PreTrainedTokenizerFast, sample: Sample, enable_thinking: bool) -> tuple[list[int], list[int]]:
    """Prompt ids exactly as a sampler builds them, then completion ids ending in <|im_end|>."""
    kwargs = {} if enable_thinking else {"enable_thinking": False}
    prompt = tok.apply_chat_template(chat_messages(sample.subject), add_generation_prompt=True, tokenize=False, **kwargs)
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tok(sample.completion, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return prompt_ids, completion_ids


def collate(pairs: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch; the loss sees completion tokens only."""
    width = max(len(p) + len(c) for p, c in pairs)
    ids = torch.full((len(pairs), width), pad_id)
    labels = torch.full((len(pairs), width), -100)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (p, c) in enumerate(pairs):
        n = len(p) + len(c)
        ids[row, :n] = torch.tensor(p + c)
        labels[row, len(p) : n] = torch.tensor(c)
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


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

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

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
    model = Qwen3ForCausalLM(config).to(args.device)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)

    # fresh corpus samples every step (seeded past the tokenizer's), so nothing repeats
    first_seed = (args.seed + 1) * 10_000_000
    start = time.time()
    model.train()
    for step in range(args.steps):
        pairs = [encode(tok, make_sample(first_seed + step * args.batch_size + i), rng.random() < 0.5) for i in range(args.batch_size)]
        batch = {k: v.to(args.device) for k, v in collate(pairs, tok.pad_token_id).items()}
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}  lr {group['lr']:.2e}  {time.time() - start:6.0f} s", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out)
    tok.save_pretrained(args.out)
    GenerationConfig(
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=1024
    ).save_pretrained(args.out)
    print(f"saved to {args.out} after {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
