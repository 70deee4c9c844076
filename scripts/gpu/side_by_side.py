"""Issue 50's before/after on one GPU lease: each section runs the project's own benchmarks with the landed settings
and with the candidate ones, in one process where it can (one model built, the knob switched), and the run ends with
one compact table (tokens/s, seconds per phase, peak memory, agreement). Sections run in the order given, each under
its own time limit; a section's output goes to $OUT/<section>.log (or --out) as it runs.

  moe-grads    Qwen3.5-MoE stand-in (CUDA): log-probs, LoRA gradients and tokens rerouted of one forward/backward with
               fla's Gated DeltaNet glue off and on (`PolicyConfig.fla_glue`), same weights, same batch, in bf16 and in
               float32 (the check that they agree)
  moe-update   bench_step.py --preset qwen3.5-moe-3b at 8192 tokens: the update with the glue off (before) and on,
               then each one's top kernels
  moe-decode   bench_sampler.py --preset qwen3.5-35b-a3b-8layers --backends hf --top-k 20 (the recipe's): the captured
               step, 8 rows, glue off/on,
               and glue on with the adapter merged (`sampling.merge_adapter`), then each one's top kernels
  4b-sampler   bench_sampler.py --preset qwen3-4b --backends vllm: the landed engine (LoRA served, max_lora_rank 64,
               sleep level 1) against merged weights with sleep level 2, each engine with the same bounded CUDA-graph sizes
  4b-lora16    the same with LoRA served at max_lora_rank 16 (the policy's rank)
  4b-step      rehearse_recipe.py, the 4B recipe on vLLM, staleness 1, the shipped config (before)
  4b-step-during  the same with the engine sampling the next batch during the update (`--sample-during-update`),
               --vllm-4b over the config's (default `AFTER_4B`: awake throughout)
On a fresh machine a 4B rehearsal of 5 steps takes 6-7 minutes (the engine's start, then the first update's
compilation: docs/results.md, "Issue 50's third lease"): give each 4B section a call of its own, --limit-s 560.

    python scripts/gpu/side_by_side.py --sections moe-grads moe-update moe-decode
    python scripts/gpu/side_by_side.py --sections 4b-step --limit-s 560          # then, on the warm machine:
    python scripts/gpu/side_by_side.py --sections 4b-step-during --limit-s 560
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the 4B sampler's engine: CUDA graphs for the batch sizes a step uses
BOUNDED_GRAPHS = {"max_num_seqs": 16, "compilation_config": {"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}}
# the 4B step's candidate, over the shipped config: the engine samples beside the update, so it never sleeps
AFTER_4B = {"enable_sleep_mode": False}


def run(name: str, command: list[str], out: Path, limit_s: float) -> list[dict]:
    """The command's JSON lines (printed and kept in out/name.log as they come)."""
    print(f"## {name}: {' '.join(command)}", flush=True)
    lines, start = [], time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                print(line, end="", flush=True)
                if line.startswith("{"):
                    try:
                        lines.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
                if time.perf_counter() - start > limit_s:
                    proc.kill()
                    print(f"## {name}: stopped at its {limit_s:.0f} s limit", flush=True)
                    break
        finally:
            proc.wait()
    print(f"## {name}: {time.perf_counter() - start:.0f} s, exit {proc.returncode}", flush=True)
    return lines


