"""The overlapped step (`max_staleness=1`): truncated importance weights, the timeline's busy time, the
prefetched batch's key, concurrent reward terms, and a real CPU run (tiny Qwen3, real Chromium) whose step
N+1 samples before update N begins, trains on the sampler's log-probs and resumes."""

import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from lit_watercolour import grpo
from lit_watercolour.callbacks.checkpoint import AdapterCheckpoint
from lit_watercolour.callbacks.runlog import RolloutLogger
from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOConfig, GRPOModule, OptimConfig
from lit_watercolour.overlap import Prefetched, Timeline, busy_idle_metrics, union_length
from lit_watercolour.policy import PolicyConfig
from lit_watercolour.records import GateResult, Rollout
from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.rewards.mix import RewardMix, mix_rewards
from lit_watercolour.sampling import SamplingConfig
from cpu_threads import one_thread  # noqa: F401  (fixture)
from tiny_painter import SUBJECT

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("one_thread")]


def test_truncated_importance_weights_match_a_reference():
    torch.manual_seed(0)
    old, sampled = torch.randn(3, 7) - 2, torch.randn(3, 7) - 2
    mask = (torch.rand(3, 7) > 0.3).float()
    cap = 2.0
    w = grpo.truncated_importance_weights(old, sampled, cap)
    ref = [[min(math.exp(o - s), cap) for o, s in zip(ro, rs)] for ro, rs in zip(old.tolist(), sampled.tolist())]
    torch.testing.assert_close(w, torch.tensor(ref))
    stats = grpo.importance_weight_stats(w, mask, cap)
    kept = [x for row, mrow in zip(ref, mask.tolist()) for x, m in zip(row, mrow) if m]
    assert stats["is_weight/mean"].item() == pytest.approx(sum(kept) / len(kept), rel=1e-6)
    assert stats["is_weight/min"].item() == pytest.approx(min(kept), rel=1e-6)
    assert stats["is_weight/max"].item() == pytest.approx(max(kept), rel=1e-6)
    assert stats["is_weight/truncated_frac"].item() == pytest.approx(sum(x >= cap for x in kept) / len(kept))

    # in the loss the weights multiply the clipped term only (TRL), never the KL
    logps, adv = (old + 0.1 * torch.randn(3, 7)).requires_grad_(), torch.tensor([1.0, -0.5, 0.25])
    loss, _ = grpo.grpo_loss(logps, adv, mask, old_logps=old, importance_weights=w, loss_type="bnpo")
    r = torch.exp(logps - old)
    per_token = -torch.min(r * adv[:, None], r.clamp(0.8, 1.2) * adv[:, None]) * w
    torch.testing.assert_close(loss, (per_token * mask).sum() / mask.sum())


def test_busy_time_is_the_union_of_spans_within_the_window():
    assert union_length([(0, 2), (1, 3), (5, 6)]) == 4
    timeline = Timeline()
    timeline.spans = [["render", 0.0, 2.0], ["render", 1.0, 3.0], ["sampling", 5.0, None], ["update", 7.0, 8.0]]
    assert timeline.busy(1.0, 6.0) == {"render": 2.0, "sampling": 1.0}  # the open span counts to the window's end
    assert busy_idle_metrics(timeline, 1.0, 6.0, ["render", "update"]) == {  # a phase with no span is idle throughout
        "time/busy/render_s": 2.0, "time/idle/render_s": 3.0, "time/busy/update_s": 0.0, "time/idle/update_s": 5.0}


def test_prefetched_batch_is_taken_only_for_its_key():
    prefetched = Prefetched()
    with ThreadPoolExecutor(1) as finishing:
        prefetched.put("step 2", finishing.submit(lambda x: x * 2, 21))
        with pytest.raises(RuntimeError):
            prefetched.put("step 2", finishing.submit(int))  # one batch ahead, never two
        assert prefetched.take("step 2").result() == 42
        prefetched.put("step 3", finishing.submit(int))
        assert prefetched.take("step 4") is None and prefetched.pending is None  # a stale key is dropped, never used


class BarrierTerm(RewardTerm):
    """Scores the code length; waits for its sibling first, so it passes only if both run at once."""

    def __init__(self, name: str, barrier: threading.Barrier) -> None:
        super().__init__(weight=0.5)
        self.name, self.barrier = name, barrier

    def score(self, rollouts):
        self.barrier.wait(timeout=120)  # serial scoring would leave this alone at the barrier: BrokenBarrierError
        return torch.tensor([len(r.code or "") / 100 for r in rollouts])


