"""scripts/bench_step.py runs one step of ours and one of TRL's on a tiny CPU model and reports every phase."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_step.py"


@pytest.mark.timeout(240)
def test_bench_step_tiny_cpu_with_trl():
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--preset", "tiny", "--dtype", "float32",
           "--completion-length", "24", "--num-generations", "4", "--micro-batch-size", "2", "--impls", "trl", "lit_watercolour"]
    # one intra-op thread: on a shared 2-core box two threads are many times slower (tests/cpu_threads.py)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=220)
    assert done.returncode == 0, done.stderr[-3000:]
    trl, ours, ratios = json.loads(done.stdout.strip().splitlines()[-1])["runs"]  # in the order asked for
    assert (ours["impl"], trl["impl"]) == ("lit_watercolour", "trl")
    for run in (ours, trl):
        assert run["completion_tokens"] == 4 * 24  # forced to full length
        assert run["sampling_s"] > 0 and run["update_fwd_bwd_s"] > 0 and run["optimizer_s"] > 0
        assert run["sampling_tokens_per_s"] == pytest.approx(96 / run["sampling_s"], rel=1e-2)
    assert ours["sampling_logps_s"] > 0 and ours["ref_logps_s"] > 0 and ours["prompt_tokens"] > 0
    total = ours["completion_tokens"] + 4 * ours["prompt_tokens"]
    assert ours["update_tokens_per_s"] == pytest.approx(total / ours["update_fwd_bwd_s"], rel=1e-2)
    assert ratios["trl_over_ours/sampling_s"] == pytest.approx(trl["sampling_s"] / ours["sampling_s"], rel=1e-2)


@pytest.mark.timeout(240)
def test_bench_step_random_completions_time_the_update_alone():
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--preset", "tiny", "--dtype", "float32", "--completions", "random",
           "--completion-length", "40", "--num-generations", "4", "--micro-batch-size", "4", "--impls", "lit_watercolour", "trl"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=220)
    assert done.returncode == 0, done.stderr[-3000:]
    ours, trl, ratios = json.loads(done.stdout.strip().splitlines()[-1])["runs"]
    for run in (ours, trl):
        assert "sampling_s" not in run and run["completions"] == "random"
        assert run["completion_tokens"] == 4 * 40 and run["update_fwd_bwd_s"] > 0
    # TRL trained on the hook's rows: its own log counts every prompt + completion token
    assert f"'num_tokens': '{160 + 4 * ours['prompt_tokens']}'" in done.stdout, done.stdout[-2000:]
    assert "'completions/mean_length': '40'" in done.stdout
    assert set(ratios) == {"completion_length", "trl_over_ours/update_fwd_bwd_s", "trl_over_ours/optimizer_s"}
