"""Sampling tokens/s of the colocated `vllm` sampler against `hf`, side by side in one run.

Both samplers draw `--num-generations` completions of the default run's prompt with the
default run's sampling settings (configs/default.yaml: temperature, top_p, top_k, length,
batch size, merged adapter), from the same policy (LoRA r16 on all linear layers), each
timed by its own `SampleBatch.seconds` (with `--logps`, the trainer-side log-prob pass
included, as a step that reuses its batch, num_iterations > 1, pays it). After one warm-up
each, the two take turns, `--repeats` times, with the same torch seeds (the warm-up is short: `--warmup-length`). Run it where vLLM is installed (`make setup-vllm`: .venv-vllm):

    .venv-vllm/bin/python scripts/bench_sampler.py                  # the default run, CPU
    python scripts/bench_sampler.py --preset qwen3-4b --device cuda --dtype bfloat16 \
        --max-completion-length 2048 --enforce-eager false          # random-init 4B on a GPU
    python scripts/bench_sampler.py --preset qwen3.5-moe-3b --device cuda --dtype bfloat16 \
        --max-completion-length 2048 --enforce-eager false --min-tokens 2048  # Qwen3.5-MoE, full-length rows
    python scripts/bench_sampler.py --preset qwen3.5-35b-a3b-8layers --device cuda --dtype bfloat16 --backends hf \
        --max-completion-length 1024 --min-tokens 1024 --fla-glue both  # the captured step, fla's glue off and on

`--preset` (scripts/bench_step.py's shapes) builds a random-init model and saves it to a
temporary folder, which vLLM loads. Each measurement prints a JSON line; the last line is the
summary: mean tokens/s per backend and vllm/hf.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from _bench_timing import profiled  # scripts/ is on sys.path when run as a script
from lit_watercolour.data import chat_prompt
from lit_watercolour.kernels.linear_attention import use_fla_glue
from lit_watercolour.policy import PolicyConfig, load_policy
from lit_watercolour.sampling import SamplingConfig, VLLMConfig, build_sampler

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "lit_watercolour" / "assets" / "tiny_policy"
SUBJECT = "a peach hibiscus"


def default_sampling(**overrides) -> SamplingConfig:
    sampling = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())["model"]["sampling"]
    return SamplingConfig(**{**sampling, **{k: v for k, v in overrides.items() if v is not None}})


def model_folder(args, tmp: str) -> str:
    if args.preset is None:
        return args.model
    from _bench_models import PRESETS, save_random_model  # scripts/ is on sys.path when run as a script

    return save_random_model(PRESETS[args.preset], args.dtype, Path(tmp) / args.preset, torch.device(args.device))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(POLICY), help="a transformers folder (default: the shipped tiny policy)")
    ap.add_argument("--preset", default=None, help="a random-init shape from scripts/bench_step.py, e.g. qwen3-4b")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--backends", nargs="+", default=["hf", "vllm"])
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=None, help="default: the default config's")
    ap.add_argument("--top-k", type=int, default=None, help="sampling.top_k (default: the default config's, 0: off; the recipe's 20)")
    ap.add_argument("--merge-adapter", choices=["true", "false", "both"], default=None,
                    help="hf: sampling.merge_adapter (default: the config's); both: also an 'hf:merged' sampler")
    ap.add_argument("--min-tokens", type=int, default=0,
                    help="rows run at least this long (the policy's generation_config.min_new_tokens): a random model's EOS cannot end them")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup-length", type=int, default=64, help="tokens per row of the uncounted warm-up")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the trainer process (the default run's 1)")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    ap.add_argument("--enforce-eager", type=lambda s: s.lower() == "true", default=True)
    ap.add_argument("--kv-cache-gib", type=float, default=None, help="vLLM's KV cache size (default on a CPU: 0.25)")
    ap.add_argument("--weight-sync", default="lora", choices=["lora", "merged"])
    ap.add_argument("--max-model-len", type=int, default=None, help="vLLM's context; default: the model's")
    ap.add_argument("--engine-kwargs", type=json.loads, default={},
                    help='vLLM: more `vllm.LLM` arguments, as JSON, e.g. \'{"max_num_seqs": 16}\'')
    ap.add_argument("--max-lora-rank", type=int, default=16, help="vLLM: VLLMConfig.max_lora_rank (the engine's LoRA width)")
    ap.add_argument("--sleep-level", type=int, choices=[1, 2], default=1, help="vLLM: VLLMConfig.sleep_level")
    ap.add_argument("--fla-glue", choices=["on", "off", "both"], default="off",
                    help="hf: Gated DeltaNet's conv and gated norm on fla's kernels (PolicyConfig.fla_glue); both: "
                         "the hf sampler timed with it off ('hf') and on ('hf:fla-glue'), turn about, on one model")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the repeats, one more warm-up-length batch of each sampler under torch.profiler: its top N kernels")
    ap.add_argument("--logps", action="store_true",
                    help="the samplers also return the trainer's log-probs, as for num_iterations > 1 (vLLM: one more forward)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda but no CUDA device is visible")
    if "vllm" in args.backends:
        from lit_watercolour.sampling.vllm import require_vllm

        require_vllm()  # before the model is built, not after
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as tmp:
        folder = model_folder(args, tmp)
        model, tokenizer = load_policy(PolicyConfig(model=folder, dtype=args.dtype, gradient_checkpointing=False,
                                                    fla_glue=args.fla_glue != "off"))
        model.to(args.device)
        model.get_base_model().generation_config.min_new_tokens = args.min_tokens or None
        merge = None if args.merge_adapter is None else args.merge_adapter == "true"
        sampling = default_sampling(max_completion_length=args.max_completion_length, merge_adapter=merge, top_k=args.top_k)
        engine = {"enforce_eager": args.enforce_eager, **args.engine_kwargs}
        kv_gib = args.kv_cache_gib if args.kv_cache_gib is not None else (0.25 if args.device == "cpu" else None)
        if kv_gib is not None:
            engine["kv_cache_memory_bytes"] = int(kv_gib * 2**30)
        vllm_config = VLLMConfig(gpu_memory_utilization=args.gpu_memory_utilization, max_lora_rank=args.max_lora_rank,
                                 max_model_len=args.max_model_len, sleep_level=args.sleep_level,
                                 weight_sync=args.weight_sync, engine_kwargs=engine, adapter_dir=f"{tmp}/adapters")
        samplers = {b: build_sampler(sampling, model, tokenizer, b, vllm_config, need_logps=args.logps) for b in args.backends}
        if args.fla_glue == "both" and "hf" in samplers:  # the same sampler, the glue switched before each batch
            samplers["hf:fla-glue"] = samplers["hf"]
        if args.merge_adapter == "both" and "hf" in samplers:  # with the glue on under --fla-glue both
            samplers["hf:merged"] = build_sampler(replace(sampling, merge_adapter=True), model, tokenizer, "hf")
        glue = {name: args.fla_glue == "on" or name.endswith("fla-glue") or (args.fla_glue == "both" and name == "hf:merged")
                for name in samplers}
        configs = {name: sampler.config for name, sampler in samplers.items()}
        prompt = chat_prompt(tokenizer, SUBJECT)
        runs: dict[str, list[dict]] = {b: [] for b in samplers}
        try:
            for name, sampler in samplers.items():  # warm-up, not counted: kernels, caches, allocator
                sampler.config = replace(configs[name], max_completion_length=min(args.warmup_length, sampling.max_completion_length))
                use_fla_glue(model, glue[name])
                sampler.sample([prompt], args.num_generations)
                sampler.config = configs[name]
            for repeat in range(args.repeats):
                for name, sampler in samplers.items():
                    torch.manual_seed(repeat)
                    use_fla_glue(model, glue[name])
                    batch_start = time.perf_counter()
                    batch = sampler.sample([prompt], args.num_generations)
                    tokens = int(batch.num_tokens.sum())
                    row = {"backend": name, "repeat": repeat, "tokens": tokens, "seconds": round(batch.seconds, 3),
                           "tokens_per_s": round(tokens / batch.seconds, 1),
                           "decode_path": getattr(sampler, "decode_path", "engine")}
                    phases = getattr(sampler, "phases", [])  # the engine's wake, generation and sleep of this batch
                    for phase, a, b in phases[-3:]:
                        if a >= batch_start:
                            row[f"{phase}_s"] = round(b - a, 3)
                    if batch.sampler_logps is not None and batch.logps is not None:  # vLLM's nucleus log-probs against the trainer's
                        diff = (batch.sampler_logps - batch.logps)[batch.completion_mask.bool()]
                        row.update(logp_diff_mean=round(float(diff.abs().mean()), 5), logp_diff_max=round(float(diff.abs().max()), 5))
                    print(json.dumps(row), flush=True)
                    runs[name].append(row)
            for name, sampler in samplers.items() if args.profile else ():
                sampler.config = replace(configs[name], max_completion_length=min(args.warmup_length, sampling.max_completion_length))
                use_fla_glue(model, glue[name])
                print(json.dumps({"profile": name, "tokens_per_row": sampler.config.max_completion_length}), flush=True)
                with profiled(torch.device(args.device), args.profile):
                    sampler.sample([prompt], args.num_generations)
        finally:
            for sampler in samplers.values():
                sampler.close()
    summary = {name: round(statistics.mean(r["tokens"] / r["seconds"] for r in rows), 1) for name, rows in runs.items()}
    if "hf" in summary and "vllm" in summary:
        summary["vllm_over_hf"] = round(summary["vllm"] / summary["hf"], 2)
    settings = {"model": args.preset or args.model, "device": args.device, "dtype": args.dtype,
                "num_generations": args.num_generations, "max_completion_length": sampling.max_completion_length,
                "top_p": sampling.top_p, "top_k": sampling.top_k, "engine": engine}
    print(json.dumps({"tokens_per_s": summary, "settings": settings}), flush=True)


if __name__ == "__main__":
    main()