def test_terms_score_concurrently_with_the_same_result():
    rollouts = [Rollout(prompt=SUBJECT, completion=c, group=0, seed=1, code=c,
                        gate=GateResult(passed=p, reason="ok" if p else "blank"))
                for c, p in [("brush.circle(1, 2, 3);", True), ("", False), ("brush.fill('#fff'); brush.rect(0, 0, 9, 9);", True)]]
    barrier = threading.Barrier(2)
    terms = [GateTerm(0.1), LengthTerm(0.2, min_tokens=1, full_tokens=20, max_tokens=100),
             BarrierTerm("left", barrier), BarrierTerm("right", barrier)]
    rewards, scores, _ = RewardMix(terms).score(rollouts)
    # the serial reference: each term on its own, gated ones on the passed rows only
    passed = torch.tensor([r.gate.passed for r in rollouts])
    expected = {}
    for term in terms:
        s = torch.zeros(len(rollouts))
        rows = [i for i, r in enumerate(rollouts) if r.gate.passed or not term.gated]
        barrier.reset()
        if isinstance(term, BarrierTerm):  # scored alone it would wait forever: score its rows directly
            s[rows] = torch.tensor([len(rollouts[i].code or "") / 100 for i in rows])
        else:
            s[rows] = term.score([rollouts[i] for i in rows]).float()
        expected[term.name] = s
    for name, s in expected.items():
        assert torch.equal(scores[name], s), name
    assert torch.equal(rewards, mix_rewards(expected, {t.name: t.weight for t in terms}, passed))


class Probe(pl.Callback):
    def __init__(self):
        self.steps = {}

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        step = outputs["step"]
        self.steps[trainer.global_step] = {"metrics": dict(step.metrics), "version": step.batch.policy_version,
                                           "logps": step.batch.samples.logps.clone()}


def make_run(root, painter, max_steps, probe):
    pl.seed_everything(0)
    module = GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32", lora_r=8, lora_alpha=16),
        sampling=SamplingConfig(max_completion_length=160, generation_batch_size=6),
        grpo_config=GRPOConfig(num_generations=6, micro_batch_size=6, scale_rewards="none"),
        optim=OptimConfig(lr=5e-3),
        render_pool_size=2, rewards=[GateTerm(), LengthTerm(min_tokens=10, full_tokens=120, max_tokens=1000)],
        max_staleness=1,
    )
    trainer = pl.Trainer(
        max_steps=max_steps, accelerator="cpu", devices=1, logger=CSVLogger(root, name="logs"),
        callbacks=[AdapterCheckpoint(dirpath=root / "ckpt", every_n_train_steps=1, save_top_k=-1), probe,
                   RolloutLogger(dirpath=str(root))],
        enable_progress_bar=False, limit_val_batches=0, num_sanity_val_steps=0, log_every_n_steps=1,
    )
    return module, PromptDataModule(subjects=[SUBJECT], seed=3), trainer


def test_one_step_stale_run_overlaps_trains_on_sampler_logps_and_resumes(tmp_path, painter, monkeypatch):
    old_logps = []  # what each loss call took as the old policy
    loss = grpo.grpo_loss
    monkeypatch.setattr(grpo, "grpo_loss", lambda *a, **k: (old_logps.append(k["old_logps"]), loss(*a, **k))[1])

    probe = Probe()
    module, data, trainer = make_run(tmp_path / "a", painter, 3, probe)
    trainer.fit(module, datamodule=data)
    steps = probe.steps
    assert [steps[k]["version"] for k in (1, 2, 3)] == [0, 0, 1]  # the first step on-policy, then one behind
    assert [steps[k]["metrics"]["train/staleness"] for k in (1, 2, 3)] == [0.0, 1.0, 1.0]
    for k in (1, 2):  # step k+1 was sampled before update k began: the policy is never used by both at once
        assert steps[k + 1]["metrics"]["time/at/sampling_end_s"] <= steps[k]["metrics"]["time/at/update_start_s"]
        assert steps[k + 1]["metrics"]["time/at/sampling_end_s"] > steps[k]["metrics"]["time/at/sampling_end_s"]
    # the on-policy step has no old policy (ratio 1); stale steps use the sampler's own log-probs
    assert old_logps[0] is None and steps[1]["metrics"]["ratio/mean"] == 1.0
    for call, k in zip(old_logps[1:], (2, 3), strict=True):
        assert torch.equal(call, steps[k]["logps"][:, : call.shape[1]])
        assert steps[k]["metrics"]["ratio/mean"] != 1.0  # the weights moved since they sampled
    for key in ["time/busy/sampling_s", "time/idle/sampling_s", "time/busy/render_s", "time/busy/score_gate_s",
                "time/busy/score_length_s", "time/busy/update_s", "time/idle/update_s", "ratio/min", "ratio/max"]:
        assert key in steps[2]["metrics"], key
    for k in (1, 2, 3):  # the update is one span inside its step's window: its busy time is that span
        m = steps[k]["metrics"]
        assert m["time/busy/update_s"] == pytest.approx(m["time/at/update_end_s"] - m["time/at/update_start_s"])
    # step 3's batch was sampled in step 2's window (before its update), and the last step prefetches nothing
    assert steps[2]["metrics"]["time/busy/sampling_s"] > 0 and steps[3]["metrics"]["time/busy/sampling_s"] == 0.0
    log = [json.loads(line) for line in (tmp_path / "a" / "rollouts.jsonl").read_text().splitlines()]
    assert {(r["step"], r["policy_version"]) for r in log} == {(1, 0), (2, 0), (3, 1)}

    # resumed from step 1: its first step samples on-policy again, then it is one behind as before
    probe_b = Probe()
    module_b, data_b, trainer_b = make_run(tmp_path / "b", painter, 3, probe_b)
    trainer_b.fit(module_b, datamodule=data_b, ckpt_path=tmp_path / "a" / "ckpt" / "epoch=0-step=1.ckpt")
    assert module_b.max_staleness == 1
    assert {k: (s["version"], s["metrics"]["train/staleness"]) for k, s in probe_b.steps.items()} == {
        2: (1, 0.0), 3: (1, 1.0)}
    log_b = [json.loads(line) for line in (tmp_path / "b" / "rollouts.jsonl").read_text().splitlines()]
    assert {(r["step"], r["policy_version"]) for r in log_b} == {(2, 1), (3, 1)}


