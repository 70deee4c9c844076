"""The overlapped step (`max_staleness=k`): truncated importance weights, the timeline's busy time, the
prefetch queue, the adapter versions, and real CPU runs (tiny Qwen3, real Chromium): step N+1 samples before update
N begins, trains on the sampler's log-probs and resumes; step N+1 sampled during update N by a server over loopback
HTTP, its old log-probs those of the adapter that sampled it; the queue's edges (prompts that do not match, validation in a
stale run, staleness with num_iterations > 1, teardown with batches in flight); and stale runs learning no
worse than on-policy ones."""

import asyncio
import dataclasses
import json
import math
import threading
from concurrent.futures import Future

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from lit_watercolour import grpo
from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.callbacks.checkpoint import AdapterCheckpoint
from lit_watercolour.callbacks.runlog import RolloutLogger
from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOConfig, GRPOModule, OptimConfig
from lit_watercolour import module as module_file
from lit_watercolour.overlap import AdapterVersions, PrefetchQueue, Timeline, busy_idle_metrics, union_length
from lit_watercolour.policy import PolicyConfig
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.sampling import SamplingConfig, VLLMConfig
from completions_server import CompletionsServer
from cpu_threads import one_thread  # noqa: F401  (fixture)
from tiny_painter import SUBJECT, sketch_rows
from transformers import AutoModelForCausalLM, AutoTokenizer

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


def done(value) -> Future:
    job = Future()
    job.set_result(value)
    return job


def test_prefetch_queue_is_bounded_ordered_and_dropped_on_other_prompts():
    queue = PrefetchQueue(2)
    queue.put("step 2", done(2))
    queue.put("step 3", done(3))
    with pytest.raises(RuntimeError):
        queue.put("step 4", done(4))  # never more than max_staleness ahead
    assert queue.take("step 2").result() == 2 and len(queue) == 1  # oldest first
    queue.put("step 4", done(4))
    assert queue.take("step 9") is None and len(queue) == 0  # other prompts: every queued batch is dropped
    with pytest.raises(RuntimeError):
        PrefetchQueue(0).put("step 2", done(2))  # on-policy: nothing is sampled ahead
    with pytest.raises(ValueError):
        PrefetchQueue(-1)


def test_adapter_versions_apply_an_older_adapter_and_put_the_live_one_back():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    model[0].requires_grad_(False)  # the frozen base: never kept
    versions = AdapterVersions(keep=2)
    x = torch.randn(4, 3)
    before = model(x)
    versions.save(0, model)
    assert set(versions.saved[0]) == {"1.weight", "1.bias"}
    with torch.no_grad():
        model[1].weight.add_(1.0)  # an update
    live = model[1].weight.clone()
    with versions.applied(0, model):
        torch.testing.assert_close(model(x), before)
    assert torch.equal(model[1].weight, live) and model[1].weight.requires_grad
    versions.save(1, model)
    versions.save(2, model)
    assert sorted(versions.saved) == [1, 2]  # the oldest dropped


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
        grpo=GRPOConfig(num_generations=6, micro_batch_size=6, scale_rewards="none"),
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


