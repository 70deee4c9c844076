"""API tokens never reach disk: a short `fit` whose judge reads its key from an environment
variable (named in the config, as users configure a hosted provider) leaves no trace of the key,
or of HF_TOKEN / OPENAI_API_KEY, in the run's logs, config.yaml, hparams.yaml, run log,
checkpoints or adapters, or in what it printed. The judge server (loopback) checks the key was
really sent, and fails the first call so the error path is exercised too.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from judge_server import JudgeServer, always, failing_first

ROOT = Path(__file__).resolve().parents[1]
SECRETS = {"LW_TEST_JUDGE_KEY": "sk-judge-9f8e7d6c5b4a", "HF_TOKEN": "hf_fakeTokenXyZ123456",
           "OPENAI_API_KEY": "sk-openai-0a1b2c3d4e5f"}
pytestmark = pytest.mark.timeout(300)


def test_tokens_are_never_written(tmp_path, painter):
    config = yaml.safe_load((ROOT / "configs" / "tiny_random.yaml").read_text())
    with JudgeServer(failing_first(1, 500, always("A"))) as server:
        config["model"]["rewards"].append({
            "class_path": "lit_watercolour.rewards.judge.JudgeTerm",
            "init_args": {"weight": 0.6, "references": 1, "backend": {
                "class_path": "lit_watercolour.rewards.openai_judge.OpenAIJudge",
                "init_args": {"base_url": server.base_url, "model": "judge", "api_key_env": "LW_TEST_JUDGE_KEY",
                              "max_retries": 1, "timeout_s": 30.0}}},
        })
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        args = ["fit", "--config", "config.yaml", "--model.policy.tiny", "null", "--model.policy.model", str(painter),
                "--model.sampling.max_completion_length", "160", "--model.threads.update", "1",
                "--model.grpo.num_generations", "6", "--data.subjects", '["a peach hibiscus"]',
                "--trainer.max_steps", "2"]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), **SECRETS)
        run = subprocess.run([sys.executable, "-m", "lit_watercolour", *args], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(server.received) > 1, "the judge was never called: no sketch passed the gate"
    assert server.headers[0]["authorization"] == f"Bearer {SECRETS['LW_TEST_JUDGE_KEY']}"

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"config.yaml", "hparams.yaml", "metrics.csv", "rollouts.jsonl", "last.ckpt",
            "adapter_model.safetensors"} <= names
    outputs = {"stdout": run.stdout.encode(), "stderr": run.stderr.encode(), **{str(p): p.read_bytes() for p in files}}
    for where, data in outputs.items():
        for var, secret in SECRETS.items():
            assert secret.encode() not in data, f"{var} leaked into {where}"
    saved = yaml.safe_load(next(tmp_path.glob("runs/tiny_random/lightning_logs/version_0/config.yaml")).read_text())
    judge = next(c for c in saved["model"]["rewards"] if c["class_path"].endswith("JudgeTerm"))
    assert judge["init_args"]["backend"]["init_args"]["api_key_env"] == "LW_TEST_JUDGE_KEY"  # the name is kept
