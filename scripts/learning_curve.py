"""Does the default run learn, and how long does it take? Mean reward of the first k steps against the
last k, over seeds, for one or several configs; each run's wall time.

Runs `python -m lit_watercolour fit --config C --seed_everything S` for every config C and seed S,
each in its own folder (`OUT/<config>[-<variant>]/seed<S>/`: metrics, gallery, renders, checkpoints
and fit.log), then reads each run's metrics.csv. Learning is claimed when the mean gain (last k
minus first k) is at least `--min-ratio` times the seed-to-seed spread (the std over seeds of the first-k mean).

`--parallel N --cpus-per-run C` runs N at once, each pinned (sched_setaffinity, inherited by its
Chromium) to its own C cores: on a 16-core node, 8 runs of 2 cores stand in for 8 quiet 2-core boxes.

    python scripts/learning_curve.py --seeds 0 1 2                      # the default config, one at a time
    python scripts/learning_curve.py --configs configs/default.yaml b.yaml --seeds 0 1 2 \\
        --variants base= lr4e-3='--model.optim.lr 4e-3' --cpus-per-run 2 --parallel 8 \\
        --chromium /opt/chr/chrome.sh --render-backend swiftshader
    # anything else goes to every `fit`, e.g. --trainer.max_steps 2

Runs are configs x variants x seeds; a variant is a name and fit arguments applied on top of each config.

Prints one JSON line per run (wall time, step seconds, first/last-k reward, gate pass rate, the
image-statistics score of passing sketches) and one per config (mean gain, spread, their ratio), and
writes them all to OUT/summary.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import queue
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"


@dataclass
class Run:
    config: Path
    variant: str  # a name for `overrides`; "" for the config as it is
    overrides: list[str]
    seed: int
    out: Path
    cpus: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    returncode: int = 0


def cpu_slots(parallel: int, cpus_per_run: int) -> list[list[int]]:
    """`parallel` disjoint sets of `cpus_per_run` cores from this process's own; [] each when 0 (no pinning)."""
    if cpus_per_run == 0:
        return [[] for _ in range(parallel)]
    cpus = sorted(os.sched_getaffinity(0))
    if parallel * cpus_per_run > len(cpus):
        raise SystemExit(f"--parallel {parallel} x --cpus-per-run {cpus_per_run} needs {parallel * cpus_per_run} cores; "
                         f"this process may use {len(cpus)}")
    return [cpus[i * cpus_per_run:(i + 1) * cpus_per_run] for i in range(parallel)]


def render_backend(backend: str | None) -> list[str]:
    """The config's render backend replaced (the rest of its render config kept)."""
    return [] if backend is None else ["--model.render.render_backend", backend]