class UpdateGatedServer(CompletionsServer):
    """Answers its k-th completions request (0-based) only once k updates have begun: the batch a step samples ahead
    is answered only while, or after, that step updates. A pipeline that samples it before the update would wait on
    the update, which waits on it: the request fails (504) after 60 s."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.updates_begun, self.begun = 0, threading.Condition()

    def update_begins(self) -> None:
        with self.begun:
            self.updates_begun += 1
            self.begun.notify_all()

    def complete(self, body):
        k = len(self.completion_requests)
        with self.begun:
            if not self.begun.wait_for(lambda: self.updates_begun >= k, timeout=60):
                return 504, {"error": f"request {k} was held for an update that never began"}
        return super().complete(body)


class BatchProbe(pl.Callback):
    def __init__(self):
        self.batches = {}

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.batches[trainer.global_step] = outputs["step"].batch


def test_sample_during_update_samples_beside_the_update_with_the_old_adapters_logps(tmp_path, painter, monkeypatch):
    """vllm-server with max_staleness 1 and sample_during_update: the batch of step k+1 is sampled while update k
    runs (the server answers it only then), the weights go to the server after both, and the update of that batch
    takes as its old policy one forward of the adapter that sampled it: the server's own log-probs, not the live
    adapter's."""
    tokenizer = AutoTokenizer.from_pretrained(painter)
    base = AutoModelForCausalLM.from_pretrained(painter, torch_dtype=torch.float32)
    old_logps = []
    loss = grpo.grpo_loss
    monkeypatch.setattr(grpo, "grpo_loss", lambda *a, **k: (old_logps.append(k["old_logps"]), loss(*a, **k))[1])
    with UpdateGatedServer(base, tokenizer) as server:
        update = module_file.policy_update
        monkeypatch.setattr(module_file, "policy_update", lambda *a, **k: (server.update_begins(), update(*a, **k))[1])
        pl.seed_everything(0)
        module = GRPOModule(
            policy=PolicyConfig(model=str(painter), dtype="float32", lora_r=8, lora_alpha=16),
            sampling=SamplingConfig(max_completion_length=160), sampler="vllm-server",
            vllm=VLLMConfig(base_url=server.base_url, adapter_dir=str(tmp_path / "adapters")),
            grpo=GRPOConfig(num_generations=6, micro_batch_size=6, scale_rewards="none"), optim=OptimConfig(lr=5e-3),
            render_pool_size=2, rewards=[GateTerm(), LengthTerm(min_tokens=10, full_tokens=120, max_tokens=1000)],
            max_staleness=1, sample_during_update=True)
        probe = BatchProbe()
        trainer = pl.Trainer(max_steps=3, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                             callbacks=[probe], enable_progress_bar=False, enable_model_summary=False,
                             limit_val_batches=0, num_sanity_val_steps=0)
        trainer.fit(module, datamodule=PromptDataModule(subjects=[SUBJECT], seed=3))
        policy = module.policy_model
    assert len(server.completion_requests) == 3 and server.updates_begun == 3
    batches = probe.batches
    assert [batches[k].policy_version for k in (1, 2, 3)] == [0, 0, 1]
    assert [batches[k].metrics["train/staleness"] for k in (1, 2, 3)] == [0.0, 1.0, 1.0]
    assert [r["model"] for r in server.completion_requests] == ["policy-1", "policy-1", "policy-2"]
    assert old_logps[0] is None and "time/old_logps_s" not in batches[1].metrics
    for k, old in zip((2, 3), old_logps[1:], strict=True):
        samples = batches[k].samples
        assert samples.logps is None and batches[k].metrics["time/old_logps_s"] > 0  # no forward on the sampling thread
        torch.testing.assert_close(old, samples.sampler_logps[:, : old.shape[1]], atol=2e-4, rtol=0)
    # the live adapter (after update 3) gives other log-probs: the old ones came from the adapter that sampled
    live = grpo_logps(policy, batches[3].samples)
    assert (live - batches[3].old_logps).abs().max() > 1e-2
    assert module.pipeline is None


def grpo_logps(model, samples):
    from lit_watercolour.sampling.base import with_policy_logps

    return with_policy_logps(model, samples, SamplingConfig(max_completion_length=160)).logps


def test_sample_during_update_needs_a_stale_engine_sampler_that_stays_awake():
    for sampler, staleness in (("hf", 1), ("vllm", 0)):
        with pytest.raises(ValueError, match="model.sample_during_update"):
            GRPOModule(sampler=sampler, max_staleness=staleness, sample_during_update=True)
    with pytest.raises(ValueError, match="model.vllm.enable_sleep_mode"):  # it would wake mid-update
        GRPOModule(sampler="vllm", max_staleness=1, sample_during_update=True)


