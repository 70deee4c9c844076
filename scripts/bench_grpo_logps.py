"""The LM head + GRPO loss alone, forward and backward, at recipe sizes: time, peak memory, agreement.

From the last hidden states [B, T, H] of one micro-batch and a frozen head [V, H] (a tied
embedding, as in Qwen3-4B) to the DAPO loss and d loss/d hidden, four ways:
  ours:   `lit_watercolour.kernels.lm_head.linear_logps_and_entropy` (token chunks) -> `grpo_loss`
  trl:    TRL 1.16's `trl.kernels.ChunkedLogProbFunction` (its fused LM head) -> `grpo_loss`
  liger:  Liger-Kernel's `LigerFusedLinearGRPOLoss` (the loss fused with the head, grads in forward)
  full:   the whole logits, float32 log_softmax, autograd (what the head costs without chunking)
TRL and Liger run only when installed. Each is warmed up, then timed `--repeats` times.

    python scripts/bench_grpo_logps.py --batch 8 --tokens 8192 --hidden 2560 --vocab 151936
    python scripts/bench_grpo_logps.py --device cpu --batch 2 --tokens 64 --hidden 32 --vocab 1000 --dtype float32
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time

import torch

from lit_watercolour.grpo import grpo_loss
from lit_watercolour.kernels.lm_head import linear_logps_and_entropy


def dapo(logps, case):
    return grpo_loss(logps, case["advantages"], case["mask"], loss_type="dapo", epsilon_high=0.28,
                     num_items_in_batch=case["num_items"])[0]


def ours(case, temperature):
    logps, entropy = linear_logps_and_entropy(case["hidden"], case["weight"], case["ids"], temperature)
    return dapo(logps, case), logps


def trl(case, temperature):
    from trl.kernels import ChunkedLogProbFunction

    h = case["hidden"]
    logps, *_ = ChunkedLogProbFunction.apply(h.reshape(-1, h.shape[-1]), case["weight"], None, case["ids"].reshape(-1),
                                             temperature, 32768, None, 1.0, ("entropy",))
    logps = logps.view(case["ids"].shape)
    return dapo(logps, case), logps


def liger(case, temperature):
    from liger_kernel.chunked_loss import LigerFusedLinearGRPOLoss

    loss_fn = LigerFusedLinearGRPOLoss(beta=0.0, use_ref_model=False, loss_type="dapo", epsilon_low=0.2,
                                       epsilon_high=0.28, temperature=temperature)
    loss, _ = loss_fn(case["hidden"], case["weight"], case["ids"], case["mask"], case["advantages"],
                      num_items_in_batch=case["num_items"])
    return loss, None


def full(case, temperature):
    logits = case["hidden"] @ case["weight"].T
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    logps = logp.gather(-1, case["ids"][..., None]).squeeze(-1)
    -(logp.exp() * logp).sum(-1)  # the entropy, as the others compute it
    return dapo(logps, case), logps


IMPLS = {"ours": ours, "trl": trl, "liger": liger, "full": full}
PACKAGES = {"trl": "trl", "liger": "liger_kernel"}


def measure(fn, case, temperature, device) -> tuple[float, float, torch.Tensor, torch.Tensor | None]:
    """(seconds, peak GiB above the inputs, loss, logps) of one forward + backward."""
    case["hidden"].grad = None
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    start = time.perf_counter()
    loss, logps = fn(case, temperature)
    loss.backward()
    sync()
    seconds = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated() - base) / 2**30 if device.type == "cuda" else None
    return seconds, peak, loss.detach(), None if logps is None else logps.detach()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=2560)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--impls", nargs="+", choices=sorted(IMPLS), default=["ours", "trl", "liger", "full"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    g = torch.Generator(device=device).manual_seed(0)
    shape = (args.batch, args.tokens)
    lengths = torch.randint(args.tokens // 2, args.tokens + 1, (args.batch,), generator=g, device=device)
    mask = (torch.arange(args.tokens, device=device) < lengths[:, None]).float()
    case = {
        "hidden": torch.randn(*shape, args.hidden, generator=g, device=device, dtype=dtype).requires_grad_(),
        "weight": torch.randn(args.vocab, args.hidden, generator=g, device=device, dtype=dtype) * args.hidden**-0.5 * 4,
        "ids": torch.randint(0, args.vocab, shape, generator=g, device=device),
        "advantages": torch.randn(args.batch, generator=g, device=device),
        "mask": mask,
        "num_items": mask.sum(),
    }
    print(f"hidden {tuple(case['hidden'].shape)} x head {tuple(case['weight'].shape)} {args.dtype}: full logits would be "
          f"{args.batch * args.tokens * args.vocab * 4 / 2**30:.1f} GiB in float32", flush=True)
    results, reference = [], None
    for name in args.impls:
        if name in PACKAGES and importlib.util.find_spec(PACKAGES[name]) is None:
            results.append({"impl": name, "error": f"{PACKAGES[name]} is not installed"})
            continue
        try:
            measure(IMPLS[name], case, args.temperature, device)  # warm-up (and compilation)
            runs = [measure(IMPLS[name], case, args.temperature, device) for _ in range(args.repeats)]
        except Exception as e:  # out of memory, or an API this version lacks: report it, run the rest
            results.append({"impl": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
            print(json.dumps(results[-1]), flush=True)
            continue
        peak, loss, logps = runs[-1][1], runs[-1][2], runs[-1][3]
        grad = case["hidden"].grad.float()
        if reference is None:
            reference = (loss, logps, grad)
        row = {"impl": name, "fwd_bwd_s": round(statistics.mean(r[0] for r in runs), 4),
               "peak_above_inputs_gib": peak and round(peak, 2), "loss": loss.item(),
               "max_abs_loss_diff": (loss - reference[0]).abs().item(),
               "grad_rel_diff": ((grad - reference[2]).norm() / reference[2].norm()).item()}
        if logps is not None and reference[1] is not None:
            row["max_abs_logps_diff"] = (logps - reference[1]).abs().max().item()
        results.append(row)
        print(json.dumps(row), flush=True)
        del runs, grad
    print(json.dumps({"results": results}), flush=True)


if __name__ == "__main__":
    main()
