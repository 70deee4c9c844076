"""The update's edges, against references computed row by row from the loss's written formulas.

`policy_update` runs on a hand-made rollout batch of three groups whose prompts have different
lengths (left padding inside a micro-batch) and whose completions have different lengths (right
padding), at several micro-batch sizes, the last one uneven. The reference scores each row alone,
unpadded, through the model, and applies TRL's per-token loss and normalisers by hand.

Through GRPOModule (fixed completions from `update_probe.ScriptedRows`, real renders and reward terms), the
same reference checks a step's gradients with bnpo and dr_grpo, and a 2-rank DDP step against the 1-process
step on the same rows (the DAPO normaliser).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import yaml

from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOModule
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.sampling import SampleBatch, SamplingConfig
from lit_watercolour.update import GRPOConfig, OptimConfig, policy_update
from cpu_threads import one_thread  # noqa: F401  (fixture)
from update_probe import ScriptedRows, UpdateProbe

pytestmark = pytest.mark.usefixtures("one_thread")

TEMPERATURE = 0.8
PROMPT_LENGTHS = [3, 6, 4]  # one per group, two rows a group
COMPLETION_LENGTHS = [5, 9, 2, 7, 9, 4]
MAX_COMPLETION = 9
ADVANTAGES = torch.tensor([0.9, -0.9, 0.4, -0.4, 1.3, -1.3], dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    """A one-layer Qwen3 with a LoRA adapter that has moved (lora_B non-zero), in float64."""
    policy, _ = load_policy(PolicyConfig(tiny="qwen3", tiny_config={"hidden_size": 32, "num_layers": 1},
                                         dtype="float32", gradient_checkpointing=False, lora_r=4, lora_alpha=8))
    policy = policy.double()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    policy.train()
    return policy


def rollout_batch(vocab: int = 200, seed: int = 0) -> SampleBatch:
    """Three groups of two rows: prompts left-padded to the longest, completions right-padded."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(10, vocab, (n,), generator=g) for n in PROMPT_LENGTHS]
    rows = [prompts[i // 2] for i in range(len(COMPLETION_LENGTHS))]
    width = max(PROMPT_LENGTHS)
    prompt_ids = torch.stack([torch.cat([torch.zeros(width - len(p), dtype=torch.long), p]) for p in rows])
    prompt_mask = torch.stack([torch.cat([torch.zeros(width - len(p)), torch.ones(len(p))]).long() for p in rows])
    completion_ids = torch.randint(10, vocab, (len(rows), MAX_COMPLETION), generator=g)
    completion_mask = (torch.arange(MAX_COMPLETION) < torch.tensor(COMPLETION_LENGTHS)[:, None]).long()
    completion_ids = completion_ids * completion_mask  # padding ids after each completion
    return SampleBatch(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion_ids,
                       completion_mask=completion_mask, texts=[""] * len(rows),
                       truncated=torch.zeros(len(rows), dtype=torch.bool), logps=None, groups=[i // 2 for i in range(6)])


def row_logps(model, batch: SampleBatch, i: int, temperature: float = TEMPERATURE) -> torch.Tensor:
    """Row i's completion log-probs, the row scored alone with no padding at all."""
    p = batch.prompt_ids[i][batch.prompt_mask[i].bool()][None]
    c = batch.completion_ids[i][batch.completion_mask[i].bool()][None]
    return completion_logps(model, p, torch.ones_like(p), c, torch.ones_like(c), temperature, 1)[0][0]


def reference_gradients(model, batch: SampleBatch, loss_type: str, micro_batch_size: int, *, advantages=ADVANTAGES,
                        old=None, sampler=None, cap=None, epsilon=0.2, temperature=TEMPERATURE,
                        max_completion_length=MAX_COMPLETION) -> tuple[list[torch.Tensor], float]:
    """TRL's loss written out per row: r = exp(logp - old), l = -min(r A, clip(r) A) * w, normalised per
    micro-batch as `grpo_loss` documents; returns the adapter's gradients and the loss."""
    model.zero_grad()
    lengths = batch.completion_mask.sum(1).tolist()
    per_row = []
    for i in range(len(lengths)):
        lp = row_logps(model, batch, i, temperature)
        o = lp.detach() if old is None else old[i, : len(lp)]
        r = torch.exp(lp - o)
        a = advantages[i]
        tokens = -torch.min(r * a, r.clamp(1 - epsilon, 1 + epsilon) * a)
        if cap is not None:
            tokens = tokens * torch.exp(o - sampler[i, : len(lp)]).clamp(max=cap)
        per_row.append(tokens)
    chunks = [range(lo, min(lo + micro_batch_size, len(lengths))) for lo in range(0, len(lengths), micro_batch_size)]
    loss = 0.0
    for rows in chunks:
        total = sum(per_row[i].sum() for i in rows)
        if loss_type == "dapo":
            loss = loss + total / sum(lengths)
        elif loss_type == "bnpo":
            loss = loss + total / sum(lengths[i] for i in rows) / len(chunks)
        elif loss_type == "dr_grpo":
            loss = loss + total / (len(rows) * max_completion_length) / len(chunks)
        else:  # grpo
            loss = loss + sum(per_row[i].mean() for i in rows) / len(rows) / len(chunks)
    loss.backward()
    return [p.grad.clone() for p in adapter(model)], loss.item()


def adapter(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def run_update(model, batch: SampleBatch, micro_batch_size: int, loss_type: str = "dapo", stale: bool = False,
               **grpo) -> tuple[list[torch.Tensor], dict[str, float]]:
    """policy_update's accumulated gradients (an optimizer with lr 0 leaves the weights as they are)."""
    params = adapter(model)
    optimizer = torch.optim.SGD(params, lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    config = GRPOConfig(num_generations=2, micro_batch_size=micro_batch_size, loss_type=loss_type, **grpo)
    metrics = policy_update(model, batch, ADVANTAGES, config,
                            SamplingConfig(temperature=TEMPERATURE, max_completion_length=MAX_COMPLETION),
                            OptimConfig(max_grad_norm=0.0), optimizer, scheduler, lambda loss: loss.backward(), old_logps=batch.logps if stale else None)
    return [p.grad.clone() for p in params], metrics


def assert_same(ours: list[torch.Tensor], reference: list[torch.Tensor]) -> None:
    assert sum(float(g.abs().sum()) for g in reference) > 0
    for a, b in zip(ours, reference, strict=True):
        # float64 weights, but RoPE's angles are float32: a left-padded row sits at shifted positions
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_dapo_gradients_are_the_same_at_every_micro_batch_size(model):
    """dapo's normaliser is the whole step's tokens: one micro-batch of 6, micro-batches of 4 + 2 (the last
    uneven, each mixing groups with different prompt lengths) and of 1 give the row-by-row reference."""
    batch = rollout_batch()
    reference, loss = reference_gradients(model, batch, "dapo", 6)
    for size in (6, 4, 1):
        grads, metrics = run_update(model, batch, size)
        assert_same(grads, reference)
        assert metrics["loss"] == pytest.approx(loss, abs=1e-7)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo"])
def test_per_micro_batch_normalisers_follow_trl_with_an_uneven_last_micro_batch(model, loss_type):
    """grpo, bnpo and dr_grpo normalise each micro-batch (TRL): micro-batches of 4 + 2 against the reference,
    which differs from the one-micro-batch step's (so the micro-batching is what is checked)."""
    batch = rollout_batch()
    reference, _ = reference_gradients(model, batch, loss_type, 4)
    whole, _ = reference_gradients(model, batch, loss_type, 6)
    assert any(not torch.allclose(a, b) for a, b in zip(reference, whole))
    grads, _ = run_update(model, batch, 4, loss_type)
    assert_same(grads, reference)


@pytest.mark.parametrize("stale", [False, True], ids=["on_policy", "stale"])
def test_importance_sampling_cap_weights_each_token_by_the_truncated_ratio(model, stale):
    """With a sampling engine's own log-probs (vLLM's), each token's clipped term is weighted by
    min(p_old / p_engine, cap); old is the sampler's log-probs when the batch is stale, else the policy's."""
    batch = rollout_batch()
    g = torch.Generator().manual_seed(1)
    mask = batch.completion_mask.double()
    with torch.no_grad():
        current = torch.cat([torch.nn.functional.pad(row_logps(model, batch, i), (0, MAX_COMPLETION - n))[None]
                             for i, n in enumerate(COMPLETION_LENGTHS)])
    batch.logps = (current + 0.3 * torch.randn(current.shape, generator=g, dtype=torch.float64)) * mask
    batch.sampler_logps = (current + 0.6 * torch.randn(current.shape, generator=g, dtype=torch.float64)) * mask
    cap = 1.5
    reference, _ = reference_gradients(model, batch, "dapo", 6, old=batch.logps if stale else None,
                                       sampler=batch.sampler_logps, cap=cap)
    grads, metrics = run_update(model, batch, 4, stale=stale, importance_sampling_cap=cap)
    assert_same(grads, reference)
    uncapped, _ = run_update(model, batch, 4, stale=stale)
    assert any(not torch.allclose(a, b) for a, b in zip(uncapped, reference))  # the weights did act
    assert 0 < metrics["is_weight/truncated_frac"] < 1 and metrics["is_weight/max"] == pytest.approx(cap)
    assert "is_weight/mean" not in run_update(model, batch, 4, stale=stale)[1]  # no cap: no weights


# --- through the module: the step's loss settings reach the update; two ranks equal one process ------------

POLICY = Path(__file__).resolve().parents[1] / "lit_watercolour" / "assets" / "tiny_policy"
ROOT = Path(__file__).resolve().parents[1]


def sketch(circles: int) -> str:
    """A gate-passing sketch whose length (so its length reward) grows with `circles`."""
    body = "".join(f"  brush.circle({120 + 60 * i}, 256, 50);\n" for i in range(circles))
    return ("```js\nfunction setup() {\n  createCanvas(512, 512, WEBGL);\n  noLoop();\n}\nfunction draw() {\n"
            '  translate(-width / 2, -height / 2);\n  background("#fbf7ee");\n  brush.noStroke();\n'
            f'  brush.fill("#3a6ea5", 170);\n{body}}}\n```')


def fit_one_step(out_dir: Path, texts: list[str], loss_type: str, micro_batch_size: int) -> dict:
    """One step of GRPOModule on one process with `texts` as the group's completions; what UpdateProbe saw."""
    pl.seed_everything(0)
    module = GRPOModule(
        policy=PolicyConfig(model=str(POLICY), dtype="float32", gradient_checkpointing=False, lora_r=4, lora_alpha=8),
        sampling=SamplingConfig(temperature=TEMPERATURE, max_completion_length=96),
        grpo=GRPOConfig(num_generations=len(texts), micro_batch_size=micro_batch_size, loss_type=loss_type,
                        scale_rewards="none"),
        optim=OptimConfig(lr=1e-3, max_grad_norm=0.0), render_pool_size=2, render=RenderConfig(pixel_density=0.5),
        rewards=[GateTerm(), LengthTerm(min_tokens=10, full_tokens=200, max_tokens=1000)])
    trainer = pl.Trainer(max_steps=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                         num_sanity_val_steps=0, callbacks=[ScriptedRows(texts, str(POLICY)), UpdateProbe(str(out_dir))])
    trainer.fit(module, datamodule=PromptDataModule(subjects=["a peach hibiscus"]))
    return torch.load(out_dir / "rank0.pt", weights_only=False)


def policy_before(record: dict):
    """The tiny policy with the adapter as it was before the recorded step."""
    model, _ = load_policy(PolicyConfig(model=str(POLICY), dtype="float32", gradient_checkpointing=False,
                                        lora_r=4, lora_alpha=8))
    state = {k.removeprefix("policy_model."): v for k, v in record["before"].items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and not [k for k in missing if "lora_" in k]
    model.train()
    return model


def recorded_grads(model, record: dict) -> list[torch.Tensor]:
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    return [record["grads"][f"policy_model.{n}"] for n in names]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("loss_type", ["bnpo", "dr_grpo"])
def test_module_step_uses_the_configured_loss_type(tmp_path, loss_type):
    """GRPOModule's step with loss_type bnpo / dr_grpo and micro-batches of 4 + 2 applies that loss's
    per-micro-batch normaliser (dr_grpo's by the configured max_completion_length): the step's gradients
    equal the row-by-row reference, not dapo's."""
    texts = [sketch(n) for n in (1, 2, 1, 3, 4, 2)]
    record = fit_one_step(tmp_path, texts, loss_type, micro_batch_size=4)
    assert record["rewards"].std() > 0  # the lengths differ, so do the rewards and the advantages
    model = policy_before(record)
    kw = dict(advantages=record["advantages"], temperature=TEMPERATURE, max_completion_length=96)
    reference, _ = reference_gradients(model, record["samples"], loss_type, 4, **kw)
    dapo, _ = reference_gradients(model, record["samples"], "dapo", 4, **kw)
    assert any(not torch.allclose(a, b, rtol=1e-2) for a, b in zip(reference, dapo))
    for ours, ref in zip(recorded_grads(model, record), reference, strict=True):
        torch.testing.assert_close(ours, ref, atol=1e-6, rtol=1e-3)


@pytest.mark.timeout(900)
def test_two_ranks_step_as_one_process_on_the_same_rows(tmp_path):
    """Lightning DDP on 2 CPU ranks (gloo), a group of 4 as 2 rows a rank, rank 0's two sketches much
    shorter than rank 1's: after DDP's all-reduce the gradients are the 1-process dapo step's on all 4 rows,
    whose normaliser is all ranks' tokens (a rank's own tokens would weigh rank 0's rows more)."""
    texts = [sketch(1), sketch(2), sketch(6), sketch(7)]
    config = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    model_cfg = config["model"]
    model_cfg["rewards"] = [{"class_path": "lit_watercolour.rewards.gate_term.GateTerm"},
                            {"class_path": "lit_watercolour.rewards.length.LengthTerm",
                             "init_args": {"min_tokens": 10, "full_tokens": 200, "max_tokens": 1000}}]
    model_cfg["policy"].update(model=str(POLICY), lora_r=4, lora_alpha=8)
    model_cfg["sampling"].update(temperature=TEMPERATURE, max_completion_length=96)
    model_cfg["grpo"].update(num_generations=4, micro_batch_size=1, loss_type="dapo", scale_rewards="none")
    model_cfg["optim"].update(max_grad_norm=0.0)
    model_cfg.update(render_pool_size=1)
    config["trainer"].update(devices=2, strategy="ddp", max_steps=1, enable_progress_bar=False, logger=False,
                             enable_checkpointing=False, default_root_dir=str(tmp_path / "run"), callbacks=[
        {"class_path": "update_probe.ScriptedRows", "init_args": {"texts": texts, "tokenizer": str(POLICY)}},
        {"class_path": "update_probe.UpdateProbe", "init_args": {"out_dir": str(tmp_path)}}])
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]), OMP_NUM_THREADS="1")
    fit = subprocess.run([sys.executable, "-m", "lit_watercolour", "fit", "--config", str(tmp_path / "ddp.yaml")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=840)
    assert fit.returncode == 0, fit.stderr[-4000:]

    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    assert [r["world"] for r in ranks] == [2, 2]
    for name, grad in ranks[0]["grads"].items():
        torch.testing.assert_close(grad, ranks[1]["grads"][name], atol=0, rtol=0)  # all-reduced
    tokens = [int(r["samples"].completion_mask.sum()) for r in ranks]
    assert tokens[1] > 1.5 * tokens[0]  # the normaliser matters
    model = policy_before(ranks[0])
    rows = merged_rows([r["samples"] for r in ranks])
    kw = dict(advantages=torch.cat([r["advantages"] for r in ranks]), temperature=TEMPERATURE, max_completion_length=96)
    assert kw["advantages"].abs().sum() > 0
    reference, _ = reference_gradients(model, rows, "dapo", 1, **kw)
    for ours, ref in zip(recorded_grads(model, ranks[0]), reference, strict=True):
        torch.testing.assert_close(ours, ref, atol=1e-6, rtol=1e-3)


def merged_rows(batches: list[SampleBatch]) -> SampleBatch:
    """The ranks' rows as one process's batch (completions right-padded to the longest)."""
    width = max(b.completion_ids.shape[1] for b in batches)
    pad = lambda t: torch.nn.functional.pad(t, (0, width - t.shape[1]))  # noqa: E731
    return SampleBatch(prompt_ids=torch.cat([b.prompt_ids for b in batches]),
                       prompt_mask=torch.cat([b.prompt_mask for b in batches]),
                       completion_ids=torch.cat([pad(b.completion_ids) for b in batches]),
                       completion_mask=torch.cat([pad(b.completion_mask) for b in batches]),
                       texts=[t for b in batches for t in b.texts], truncated=torch.cat([b.truncated for b in batches]),
                       logps=None, groups=[g for b in batches for g in b.groups])