def moe_grads(out: Path, limit_s: float) -> list[dict]:
    """fla's glue against transformers' on one model: log-probs, every LoRA gradient and the experts each token is
    routed to, from one forward/backward each way. In bfloat16 (as trained) a rounding difference that flips one token's
    experts in an early layer reroutes more tokens in every later one (this random-init stand-in's router logits are
    near ties), so the two differ far past rounding while neither is wrong; float32 (TF32 off) is the check that they
    compute the same."""
    import torch

    from lit_watercolour.kernels.linear_attention import use_fla_glue
    from lit_watercolour.policy import PolicyConfig, load_policy

    shapes = dict(hidden_size=1024, num_layers=8, num_experts=16, num_experts_per_tok=4)
    model, _ = load_policy(PolicyConfig(tiny="qwen3_5_moe", tiny_config=shapes, dtype="bfloat16"), "cuda")
    model.to("cuda").train()
    torch.manual_seed(0)
    ids = torch.randint(0, model.config.get_text_config().vocab_size, (2, 2048), device="cuda")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)  # a trained adapter, so every LoRA gradient is non-zero
    routes = {}  # router name -> each token's experts, sorted (checkpointing's recomputation writes the same again)
    for name, m in model.named_modules():
        if type(m).__name__.endswith("TopKRouter"):
            m.register_forward_hook(lambda _, __, out, name=name: routes.__setitem__(name, out[2].sort(-1).values))

    def pass_(on: bool) -> tuple[torch.Tensor, dict, dict]:
        if use_fla_glue(model, on) is not on:
            raise RuntimeError("fla's glue does not switch on here (fla, triton or transformers' conv functions missing)")
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids).logits[:, :-1].float()
        logps = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
        logps.mean().backward()
        return (logps.detach(), {n: p.grad.float().clone() for n, p in model.named_parameters() if p.grad is not None},
                dict(routes))

    def compare(a, b) -> dict:
        worst = max((float((b[1][n] - g).norm() / g.norm().clamp_min(1e-12)), n) for n, g in a[1].items())
        rerouted = [int((a[2][n] != b[2][n]).any(-1).sum()) for n in a[2]]
        return {"logp_max_abs_diff": round(float((a[0] - b[0]).abs().max()), 6), "grad_max_rel_err": round(worst[0], 6),
                "worst_param": worst[1], "tokens_rerouted_per_layer": rerouted}

    off = pass_(False)
    row = {"section": "moe-grads", "lora_params": len(off[1]), "tokens": ids.numel(), "bf16": compare(off, pass_(True)),
           "bf16_off_repeat": compare(off, pass_(False))}  # the floor: any kernel that is not run-to-run deterministic
    seconds = {}
    for on in (False, True, False, True):  # each warmed up above; the second of each counts
        torch.cuda.synchronize()
        start = time.perf_counter()
        pass_(on)
        torch.cuda.synchronize()
        seconds[on] = round(time.perf_counter() - start, 4)
    row["fwd_bwd_s_glue_off"], row["fwd_bwd_s_glue_on"] = seconds[False], seconds[True]
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        model.float()
        row["fp32"] = compare(pass_(False), pass_(True))
        row["glue_matches"] = row["fp32"]["logp_max_abs_diff"] < 1e-3 and row["fp32"]["grad_max_rel_err"] < 1e-3
    except Exception as e:  # noqa: BLE001 - the bf16 row still counts
        row["fp32"], row["glue_matches"] = {"error": f"{type(e).__name__}: {e}"}, None
    print(json.dumps(row), flush=True)
    return [row]


def sections(args) -> dict:
    py = sys.executable
    return {
        "moe-update": [py, "scripts/bench_step.py", "--preset", "qwen3.5-moe-3b", "--completion-length", "8192",
                       "--completions", "random", "--repeats", "2", "--impls", "lit_watercolour:fla=0", "lit_watercolour:fla=1", "--profile", "20"],
        "moe-decode": [py, "scripts/bench_sampler.py", "--preset", "qwen3.5-35b-a3b-8layers", "--device", "cuda",
                       "--dtype", "bfloat16", "--backends", "hf", "--max-completion-length", "1024", "--min-tokens",
                       "1024", "--top-k", "20", "--repeats", "2", "--fla-glue", "both", "--merge-adapter", "both", "--profile", "25"],
        "4b-sampler": [py, "scripts/bench_sampler.py", "--preset", "qwen3-4b", "--device", "cuda", "--dtype", "bfloat16",
                       "--backends", "vllm", "--max-completion-length", "2048", "--min-tokens", "2048", "--repeats", "2",
                       "--enforce-eager", "false", "--engine-kwargs", json.dumps(BOUNDED_GRAPHS)],
        "4b-step": [py, "scripts/rehearse_recipe.py", "--config", "configs/hibiscus_qwen3_4b.yaml", "--policy-shapes",
                    "qwen3-4b", "--sampler", "vllm", "--steps", str(args.steps_4b), "--max-staleness", "1",
                    "--max-minutes", str(args.limit_s / 60 - 0.5)],
    }


def summarise(name: str, lines: list[dict], run_name: str = "") -> list[str]:
    """Table rows of one section's JSON lines."""
    rows = []
    for r in lines:
        if name == "moe-grads":
            agreement = "; ".join(f"{k} logp max diff {r[k]['logp_max_abs_diff']}, grad max rel err "
                                  f"{r[k]['grad_max_rel_err']}, rerouted {sum(r[k]['tokens_rerouted_per_layer'])}"
                                  if "error" not in r[k] else f"{k} {r[k]['error']}" for k in ("fp32", "bf16", "bf16_off_repeat"))
            rows.append(f"| moe-grads | glue off vs on | | fwd+bwd {r['fwd_bwd_s_glue_off']} s vs {r['fwd_bwd_s_glue_on']} s; "
                        f"glue matches: {r['glue_matches']}; {agreement} | |")
        elif name == "moe-update" and "update_tokens_per_s" in r:
            rows.append(f"| moe-update | {r['name']} | {r['update_tokens_per_s']:.0f} tokens/s | fwd+bwd "
                        f"{r['update_fwd_bwd_s']:.2f} s, first step {r.get('first_step_s')} s, grad norm "
                        f"{r.get('grad_norm_first_step')} | "
                        f"{r.get('peak_memory_update_gib', '')} GiB |")
        elif name in ("moe-decode", "4b-sampler", "4b-lora16") and "backend" in r:
            phases = ", ".join(f"{k} {v}" for k, v in r.items() if k.endswith("_s") and k not in ("seconds", "tokens_per_s"))
            rows.append(f"| {name} | {r['backend']} r{r['repeat']} ({str(r.get('decode_path'))[:40]}) | {r['tokens_per_s']:.0f} "
                        f"tokens/s | {r['seconds']} s {phases} | |")
    if name == "4b-step":
        rows += steady_steps(lines, run_name)
    return rows