class SharedRenders(pl.Callback):
    """Renders each (code, seed) once across the learning runs: the page is deterministic for them (test_gate),
    the runs of a seed share their prompts' render seeds and the painter repeats its few sketches, so a group
    costs a handful of renders and a seed's later runs find most of theirs done."""

    def __init__(self, done: dict):
        self.done = done

    def on_train_start(self, trainer, module):
        pool, done, running = module.pipeline.pool, self.done, {}
        render = pool.render

        async def once(code, seed=0, timeout_s=None):  # on the pipeline's loop, so one task per sketch
            if (code, seed) not in done:
                if (code, seed) not in running:
                    running[code, seed] = asyncio.ensure_future(render(code, seed, timeout_s))
                done[code, seed] = await asyncio.shield(running[code, seed])
            return done[code, seed]
        pool.render = once


def sketch_margin(model, tokenizer) -> float:
    """The policy's mean log-prob of the painter's three gate-passing sketches minus that of its failing one
    (COMPLETIONS[3], bare p5 shapes), teacher-forced: what a run learned, read without sampling noise."""
    prompt, rows = sketch_rows(tokenizer)
    logps = []
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([row])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
            logps.append(logits.log_softmax(-1).gather(1, ids[0, len(prompt):, None]).sum().item())
    return sum(logps[:3]) / 3 - logps[3]


class Learning(pl.Callback):
    """The policy's `sketch_margin` before the run and after each step, and each step's staleness and token
    mean importance ratio (new policy over the one that sampled the batch)."""

    def __init__(self):
        self.margins, self.staleness, self.ratios = [], [], []

    def on_train_start(self, trainer, module):
        self.margins.append(sketch_margin(module.policy_model, module.tokenizer))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.margins.append(sketch_margin(module.policy_model, module.tokenizer))
        self.staleness.append(outputs["step"].metrics["train/staleness"])
        self.ratios.append(outputs["step"].metrics["ratio/mean"])


SEEDS, STEPS = (0, 1), 4


def learning_run(painter, seed: int, max_staleness: int, renders: dict) -> Learning:
    pl.seed_everything(seed)
    module = GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32", lora_r=8, lora_alpha=16),
        sampling=SamplingConfig(max_completion_length=160, generation_batch_size=8),
        grpo=GRPOConfig(num_generations=8, micro_batch_size=8, scale_rewards="none"),
        optim=OptimConfig(lr=5e-3), render_pool_size=2, render=RenderConfig(pixel_density=0.5),
        rewards=[GateTerm(weight=1.0)], max_staleness=max_staleness,
    )
    learning = Learning()
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         callbacks=[SharedRenders(renders), learning], enable_progress_bar=False,
                         enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0)
    trainer.fit(module, datamodule=PromptDataModule(subjects=[SUBJECT], seed=seed))
    return learning


@pytest.fixture(scope="module")
def learning_runs(painter):
    """(seed, max_staleness) -> the run's `Learning`, each run once per module: the on-policy runs serve both
    stalenesses compared with them, and every run reads the renders of the ones before it."""
    runs, renders = {}, {}

    def run(seed: int, max_staleness: int) -> Learning:
        if (seed, max_staleness) not in runs:
            runs[seed, max_staleness] = learning_run(painter, seed, max_staleness, renders)
        return runs[seed, max_staleness]
    return run


@pytest.mark.parametrize("max_staleness", [1, 2])
def test_stale_learns_no_worse_than_on_policy(learning_runs, max_staleness):
    """Each seed run on-policy and k steps stale from the same start. What a run learned is read without
    sampling noise, as the gain of `sketch_margin` (the painter starts indifferent); averaged over the seeds,
    the on-policy runs gain at least half a nat and the stale runs at least that and half the on-policy gain.
    Each stale step's importance ratio is the drift of the updates since its batch was sampled: near 1, never
    exactly 1 (the sampler's own log-probs, not the current policy's or another row's)."""
    k = max_staleness
    runs = {(s, j): learning_runs(s, j) for s in SEEDS for j in (0, k)}
    gain = {j: sum(runs[s, j].margins[-1] - runs[s, j].margins[0] for s in SEEDS) / len(SEEDS) for j in (0, k)}
    summary = {"gain": gain, "margins": {key: r.margins for key, r in runs.items()},
               "ratios": {s: runs[s, k].ratios for s in SEEDS}}
    for s in SEEDS:
        assert runs[s, 0].staleness == [0.0] * STEPS and runs[s, k].staleness == [min(i, k) for i in range(STEPS)]
        assert all(0 < abs(ratio - 1) < 0.05 for ratio in runs[s, k].ratios[1:]), summary
    assert gain[0] >= 0.5 and gain[k] >= max(0.5, gain[0] / 2), summary


