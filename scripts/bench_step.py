"""Time one GRPO step's GPU side on a random-init model, and the same step in TRL's GRPOTrainer.

Phases: sampling (generate, then the sampler's own log-prob pass), the reference log-prob pass
(what beta > 0 adds), and the update (forward + backward over all rows, then the optimizer),
each with seconds and tokens/s, plus peak accelerator memory. It drives the trainer's pieces:
`lit_watercolour.policy.load_policy` (LoRA on all linear layers, gradient checkpointing), the
`hf` sampler, and the `lit_watercolour.grpo` advantages and loss.

Not measured: rendering and scoring. Rewards are random numbers (GPU nodes have no Chromium).
Completions are forced to full length (`min_new_tokens` = the length, EOS never ends a row), so
tokens/s figures compare like with like across runs and with TRL, whose generation gets the
same `min_new_tokens` through `generation_kwargs`. `--completions random` skips generation in
both (uniform random token ids of full length; TRL gets them through its `rollout_func` hook)
to time the update alone, where `generate` at long lengths would take most of a time budget.

The model is built from a config with random weights and saved to a temporary folder, so it is
loaded by the very code that loads a Hub checkpoint (`--model` takes a real one instead):

    python scripts/bench_step.py --preset qwen3-4b --completion-length 2048 --impls lit_watercolour trl
    python scripts/bench_step.py --arch qwen3 --hidden 2048 --layers 28 --completion-length 2048
    python scripts/bench_step.py --device cpu --preset tiny --completion-length 32 --dtype float32 --impls trl lit_watercolour

Each implementation is warmed up with one whole step (kernels, compilation, optimizer state), timed
and reported as `first_step_s` (`compile_s` of it compiling), then timed over `--repeats` steps; peak
memory is that of the timed steps. `lit_watercolour` with no knobs runs the shipped defaults, resolved
for the model's family and the device as a training run resolves them (`settings` in its line); an
implementation can carry knobs, `impl:key=value,...` (see `Variant`), so one call compares several
settings side by side, on several models (`--preset a b`):

    python scripts/bench_step.py --preset qwen3-4b --completion-length 8192 --completions random \
        --impls trl lit_watercolour lit_watercolour:mb=1,keep=inputs,compile=0 --profile 25

QLoRA and the 8-bit optimizer (bitsandbytes) against the bf16 LoRA, loss and gradient norm of the first
steps beside the speed and memory (the recipe's 35B-A3B as a slice of its layers, which fits the disk):

    python scripts/bench_step.py --preset qwen3-4b qwen3.5-35b-a3b-8layers --completion-length 4096 \
        --completions random --repeats 2 --impls lit_watercolour:compile=0 lit_watercolour:quant=4bit \
        lit_watercolour:quant=8bit lit_watercolour:compile=0,optim=adamw_8bit

MFU = model FLOPs of the update (`update_flops`: forward + backward matmuls and causal attention,
recomputation not counted) / forward-backward seconds / `--peak-tflops` (H200 dense bf16: 989).
`--profile N` runs one more step under torch.profiler and prints its top N kernels.

Each run prints a JSON line as it ends; the last line holds every figure: {"runs": [...]}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import torch
from _bench_models import PRESETS, PROMPT, random_completions, save_random_model  # scripts/ is on sys.path when run
from _bench_timing import Clock, peak_memory_gib, profiled, reset_memory, update_figures
from _bench_trl import TRL_MICRO_BATCH, bench_trl

from lit_watercolour import grpo
from lit_watercolour.data import chat_prompt
from lit_watercolour.flops import update_flops
from lit_watercolour.kernels.attention import AttentionBackend
from lit_watercolour.kernels.checkpointing import CheckpointKeep
from lit_watercolour.kernels.compile import compile_seconds
from lit_watercolour.policy import (
    DTYPES,
    PolicyConfig,
    adapter_in_model_dtype,
    completion_logps,
    decoder_layers,
    load_policy,
    update_defaults,
)
from lit_watercolour.sampling import SampleBatch, SamplingConfig, build_sampler


def random_batch(tokenizer, prompt: str, n: int, length: int, device: torch.device) -> SampleBatch:
    enc = tokenizer([prompt] * n, return_tensors="pt", add_special_tokens=False)
    ids = random_completions(tokenizer, n, length, torch.Generator().manual_seed(0))
    return SampleBatch(prompt_ids=enc.input_ids.to(device), prompt_mask=enc.attention_mask.to(device),
                       completion_ids=ids.to(device), completion_mask=torch.ones_like(ids, device=device),
                       texts=[""] * n, truncated=torch.ones(n, dtype=torch.bool), logps=torch.zeros(ids.shape, device=device),
                       groups=[0] * n)


@dataclass
class Variant:
    """One implementation and its knobs, written on the command line as `impl[:key=value,...]`; ours left
    without knobs runs the shipped defaults ("auto": resolved for the model's family and the device)."""

    impl: str  # lit_watercolour | trl
    mb: int = 0  # rows per forward/backward; 0: --micro-batch-size, else ours "auto" and TRL's 8
    sdpa: str = PolicyConfig.attention_backend  # ours: the SDPA kernel tried first (flash, cudnn, efficient)
    autocast: int = 1  # ours: adapter matmuls in bf16 under autocast (`policy.adapter_in_model_dtype`)
    compile: str = "auto"  # ours: torch.compile the decoder layers (1, 0, auto)
    ckpt: int = 1  # ours: gradient checkpointing (0: keep every activation, no recomputation)
    keep: str = "auto"  # ours: what a checkpointed layer keeps (inputs, attention, attention+out_proj, auto)
    fused: int = int(PolicyConfig.fused_lora)  # ours: LoRA linears as one autograd node (`kernels.lora`)
    experts: int = int(PolicyConfig.frozen_experts)  # ours: MoE experts as one autograd node (`kernels.experts`); 0: transformers'
    fla: int = int(PolicyConfig.fla_glue)  # ours: Gated DeltaNet's conv and gated norm on fla's kernels (`kernels.linear_attention`)
    quant: str = "none"  # ours: bitsandbytes base weights (4bit, 8bit): QLoRA
    optim: str = "adamw"  # ours: adamw (torch's, fused) or adamw_8bit (bitsandbytes)
    liger: int = 0  # trl: use_liger_kernel (Liger's Triton RMSNorm, RoPE, SwiGLU; needs liger-kernel)
    profile: int = 0  # either: print the top N kernels of one more step (--profile N does it for every run)

    CHOICES = {"sdpa": get_args(AttentionBackend), "keep": get_args(CheckpointKeep) + ("auto",), "compile": ("0", "1", "auto"),
               "quant": ("none", "4bit", "8bit"), "optim": ("adamw", "adamw_8bit")}

    @classmethod
    def parse(cls, text: str) -> "Variant":
        impl, _, opts = text.partition(":")
        if impl not in ("lit_watercolour", "trl"):
            raise argparse.ArgumentTypeError(f"unknown implementation {impl!r} in {text!r}: lit_watercolour or trl")
        kwargs = {}
        for item in filter(None, opts.split(",")):
            key, _, value = item.partition("=")
            if key not in cls.__dataclass_fields__ or key == "impl":
                raise argparse.ArgumentTypeError(f"unknown option {key!r} in {text!r}")
            if key in cls.CHOICES and value not in cls.CHOICES[key]:
                raise argparse.ArgumentTypeError(f"{key} must be one of {', '.join(cls.CHOICES[key])} in {text!r}")
            kwargs[key] = value if key in cls.CHOICES else int(value)
        return cls(impl, **kwargs)

    def policy_config(self, folder: str, args) -> PolicyConfig:
        return PolicyConfig(model=folder, dtype=args.dtype, gradient_checkpointing=bool(self.ckpt),
                            checkpoint_keep=self.keep, fused_lora=bool(self.fused), frozen_experts=bool(self.experts), fla_glue=bool(self.fla),
                            compile_layers=self.compile if self.compile == "auto" else bool(int(self.compile)),
                            attention_backend=self.sdpa, quantization=self.quant, lora_r=args.lora_r,
                            lora_alpha=2 * args.lora_r, attn_implementation=args.attn_implementation)


def bench_ours(folder: str, args, length: int, device: torch.device, v: Variant) -> dict:
    cfg = v.policy_config(folder, args)
    settings = update_defaults(cfg, device.type, v.mb or args.micro_batch_size)  # what "auto" resolved to
    model, tokenizer = load_policy(cfg, device.type, settings)
    if cfg.quantization == "none":  # a quantized base is loaded onto the device, where bitsandbytes quantized it
        model.to(device)
    G, mb = args.num_generations, min(settings.micro_batch_size, args.num_generations)
    if G % mb:
        raise ValueError(f"--num-generations {G} is not a multiple of the micro-batch size {mb}")
    # transformers' generate: min_new_tokens forces full-length rows, and its calls are timed apart from the log-probs
    sampling = SamplingConfig(temperature=1.0, max_completion_length=length, generation_batch_size=G, logprob_batch_size=mb,
                              lean_decode=False)
    sampler = build_sampler(sampling, model, tokenizer, need_logps=True)  # its log-prob pass is one of the phases timed
    prompt = chat_prompt(tokenizer, PROMPT)
    clock = Clock(device)
    if args.completions == "random":
        batch = random_batch(tokenizer, prompt, G, length, device)
    else:
        warm_up = SamplingConfig(max_completion_length=8, generation_batch_size=G, logprob_batch_size=mb, lean_decode=False)
        build_sampler(warm_up, model, tokenizer, need_logps=True).sample([prompt], G)  # kernels, allocator, cuBLAS handles
        model.get_base_model().generation_config.min_new_tokens = length  # full-length completions: EOS cannot end a row
        model.generate = clock.wrap("generate", model.generate)  # the sampler's generate calls, timed apart from its log-probs
        batch = clock.wrap("sampling", sampler.sample)([prompt], G)
        clock.seconds["sampling_logps"] = clock.seconds["sampling"] - clock.seconds["generate"]
    args_ = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask, sampling.temperature, mb)

    def reference_logps():
        with torch.no_grad(), model.disable_adapter():
            return completion_logps(model, *args_, lora_autocast=bool(v.autocast))[0]

    reference_logps()  # warm-up
    reset_memory(device)
    clock.wrap("ref_logps", reference_logps)()
    ref_peak = peak_memory_gib(device)
    sampled_s, ref_s = dict(clock.seconds), clock.seconds["ref_logps"]

    rewards = torch.rand(G)  # synthetic: no rendering here
    advantages, _ = grpo.group_advantages(rewards, G, "group")
    advantages = advantages.to(device)
    mask = batch.completion_mask.float()
    num_items = mask.sum()
    params = [p for p in model.parameters() if p.requires_grad]
    if v.optim == "adamw_8bit":  # as GRPOModule.configure_optimizers
        import bitsandbytes as bnb

        optimizer = bnb.optim.AdamW8bit(params, lr=1e-5, weight_decay=0.0)
    else:
        optimizer = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0, fused=device.type == "cuda")
    losses, mean_logps = [], []  # each step's, beside its gradient norm: variants of one model must start alike

    def forward_backward():
        model.train()
        total = logp_sum = 0.0
        for lo in range(0, G, mb):
            sl = slice(lo, lo + mb)
            logps, _ = completion_logps(model, batch.prompt_ids[sl], batch.prompt_mask[sl], batch.completion_ids[sl],
                                        batch.completion_mask[sl], sampling.temperature, mb,
                                        lora_autocast=bool(v.autocast))
            loss, _ = grpo.grpo_loss(logps, advantages[sl], mask[sl], loss_type="dapo", num_items_in_batch=num_items)
            with adapter_in_model_dtype(model, bool(v.autocast)):  # as update.policy_update
                loss.backward()
            total, logp_sum = total + loss.detach(), logp_sum + (logps.detach() * mask[sl]).sum()
        losses.append(total)
        mean_logps.append(logp_sum / num_items)  # how far a quantized base moves the policy's log-probs

    grad_norms = []  # each step's, read after the timing: variants of one model must agree on the first

    def optimizer_step():  # as update.optimizer_step: one norm, clipped with it, one step
        norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        grad_norms.append(norm.detach())
        torch.nn.utils.clip_grads_with_norm_(params, 1.0, norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    clock.seconds, compiled_before = {}, compile_seconds()
    clock.wrap("first_step", forward_backward)()  # warm-up: kernels, compilation, the optimizer's state
    clock.wrap("first_step", optimizer_step)()
    first_step_s, compile_s = clock.seconds["first_step"], compile_seconds() - compiled_before
    reset_memory(device)
    fwd_bwd, opt = [], []
    for _ in range(args.repeats):
        clock.seconds = {}
        clock.wrap("fwd_bwd", forward_backward)()
        clock.wrap("optimizer", optimizer_step)()
        fwd_bwd.append(clock.seconds["fwd_bwd"])
        opt.append(clock.seconds["optimizer"])
    peak = peak_memory_gib(device)
    if v.profile or args.profile:
        with profiled(device, v.profile or args.profile):
            forward_backward()
            optimizer_step()
    prompt_tokens = int(batch.prompt_mask.sum())
    completion_tokens = int(batch.completion_mask.sum())
    all_tokens = completion_tokens + prompt_tokens
    seq_len = batch.prompt_ids.shape[1] + batch.completion_ids.shape[1]
    sampled = {} if args.completions == "random" else {
        "sampling_s": sampled_s["generate"], "sampling_tokens_per_s": completion_tokens / sampled_s["generate"],
        "sampling_logps_s": sampled_s["sampling_logps"],
        "sampling_logps_tokens_per_s": all_tokens / max(sampled_s["sampling_logps"], 1e-9),
    }
    out = {
        "impl": "lit_watercolour", "completion_length": length, "prompt_tokens": int(batch.prompt_mask[0].sum()),
        "completion_tokens": completion_tokens, **sampled,
        "ref_logps_s": ref_s, "ref_logps_tokens_per_s": all_tokens / ref_s, "peak_memory_ref_gib": ref_peak,
        **update_figures(fwd_bwd, opt, all_tokens, update_flops(model, G, seq_len), args.peak_tflops),
        "micro_batch_size": mb, "peak_memory_update_gib": peak, "first_step_s": first_step_s, "compile_s": compile_s,
        "grad_norm_first_step": float(grad_norms[0]), "grad_norms": [round(float(n), 5) for n in grad_norms],
        "losses": [round(float(x), 6) for x in losses], "mean_logps": [round(float(x), 5) for x in mean_logps],
        "settings": str(settings),
        # where compiling was asked for but failed, the layers ran eagerly after one warning: say so beside the figures
        "compile_fell_back": settings.compile_layers and not any(
            getattr(layer._compiled_call_impl, "compiling", False) for layer in decoder_layers(model)),
    }
    del model, sampler, optimizer, batch
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), nargs="+", default=None,
                    help="one or more models, each run with every --impls in turn")

    ap.add_argument("--arch", default="qwen3", help="qwen3 | qwen3_moe | qwen3_5_moe, sized by --hidden/--layers")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--model", default=None, help="a Hub id or transformers folder instead of a random-init model")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    ap.add_argument("--attn-implementation", default=None, help="e.g. sdpa, flash_attention_2; None: transformers' choice")
    ap.add_argument("--completion-length", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--micro-batch-size", type=int, default=None,
                    help="rows per forward/backward (TRL's per_device_train_batch_size) unless an impl sets mb=; "
                         f"None: ours resolves it for the model and device (`kernels.defaults`), TRL gets {TRL_MICRO_BATCH}")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--completions", choices=["generate", "random"], default="generate",
                    help="random: full-length random token ids instead of sampling, to time the update alone")
    ap.add_argument("--impls", nargs="+", type=Variant.parse, default=[Variant("lit_watercolour")],
                    metavar="IMPL[:KEY=VALUE,...]",
                    help="run in this order; lit_watercolour or trl (one GRPOTrainer run, same settings), with "
                         "knobs mb, sdpa, autocast, compile, ckpt, keep, fused, experts, quant, optim (ours), liger (trl), "
                         "profile (both); see Variant")
    ap.add_argument("--repeats", type=int, default=3, help="timed steps after one warm-up step")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="the device's dense bf16 peak, for MFU")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N kernels of one more step")
    args = ap.parse_args()
    for v in args.impls:
        if args.num_generations % (v.mb or args.micro_batch_size or 1):
            ap.error("--num-generations must be a multiple of every micro-batch size")
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # the Trainer places TRL's model on the current device
    runs = []
    for preset in args.preset or [None]:
        spec = PRESETS[preset] if preset else dict(arch=args.arch, hidden=args.hidden, layers=args.layers)
        name = args.model or preset or f"{args.arch}-{args.hidden}x{args.layers}"
        with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:  # one model on disk at a time
            folder = args.model or save_random_model(spec, args.dtype, Path(tmp) / "model", device)
            runs += bench_model(folder, name, args, device, tmp)
    print(table(runs), flush=True)
    print(json.dumps({"runs": runs}), flush=True)


