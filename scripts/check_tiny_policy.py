"""Check a pre-trained policy: sample, render, gate; report pass rate, variety and speed.

    python scripts/check_tiny_policy.py --policy lit_watercolour/assets/tiny_policy --per-subject 16

Samples `--per-subject` completions at `--temperature`, `--top-p`, `--top-k` (the default config's) for each subject with `model.generate`
(KV cache, batches of `--batch-size`), renders the extracted sketches in headless Chromium and
gates them. Variety is the number of distinct sketches and the spread of painted fraction.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from lit_watercolour.gate import gate, static_gate
from lit_watercolour.prompts import chat_messages
from lit_watercolour.render import ThreadedRenderPool
from lit_watercolour.sketch import extract_code

DEFAULT_SUBJECTS = ["a peach hibiscus", "a red poppy", "a misty hillside at dawn", "a bowl of lemons"]


def sample(model, tok, subject: str, n: int, temperature: float, top_p: float, top_k: int, max_new_tokens: int) -> tuple[list[str], int]:
    """n completions for one subject and the number of tokens generated."""
    prompt = tok.apply_chat_template(chat_messages(subject), add_generation_prompt=True, tokenize=False, enable_thinking=False)
    batch = tok([prompt] * n, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**batch, do_sample=True, temperature=temperature, top_p=top_p, top_k=top_k, max_new_tokens=max_new_tokens)
    new = out[:, batch["input_ids"].shape[1] :]
    num_tokens = int((new != tok.pad_token_id).sum())
    return tok.batch_decode(new, skip_special_tokens=True), num_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", type=Path, default=Path("lit_watercolour/assets/tiny_policy"))
    parser.add_argument("--subjects", type=str, nargs="+", default=DEFAULT_SUBJECTS)
    parser.add_argument("--per-subject", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--dtype", type=str, default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--render-size", type=int, default=2)
    parser.add_argument("--save-pngs", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(args.policy)
    model = AutoModelForCausalLM.from_pretrained(args.policy, dtype=getattr(torch, args.dtype)).eval()

    completions, subjects, tokens, sampling_s = [], [], 0, 0.0
    for subject in args.subjects:
        for start in range(0, args.per_subject, args.batch_size):
            t = time.perf_counter()
            with torch.no_grad():
                texts, n = sample(model, tok, subject, min(args.batch_size, args.per_subject - start), args.temperature, args.top_p, args.top_k, args.max_new_tokens)
            sampling_s += time.perf_counter() - t
            completions += texts
            subjects += [subject] * len(texts)
            tokens += n
    print(f"sampled {len(completions)} completions, {tokens} tokens in {sampling_s:.1f} s: {tokens / sampling_s:.0f} tokens/s (batch {args.batch_size})")

    codes = [extract_code(c) for c in completions]
    static = [static_gate(code, c) for code, c in zip(codes, completions)]
    to_render = [i for i, verdict in enumerate(static) if verdict is None]
    t = time.perf_counter()
    with ThreadedRenderPool(size=args.render_size) as pool:
        renders = dict(zip(to_render, pool.render_many([codes[i] for i in to_render], [args.seed] * len(to_render))))
    print(f"rendered {len(to_render)} sketches in {time.perf_counter() - t:.1f} s")
    verdicts = [static[i] or gate(codes[i], renders[i]) for i in range(len(codes))]

    if args.save_pngs is not None:
        args.save_pngs.mkdir(parents=True, exist_ok=True)
        for i, render in renders.items():
            if render.png:
                (args.save_pngs / f"{i:03d}_{verdicts[i].reason}.png").write_bytes(render.png)
    passed = [v.passed for v in verdicts]
    print(f"gate pass rate: {sum(passed)}/{len(passed)} = {sum(passed) / len(passed):.0%}")
    print("reasons:", dict(Counter(v.reason for v in verdicts)))
    for subject in args.subjects:
        rows = [i for i, s in enumerate(subjects) if s == subject]
        fractions = [renders[i].painted_fraction for i in rows if i in renders and verdicts[i].passed]
        spread = f"painted fraction {min(fractions):.3f}-{max(fractions):.3f} (sd {statistics.pstdev(fractions):.3f})" if fractions else ""
        print(f"{subject}: {sum(passed[i] for i in rows)}/{len(rows)} pass, {len({codes[i] for i in rows})} distinct sketches, {spread}")
    lengths = [len(tok(c, add_special_tokens=False)["input_ids"]) for c in completions]
    print(f"completion tokens: median {statistics.median(lengths):.0f}, min {min(lengths)}, max {max(lengths)}")


if __name__ == "__main__":
    main()
