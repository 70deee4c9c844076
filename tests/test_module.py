"""GRPOModule end to end on CPU: a tiny Qwen3 + LoRA, real Chromium renders, real reward terms.

3+1 optimizer steps change only adapter weights; a run resumed from the step-3 checkpoint
starts with the same step, LR, optimizer state, adapter and RNG, so its step 4 samples the
very completions and reaches the very weights of the uninterrupted run.
"""

import json

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from PIL import Image
from safetensors.torch import load_file

from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.callbacks.checkpoint import AdapterCheckpoint
from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOConfig, GRPOModule, OptimConfig
from lit_watercolour.policy import PolicyConfig
from lit_watercolour.rewards.base import RewardTerm, TermScores
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.sampling import SamplingConfig
from cpu_threads import one_thread  # noqa: F401  (fixture)
from tiny_painter import SUBJECT

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("one_thread")]


class Probe(pl.Callback):
    """Records what each step did and what state training starts from."""

    def __init__(self):
        self.start, self.steps = None, {}

    def on_train_start(self, trainer, module):
        self.start = snapshot(trainer, module)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.steps[trainer.global_step] = {
            "texts": [r.completion for r in outputs["step"].batch.rollouts],
            "rewards": outputs["step"].rewards.clone(),
            **snapshot(trainer, module),
        }


def snapshot(trainer, module):
    opt = trainer.optimizers[0]
    return {
        "global_step": trainer.global_step,
        "lr": trainer.lr_scheduler_configs[0].scheduler.get_last_lr()[0],
        "adam_step": [float(s["step"]) for s in opt.state.values()],
        "exp_avg": [s["exp_avg"].clone() for s in opt.state.values()],
        "params": {n: p.detach().clone() for n, p in module.policy_model.named_parameters()},
    }


def make_run(tmp_path, painter, max_steps, probe, hub=None):
    pl.seed_everything(0)
    module = GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32", lora_r=8, lora_alpha=16),
        sampling=SamplingConfig(max_completion_length=160, generation_batch_size=4),
        grpo=GRPOConfig(num_generations=6, micro_batch_size=2, beta=0.05, scale_rewards="none"),
        optim=OptimConfig(lr=5e-3, lr_scheduler="cosine", warmup_steps=2),
        render_pool_size=2, rewards=[GateTerm(), LengthTerm(min_tokens=10, full_tokens=120, max_tokens=1000)],
    )
    ckpt = AdapterCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=1, save_top_k=-1, hub_repo=hub)
    trainer = pl.Trainer(
        max_steps=max_steps, accelerator="cpu", devices=1, logger=CSVLogger(tmp_path, name="logs"),
        callbacks=[ckpt, probe],
        enable_progress_bar=False, limit_val_batches=0, num_sanity_val_steps=0, log_every_n_steps=1,
    )
    return module, PromptDataModule(subjects=[SUBJECT], seed=3), trainer


