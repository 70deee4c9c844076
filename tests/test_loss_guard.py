"""Steps that must not learn: every score missing, a non-finite loss. And a partly missing step.

Three steps of a tiny Qwen3 + LoRA on fixed completions (all pass the gate) with a reward term
that fails on cue: step 1 every score is NaN (skipped, `train/skipped_missing`), step 2 one
score is NaN (that rollout gets advantage 0, the rest train), step 3 the loss turns infinite
(skipped, `train/skipped_nonfinite`). A skipped step leaves the adapter and the optimizer
state untouched but still counts: global_step and the LR schedule advance.
"""

import math

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from lit_watercolour import grpo
from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOConfig, GRPOModule, OptimConfig
from lit_watercolour.policy import PolicyConfig
from lit_watercolour.rewards.base import RewardTerm, TermScores
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.callbacks.runlog import ROLLOUTS_FILE, RolloutLog, RolloutLogger
from lit_watercolour.sampling import SamplingConfig
from cpu_threads import one_thread  # noqa: F401  (fixture)
from scripted_sampler import ScriptedSampler
from tiny_painter import SUBJECT

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("one_thread")]

NAN = math.nan
# a large square wash: well over the gate's 0.5% painted on every seed
SKETCH = """```js
function setup() {
  createCanvas(512, 512, WEBGL);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background("#fbf7ee");
  brush.noStroke();
  brush.fill("COLOUR", 200);
  brush.rect(96, 96, 320, 320);
}
```"""
TEXTS = [SKETCH.replace("COLOUR", c) for c in ("#3a6ea5", "#c2185b", "#7aa35a", "#e8735a")]
SCHEDULE = {1: [NAN, NAN, NAN, NAN], 2: [NAN, 0.2, 0.5, 0.9], 3: [0.1, 0.4, 0.6, 0.8]}


class FlakyScorer(RewardTerm):
    """Scores by the schedule of the current step, NaN standing for a failed service."""

    name = "flaky"

    def __init__(self):
        super().__init__(weight=1.0)
        self.calls = 0

    def score(self, rollouts):
        self.calls += 1
        assert len(rollouts) == 4, "every scripted completion passes the gate"
        return TermScores(torch.tensor(SCHEDULE[self.calls]), {})


class Probe(pl.Callback):
    def __init__(self):
        self.states = {}

    def on_train_start(self, trainer, module):
        self.states[0] = self.snapshot(trainer, module)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.states[trainer.global_step] = {**self.snapshot(trainer, module), "metrics": dict(trainer.callback_metrics)}

    @staticmethod
    def snapshot(trainer, module):
        opt = trainer.optimizers[0]
        return {
            "lora": {n: p.detach().clone() for n, p in module.policy_model.named_parameters() if p.requires_grad},
            "adam_step": sorted({float(s["step"]) for s in opt.state.values()}),
            "lr": trainer.lr_scheduler_configs[0].scheduler.get_last_lr()[0],
        }


def test_missing_scores_and_nonfinite_loss_skip_the_update(tmp_path, monkeypatch):
    real_loss, loss_calls = grpo.grpo_loss, []

    def infinite_on_step_3(*args, **kwargs):
        loss, metrics = real_loss(*args, **kwargs)
        loss_calls.append(trainer.global_step)
        return (loss * math.inf if trainer.global_step == 2 else loss), metrics  # global_step 2 = the 3rd step

    monkeypatch.setattr(grpo, "grpo_loss", infinite_on_step_3)
    pl.seed_everything(0)
    flaky = FlakyScorer()
    module = GRPOModule(
        policy=PolicyConfig(tiny="qwen3", tiny_config={"hidden_size": 64, "num_layers": 2}, dtype="float32",
                            gradient_checkpointing=False, lora_r=4, lora_alpha=8),
        sampling=SamplingConfig(max_completion_length=256),
        grpo=GRPOConfig(num_generations=4, micro_batch_size=2, scale_rewards="none"),
        optim=OptimConfig(lr=1e-2, lr_scheduler="linear", warmup_steps=0),
        rewards=[GateTerm(), flaky],
    )
    module.configure_model()
    module.sampler = ScriptedSampler(module.tokenizer, TEXTS, model=module.policy_model)
    probe = Probe()
    trainer = pl.Trainer(max_steps=3, accelerator="cpu", devices=1, logger=CSVLogger(tmp_path, name="logs"),
                         enable_checkpointing=False, enable_progress_bar=False, log_every_n_steps=1,
                         limit_val_batches=0, num_sanity_val_steps=0,
                         callbacks=[RolloutLogger(), probe])
    trainer.fit(module, datamodule=PromptDataModule(subjects=[SUBJECT]))

    s = probe.states
    assert trainer.global_step == 3 and flaky.calls == 3
    # the LR schedule advanced on every step, skipped or not (linear decay to 0 at max_steps)
    assert s[0]["lr"] > s[1]["lr"] > s[2]["lr"] > s[3]["lr"]
    # step 1: no score at all, so no forward/backward and no change
    assert s[1]["metrics"]["train/skipped_missing"] == 1.0
    assert all(torch.equal(v, s[1]["lora"][n]) for n, v in s[0]["lora"].items())
    assert s[1]["adam_step"] == s[0]["adam_step"] == []
    # step 2: one missing score; the other three train
    m2 = s[2]["metrics"]
    assert m2["train/skipped_missing"] == 0.0 and m2["train/skipped_nonfinite"] == 0.0
    assert m2["frac_reward_missing"].item() == pytest.approx(0.25)
    assert any(not torch.equal(v, s[2]["lora"][n]) for n, v in s[1]["lora"].items())
    assert s[2]["adam_step"] == [1.0]
    # step 3: the loss is infinite: gradients dropped, adapter and Adam state as after step 2
    assert 2 in loss_calls and s[3]["metrics"]["train/skipped_nonfinite"] == 1.0
    assert all(torch.equal(v, s[3]["lora"][n]) for n, v in s[2]["lora"].items())
    assert s[3]["adam_step"] == [1.0]
    assert all(torch.isfinite(p).all() for p in s[3]["lora"].values())

    # the run log keeps every step; a missing score is null with advantage 0
    log = RolloutLog(tmp_path / "logs" / ROLLOUTS_FILE).read()
    assert [r["step"] for r in log] == [1] * 4 + [2] * 4 + [3] * 4
    step2 = [r for r in log if r["step"] == 2]
    assert step2[0]["reward"] is None and step2[0]["scores"]["flaky"] is None and step2[0]["advantage"] == 0.0
    valid = [r["reward"] for r in step2[1:]]
    assert [r["advantage"] for r in step2[1:]] == pytest.approx([v - sum(valid) / 3 for v in valid], abs=1e-6)
    assert all(r["gate"] == "ok" and r["subject"] == SUBJECT for r in log)