class SameRenders(pl.Callback):
    """Renders each (code, seed) once: the page is deterministic for them (test_gate), and the painter
    repeats its few sketches, so a 16-row group costs a handful of renders."""

    def on_train_start(self, trainer, module):
        submit, done = module.pool.submit, {}
        module.pool.submit = lambda code, seed=0, timeout_s=None: done.get((code, seed)) or done.setdefault(
            (code, seed), submit(code, seed, timeout_s))


class Rewards(pl.Callback):
    def __init__(self):
        self.by_step, self.staleness = [], []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.by_step.append(outputs["step"].metrics["reward"])
        self.staleness.append(outputs["step"].metrics["train/staleness"])


def learning_run(painter, seed: int, max_staleness: int, steps: int = 6) -> Rewards:
    pl.seed_everything(seed)
    module = GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32", lora_r=8, lora_alpha=16),
        sampling=SamplingConfig(max_completion_length=160, generation_batch_size=16),
        grpo_config=GRPOConfig(num_generations=16, micro_batch_size=16, scale_rewards="none"),
        optim=OptimConfig(lr=2e-3), render_pool_size=2, render_kwargs={"pixel_density": 0.5},
        rewards=[GateTerm(weight=1.0)], max_staleness=max_staleness,
    )
    rewards = Rewards()
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         callbacks=[SameRenders(), rewards], enable_progress_bar=False, enable_model_summary=False,
                         limit_val_batches=0, num_sanity_val_steps=0)
    trainer.fit(module, datamodule=PromptDataModule(subjects=[SUBJECT], seed=seed))
    return rewards


def test_one_step_stale_learns_no_worse_than_on_policy(painter):
    """Three seeds, each run on-policy and one step stale from the same start: the stale runs' reward
    over the last two steps is within the on-policy runs' seed spread, and both settings learn (the gate
    pass rate of the painter, ~half at the start, rises)."""
    runs = {(s, k): learning_run(painter, s, k) for s in (0, 1, 2) for k in (0, 1)}
    assert all(runs[s, 1].staleness[1:] == [1.0] * 5 and runs[s, 0].staleness == [0.0] * 6 for s in (0, 1, 2))
    first = {k: sum(runs[s, k].by_step[0] for s in (0, 1, 2)) / 3 for k in (0, 1)}
    last = {(s, k): sum(runs[s, k].by_step[-2:]) / 2 for s in (0, 1, 2) for k in (0, 1)}
    on_policy = [last[s, 0] for s in (0, 1, 2)]
    stale = sum(last[s, 1] for s in (0, 1, 2)) / 3
    spread = max(on_policy) - min(on_policy)
    summary = {"first": first, "last": last, "spread": spread}
    assert stale >= sum(on_policy) / 3 - spread, summary
    for k in (0, 1):
        assert sum(last[s, k] for s in (0, 1, 2)) / 3 > first[k], summary
    print(summary)
