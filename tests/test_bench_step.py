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
           "--completion-length", "24", "--num-generations", "4", "--micro-batch-size", "2", "--impls", "trl", "lit_watercolour",
           "--repeats", "1"]
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
    assert ratios["trl_over_lit_watercolour/sampling_s"] == pytest.approx(trl["sampling_s"] / ours["sampling_s"], rel=1e-2)


@pytest.mark.timeout(300)
def test_bench_step_random_completions_time_the_update_alone():
    """Warm-up + timed repeats, knobs per implementation, FLOPs and a profile, ratios against the TRL run."""
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--preset", "tiny", "--dtype", "float32", "--completions", "random",
           "--completion-length", "40", "--num-generations", "4", "--micro-batch-size", "4", "--repeats", "2",
           "--profile", "5", "--impls", "lit_watercolour:mb=1,sdpa=flash", "trl"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    ours, trl, ratios = json.loads(done.stdout.strip().splitlines()[-1])["runs"]
    assert (ours["name"], ours["micro_batch_size"], trl["micro_batch_size"]) == ("lit_watercolour:mb=1,sdpa=flash", 1, 4)
    assert ours["settings"] == "dense model on cpu: micro_batch_size 1, checkpoint_keep inputs, compile_layers False"
    assert ours["first_step_s"] > 0 and trl["first_step_s"] > 0 and ours["compile_s"] == 0.0  # CPU: not compiled ...
    assert ours["compile_fell_back"] is False  # ... and not asked to be
    assert len(ours["grad_norms"]) == len(ours["mean_logps"]) == 4 and ours["mean_logps"][0] < 0  # warm-up, 2, profiled
    for run in (ours, trl):
        assert "sampling_s" not in run and run["completions"] == "random" and "error" not in run
        assert run["completion_tokens"] == 4 * 40 and run["update_fwd_bwd_s"] > 0
        assert len(run["update_fwd_bwd_reps_s"]) == 2
        assert run["update_fwd_bwd_s"] == pytest.approx(sum(run["update_fwd_bwd_reps_s"]) / 2, abs=1e-3)
        assert run["update_tflop"] == ours["update_tflop"] > 0  # the same model and tokens, the same FLOPs
    # TRL trained on the hook's rows: its own log counts every prompt + completion token
    assert f"'num_tokens': '{160 + 4 * ours['prompt_tokens']}'" in done.stdout, done.stdout[-2000:]
    assert "'completions/mean_length': '40'" in done.stdout
    name = "lit_watercolour:mb=1,sdpa=flash"
    assert set(ratios) == {"completion_length", "baseline", f"trl_over_{name}/update_fwd_bwd_s", f"trl_over_{name}/optimizer_s"}
    assert ratios[f"trl_over_{name}/update_fwd_bwd_s"] == pytest.approx(trl["update_fwd_bwd_s"] / ours["update_fwd_bwd_s"],
                                                                        rel=1e-2)
    assert done.stdout.count("Self CPU time total") == 2  # one profile table per implementation
    assert f"| tiny | {name} | 40 | 1 |" in done.stdout  # the summary table


@pytest.mark.timeout(120)
def test_bench_grpo_logps_agree_on_the_loss_and_gradient():
    """The head + loss micro-benchmark: ours, TRL's chunked head and the full logits give one loss and gradient."""
    cmd = [sys.executable, str(SCRIPT.parent / "bench_grpo_logps.py"), "--device", "cpu", "--batch", "2", "--tokens", "32",
           "--hidden", "16", "--vocab", "300", "--dtype", "float32", "--repeats", "1", "--impls", "ours", "trl", "full"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    assert [r["impl"] for r in results] == ["ours", "trl", "full"]
    for r in results:
        assert r["fwd_bwd_s"] > 0 and r["max_abs_loss_diff"] < 1e-6 and r["grad_rel_diff"] < 1e-5
        assert r["max_abs_logps_diff"] < 1e-5


@pytest.mark.timeout(120)
def test_bench_experts_agree_with_transformers():
    """The experts-layer micro-benchmark: ours and transformers' grouped_mm give one output and input gradient."""
    cmd = [sys.executable, str(SCRIPT.parent / "bench_experts.py"), "--device", "cpu", "--dtype", "float32", "--tokens", "64",
           "--hidden", "32", "--experts", "8", "--top-k", "2", "--intermediate", "16", "--repeats", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.strip().splitlines()]
    assert [r["impl"] for r in rows] == ["transformers_grouped_mm", "frozen_grouped_mm"]
    for r in rows:
        assert r["fwd_bwd_s"] > 0 and r["max_rel_diff_output"] < 1e-5 and r["max_rel_diff_input_grad"] < 1e-5


def test_update_flops_count_matmuls_and_causal_attention():
    """Qwen3-4B shapes at 8 x 8222 tokens: 4 x tokens x 4.02e9 matmul weights + 6 T^2 heads*head_dim per layer."""
    sys.path.insert(0, str(SCRIPT.parent))
    import torch
    from _bench_models import PRESETS, model_config
    from lit_watercolour.flops import update_flops

    from lit_watercolour.policy import model_class
    from lit_watercolour.offline.tiny_models import tiny_tokenizer

    cfg = model_config(PRESETS["qwen3-4b"], tiny_tokenizer())
    with torch.device("meta"):
        model = model_class(cfg).from_config(cfg, dtype=torch.bfloat16).requires_grad_(False)
    matmul = sum(p.numel() for p in model.parameters())  # tied head: every weight once, as a matmul or the head
    attention = 6 * 8 * 8222**2 * 32 * 128 * 36
    assert update_flops(model, 8, 8222) == pytest.approx(4 * 8 * 8222 * matmul + attention, rel=1e-3)
    assert 1.5e15 < update_flops(model, 8, 8222) < 1.6e15
