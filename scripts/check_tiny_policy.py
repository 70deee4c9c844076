"""Check a pre-trained policy: sample, render, gate; report pass rate, variety and speed.

    python scripts/check_tiny_policy.py --policy lit_watercolour/assets/tiny_policy --per-subject 16

Samples `--per-subject` completions at `--temperature`, `--top-p`, `--top-k` (the default config's) for each
subject with the training step's own rollout (`lit_watercolour.rollout.RolloutPipeline`: the hf sampler in batches of
`--batch-size`, each sketch rendered in headless Chromium as its row ends, then gated). Variety is the number
of distinct sketches and the spread of painted fraction.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from lit_watercolour.data import Prompt, chat_prompt
from lit_watercolour.rollout import RolloutPipeline
from lit_watercolour.sampling import HFSampler, SamplingConfig

DEFAULT_SUBJECTS = ["a peach hibiscus", "a red poppy", "a misty hillside at dawn", "a bowl of lemons"]


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
    sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                              max_completion_length=args.max_new_tokens, generation_batch_size=args.batch_size,
                              lean_decode=False)  # lean decoding folds a LoRA adapter: this model has none
    sampler = HFSampler(model, tok, sampling)
    rollouts, sampling_s, wait_s = [], 0.0, 0.0
    pipeline = RolloutPipeline(sampler, pool_size=args.render_size)
    try:
        for subject in args.subjects:
            batch = pipeline.collect([Prompt(subject, chat_prompt(tok, subject), args.seed)], args.per_subject)
            rollouts += batch.rollouts
            sampling_s += batch.metrics["time/sampling_s"]
            wait_s += batch.metrics["time/render_wait_s"]
    finally:
        pipeline.close()
    tokens = sum(r.num_tokens for r in rollouts)
    print(f"sampled {len(rollouts)} completions, {tokens} tokens in {sampling_s:.1f} s: {tokens / sampling_s:.0f} tokens/s "
          f"(batch {args.batch_size}); renders left after sampling: {wait_s:.1f} s")

    if args.save_pngs is not None:
        args.save_pngs.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(rollouts):
            if r.render is not None and r.render.png:
                (args.save_pngs / f"{i:03d}_{r.gate.reason}.png").write_bytes(r.render.png)
    passed = [r.gate.passed for r in rollouts]
    print(f"gate pass rate: {sum(passed)}/{len(passed)} = {sum(passed) / len(passed):.0%}")
    print("reasons:", dict(Counter(r.gate.reason for r in rollouts)))
    for subject in args.subjects:
        rows = [r for r in rollouts if r.prompt == subject]
        fractions = [r.render.painted_fraction for r in rows if r.render is not None and r.gate.passed]
        spread = f"painted fraction {min(fractions):.3f}-{max(fractions):.3f} (sd {statistics.pstdev(fractions):.3f})" if fractions else ""
        print(f"{subject}: {sum(r.gate.passed for r in rows)}/{len(rows)} pass, {len({r.code for r in rows})} distinct sketches, {spread}")
    lengths = [r.num_tokens for r in rollouts]
    print(f"completion tokens: median {statistics.median(lengths):.0f}, min {min(lengths)}, max {max(lengths)}")


if __name__ == "__main__":
    main()
