"""`python -m lit_watercolour sft`: supervised fine-tuning on sketches, the warm start before GRPO.

The policy loads as `fit` loads it (`model.policy`: LoRA on all linear layers, or with `full` every weight), the
rows are prompted as `fit` prompts (`lit_watercolour.sft_data`), and the loss is the mean negative log-likelihood
of the completion's tokens only (`sft_loss`), through the same `completion_logps` the GRPO loss and the samplers
use. Each validation logs the held-out loss (`val/loss`). At the end it writes, in the run's folder:

    adapter/            the peft adapter and tokenizer: `fit`/`predict --model.policy.adapter <run>/adapter`
    model/              with `full`: the whole model, a transformers folder (`--model.policy.model <run>/model`)
    samples/            `samples_per_subject` sketches of each of `sample_subjects`, rendered, gated and scored by
                        `rewards` (.txt, .js, .png each, `samples.jsonl` as `predict` writes it, `summary.json`)

and Lightning's checkpoints where the config's callbacks put them (`AdapterCheckpoint` works as in `fit`).
"""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import torch

from lit_watercolour.callbacks.paintings import slug, write
from lit_watercolour.callbacks.rewards import RewardModels
from lit_watercolour.callbacks.runlog import RolloutLog, rollout_records
from lit_watercolour.data import Prompt, chat_prompt, group_seed
from lit_watercolour.kernels.checkpointing import enable_gradient_checkpointing
from lit_watercolour.policy import (PolicyConfig, completion_logps, load_base_model, load_policy, load_tokenizer,
                                   trainable_state_dict, update_defaults)
from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.mix import RewardMix
from lit_watercolour.rollout import RolloutPipeline
from lit_watercolour.sampling import SamplingConfig, build_sampler
from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.update import OptimConfig, ThreadsConfig, configure_optimizer

SAMPLES_FILE = "samples.jsonl"