class StreamOff(PromptDataModule):
    """The prompts read ahead for batch `off` differ from the ones the stream then yields (as after a change
    of data order): the batch sampled ahead for it must not be used."""

    def __init__(self, off: int, **kwargs):
        super().__init__(**kwargs)
        self.off = off

    def train_prompts(self, step):
        prompts = super().train_prompts(step)
        return [dataclasses.replace(p, seed=p.seed + 1) for p in prompts] if step == self.off else prompts


class StopAfter(pl.Callback):
    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        trainer.should_stop = trainer.global_step >= self.step


def small_run(painter, max_staleness: int, max_steps: int, data: PromptDataModule, probe: pl.Callback,
              num_iterations: int = 1, **trainer_kwargs):
    pl.seed_everything(0)
    module = GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32", lora_r=8, lora_alpha=16),
        sampling=SamplingConfig(max_completion_length=160, generation_batch_size=4),
        grpo=GRPOConfig(num_generations=4, micro_batch_size=4, scale_rewards="none", num_iterations=num_iterations),
        optim=OptimConfig(lr=5e-3), render_pool_size=2, render=RenderConfig(pixel_density=0.5),
        rewards=[GateTerm(), LengthTerm(min_tokens=10, full_tokens=120, max_tokens=1000)], max_staleness=max_staleness,
    )
    trainer = pl.Trainer(max_steps=max_steps, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[probe, *trainer_kwargs.pop("callbacks", [])], **trainer_kwargs)
    trainer.fit(module, datamodule=data)
    return module, trainer


def test_staleness_counts_optimizer_steps_and_validation_runs_between_stale_steps(painter):
    """num_iterations 2, max_staleness 1: a batch sampled ahead is two optimizer steps behind its update;
    validation after every step (with the next batch in flight) scores on its own and leaves the queue as it
    was; nothing is sampled past the last step."""
    probe = Probe()
    data = PromptDataModule(subjects=[SUBJECT], seed=3)
    module, trainer = small_run(painter, 1, 6, data, probe, num_iterations=2, val_check_interval=1,
                                limit_val_batches=1)
    steps = probe.steps
    assert trainer.global_step == 6 and list(steps) == [2, 4, 6]
    assert [steps[k]["version"] for k in (2, 4, 6)] == [0, 0, 2]
    assert [steps[k]["metrics"]["train/staleness"] for k in (2, 4, 6)] == [0.0, 2.0, 2.0]
    assert "val/reward" in trainer.callback_metrics and "val/gate_pass_rate" in trainer.callback_metrics
    assert module.pipeline is None  # closed at teardown


def test_other_prompts_drop_the_queue_and_teardown_waits_for_batches_in_flight(painter):
    """max_staleness 2 over a stream whose read-ahead for batch 1 differs: step 2 drops both queued batches
    and samples on-policy, step 3 takes a batch sampled ahead again; the run stops with a batch in flight,
    and teardown waits for it before closing the pool: no rollout thread outlives the run."""
    probe = Probe()
    module, trainer = small_run(painter, 2, 6, StreamOff(1, subjects=[SUBJECT], seed=3), probe,
                                callbacks=[StopAfter(3)], limit_val_batches=0)
    steps = probe.steps
    assert trainer.global_step == 3
    assert [(steps[k]["version"], steps[k]["metrics"]["train/staleness"]) for k in (1, 2, 3)] == [
        (0, 0.0), (1, 0.0), (1, 1.0)]
    assert module.pipeline is None
    assert not [t.name for t in threading.enumerate() if t.name.startswith(("rollout-loop", "rollout-work", "rollout-sampling"))]
