"""Interrupted runs, as a user meets them: `python -m lit_watercolour fit` killed mid-run, resumed
with `--ckpt_path last`, ends where an uninterrupted run of the same seed ends.

One chain of runs checkpointing every 2 steps: SIGTERM lands once step 1 is in the run log, and the
run must finish its step, write last.ckpt and exit cleanly. Its resumed run is SIGKILLed once step 3
is in the run log but only step 2 has a checkpoint, so the next resumed run must drop step 3 from the
log and train it again. At the end, the run log holds every step exactly once and equals the
uninterrupted run's, and the final checkpoint has the same step, optimizer and scheduler state, RNG state and adapter.

The policy is the tiny painter (tests/tiny_painter.py), so rewards differ and the adapter moves.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
MAX_STEPS = 4
pytestmark = pytest.mark.timeout(420)


CONFIG = ROOT / "configs" / "tiny_random.yaml"


def fit(cwd: Path, painter: Path, *extra: str, config: Path = CONFIG) -> subprocess.Popen:
    args = ["fit", "--config", str(config), "--model.policy.tiny", "null",
            "--model.policy.model", str(painter), "--model.sampling.max_completion_length", "160",
            "--model.threads.update", "1", "--data.subjects", '["a peach hibiscus"]', "--trainer.max_steps", str(MAX_STEPS),
            *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    cwd.mkdir(parents=True, exist_ok=True)
    # a session of its own, so the browser it leaves behind when killed can be reaped as a group
    with (cwd / "fit.log").open("a") as log:  # a file, not a pipe nobody reads while polling
        proc = subprocess.Popen([sys.executable, "-m", "lit_watercolour", *args], cwd=cwd, env=env,
                                start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    proc.log_path = cwd / "fit.log"
    return proc


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
    proc.wait(timeout=timeout)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of its group outlived it
    except ProcessLookupError:
        pass
    return proc.returncode, proc.log_path.read_text()


def wait_until(done, proc: subprocess.Popen, what: str, deadline_s: float = 240) -> None:
    deadline = time.monotonic() + deadline_s
    while not done():
        assert proc.poll() is None, f"the run ended before {what}:\n{proc.log_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {deadline_s} s"
        time.sleep(0.05)  # polling files, not waiting for a result


def logged_steps(cwd: Path) -> set[int]:
    path = run_dir(cwd) / "lightning_logs" / "rollouts.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {json.loads(line)["step"] for line in lines if line.endswith("}")}


def run_dir(cwd: Path) -> Path:
    return cwd / "runs" / "tiny_random"


def rollout_log(cwd: Path) -> list[dict]:
    text = (run_dir(cwd) / "lightning_logs" / "rollouts.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def last_state(cwd: Path) -> dict:
    return torch.load(run_dir(cwd) / "checkpoints" / "last.ckpt", weights_only=False)


def assert_same_run(cwd: Path, reference: Path) -> None:
    log, ref_log = rollout_log(cwd), rollout_log(reference)
    assert [r["step"] for r in log] == [s for s in range(1, MAX_STEPS + 1) for _ in range(4)]  # each step once
    assert log == ref_log
    assert len({r["reward"] for r in ref_log}) > 1  # rewards differed, so the adapter moved
    state, ref = last_state(cwd), last_state(reference)
    assert state["global_step"] == ref["global_step"] == MAX_STEPS
    steps = [float(s["step"]) for s in state["optimizer_states"][0]["state"].values()]
    assert steps and set(steps) == {float(MAX_STEPS)}
    assert state["lr_schedulers"] == ref["lr_schedulers"] and state["lr_schedulers"][0]["last_epoch"] == MAX_STEPS
    assert state["rng_states"]["python"] == ref["rng_states"]["python"]
    assert torch.equal(state["rng_states"]["torch"], ref["rng_states"]["torch"])
    for name, value in ref["state_dict"].items():
        torch.testing.assert_close(state["state_dict"][name], value)
    adapter = load_file(run_dir(cwd) / "checkpoints" / "last-adapter" / "adapter_model.safetensors")
    ref_adapter = load_file(run_dir(reference) / "checkpoints" / "last-adapter" / "adapter_model.safetensors")
    assert adapter.keys() == ref_adapter.keys()
    for name, value in ref_adapter.items():
        torch.testing.assert_close(adapter[name], value)


@pytest.fixture(scope="module")
def reference(painter, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("uninterrupted")
    rc, out = finish(fit(cwd, painter))
    assert rc == 0, out[-3000:]
    return cwd


def test_sigterm_then_sigkill_mid_run_each_resumed(tmp_path, painter, reference):
    """One chain of runs: SIGTERM, resume, SIGKILL, resume, ending where the uninterrupted run ends."""
    config = yaml.safe_load(CONFIG.read_text())
    config["trainer"]["callbacks"][-1]["init_args"]["every_n_train_steps"] = 2
    every2 = tmp_path / "every2.yaml"  # every run of the chain: a ModelCheckpoint with other settings would not take over last.ckpt
    every2.write_text(yaml.safe_dump(config))

    victim = fit(tmp_path, painter, config=every2)
    wait_until(lambda: 1 in logged_steps(tmp_path), victim, "step 1 in the log")
    victim.send_signal(signal.SIGTERM)
    rc, out = finish(victim)
    assert rc == 0, out[-3000:]  # it finished its step, saved and exited cleanly
    stopped_at = last_state(tmp_path)["global_step"]
    assert stopped_at in (1, 2)  # it stopped early, at a step boundary, with no periodic checkpoint past step 2
    assert {r["step"] for r in rollout_log(tmp_path)} == set(range(1, stopped_at + 1))

    victim = fit(tmp_path, painter, "--ckpt_path", "last", config=every2)
    wait_until(lambda: 3 in logged_steps(tmp_path), victim, "step 3 in the log")
    victim.send_signal(signal.SIGKILL)
    rc, _ = finish(victim)
    assert rc == -signal.SIGKILL
    assert last_state(tmp_path)["global_step"] == 2 and 3 in logged_steps(tmp_path)  # step 3 is to be redone

    rc, out = finish(fit(tmp_path, painter, "--ckpt_path", "last", config=every2))
    assert rc == 0, out[-3000:]
    assert_same_run(tmp_path, reference)


def test_rollout_log_truncates_to_the_checkpoint_and_drops_a_torn_line(tmp_path):
    from lit_watercolour.callbacks.runlog import RolloutLog

    log = RolloutLog(tmp_path / "rollouts.jsonl")
    for step in (1, 2, 3):
        log.append([{"step": step, "row": row, "reward": None} for row in range(2)])
    with log.path.open("a") as f:
        f.write('{"step": 4, "row": 0, "rew')  # a kill mid-write
    log.truncate(2)
    assert [(r["step"], r["row"]) for r in log.read()] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    log.append([{"step": 3, "row": 0}])
    assert [r["step"] for r in log.read()] == [1, 1, 2, 2, 3]
    log.truncate(0)  # a fresh run in the same folder starts an empty log
    assert log.read() == []
