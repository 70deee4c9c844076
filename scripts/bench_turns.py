"""Does the painter learn to revise? Two-turn runs (`--model.turns 2`, text feedback) against the single-turn
default, over seeds, on the same config (issue 38).

Runs `scripts/learning_curve.py`'s `fit` for each seed twice: the two-turn arm for `--steps` steps and the
single-turn arm for `--single-steps` (default twice as many, so it can sample as many tokens), then reads
each run's metrics.csv and reports:
  - revision gain: the two-turn arm's mean turn-2 minus turn-1 reward (`turns/gain`, the reward mix of each
    turn's painting) over its first k steps and its last k; learning to revise makes the last k higher;
  - final-painting gain at equal sampled tokens: the two-turn arm's final reward over its last k steps minus
    the single-turn arm's over the k steps ending where it had sampled as many tokens (both turns' tokens
    count; `time/sampling_tokens_per_s * time/sampling_s` per step).

    python scripts/bench_turns.py --seeds 0 1 2 --steps 10 --out runs/bench_turns \\
        --model.grpo.num_generations 4 --model.sampling.max_completion_length 512
    # anything else goes to every `fit`

Prints one JSON line per seed and a summary, and writes them to OUT/summary.json.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning_curve import DEFAULT_CONFIG, ROOT, Run, column, cpu_slots, fit  # noqa: E402


def metrics_of(run: Run) -> Path:
    found = sorted(run.out.glob("*/version_*/metrics.csv"))
    if run.returncode or not found:
        raise SystemExit(f"fit failed (exit {run.returncode}): see {run.out / 'fit.log'}")
    return found[-1]


def step_tokens(metrics: Path) -> list[float]:
    """Tokens the policy sampled at each step (both turns' for a two-turn run)."""
    return [rate * seconds for rate, seconds in zip(column(metrics, "time/sampling_tokens_per_s"),
                                                    column(metrics, "time/sampling_s"), strict=True)]


def mean(xs: list[float]) -> float:
    return round(statistics.mean(xs), 4)


def at_equal_tokens(rewards: list[float], tokens: list[float], budget: float, k: int) -> tuple[float, int]:
    """The mean reward of the k steps ending where the run's cumulative tokens first reach `budget` (or its
    last step, if it never does), and how many steps that took."""
    total, steps = 0.0, len(rewards)
    for i, t in enumerate(tokens):
        total += t
        if total >= budget:
            steps = i + 1
            break
    return mean(rewards[max(0, steps - k):steps]), steps


def seed_record(seed: int, two: Run, one: Run, k: int) -> dict:
    m2, m1 = metrics_of(two), metrics_of(one)
    gain, first, final = column(m2, "turns/gain"), column(m2, "turns/reward_1"), column(m2, "turns/reward_2")
    tokens2, tokens1 = step_tokens(m2), step_tokens(m1)
    single, single_steps = at_equal_tokens(column(m1, "reward"), tokens1, sum(tokens2), k)
    return {"seed": seed, "steps": len(gain), "revision_gain_first_k": mean(gain[:k]), "revision_gain_last_k": mean(gain[-k:]),
            "turn1_reward_last_k": mean(first[-k:]), "turn2_reward_last_k": mean(final[-k:]),
            "tokens": round(sum(tokens2)), "single_steps_at_equal_tokens": single_steps,
            "single_reward_at_equal_tokens": single, "final_gain_vs_single": round(mean(final[-k:]) - single, 4),
            "two_turn_wall_s": round(two.wall_s, 1), "single_wall_s": round(one.wall_s, 1)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=10, help="steps of the two-turn arm")
    ap.add_argument("--single-steps", type=int, default=None, help="steps of the single-turn arm (default 2 x --steps)")
    ap.add_argument("--k", type=int, default=5, help="steps averaged at each end")
    ap.add_argument("--parallel", type=int, default=1, help="runs at once")
    ap.add_argument("--cpus-per-run", type=int, default=0, help="cores each run is pinned to (0: not pinned)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_turns")
    ap.add_argument("--collect", action="store_true", help="read the runs already in --out (OUT/<arm>/seed<S>), fit nothing")
    args, overrides = ap.parse_known_args(argv)
    out = args.out.resolve()
    if not args.collect and any(out.glob("*/seed*/*/version_*/metrics.csv")):
        raise SystemExit(f"earlier results in {out}: pick another --out (runs would mix), or --collect them")
    arms = {"two_turns": ["--model.turns", "2", "--trainer.max_steps", str(args.steps)],
            "single": ["--trainer.max_steps", str(args.single_steps or 2 * args.steps)]}
    runs = {(arm, s): Run(args.config.resolve(), arm, extra, s, out / arm / f"seed{s}") for arm, extra in arms.items()
            for s in args.seeds}
    slots: queue.Queue = queue.Queue()
    for cpus in cpu_slots(args.parallel, args.cpus_per_run):
        slots.put(cpus)
    with ThreadPoolExecutor(args.parallel) as pool:
        run = (lambda r: r) if args.collect else (lambda r: fit(r, slots, overrides, None, None))
        done = {key: pool.submit(run, r) for key, r in runs.items()}
        records = []
        for s in args.seeds:
            records.append(seed_record(s, done["two_turns", s].result(), done["single", s].result(), args.k))
            print(json.dumps(records[-1]), flush=True)
    keys = ("revision_gain_first_k", "revision_gain_last_k", "final_gain_vs_single")
    summary = {"k": args.k, "overrides": overrides, **{f"mean_{key}": mean([r[key] for r in records]) for key in keys},
               **{f"std_{key}": round(statistics.stdev([r[key] for r in records]), 4) if len(records) > 1 else None
                  for key in keys}, "seeds": records}
    print(json.dumps({k: v for k, v in summary.items() if k != "seeds"}), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
