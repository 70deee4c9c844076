"""Timing and memory of a benchmarked step on a device: phase clocks synchronised with the device, peak memory,
the update's figures (tokens/s, MFU) and a profile of its top kernels by kind. Used by scripts/bench_step.py."""

from __future__ import annotations

import contextlib
import gc
import json
import statistics
import time

import torch


class Clock:
    """Wall-clock seconds summed per phase, the device synchronised at both ends."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.seconds = device, {}

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def wrap(self, phase: str, fn):
        def timed(*args, **kwargs):
            self.sync()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - t0
        return timed


def reset_memory(device: torch.device) -> None:
    gc.collect()  # the previous run's model and optimizer state
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_gib(device: torch.device) -> float | None:
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None


@contextlib.contextmanager
def profiled(device: torch.device, rows: int):
    """torch.profiler around the block, then its top kernels (ops on a CPU) by their own time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        yield
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    averages = prof.key_averages()
    print(averages.table(sort_by=key, row_limit=rows, max_name_column_width=100), flush=True)
    kernels = [(e.key, e.self_device_time_total, e.count) for e in averages
               if e.device_type == torch.autograd.DeviceType.CUDA and e.self_device_time_total > 0]
    if kernels:
        print(json.dumps({"kernel_time_by_kind": kernel_time_by_kind(kernels)}), flush=True)


KERNEL_KINDS = {  # first match wins; names of cuBLAS, cuDNN, FlashAttention, Triton and ATen kernels
    "attention": ("flash", "fmha", "attention", "cudnn"),
    "matmul": ("gemm", "nvjet", "cutlass", "xmma", "splitk"),
    "triton (compiled)": ("triton",),
    "elementwise": ("elementwise", "vectorized", "unrolled", "copy", "fill"),
    "reduction": ("reduce", "norm", "softmax", "sum"),
}


def kernel_time_by_kind(kernels: list[tuple[str, float, int]]) -> dict:
    """Seconds and launches of device kernels by kind, from (name, microseconds, count) rows."""
    out: dict[str, dict] = {}
    for name, us, count in kernels:
        kind = next((k for k, words in KERNEL_KINDS.items() if any(w in name.lower() for w in words)), "other")
        row = out.setdefault(kind, {"s": 0.0, "launches": 0})
        row["s"] = round(row["s"] + us / 1e6, 4)
        row["launches"] += count
    return out


def update_figures(fwd_bwd: list[float], optimizer: list[float], tokens: int, flops: float, peak_tflops: float) -> dict:
    """Means over the timed steps (each step's seconds too), tokens/s and MFU of the forward + backward."""
    mean = statistics.mean(fwd_bwd)
    return {"update_fwd_bwd_s": mean, "update_fwd_bwd_reps_s": [round(t, 4) for t in fwd_bwd],
            "update_tokens_per_s": tokens / mean, "optimizer_s": statistics.mean(optimizer),
            "update_tflop": flops / 1e12, "mfu": flops / mean / (peak_tflops * 1e12)}