def test_train_resume_and_publish(tmp_path, painter):
    probe = Probe()
    module, data, trainer = make_run(tmp_path / "a", painter, 4, probe, hub=str(tmp_path / "hub"))
    trainer.fit(module, datamodule=data)
    assert trainer.global_step == 4
    start, after3, after4 = probe.start, probe.steps[3], probe.steps[4]

    # rewards differ inside the group, so the update is not empty
    assert any(s["rewards"].std() > 0 for s in probe.steps.values())
    # only the adapter moved
    assert any(not torch.equal(v, after4["params"][n]) for n, v in start["params"].items() if "lora_B" in n)
    assert all(torch.equal(v, after4["params"][n]) for n, v in start["params"].items() if "lora_" not in n)
    # warm-up then cosine: the LR rose over the first two steps
    assert probe.steps[1]["lr"] < probe.steps[2]["lr"]

    # the metrics a user watches were logged
    metrics = (tmp_path / "a" / "logs" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    for key in ["reward", "reward_std", "reward/gate/pass_rate", "reward/length/mean", "advantage/std", "loss", "kl",
                "entropy", "clip_ratio/region_mean", "completions/mean_length", "completions/clipped_ratio",
                "gate/pass_rate", "gate/reason_ok", "gate/text_hits", "time/sampling_tokens_per_s",
                "time/render_wait_s", "time/scoring_s",
                "time/update_tokens_per_s", "grad_norm", "lr", "train/device/items_per_sec", "train/device/samples_per_sec"]:
        assert key in metrics, key  # the last two: Lightning's Throughput, in the step's row
    assert module.flops_per_batch > 0  # what that monitor's MFU divides, where it knows the device's peak

    # the .ckpt holds the adapter only; the peft folder beside it loads as an adapter
    ckpt3 = tmp_path / "a" / "ckpt" / "epoch=0-step=3.ckpt"
    state = torch.load(ckpt3, weights_only=False)
    assert state["state_dict"] and all("lora_" in k for k in state["state_dict"])
    adapter = tmp_path / "a" / "ckpt" / "epoch=0-step=4-adapter"
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 8 and (adapter / "tokenizer_config.json").exists()
    saved = load_file(adapter / "adapter_model.safetensors")
    assert len(saved) == sum("lora_" in n for n in after4["params"])
    # the last adapter was published (hub_repo is a local folder here)
    assert (tmp_path / "hub" / "adapter_model.safetensors").read_bytes() == (adapter / "adapter_model.safetensors").read_bytes()

    # resume from step 3: same step, LR, optimizer state and adapter; step 4 repeats exactly
    probe_b = Probe()
    module_b, data_b, trainer_b = make_run(tmp_path / "b", painter, 4, probe_b)
    trainer_b.fit(module_b, datamodule=data_b, ckpt_path=ckpt3)
    b = probe_b.start
    assert b["global_step"] == 3 and b["lr"] == after3["lr"] and b["adam_step"] == after3["adam_step"]
    assert all(torch.equal(x, y) for x, y in zip(b["exp_avg"], after3["exp_avg"]))
    assert all(torch.equal(v, b["params"][n]) for n, v in after3["params"].items())
    assert probe_b.steps[4]["texts"] == after4["texts"]
    for n, v in after4["params"].items():
        torch.testing.assert_close(probe_b.steps[4]["params"][n], v)


class TokenCount(RewardTerm):
    """An ungated term that keeps the rollouts validation scored; its score is their token count / 1000."""

    name, gated = "tokens", False

    def __init__(self) -> None:
        super().__init__(weight=0.5)
        self.seen = []

    def score(self, rollouts):
        self.seen += rollouts
        return TermScores(torch.tensor([r.num_tokens / 1000 for r in rollouts]), {})


def test_validate_scores_and_predict_paints_png_and_js(tmp_path, painter):
    """validate sets the reward terms up (the RewardModels callback) and tears them down; predict paints
    without setting up any."""
    tokens, setups = TokenCount(), []
    setup = tokens.setup
    tokens.setup = lambda device: (setups.append(device), setup(device))[1]
    module = GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32", gradient_checkpointing=False),
        sampling=SamplingConfig(max_completion_length=160, temperature=0.7),
        grpo=GRPOConfig(num_generations=4),
        predict_generations=3, predict_dir=str(tmp_path / "paintings"),
        render=RenderConfig(pixel_density=0.5),  # training's cheap renders; paintings stay full size
        rewards=[GateTerm(weight=0.1), tokens],
    )
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    # a data seed whose prompts' sampling seeds draw passing and failing sketches alike
    data = PromptDataModule(subjects=[SUBJECT], seed=1)
    (metrics,) = trainer.validate(module, datamodule=data)
    # the metrics against the rollouts validation scored: passed sketches earn 0.1 + 0.5 * tokens / 1000, others 0
    passed, counts = [r.gate.passed for r in tokens.seen], [r.num_tokens / 1000 for r in tokens.seen]
    assert len(passed) == 4 and 0 < sum(passed) < 4, passed
    assert metrics["val/gate_pass_rate"] == metrics["val/reward/gate"] == pytest.approx(sum(passed) / 4)
    assert metrics["val/reward/tokens"] == pytest.approx(sum(counts) / 4)
    assert metrics["val/reward"] == pytest.approx(sum(p * (0.1 + 0.5 * c) for p, c in zip(passed, counts)) / 4)
    for key in ("reward", "gate_pass_rate", "reward/tokens"):  # the one subject's figures are the whole batch's
        assert metrics[f"val/a-peach-hibiscus/{key}"] == pytest.approx(metrics[f"val/{key}"])
    assert setups == [torch.device("cpu")]  # set up for validate
    written = trainer.predict(module, datamodule=data)
    stems = [s for batch in written for s in batch.rollouts]
    assert len(stems) == 3 and len(setups) == 1  # predict scores nothing: no reward model is set up
    files = sorted(p.name for p in (tmp_path / "paintings").iterdir())
    assert all(f"a-peach-hibiscus-0-{i}.txt" in files for i in range(3))
    pngs = list((tmp_path / "paintings").glob("*.png"))
    assert pngs and all(Image.open(p).size == (512, 512) for p in pngs)
    assert all(p.with_suffix(".js").exists() for p in pngs)


def test_num_iterations_reuses_the_rollout_batch(tmp_path, painter):
    """Two optimizer steps per rollout batch: the second sees a ratio away from 1 (old log-probs kept)."""
    pl.seed_everything(0)
    probe = Probe()
    module = GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32"),
        sampling=SamplingConfig(max_completion_length=160),
        grpo=GRPOConfig(num_generations=4, micro_batch_size=4, num_iterations=2, loss_type="grpo"),
        optim=OptimConfig(lr=2e-2), rewards=[GateTerm(), LengthTerm(min_tokens=10, full_tokens=120)],
    )
    trainer = pl.Trainer(max_steps=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, callbacks=[probe])
    trainer.fit(module, datamodule=PromptDataModule(subjects=[SUBJECT]))
    assert trainer.global_step == 2 and list(probe.steps) == [2]  # one batch, two steps
    assert probe.steps[2]["rewards"].std() > 0
    assert abs(trainer.callback_metrics["ratio/mean"].item() - 1.0) > 1e-6


