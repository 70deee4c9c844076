"""Time the rollout phase of the default run on a CPU: sample a group, render it, gate it.

Runs `lit_watercolour.rollout.collect` (the training step's own rollout) with the shipped tiny policy and a
warm Chromium pool, for settings given as `generation_batch_size:merge_adapter[:pixel_density[:lean_decode]]`:

    python scripts/bench_rollout.py --variants 8:true:0.5:false 8:true:0.5:true --repeats 3

- `4:false:1`: two `generate` calls of 4 rows, the adapter applied as a side branch of every linear;
- `8:false:1`: one call of 8 rows; each row is handed to the renderer the step it ends;
- `8:true:1`:  the same with the adapter merged into the base weights while decoding;
- `8:true:0.5`: renders captured at 256x256, decoded by transformers `generate`;
- `8:true:0.5:true`: the default config: the same, decoded by `lit_watercolour.decoding` (lean_decode).
Sampling uses the default config's top_p 0.95 / top_k 0 (off) unless told otherwise.

Every variant samples the same prompts with the same seeds, after one warm-up rollout. Printed
per variant: mean seconds of sampling and of the whole rollout (until the last render is back),
tokens per second, and the speed-up of the whole rollout over the first variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lit_watercolour.data import Prompt, chat_prompt
from lit_watercolour.module import GRPOModule
from lit_watercolour.policy import PolicyConfig
from lit_watercolour.rollout import collect
from lit_watercolour.sampling import SamplingConfig

POLICY = "lit_watercolour/assets/tiny_policy"


def rollout_seconds(module: GRPOModule, prompt: Prompt, n: int, seed: int) -> dict[str, float]:
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    batch = collect(module.sampler, module.pool, [prompt], n)
    return {"rollout_s": time.perf_counter() - t0, "sampling_s": batch.metrics["time/sampling_s"],
            "tokens": float(batch.samples.num_tokens.sum()),
            "passed": sum(r.gate.passed for r in batch.rollouts) / len(batch.rollouts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", nargs="+", default=["8:true:0.5:false", "8:true:0.5:true"])
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=1024)
    ap.add_argument("--render-pool-size", type=int, default=2)
    args = ap.parse_args()
    results = []
    for variant in args.variants:
        parts = variant.split(":")
        batch_size, merge, density, lean = parts + ["1", "false"][len(parts) - 2 :]
        sampling = SamplingConfig(max_completion_length=args.max_completion_length, generation_batch_size=int(batch_size),
                                  merge_adapter=merge.lower() == "true", top_p=args.top_p, top_k=args.top_k,
                                  lean_decode=lean.lower() == "true")
        module = GRPOModule(policy=PolicyConfig(model=POLICY, dtype="float32", gradient_checkpointing=False),
                            sampling=sampling, render_pool_size=args.render_pool_size, cpu_threads=1,
                            render_kwargs={"pixel_density": float(density)})
        module.configure_model()
        module._open_pool()
        try:
            prompt = Prompt("a peach hibiscus", chat_prompt(module.tokenizer, "a peach hibiscus"), seed=0)
            rollout_seconds(module, prompt, args.num_generations, seed=-1)  # warm-up: pages, kernels
            runs = [rollout_seconds(module, prompt, args.num_generations, seed) for seed in range(args.repeats)]
        finally:
            module.teardown("fit")
        row = {"variant": variant, **{k: statistics.mean(r[k] for r in runs) for k in runs[0]}}
        row["sampling_tokens_per_s"] = row["tokens"] / row["sampling_s"]
        row["speedup_rollout"] = results[0]["rollout_s"] / row["rollout_s"] if results else 1.0
        results.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main()
