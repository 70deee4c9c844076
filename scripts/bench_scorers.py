"""Throughput of the in-process judge and HPSv3 on random-init models of their real architectures.

Self-contained: the models are built from configs (no downloads) and the images are the shipped
pool's PNGs (no Chromium). Judge images/s counts candidates, each judged against `--references`
pool images in both orders (2 x references forward rows per candidate), as in training.

    python scripts/bench_scorers.py --device cuda --size medium --judge-arch qwen3_vl_moe
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from lit_watercolour.records import RenderResult, Rollout
from lit_watercolour.rewards.hpsv3 import HPSv3Model, HPSv3Term, add_reward_token
from lit_watercolour.rewards.judge import JudgeTerm
from lit_watercolour.rewards.pool import SHIPPED_POOL, ReferencePool
from lit_watercolour.rewards.transformers_judge import TransformersJudge
from lit_watercolour.offline.tiny_models import tiny_qwen2_vl, tiny_qwen3_vl

# (text hidden, text layers, vision depth, vision width)
SIZES = {"tiny": (64, 2, 2, 32), "small": (512, 8, 4, 256), "medium": (1024, 16, 8, 512), "large": (2048, 28, 16, 1024)}


def timed(fn, repeats: int, device: str) -> float:
    fn()  # warm-up: kernels, allocator
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
    ap.add_argument("--judge-arch", default="qwen3_vl_moe", choices=["qwen2_vl", "qwen3_vl", "qwen3_vl_moe"])
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--references", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16, help="forward rows per batch for both scorers")
    ap.add_argument("--judge-pixels", type=int, default=448 * 448)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pool", type=Path, default=SHIPPED_POOL)
    args = ap.parse_args()

    hidden, layers, depth, width = SIZES[args.size]
    dtype = getattr(torch, args.dtype)
    pool = ReferencePool.from_folder(args.pool)
    pngs = [pool.references[i % len(pool)].png for i in range(args.images)]
    rollouts = [Rollout("a loose watercolour flower", "", i // 4, i // 4, render=RenderResult(png=p)) for i, p in enumerate(pngs)]
    print(f"device={args.device} dtype={args.dtype} size={args.size} (hidden {hidden}, layers {layers}, "
          f"vision {depth}x{width}) images={args.images} from {args.pool}")

    bench_judge(args, rollouts, hidden, layers, depth, width, dtype)
    bench_hpsv3(args, rollouts, hidden, layers, depth, width, dtype)


def bench_judge(args, rollouts, hidden, layers, depth, width, dtype) -> None:
    if args.judge_arch == "qwen2_vl":
        model, processor = tiny_qwen2_vl(hidden, layers, depth, width)
    else:
        model, processor = tiny_qwen3_vl(hidden, layers, depth, width, moe=args.judge_arch == "qwen3_vl_moe")
    model = model.to(args.device, dtype)
    judge = JudgeTerm(TransformersJudge.from_model(model, processor, args.batch_size, args.judge_pixels),
                      pool=str(args.pool), references=args.references)
    judge.setup(torch.device(args.device))
    s = timed(lambda: judge.score(rollouts), args.repeats, args.device)
    n = len(rollouts)
    print(f"judge  {type(model).__name__}: {n / s:.2f} images/s "
          f"({2 * args.references * n / s:.1f} comparisons/s), {s:.3f} s per batch of {n}")


def bench_hpsv3(args, rollouts, hidden, layers, depth, width, dtype) -> None:
    backbone, processor = tiny_qwen2_vl(hidden, layers, depth, width)
    token = add_reward_token(processor)
    backbone.resize_token_embeddings(len(processor.tokenizer), mean_resizing=False)
    model = HPSv3Model(backbone.to(dtype), token).to(args.device)  # rm_head stays fp32, as in HPSv3
    scorer = HPSv3Term.from_model(model, processor, batch_size=args.batch_size)
    s = timed(lambda: scorer.score(rollouts), args.repeats, args.device)
    print(f"hpsv3  Qwen2VL backbone: {len(rollouts) / s:.2f} images/s, {s:.3f} s per batch of {len(rollouts)}")

if __name__ == "__main__":
    main()
