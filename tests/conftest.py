"""Shared fixtures: one warm render pool for the whole session, the fixture sketches, a tiny painter, and
one short `fit` of it through the entry point that test_cli and test_secrets both read.

Other test files reuse `render_pool` (a ThreadedRenderPool: `.submit(code, seed)`,
`.render_many(codes, seeds)`) instead of launching their own Chromium, and `rendered(codes, seeds)` where
they only read a render that another test may already have made.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from judge_server import JudgeServer, always, failing_first
from lit_watercolour.sandbox import ThreadedRenderPool
from tiny_painter import save_tiny_painter

ROOT = Path(__file__).resolve().parent.parent
SKETCH_DIR = ROOT / "renderer" / "sketches"
SECRETS = {"LW_TEST_JUDGE_KEY": "sk-judge-9f8e7d6c5b4a", "HF_TOKEN": "hf_fakeTokenXyZ123456",
           "OPENAI_API_KEY": "sk-openai-0a1b2c3d4e5f"}


@pytest.fixture(scope="session")
def render_pool():
    with ThreadedRenderPool(size=3, timeout_s=60.0) as pool:
        yield pool


@pytest.fixture(scope="session")
def rendered(render_pool):
    """`rendered(codes, seeds)`: the session pool's renders, each (code, seed) rendered once a session, for
    tests that only read a render (its report, verdict or pixels); a test of how the pool behaves renders
    afresh through `render_pool`. A generous limit: honest sketches must finish however loaded the machine is."""
    futures = {}

    def renders(codes: list[str], seeds: list[int]) -> list:
        keys = list(zip(codes, seeds, strict=True))
        for key in keys:
            if key not in futures:
                futures[key] = render_pool.submit(*key, timeout_s=300.0)
        return [futures[key].result() for key in keys]
    return renders


@pytest.fixture(scope="session")
def sketches() -> dict[str, str]:
    """The hand-written fixture sketches, by file stem."""
    return {path.stem: path.read_text() for path in sorted(SKETCH_DIR.glob("*.js"))}


@pytest.fixture(scope="session")
def painter(tmp_path_factory):
    """A tiny Qwen3 that writes a few sketches (`tiny_painter`), trained once per session on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield save_tiny_painter(tmp_path_factory.mktemp("painter"), steps=300)
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def judged_fit(tmp_path_factory, painter):
    """`python -m lit_watercolour fit` of the tiny painter for 2 steps, with a progress bar and a judge (loopback,
    failing its first call) whose key comes from an environment variable named in the config, as users configure
    a hosted provider; SECRETS are in its environment. `cwd`: where it ran (config.yaml, runs/tiny_random);
    `run`: its CompletedProcess; `server`: the judge; `env`: its environment; `secrets`: SECRETS."""
    cwd = tmp_path_factory.mktemp("judged_fit")
    config = yaml.safe_load((ROOT / "configs" / "tiny_random.yaml").read_text())
    with JudgeServer(failing_first(1, 500, always("A"))) as server:
        config["model"]["rewards"].append({
            "class_path": "lit_watercolour.rewards.judge.JudgeTerm",
            "init_args": {"weight": 0.6, "references": 1, "backend": {
                "class_path": "lit_watercolour.rewards.openai_judge.OpenAIJudge",
                "init_args": {"base_url": server.base_url, "model": "judge", "api_key_env": "LW_TEST_JUDGE_KEY",
                              "max_retries": 1, "timeout_s": 30.0}}},
        })
        (cwd / "config.yaml").write_text(yaml.safe_dump(config))
        args = ["fit", "--config", "config.yaml", "--model.policy.tiny", "null", "--model.policy.model", str(painter),
                "--model.sampling.max_completion_length", "160", "--model.threads.update", "1",
                "--model.grpo.num_generations", "6", "--data.subjects", '["a peach hibiscus"]',
                "--trainer.max_steps", "2", "--trainer.enable_progress_bar", "true"]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), **SECRETS)  # 1 thread: see cpu_threads.py
        run = subprocess.run([sys.executable, "-m", "lit_watercolour", *args], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=1800)  # a hang guard, never a speed bound
    return SimpleNamespace(cwd=cwd, run=run, server=server, env=env, secrets=SECRETS)


# `make test` runs the suite on two workers (pytest-xdist), a module at a time so that module fixtures are made
# once; modules that read one costly session fixture share a worker, so that it is made once too
SHARED_WORKER = {"tests/test_secrets.py": "tests/test_cli.py"}  # both read `judged_fit`


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)  # the other worker has the other core: a second thread would only spin (cpu_threads.py)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SHARED_WORKER.get(module, module)

    return ModuleScheduling(config, log)


# tests that skip where an optional dependency is missing, and what `make test` does about it
OPTIONAL = {
    "REAL-vLLM": (lambda r: "vllm" in getattr(r, "keywords", {}),
                  "`make test` runs them in .venv-vllm, where a missing vLLM fails them instead."),
    "QLoRA / 8-BIT OPTIMIZER (bitsandbytes)": (lambda r: "test_qlora.py" in r.nodeid,
                                               "`make test` installs bitsandbytes (the test extra); it runs on the CPU."),
}


def pytest_terminal_summary(terminalreporter):
    """Say loudly when tests of an optional dependency did not run: a plain `pytest` skips them where it is not
    installed, and a summary line of skips is easy to read past."""
    for what, (belongs, remedy) in OPTIONAL.items():
        skipped = [r for r in terminalreporter.stats.get("skipped", []) if belongs(r)]
        if not skipped:
            continue
        reasons = sorted({str(r.longrepr[2]).removeprefix("Skipped: ") for r in skipped if isinstance(r.longrepr, tuple)})
        terminalreporter.write_sep("!", f"{len(skipped)} {what} TESTS WERE NOT RUN", red=True, bold=True)
        for reason in reasons:
            terminalreporter.write_line(f"  why: {reason}", red=True)
        terminalreporter.write_line(f"  {remedy}", red=True)