STEP_FIGURES = ("time/step_s", "time/sampling_s", "time/sampling_tokens_per_s", "time/update_s", "time/old_logps_s",
                "time/render_wait_s", "time/scoring_s", "memory/peak_gib", "phase/generate_peak_gib")


def steady_steps(lines: list[dict], run_name: str) -> list[str]:
    """A rehearsal's steps between its first (compiling, on-policy) and its last (nothing sampled ahead): the
    mean of each figure, and the wall time from the first step's update end to the last but one's."""
    steps = [r for r in lines if "step" in r and "time/step_s" in r]
    if len(steps) < 3:
        return [f"| 4b-step | {run_name} | | {len(steps)} steps: too few for a steady one | |"]
    steady = steps[1:-1]
    mean = {k.removeprefix("time/"): round(sum(s.get(k, 0.0) for s in steady) / len(steady), 2)
            for k in STEP_FIGURES if any(k in s for s in steady)}
    wall = (steady[-1]["time/at/update_end_s"] - steps[0]["time/at/update_end_s"]) / len(steady)
    return [f"| 4b-step | {run_name}: steps 2-{len(steps) - 1} | {mean.get('sampling_tokens_per_s', '')} tokens/s | "
            f"{wall:.2f} s a step (update end to update end); means {json.dumps(mean)}; first step "
            f"{steps[0]['time/step_s']:.1f} s | {mean.get('memory/peak_gib', '')} GiB |"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", nargs="+", default=["moe-grads", "moe-update", "moe-decode", "4b-sampler", "4b-step"],
                    choices=["moe-grads", "moe-update", "moe-decode", "4b-sampler", "4b-lora16", "4b-step", "4b-step-during"])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "runs/side_by_side")))
    ap.add_argument("--vllm-4b", type=json.loads, default=AFTER_4B,
                    help="4b-step, after: VLLMConfig fields over the config's, as JSON")
    ap.add_argument("--steps-4b", type=int, default=4, help="4b-step: optimizer steps of each run")
    ap.add_argument("--limit-s", type=float, default=280.0, help="seconds each section may run")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    commands, table, vllm_after = sections(args), [], json.dumps(args.vllm_4b)
    for name in args.sections:
        if name == "4b-sampler":  # before (the landed LoRA engine), then after (merged), each its own engine
            lines = run("4b-sampler-lora64", [*commands[name], "--max-lora-rank", "64"], args.out, args.limit_s)
            after = [*commands[name], "--weight-sync", "merged", "--sleep-level", "2"]
            lines += run("4b-sampler-merged", after, args.out, args.limit_s)
        elif name == "4b-step":
            lines = run(name, [*commands[name], "--out", str(args.out / "rehearsal_4b_shipped")], args.out, args.limit_s)
            table += summarise(name, lines, "before: shipped config")
            continue
        elif name == "4b-step-during":
            lines = run(name, [*commands["4b-step"], "--sample-during-update", "--vllm", vllm_after,
                               "--out", str(args.out / "rehearsal_4b_during")], args.out, args.limit_s)
            table += summarise("4b-step", lines, "after: sampling during the update")
            continue
        elif name == "4b-lora16":
            lines = run(name, commands["4b-sampler"], args.out, args.limit_s)
        elif name == "moe-grads":
            try:
                lines = moe_grads(args.out, args.limit_s)
            except Exception as e:  # noqa: BLE001 - reported, the other sections still run
                print(f"## moe-grads failed: {type(e).__name__}: {e}", flush=True)
                lines = []
        else:
            lines = run(name, commands[name], args.out, args.limit_s)
        table += summarise(name, lines)
    print("\n| section | run | tokens/s | seconds, agreement | peak |\n|---|---|---|---|---|", flush=True)
    print("\n".join(table), flush=True)


if __name__ == "__main__":
    main()
