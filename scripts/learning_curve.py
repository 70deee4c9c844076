"""Does the default run learn? Mean reward of the first k steps against the last k, over seeds.

Runs `python -m lit_watercolour fit` (the offline default config) once per seed, then reads each
run's metrics.csv. Learning is claimed only if the mean improvement exceeds the seed-to-seed
spread (the std over seeds of the first-k mean); `gain_over_spread` is their ratio. `--jobs`
runs that many seeds at once (each with its own Chromium pool):

    python scripts/learning_curve.py --seeds 0 1 2 --k 5 [--jobs 3] [any fit override, e.g. --model.optim.lr 2e-3]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(seed: int, out: Path, overrides: list[str]) -> tuple[Path, float]:
    """One default run; its metrics.csv and wall-clock seconds."""
    args = [sys.executable, "-m", "lit_watercolour", "fit", "--seed_everything", str(seed), "--data.seed", str(seed),
            "--trainer.default_root_dir", str(out), "--trainer.logger.init_args.save_dir", str(out),
            "--trainer.enable_progress_bar", "false", *overrides]
    t0 = time.perf_counter()
    subprocess.run(args, cwd=ROOT, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return next(out.glob("*/version_*/metrics.csv")), time.perf_counter() - t0


def curve(metrics: Path, key: str) -> list[float]:
    return [float(r[key]) for r in csv.DictReader(metrics.open()) if r.get(key)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--k", type=int, default=5, help="steps averaged at each end")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "learning_curve")
    ap.add_argument("--jobs", type=int, default=1, help="seeds run at once")
    args, overrides = ap.parse_known_args()  # anything else goes to `fit`, e.g. --trainer.max_steps 60
    firsts, lasts = [], []
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda seed: run(seed, args.out / f"seed{seed}", overrides), args.seeds))
    for seed, (metrics, wall_s) in zip(args.seeds, runs):
        rewards, passed = curve(metrics, "reward"), curve(metrics, "gate/pass_rate")
        painted = curve(metrics, "reward/embedded/mean")  # the scorer on passing sketches only: no gate noise
        first, last = statistics.mean(rewards[: args.k]), statistics.mean(rewards[-args.k :])
        firsts.append(first)
        lasts.append(last)
        print(json.dumps({"seed": seed, "wall_s": round(wall_s), "first_k_reward": round(first, 4), "last_k_reward": round(last, 4),
                          "first_k_pass": round(statistics.mean(passed[: args.k]), 3),
                          "last_k_pass": round(statistics.mean(passed[-args.k :]), 3),
                          "first_k_embedded": round(statistics.mean(painted[: args.k]), 4) if painted else None,
                          "last_k_embedded": round(statistics.mean(painted[-args.k :]), 4) if painted else None,
                          "rewards": [round(r, 3) for r in rewards]}), flush=True)
    gains = [b - a for a, b in zip(firsts, lasts)]
    spread = statistics.stdev(firsts) if len(firsts) > 1 else float("nan")
    mean_gain = statistics.mean(gains)
    print(json.dumps({"mean_gain": round(mean_gain, 4), "gains": [round(g, 4) for g in gains],
                      "seed_spread_first_k": round(spread, 4), "gain_over_spread": round(mean_gain / spread, 2),
                      "learns": mean_gain > spread}))


if __name__ == "__main__":
    main()
