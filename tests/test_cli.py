"""The entry point, as a user runs it: `python -m lit_watercolour fit|predict --config ...`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(600)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))  # 1 thread: see cpu_threads.py
    return subprocess.run([sys.executable, "-m", "lit_watercolour", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=540)


def test_fit_then_predict_with_the_trained_adapter(tmp_path):
    config = str(ROOT / "configs" / "tiny_random.yaml")
    fit = run(["fit", "--config", config, "--trainer.max_steps", "2"], tmp_path)
    assert fit.returncode == 0, fit.stderr[-3000:]
    out = tmp_path / "runs" / "tiny_random"
    assert (out / "checkpoints" / "last.ckpt").exists()
    assert (out / "checkpoints" / "last-adapter" / "adapter_model.safetensors").exists()
    logs = out / "lightning_logs" / "version_0"
    assert yaml.safe_load((logs / "config.yaml").read_text())["trainer"]["max_steps"] == 2  # the resolved config is kept
    rows = (logs / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3 and "reward" in rows[0].split(",")  # a header and one row per step

    predict = run(["predict", "--config", config, "--ckpt_path", str(out / "checkpoints" / "last.ckpt"),
                   "--model.predict_dir", str(tmp_path / "paintings")], tmp_path)
    assert predict.returncode == 0, predict.stderr[-3000:]
    painted = sorted(p.name for p in (tmp_path / "paintings").iterdir())
    assert "a-peach-hibiscus-0-0.txt" in painted and "a-blue-iris-1-0.txt" in painted


def test_recipe_config_parses():
    """The H200 recipe resolves to the documented settings without loading the 35B model."""
    cfg = run(["fit", "--config", str(ROOT / "configs" / "hibiscus_qwen35_a3b.yaml"), "--print_config"], ROOT)
    assert cfg.returncode == 0, cfg.stderr[-3000:]
    c = yaml.safe_load(cfg.stdout)
    m = c["model"]
    assert m["policy"]["model"] == "Qwen/Qwen3.5-35B-A3B" and m["policy"]["dtype"] == "bfloat16"
    assert (m["policy"]["lora_r"], m["policy"]["lora_alpha"], m["policy"]["lora_dropout"]) == (16, 32, 0.0)
    assert m["policy"]["target_modules"] == "all-linear" and m["policy"]["gradient_checkpointing"]
    assert (m["sampling"]["top_p"], m["sampling"]["top_k"], m["sampling"]["max_completion_length"]) == (0.95, 20, 8192)
    assert m["grpo_config"]["num_generations"] == 8 and m["grpo_config"]["micro_batch_size"] == 1
    assert m["grpo_config"]["scale_rewards"] == "none"
    assert (m["optim"]["lr"], m["optim"]["lr_scheduler"], m["optim"]["warmup_steps"]) == (5e-5, "constant_with_warmup", 5)
    assert c["trainer"]["max_steps"] == 110 and c["data"]["subjects"] == ["a peach hibiscus"]
    terms = {cb["class_path"].rsplit(".", 1)[-1]: cb["init_args"] for cb in c["model"]["rewards"]}
    assert {"GateTerm", "LengthTerm", "PairwiseJudge", "HPSv3Scorer"} <= set(terms)
    assert terms["PairwiseJudge"]["references"] == 4


def test_default_config_and_environment(monkeypatch):
    """No --config reads configs/default.yaml, which LIT_WATERCOLOUR_<SUBCOMMAND>__<KEY> variables override;
    a --config replaces the default whole (none of default.yaml's settings leak into it)."""
    monkeypatch.setenv("LIT_WATERCOLOUR_FIT__TRAINER__MAX_STEPS", "7")
    monkeypatch.setenv("LIT_WATERCOLOUR_FIT__MODEL__RENDER_POOL_SIZE", "5")
    cfg = run(["fit", "--print_config"], ROOT)
    assert cfg.returncode == 0, cfg.stderr[-3000:]
    c = yaml.safe_load(cfg.stdout)
    assert c["trainer"]["logger"]["init_args"]["name"] == "default"
    assert c["trainer"]["max_steps"] == 7 and c["model"]["render_pool_size"] == 5
    assert c["model"]["render"]["pixel_density"] == 0.5

    cfg = run(["fit", "--config", str(ROOT / "configs" / "tiny_random.yaml"), "--print_config"], ROOT)
    c = yaml.safe_load(cfg.stdout)
    assert c["trainer"]["logger"]["init_args"]["save_dir"] == "runs/tiny_random"
    assert c["trainer"]["logger"]["init_args"]["name"] == "lightning_logs" and c["model"]["render"]["pixel_density"] == 1.0
    assert c["trainer"]["max_steps"] == 3 and c["model"]["render_pool_size"] == 2  # the config beats the environment
