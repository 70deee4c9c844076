"""The update's edges, against references computed row by row from the loss's written formulas.

`policy_update` runs on a hand-made rollout batch of three groups whose prompts have different
lengths (left padding inside a micro-batch) and whose completions have different lengths (right
padding), at several micro-batch sizes, the last one uneven. The reference scores each row alone,
unpadded, through the model, and applies TRL's per-token loss and normalisers by hand.
"""

from __future__ import annotations

import math

import pytest
import torch

from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy
from lit_watercolour.sampling import SampleBatch, SamplingConfig
from lit_watercolour.update import GRPOConfig, OptimConfig, policy_update
from cpu_threads import one_thread  # noqa: F401  (fixture)

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


def row_logps(model, batch: SampleBatch, i: int) -> torch.Tensor:
    """Row i's completion log-probs, the row scored alone with no padding at all."""
    p = batch.prompt_ids[i][batch.prompt_mask[i].bool()][None]
    c = batch.completion_ids[i, : COMPLETION_LENGTHS[i]][None]
    return completion_logps(model, p, torch.ones_like(p), c, torch.ones_like(c), TEMPERATURE, 1)[0][0]


def reference_gradients(model, batch: SampleBatch, loss_type: str, micro_batch_size: int, *, old=None, sampler=None,
                        cap=None, epsilon=0.2) -> tuple[list[torch.Tensor], float]:
    """TRL's loss written out per row: r = exp(logp - old), l = -min(r A, clip(r) A) * w, normalised per
    micro-batch as `grpo_loss` documents; returns the adapter's gradients and the loss."""
    model.zero_grad()
    n = len(COMPLETION_LENGTHS)
    per_row = []
    for i in range(n):
        lp = row_logps(model, batch, i)
        o = lp.detach() if old is None else old[i, : len(lp)]
        r = torch.exp(lp - o)
        a = ADVANTAGES[i]
        tokens = -torch.min(r * a, r.clamp(1 - epsilon, 1 + epsilon) * a)
        if cap is not None:
            tokens = tokens * torch.exp(o - sampler[i, : len(lp)]).clamp(max=cap)
        per_row.append(tokens)
    chunks = [list(range(lo, min(lo + micro_batch_size, n))) for lo in range(0, n, micro_batch_size)]
    ga, all_tokens = len(chunks), sum(COMPLETION_LENGTHS)
    loss = 0.0
    for rows in chunks:
        total = sum(per_row[i].sum() for i in rows)
        if loss_type == "dapo":
            loss = loss + total / all_tokens
        elif loss_type == "bnpo":
            loss = loss + total / sum(COMPLETION_LENGTHS[i] for i in rows) / ga
        elif loss_type == "dr_grpo":
            loss = loss + total / (len(rows) * MAX_COMPLETION) / ga
        else:  # grpo
            loss = loss + sum(per_row[i].mean() for i in rows) / len(rows) / ga
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
                            OptimConfig(max_grad_norm=0.0), optimizer, scheduler, lambda loss: loss.backward(), stale=stale)
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