def test_prompt_stream_resumes_where_it_stopped(painter):
    from transformers import AutoTokenizer

    from lit_watercolour.data import PromptStream

    tok = AutoTokenizer.from_pretrained(painter)
    subjects = ["a", "b", "c"]
    full = PromptStream(subjects, tok, prompts_per_step=2, shuffle=True, seed=5)
    resumed = PromptStream(subjects, tok, prompts_per_step=2, shuffle=True, seed=5, start=3)
    first = [batch for _, batch in zip(range(6), full)]
    assert [batch for _, batch in zip(range(3), resumed)] == first[3:]
    # every subject comes once per pass, and each group has its own seed
    flat = [p for batch in first for p in batch]
    assert sorted(p.subject for p in flat[:3]) == subjects
    assert len({p.seed for p in flat}) == len(flat)


def test_rows_reported_out_of_order_keep_their_own_completion_and_render():
    """A backend that finishes rows in any order (a vLLM server) must not shuffle rollouts."""
    from lit_watercolour.data import Prompt
    from lit_watercolour.rollout import RolloutPipeline
    from lit_watercolour.offline.tiny_models import tiny_tokenizer
    from scripted_sampler import ScriptedSampler

    sketch = ("```js\nfunction setup() {{ createCanvas(512, 512, WEBGL); noLoop(); }}\nfunction draw() {{\n"
              '  console.log("row {row}");\n  translate(-width / 2, -height / 2);\n  background("#fbf7ee");\n'
              '  brush.noStroke();\n  brush.fill("#3a6ea5", 170);\n  brush.circle(256, 256, 60);\n}}\n```')
    texts = [sketch.format(row=i) for i in range(4)]
    texts[2] = "no code in this one"  # a static gate failure between rendered rows
    prompts = [Prompt("a peach hibiscus", "p0", seed=11), Prompt("a blue iris", "p1", seed=22)]
    pipeline = RolloutPipeline(ScriptedSampler(tiny_tokenizer(), texts, order=[3, 1, 2, 0]), pool_size=2)
    try:
        batch = pipeline.collect(prompts, 2)
    finally:
        pipeline.close()
    rollouts = batch.rollouts
    assert [r.completion for r in rollouts] == texts == batch.samples.texts
    assert [(r.prompt, r.group, r.seed) for r in rollouts] == [
        ("a peach hibiscus", 0, 11), ("a peach hibiscus", 0, 11), ("a blue iris", 1, 22), ("a blue iris", 1, 22)]
    assert rollouts[2].render is None and not rollouts[2].gate.passed
    for row in (0, 1, 3):
        assert rollouts[row].render.console == [f"log: row {row}"], row
    assert [r.num_tokens for r in rollouts] == batch.samples.completion_mask.sum(1).tolist()


def test_a_rollout_draws_from_the_pipelines_generator_and_leaves_torchs_alone():
    """`RolloutPipeline.generator`, seeded for each batch from its first prompt's seed and the rank: a rollout leaves
    torch's global random state where it was, the same seed samples the same rows whatever that state, and another
    seed or rank (DDP) other rows."""
    from lit_watercolour.data import Prompt
    from lit_watercolour.policy import load_policy
    from lit_watercolour.rollout import RolloutPipeline
    from lit_watercolour.sampling import HFSampler

    model, tokenizer = load_policy(PolicyConfig(tiny="qwen3", dtype="float32", lora_r=4, lora_alpha=8), "cpu")
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=12))
    text = "<|im_start|>user\nPaint a fox<|im_end|>\n<|im_start|>assistant\n"
    pipelines = [RolloutPipeline(sampler, pool_size=1, rank=rank) for rank in (0, 1)]
    try:
        torch.manual_seed(5)
        before = torch.get_rng_state()
        first = pipelines[0].collect([Prompt(SUBJECT, text, seed=7)], 4)
        assert torch.equal(torch.get_rng_state(), before)
        torch.manual_seed(6)
        again = pipelines[0].collect([Prompt(SUBJECT, text, seed=7)], 4)
        other_seed = pipelines[0].collect([Prompt(SUBJECT, text, seed=8)], 4)
        other_rank = pipelines[1].collect([Prompt(SUBJECT, text, seed=7)], 4)
    finally:
        for pipeline in pipelines:
            pipeline.close()
    assert first.samples.texts == again.samples.texts
    assert other_seed.samples.texts != first.samples.texts and other_rank.samples.texts != first.samples.texts