def fit(run: Run, slots: queue.Queue, overrides: list[str], chromium: str | None, backend: str | None) -> Run:
    """One run in its own folder, pinned to a free slot of cores; its output goes to run.out/fit.log."""
    cpus = slots.get()
    try:
        run.cpus = cpus
        run.out.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "lit_watercolour", "fit", "--config", str(run.config),
                "--seed_everything", str(run.seed), "--data.seed", str(run.seed),
                "--trainer.default_root_dir", str(run.out), "--trainer.logger.init_args.save_dir", str(run.out),
                "--trainer.enable_progress_bar", "false", *render_backend(backend), *overrides, *run.overrides]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                   CUDA_VISIBLE_DEVICES="")  # a CPU box: torch sees no GPU even on a GPU node
        if chromium:
            env["LIT_WATERCOLOUR_CHROMIUM"] = chromium
        t0 = time.perf_counter()
        with (run.out / "fit.log").open("w") as log:
            proc = subprocess.run(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        run.wall_s, run.returncode = time.perf_counter() - t0, proc.returncode
        return run
    finally:
        slots.put(cpus)


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, sep, rest = text.partition("=")
    if text and not sep or not all(ch.isalnum() or ch in "-_." for ch in name):
        raise SystemExit(f"a variant is NAME=ARGS, NAME of letters, digits and -_. : not {text!r}")
    return name, shlex.split(rest)


def column(metrics: Path, key: str) -> list[float]:
    return [float(r[key]) for r in csv.DictReader(metrics.open()) if r.get(key)]


def mean_or_none(xs: list[float]) -> float | None:
    return round(statistics.mean(xs), 4) if xs else None


def run_record(run: Run, k: int) -> dict:
    record = {"config": str(run.config), "variant": run.variant, "seed": run.seed, "cpus": run.cpus, "wall_s": round(run.wall_s, 1),
              "returncode": run.returncode, "out": str(run.out)}
    found = sorted(run.out.glob("*/version_*/metrics.csv"))
    if run.returncode or not found:
        return {**record, "error": f"fit failed (exit {run.returncode}): see {run.out / 'fit.log'}"}
    metrics = found[-1]
    rewards, passed = column(metrics, "reward"), column(metrics, "gate/pass_rate")
    painted = column(metrics, "reward/image_stats/mean")  # the scorer on passing sketches only: no gate noise
    steps = column(metrics, "time/step_s")
    first, last = statistics.mean(rewards[:k]), statistics.mean(rewards[-k:])
    return {**record, "steps": len(rewards), "steps_s": round(sum(steps), 1), "outside_steps_s": round(run.wall_s - sum(steps), 1),
            "mean_step_s": round(statistics.mean(steps), 2),
            "first_k_reward": round(first, 4), "last_k_reward": round(last, 4), "gain": round(last - first, 4),
            "first_k_pass": mean_or_none(passed[:k]), "last_k_pass": mean_or_none(passed[-k:]),
            "first_k_image_stats": mean_or_none(painted[:k]), "last_k_image_stats": mean_or_none(painted[-k:]),
            "rewards": [round(r, 3) for r in rewards]}


def config_record(config: Path, variant: str, records: list[dict], min_ratio: float) -> dict:
    ok = [r for r in records if "error" not in r]
    summary = {"config": str(config), "variant": variant, "runs": len(records), "failed": len(records) - len(ok)}
    if not ok:
        return summary
    gains = [r["gain"] for r in ok]
    spread = statistics.stdev([r["first_k_reward"] for r in ok]) if len(ok) > 1 else float("nan")
    mean_gain = statistics.mean(gains)
    ratio = mean_gain / spread if spread > 0 else float("nan")
    return {**summary, "mean_gain": round(mean_gain, 4), "gains": gains, "seed_spread_first_k": round(spread, 4),
            "gain_over_spread": round(ratio, 2), "learns": ratio >= min_ratio,
            "mean_wall_s": round(statistics.mean(r["wall_s"] for r in ok), 1),
            "max_wall_s": round(max(r["wall_s"] for r in ok), 1),
            "mean_step_s": round(statistics.mean(r["mean_step_s"] for r in ok), 2)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=Path, nargs="+", default=[DEFAULT_CONFIG])
    ap.add_argument("--variants", nargs="+", default=[""], metavar="NAME=ARGS",
                    help="fit arguments tried on every config, e.g. base= lr4e-3='--model.optim.lr 4e-3'")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--k", type=int, default=5, help="steps averaged at each end")
    ap.add_argument("--min-ratio", type=float, default=3.0, help="gain over spread that counts as learning")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "learning_curve")
    ap.add_argument("--parallel", type=int, default=1, help="runs at once")
    ap.add_argument("--cpus-per-run", type=int, default=0, help="cores each run is pinned to (0: not pinned)")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="stop each run after this long (trainer.max_time); its record says how many steps it took")
    ap.add_argument("--chromium", default=None, help="browser executable (sets LIT_WATERCOLOUR_CHROMIUM for the runs)")
    ap.add_argument("--render-backend", choices=["auto", "swiftshader", "gpu"], default=None,
                    help="replaces the config's render.render_backend")
    args, overrides = ap.parse_known_args(argv)
    if args.max_minutes is not None:
        seconds = round(args.max_minutes * 60)
        overrides = ["--trainer.max_time", f"00:{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}", *overrides]
    configs = [c.resolve() for c in args.configs]
    missing = [str(c) for c in configs if not c.is_file()]
    if missing:
        raise SystemExit(f"no such config: {', '.join(missing)}")
    if len({c.stem for c in configs}) < len(configs):
        raise SystemExit("configs must have different file names: each names its runs' folder")
    out = args.out.resolve()
    slots: queue.Queue = queue.Queue()
    for cpus in cpu_slots(args.parallel, args.cpus_per_run):
        slots.put(cpus)
    variants = dict(parse_variant(v) for v in args.variants)
    if len(variants) < len(args.variants):
        raise SystemExit("variants must have different names: each names its runs' folder")
    arms = [(c, v) for c in configs for v in variants]
    runs = [Run(c, v, variants[v], s, out / "-".join(filter(None, [c.stem, v])) / f"seed{s}") for c, v in arms for s in args.seeds]
    taken = [r.out for r in runs if any(r.out.glob("*/version_*/metrics.csv"))]
    if taken:
        raise SystemExit(f"earlier results in {taken[0]}: pick another --out (runs would mix)")
    records: dict[tuple[Path, str], list[dict]] = {arm: [] for arm in arms}
    with ThreadPoolExecutor(args.parallel) as pool:
        futures = [pool.submit(fit, r, slots, overrides, args.chromium, args.render_backend) for r in runs]
        for run, future in zip(runs, futures):  # in submission order: a config's seeds print together
            record = run_record(future.result(), args.k)
            records[run.config, run.variant].append(record)
            print(json.dumps(record), flush=True)
    summary = {"k": args.k, "overrides": overrides, "parallel": args.parallel, "cpus_per_run": args.cpus_per_run,
               "configs": [config_record(c, v, records[c, v], args.min_ratio) for c, v in arms],
               "runs": [r for arm in arms for r in records[arm]]}
    for c in summary["configs"]:
        print(json.dumps(c), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"summary: {out / 'summary.json'}")
    return summary


if __name__ == "__main__":
    main()
