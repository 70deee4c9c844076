"""Time one MoE experts layer, forward + backward, with frozen expert weights: ours against transformers'.

`frozen_grouped_mm` (lit_watercolour/kernels/experts.py) against transformers' `grouped_mm` experts forward on the
same module and routing (Qwen3.5-MoE experts at the `qwen3.5-moe-3b` bench preset's sizes by default),
each warmed up then timed; prints one JSON line per implementation with seconds, tokens/s, peak memory
and the largest difference from transformers' output and input gradient (relative to their largest value).

    python scripts/bench_experts.py --tokens 32768             # a GPU: the update step's micro-batch of 4 x 8k
    python scripts/bench_experts.py --tokens 2048 --device cpu
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers.integrations.moe import grouped_mm_experts_forward
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeExperts

from lit_watercolour.kernels.experts import frozen_grouped_mm_experts_forward
from lit_watercolour.offline.tiny_models import tiny_config

IMPLS = {"transformers_grouped_mm": grouped_mm_experts_forward, "frozen_grouped_mm": frozen_grouped_mm_experts_forward}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def relative_difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """The largest absolute difference over the largest absolute value of `theirs`."""
    return float((ours.float() - theirs.float()).abs().max() / theirs.float().abs().max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--hidden", type=int, default=1536)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)

    cfg = tiny_config("qwen3_5_moe", 64, hidden_size=args.hidden).get_text_config()
    cfg.num_experts, cfg.moe_intermediate_size = args.experts, args.intermediate
    torch.manual_seed(0)
    experts = Qwen3_5MoeExperts(cfg).to(device, dtype).requires_grad_(False)
    with torch.no_grad():
        experts.gate_up_proj.normal_(0, args.hidden**-0.5)
        experts.down_proj.normal_(0, args.intermediate**-0.5)
    hidden = torch.randn(args.tokens, args.hidden, device=device, dtype=dtype)
    router = torch.randn(args.tokens, args.experts, device=device).softmax(-1)
    weights, index = router.topk(args.top_k, dim=-1)
    weights = (weights / weights.sum(-1, keepdim=True)).to(dtype)
    grad_out = torch.randn_like(hidden)

    reference = None
    for name, forward in IMPLS.items():
        def step():
            x, w = hidden.detach().requires_grad_(), weights.detach().requires_grad_()
            out = forward(experts, x, index, w)
            out.backward(grad_out)
            return out.detach(), x.grad

        out, grad = step()  # warm-up (and the values compared)
        synchronize(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        seconds = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            step()
            synchronize(device)
            seconds.append(time.perf_counter() - t)
        if reference is None:
            reference = (out, grad)
        row = {"impl": name, "device": str(device), "dtype": args.dtype, "tokens": args.tokens,
               "fwd_bwd_s": statistics.median(seconds), "tokens_per_s": args.tokens / statistics.median(seconds),
               "max_rel_diff_output": relative_difference(out, reference[0]),
               "max_rel_diff_input_grad": relative_difference(grad, reference[1])}
        if device.type == "cuda":
            row["peak_extra_gib"] = round((torch.cuda.max_memory_allocated(device) - base) / 2**30, 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
