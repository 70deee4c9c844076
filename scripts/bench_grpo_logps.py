"""Peak memory and time of per-token log-probs + entropy, forward and backward, at recipe sizes.

Compares `lit_watercolour.grpo.token_logps_and_entropy` with autograd through a full
log_softmax, in float32 (what an fp32 upcast costs) and row by row in the logits' dtype
(TRL's fallback for bf16 logits in `selective_log_softmax`). Needs a CUDA device.

    python scripts/bench_grpo_logps.py --batch 2 --tokens 4096 --vocab 151936
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from lit_watercolour.grpo import token_logps_and_entropy


def full_fp32(logits, ids, temperature):
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, ids[..., None]).squeeze(-1), -(logp.exp() * logp).sum(-1)


def rowwise_native(logits, ids, temperature):
    logps, entropies = [], []
    for row, row_ids in zip(logits / temperature, ids):
        logp = torch.log_softmax(row, dim=-1)
        logps.append(logp.gather(-1, row_ids[:, None]).squeeze(-1))
        entropies.append(-(logp.exp() * logp).sum(-1))
    return torch.stack(logps), torch.stack(entropies)


def measure(fn, logits, ids, temperature) -> tuple[float, float]:
    """(peak GiB above the logits, seconds) of fn's forward plus backward."""
    logits.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    start = time.perf_counter()
    logps, entropy = fn(logits, ids, temperature)
    (logps.sum() + 0.01 * entropy.sum()).backward()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return (torch.cuda.max_memory_allocated() - base) / 2**30, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--chunk-sizes", type=int, nargs="+", default=[512, 1024, 4096])
    args = parser.parse_args()

    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    logits = (torch.randn(args.batch, args.tokens, args.vocab, device="cuda") * 4).to(dtype).requires_grad_()
    ids = torch.randint(0, args.vocab, (args.batch, args.tokens), device="cuda")
    print(f"logits {tuple(logits.shape)} {args.dtype}: {logits.nbytes / 2**30:.2f} GiB (its gradient is as large)")

    lean = token_logps_and_entropy(logits, ids, args.temperature)
    ref = full_fp32(logits, ids, args.temperature)
    for name, a, b in zip(["logps", "entropy"], lean, ref):
        print(f"max |ours - fp32 log_softmax| {name}: {(a - b).abs().max().item():.2e}")
    native = rowwise_native(logits, ids, args.temperature)
    for name, a, b in zip(["logps", "entropy"], native, ref):
        print(f"max |rowwise {args.dtype} - fp32 log_softmax| {name}: {(a.float() - b).abs().max().item():.2e}")
    del lean, ref, native

    candidates = [(f"ours chunk={c}", partial(token_logps_and_entropy, chunk_size=c)) for c in args.chunk_sizes]
    for name, fn in [*candidates, ("full_fp32", full_fp32), (f"rowwise_{args.dtype}", rowwise_native)]:
        measure(fn, logits, ids, args.temperature)  # warm-up
        peak, seconds = measure(fn, logits, ids, args.temperature)
        print(f"{name:17s} peak above logits {peak:6.2f} GiB   fwd+bwd {seconds * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
