"""scripts/learning_curve.py's bookkeeping: core slots, variants, and the gain-over-spread it reports.
(The runs themselves are the default run's: tests/test_default_run.py.)"""

import csv
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("learning_curve", ROOT / "scripts" / "learning_curve.py")
lc = sys.modules["learning_curve"] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
spec.loader.exec_module(lc)


def write_metrics(run: lc.Run, rewards: list[float]) -> None:
    path = run.out / "default" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, ["step", "reward", "gate/pass_rate", "time/step_s"])
        w.writeheader()
        for i, r in enumerate(rewards):
            w.writerow({"step": i, "reward": r, "gate/pass_rate": 1.0, "time/step_s": 2.0})


def test_cpu_slots_are_disjoint_and_refuse_more_than_the_machine():
    cores = len(os.sched_getaffinity(0))
    slots = lc.cpu_slots(cores, 1)
    assert sorted(c for s in slots for c in s) == sorted(os.sched_getaffinity(0))
    assert lc.cpu_slots(3, 0) == [[], [], []]  # not pinned
    with pytest.raises(SystemExit, match="needs"):
        lc.cpu_slots(cores + 1, 1)


def test_variants_parse_and_bad_names_are_refused():
    assert lc.parse_variant("") == ("", [])
    assert lc.parse_variant("lr4e-3=--model.optim.lr 4e-3") == ("lr4e-3", ["--model.optim.lr", "4e-3"])
    for bad in ("no-equals-sign", "a/b=--x 1"):
        with pytest.raises(SystemExit, match="NAME=ARGS"):
            lc.parse_variant(bad)


def test_gain_and_spread_over_seeds(tmp_path):
    curves = {0: [0.50, 0.52, 0.60, 0.62], 1: [0.54, 0.56, 0.61, 0.63], 2: [0.52, 0.54, 0.65, 0.67]}
    records = []
    for seed, rewards in curves.items():
        run = lc.Run(tmp_path / "a.yaml", "", [], seed, tmp_path / f"seed{seed}", wall_s=10.0)
        write_metrics(run, rewards)
        records.append(lc.run_record(run, k=2))
    assert [r["gain"] for r in records] == [0.1, 0.07, 0.13]
    assert records[0]["steps"] == 4 and records[0]["steps_s"] == 8.0 and records[0]["outside_steps_s"] == 2.0
    summary = lc.config_record(tmp_path / "a.yaml", "", records, min_ratio=3.0)
    assert summary["mean_gain"] == pytest.approx(0.1) and summary["seed_spread_first_k"] == pytest.approx(0.02)
    assert summary["gain_over_spread"] == pytest.approx(5.0) and summary["learns"]


def test_a_failed_run_is_reported_not_averaged(tmp_path):
    run = lc.Run(tmp_path / "a.yaml", "", [], 0, tmp_path / "seed0", returncode=1)
    record = lc.run_record(run, k=5)
    assert "fit.log" in record["error"]
    assert lc.config_record(tmp_path / "a.yaml", "", [record], 3.0) == {
        "config": str(tmp_path / "a.yaml"), "variant": "", "runs": 1, "failed": 1}
