"""The default run (configs/default.yaml, CPU) with each `--staleness` (default 0 and 1), in one script run, side by side.

Per step, from the step's own metrics: its wall time (`time/step_s`) and its period (from the end of the
previous step's update to the end of its own: what a run of many steps pays per step, the callbacks
between steps included) against the serial sum and against the bound a pipelined step can reach,
max(sampling + update, render + score) (`overlap.stage_times`: sampling is `time/sampling_s`, render+score
the render wait after sampling plus the scoring, update `time/update_s`), and the largest single stage;
each phase's busy seconds within the step's window; and the reward, so the
two runs' learning can be compared over the same seeds (a measurement, not a test: a few steps of one seed
say little). The means are the steady state: they leave out the first step (on-policy, it pays the warm-up,
and a stale run samples k + 1 batches in it) and the last (a stale run has nothing left to prefetch, so its
last step is only an update); the whole run's wall time, first and last steps included, is printed too.

    python scripts/bench_staleness.py --steps 6 --staleness 0 1 2 --out runs/bench_staleness
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import lightning.pytorch as pl

from lit_watercolour.overlap import stage_times

ROOT = Path(__file__).resolve().parent.parent


class StepFigures(pl.Callback):
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.last_update_end: float | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        m = outputs["step"].metrics
        end = m["time/at/update_end_s"]
        period = m["time/step_s"] if self.last_update_end is None else end - self.last_update_end
        self.last_update_end = end
        self.rows.append({
            "step": trainer.global_step, "staleness": m["train/staleness"], "wall_s": m["time/step_s"],
            "period_s": period, **stage_times(m),
            **{k.removeprefix("time/"): m[k] for k in sorted(m) if k.startswith("time/busy/")},
            "reward": m["reward"],
        })


def run(staleness: int, steps: int, out: Path, seed: int) -> list[dict]:
    from lit_watercolour.__main__ import WatercolourCLI

    folder = out / f"staleness{staleness}"
    cli = WatercolourCLI(args=["--config", str(ROOT / "configs" / "default.yaml"), "--seed_everything", str(seed),
                               "--model.max_staleness", str(staleness), "--trainer.max_steps", str(steps),
                               "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(folder),
                               "--trainer.logger.init_args.save_dir", str(folder)], run=False)
    figures = StepFigures()
    cli.trainer.callbacks.append(figures)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return figures.rows


def mean(rows: list[dict], key: str) -> float:
    return round(statistics.fmean(r[key] for r in rows), 2)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--staleness", type=int, nargs="+", default=[0, 1], help="the max_staleness of each run")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_staleness")
    args = ap.parse_args(argv)
    summary = {}
    for staleness in args.staleness:
        rows = run(staleness, args.steps, args.out, args.seed)
        for r in rows:
            print(json.dumps({"max_staleness": staleness, **{k: round(v, 3) for k, v in r.items()}}), flush=True)
        steady = rows[1:-1] or rows
        keys = ("wall_s", "period_s", "serial_s", "pipeline_bound_s", "largest_stage_s", "sampling_s", "render_score_s",
                "update_s", "reward")
        summary[f"max_staleness={staleness}"] = {**{k: mean(steady, k) for k in keys},
                                                 "run_s": round(sum(r["period_s"] for r in rows), 2)}
    print("| max_staleness | step wall s | step period s | serial sum s | max(sampling + update, render+score) s "
          "| max(sampling, render+score, update) s | sampling s | render+score s | update s | reward | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, s in summary.items():
        print(f"| {name.split('=')[1]} | {s['wall_s']} | {s['period_s']} | {s['serial_s']} | {s['pipeline_bound_s']} "
              f"| {s['largest_stage_s']} | {s['sampling_s']} | {s['render_score_s']} | {s['update_s']} | {s['reward']} "
              f"| {s['run_s']} |")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