def bench_model(folder: str, model_name: str, args, device: torch.device, tmp: str) -> list[dict]:
    """Every --impls run at every --completion-length on one model, and each against the first TRL run."""
    runs = []
    for length in args.completion_length:
        by_name = {}
        for v in args.impls:
            name = describe(v)
            torch.manual_seed(0)
            try:
                if v.impl == "trl":
                    figures = bench_trl(folder, args, length, device, v, str(Path(tmp) / "trl"))
                else:
                    figures = bench_ours(folder, args, length, device, v)
            except torch.OutOfMemoryError as e:  # a figure in itself; the other implementations still run
                figures = {"impl": v.impl, "completion_length": length, "error": f"out of memory: {str(e)[:200]}"}
            except Exception as e:  # a knob this machine lacks (a kernel, a package): report it, run the rest
                figures = {"impl": v.impl, "completion_length": length, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            result = {"name": name, "model": model_name, "device": str(device), "dtype": args.dtype,
                      "num_generations": args.num_generations, "micro_batch_size": v.mb or args.micro_batch_size,
                      "completions": args.completions, **figures}
            result = {k: round(v_, 4) if isinstance(v_, float) else v_ for k, v_ in result.items()}
            runs.append(result)
            by_name[name] = result
            print(json.dumps(result), flush=True)
            reset_memory(device)
        baseline = next((r for r in by_name.values() if r["impl"] == "trl" and "error" not in r), None)
        if baseline is not None and len(by_name) > 1:  # side by side: each against the first TRL run
            ratios = {"completion_length": length, "baseline": baseline["name"]}
            for name, r in by_name.items():
                if r is baseline or "error" in r:
                    continue
                for k in ("sampling_s", "update_fwd_bwd_s", "optimizer_s", "peak_memory_update_gib"):
                    if baseline.get(k) and r.get(k):
                        ratios[f"trl_over_{name}/{k}"] = round(baseline[k] / r[k], 3)
            runs.append(ratios)
            print(json.dumps(ratios), flush=True)
    return runs


def describe(v: Variant) -> str:
    """The variant as typed on the command line, only the knobs that differ from the defaults."""
    default = Variant(v.impl)
    knobs = [f"{k}={getattr(v, k)}" for k in Variant.__dataclass_fields__
             if getattr(v, k) != getattr(default, k) and k != "profile"]
    return v.impl + (":" + ",".join(knobs) if knobs else "")


def table(runs: list[dict]) -> str:
    """The update figures as a markdown table; "first step" is the warm-up step (compilation, autotuning) and
    "compile s" the part of it compiling; "logp" (the mean completion-token log-prob), "loss" and "grad norm" are
    the first `FIRST_STEPS` steps' (ours: variants of one model must start alike; a quantized base or the 8-bit
    optimizer moves them). The loss is zero up to rounding here (on-policy, full-length rows, advantages of zero
    mean in each group): logp and grad norm are where a variant shows."""
    lines = ["| model | run | length | mb | fwd+bwd s | tokens/s | optimizer s | peak GiB | MFU | first step s | compile s "
             "| logp, first steps | loss, first steps | grad norm, first steps |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if "name" not in r:
            continue
        head = f"| {r['model']} | {r['name']} | {r['completion_length']} | {r['micro_batch_size']} "
        if "error" in r:
            lines.append(head + f"| {r['error'][:80]} ||||||||||")
            continue
        lines.append(head + f"| {r['update_fwd_bwd_s']:.2f} | {r['update_tokens_per_s']:,.0f} | {r['optimizer_s']:.3f} "
                     f"| {r['peak_memory_update_gib']} | {100 * r['mfu']:.1f}% | {r.get('first_step_s', 0):.1f} "
                     f"| {r.get('compile_s', '')}{' (fell back to eager)' if r.get('compile_fell_back') else ''} "
                     f"| {first_steps(r.get('mean_logps'))} | {first_steps(r.get('losses'))} "
                     f"| {first_steps(r.get('grad_norms'))} |")
    return "\n".join(lines)


FIRST_STEPS = 2


def first_steps(values: list[float] | None) -> str:
    return " / ".join(f"{x:.5g}" for x in (values or [])[:FIRST_STEPS])

if __name__ == "__main__":
    main()
