"""API tokens never reach disk: a short `fit` whose judge reads its key from an environment
variable (named in the config, as users configure a hosted provider) leaves no trace of the key,
or of HF_TOKEN / OPENAI_API_KEY, in the run's logs, config.yaml, hparams.yaml, run log,
checkpoints or adapters, or in what it printed. The judge server (loopback) checks the key was
really sent, and fails the first call so the error path is exercised too. The fit is conftest's
`judged_fit` (test_cli reads it too; whatever else ran in its folder is checked as well).
"""

import pytest
import yaml

pytestmark = pytest.mark.timeout(300)


def test_tokens_are_never_written(judged_fit):
    run, server, cwd, secrets = judged_fit.run, judged_fit.server, judged_fit.cwd, judged_fit.secrets
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(server.received) > 1, "the judge was never called: no sketch passed the gate"
    assert server.headers[0]["authorization"] == f"Bearer {secrets['LW_TEST_JUDGE_KEY']}"

    files = [p for p in cwd.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"config.yaml", "hparams.yaml", "metrics.csv", "rollouts.jsonl", "last.ckpt",
            "adapter_model.safetensors"} <= names
    outputs = {"stdout": run.stdout.encode(), "stderr": run.stderr.encode(), **{str(p): p.read_bytes() for p in files}}
    for where, data in outputs.items():
        for var, secret in secrets.items():
            assert secret.encode() not in data, f"{var} leaked into {where}"
    saved = yaml.safe_load(next(cwd.glob("runs/tiny_random/lightning_logs/version_0/config.yaml")).read_text())
    judge = next(c for c in saved["model"]["rewards"] if c["class_path"].endswith("JudgeTerm"))
    assert judge["init_args"]["backend"]["init_args"]["api_key_env"] == "LW_TEST_JUDGE_KEY"  # the name is kept