def sft_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean negative log-likelihood of the completions' tokens (the prompt's are context, never targets; padding
    neither), and the number of tokens it averages."""
    mask = batch["completion_mask"]
    logps, _ = completion_logps(model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], mask,
                                temperature=1.0, batch_size=mask.shape[0])
    tokens = mask.sum()
    return -(logps * mask).sum() / tokens.clamp(min=1), tokens


class SFTModule(pl.LightningModule):
    def __init__(
        self,
        policy: PolicyConfig = PolicyConfig(model="lit_watercolour/assets/tiny_policy", dtype="float32"),
        full: bool = False,
        optim: OptimConfig = OptimConfig(lr=2e-4, lr_scheduler="cosine", warmup_steps=5),
        rewards: list[RewardTerm] | None = None,
        sampling: SamplingConfig = SamplingConfig(max_completion_length=1024),
        sample_subjects: list[str] | None = None,
        samples_per_subject: int = 4,
        render_pool_size: int = 2,
        render: RenderConfig = RenderConfig(),
        threads: ThreadsConfig = ThreadsConfig(),
    ) -> None:
        """
        Args:
            policy: the model and its LoRA adapter, as `fit`'s `model.policy` (`adapter`: continue from one).
            full: train every weight instead of a LoRA adapter; writes `model/` instead of `adapter/`.
            optim: optimizer, learning rate and its schedule (the gradient clip is `max_grad_norm`).
            rewards: the terms that score the samples after training, as `fit`'s `model.rewards`; none: gated only.
            sampling: how the samples after training are drawn (the hf sampler).
            sample_subjects: subjects sampled after training; None: "a peach hibiscus". Subjects left out of the
                data (`data.exclude_subjects`) show whether SFT generalises.
            samples_per_subject: sketches of each subject after training; 0: none.
            render_pool_size: Chromium pages rendering the samples.
            render: how each sample renders (docs/rendering.md).
            threads: torch threads of training and of decoding.
        """
        super().__init__()
        self.policy_config, self.full, self.optim_config = policy, full, optim
        self.sampling_config, self.render_pool_size, self.render_config = sampling, render_pool_size, render
        self.sample_subjects = sample_subjects or ["a peach hibiscus"]
        self.samples_per_subject, self.threads = samples_per_subject, threads
        self.reward_mix = RewardMix(rewards or [])
        self.policy_model, self.tokenizer = None, None
        self.strict_loading = False  # checkpoints hold the trained weights only

    def configure_callbacks(self) -> list[pl.Callback]:
        return [RewardModels(self.reward_mix.terms)] if self.samples_per_subject > 0 else []

    def configure_model(self) -> None:
        if self.policy_model is not None:
            return
        if self.threads.update > 0:
            torch.set_num_threads(self.threads.update)
        device = self.trainer.strategy.root_device.type if self._trainer is not None else None
        if self.full:
            self.tokenizer = load_tokenizer(self.policy_config)
            self.policy_model = load_base_model(self.policy_config, self.tokenizer, device)
            self.policy_model.requires_grad_(True)
            if self.policy_config.gradient_checkpointing:
                keep = update_defaults(self.policy_config, device).checkpoint_keep
                enable_gradient_checkpointing(self.policy_model, keep)
        else:
            self.policy_model, self.tokenizer = load_policy(self.policy_config, device)
        self.policy_model.train()  # from_pretrained leaves it in eval, where gradient checkpointing is off

    def configure_optimizers(self):
        return configure_optimizer(self.policy_model, self.optim_config, self.trainer.max_steps)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """Clip the gradient norm to `max_grad_norm`; a non-finite norm drops the gradients, so AdamW skips the step
        (one bad batch must not turn the weights into NaN)."""
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, gradient_clip_val or self.optim_config.max_grad_norm or float("inf"))
        if not torch.isfinite(norm):
            for p in params:
                p.grad = None

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["state_dict"] = trainable_state_dict(self)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.configure_model()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, tokens = sft_loss(self.policy_model, batch)
        rows = batch["completion_mask"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=rows)
        self.log("train/tokens", tokens.float(), reduce_fx="sum", batch_size=rows)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss, tokens = sft_loss(self.policy_model, batch)
        # weighted by tokens: the held-out loss is the mean over every held-out completion token
        self.log("val/loss", loss, prog_bar=True, batch_size=int(tokens))

    # --- what the run leaves behind ----------------------------------------------------------------

    def run_dir(self) -> Path:
        return Path(self.trainer.log_dir or self.trainer.default_root_dir)

    def save_adapter(self, path: str | Path) -> None:
        """The trained weights as `fit` loads them: a peft adapter folder, or with `full` a transformers folder;
        with the tokenizer either way."""
        self.policy_model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)

    def on_train_end(self) -> None:
        if self.trainer.is_global_zero:
            out = self.run_dir() / ("model" if self.full else "adapter")
            self.save_adapter(out)
            print(f"sft: wrote {out}")

    def on_fit_end(self) -> None:
        if self.samples_per_subject > 0 and self.trainer.is_global_zero:
            summary = self.write_samples(self.run_dir() / "samples")
            print("sft: samples " + json.dumps(summary))

    def write_samples(self, folder: Path) -> dict:
        """`samples_per_subject` sketches of each sample subject, rendered, gated and scored, written to `folder`
        (.txt, .js, .png, `samples.jsonl`, `summary.json`); returns the summary: gate pass rate, mean reward and
        each term's mean, per subject and over all."""
        system = getattr(self.trainer.datamodule, "system", None)
        prompts = [Prompt(s, chat_prompt(self.tokenizer, s, *([system] if system else [])), group_seed(0, -1 - i))
                   for i, s in enumerate(self.sample_subjects)]
        sampler = build_sampler(self.sampling_config, self.policy_model, self.tokenizer, threads=self.threads.sampling)
        pipeline = RolloutPipeline(sampler, rewards=self.reward_mix if self.reward_mix.terms else None,
                                   render=self.render_config, pool_size=self.render_pool_size, device=self.device)
        try:
            self.policy_model.eval()
            batch = pipeline.collect(prompts, self.samples_per_subject)
        finally:
            pipeline.close()
            sampler.close()
        folder.mkdir(parents=True, exist_ok=True)
        n = len(batch.rollouts)
        rewards = batch.rewards if batch.rewards is not None else torch.full((n,), float("nan"))
        records = rollout_records(self.global_step, batch.rollouts, batch.scores, rewards, torch.full((n,), float("nan")))
        log = RolloutLog(folder / SAMPLES_FILE)
        log.path.unlink(missing_ok=True)
        for i, (r, record) in enumerate(zip(batch.rollouts, records, strict=True)):
            record["painting"] = stem = f"{slug(r.prompt)}-{i % self.samples_per_subject}"
            write(folder / stem, r)
        log.append(records)
        summary = {"all": sample_summary(records)}
        summary.update({s: sample_summary([r for r in records if r["subject"] == s]) for s in self.sample_subjects})
        (folder / "summary.json").write_text(json.dumps(summary, indent=1))
        if self.logger is not None:
            self.logger.log_metrics({f"samples/{k}": v for k, v in summary["all"].items()}, step=self.global_step)
        return summary


def sample_summary(records: list[dict]) -> dict[str, float]:
    """The rows' gate pass rate, mean reward and mean of each term (NaN scores left out)."""
    def mean(values):
        values = [v for v in values if v is not None and v == v]
        return sum(values) / len(values) if values else float("nan")

    out = {"n": float(len(records)), "gate_pass_rate": mean([float(r["gate"] == "ok") for r in records]),
           "reward": mean([r["reward"] for r in records])}
    for name in sorted({k for r in records for k in r["scores"]}):
        out[f"reward/{name}"] = mean([r["scores"].get(name) for r in records])
    return out
