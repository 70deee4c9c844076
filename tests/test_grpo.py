"""lit_watercolour.grpo against TRL 1.16's own GRPOTrainer code, on identical tensors.

A real (tiny, CPU) GRPOTrainer is built once: a 1-layer Qwen3 with a LoRA adapter, a
word-level tokenizer of 8 tokens (so end-of-turn is often sampled within 4 tokens). Then:
- advantages: TRL's `_generate_and_score_completions` runs for real (generation, reward
  call, its inline advantage code) with a reward function that returns fixed values,
  None for a missing score; its `advantages` and logged stats are compared with ours;
- the loss: TRL's `_compute_loss` runs on the trainer with only the model forward
  (`_get_per_token_logps_and_entropies`) replaced by fixed float64 log-probs, over every
  loss type x scale_rewards x clipping x beta x truncation x num_iterations;
- end to end: TRL's `_compute_loss` with its fused LM head on the real model, against our
  logits -> token_logps_and_entropy -> grpo_loss, comparing parameter gradients;
- log-probs and entropy: against TRL's `selective_log_softmax` / `entropy_from_logits`
  and a naive full log_softmax, values and gradients.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections import defaultdict

import datasets
import peft
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import entropy_from_logits, selective_log_softmax

from lit_watercolour.grpo import (
    group_advantages,
    grpo_loss,
    mask_truncated_completions,
    masked_mean,
    nanstd,
)
from lit_watercolour.kernels.lm_head import linear_logps_and_entropy
from lit_watercolour.kernels.lora import _fused_lora_forward, fuse_lora_linears
from lit_watercolour.policy import completion_logps
from lit_watercolour.offline.tiny_models import build_tiny_model

NAN = float("nan")
G = 4  # num_generations
TEMPERATURE = 0.8
LORA_SHIFT = 0.5  # std of the LoRA B weights set after sampling, enough for ratios to clip

# Three groups each: a missing score, a zero-std group, a group with one valid score, an all-missing group.
REWARD_TABLES = {
    "mixed": [1.0, 2.0, NAN, 3.0, 0.5, 0.5, 0.5, 0.5, NAN, 0.7, NAN, NAN],
    "all_missing_group": [0.2, 0.9, 0.4, 0.1, NAN, NAN, NAN, NAN, 0.0, 1.0, 1.0, 0.0],
}


class FixedRewards:
    """A TRL reward function returning preset values; NaN becomes None (TRL's 'no score')."""

    __name__ = "fixed"

    def __init__(self):
        self.values: list[float] = []

    def __call__(self, completions, **kwargs):
        assert len(completions) == len(self.values)
        return [None if v != v else v for v in self.values]


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    vocab = {"<pad>": 0, "<eos>": 1, **{f"w{i}": i + 2 for i in range(6)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    model = build_tiny_model("qwen3", tokenizer, seed=0, hidden_size=32, num_layers=1)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    model = peft.get_peft_model(model, lora)
    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("trl")),
        per_device_train_batch_size=12,
        num_generations=G,
        max_completion_length=4,
        num_iterations=2,  # makes TRL compute old_per_token_logps
        temperature=TEMPERATURE,
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        save_strategy="no",
    )
    rewards = FixedRewards()
    dataset = datasets.Dataset.from_dict({"prompt": ["w0 w1", "w2 w3", "w4 w5"]})
    tr = GRPOTrainer(model=model, reward_funcs=[rewards], args=args, train_dataset=dataset, processing_class=tokenizer)
    tr.model.train()
    tr.fixed_rewards = rewards
    return tr


@contextlib.contextmanager
def lora_fused(model, fused: bool = True):
    """`fuse_lora_linears` on `model` for the block, peft's own forward again afterwards."""
    if fused:
        assert fuse_lora_linears(model) > 0
    try:
        yield
    finally:
        for m in model.modules():
            if getattr(vars(m).get("forward"), "__func__", None) is _fused_lora_forward:
                del m.forward


def configure(monkeypatch, obj, **attrs):
    for name, value in attrs.items():
        monkeypatch.setattr(obj, name, value, raising=False)


def fresh_metrics(monkeypatch, trainer):
    configure(monkeypatch, trainer, _metrics={"train": defaultdict(list), "eval": defaultdict(list)})
    return trainer._metrics["train"]


def generate(trainer, rewards: list[float], seed: int = 0) -> dict:
    trainer.fixed_rewards.values = rewards
    torch.manual_seed(seed)
    prompts = ["w0 w1"] * G + ["w2 w3"] * G + ["w4 w5"] * G  # TRL's RepeatSampler order
    return trainer._generate_and_score_completions([{"prompt": p} for p in prompts])


# --- advantages -------------------------------------------------------------------------------


@pytest.mark.parametrize("table", REWARD_TABLES)
@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_advantages_match_trl(trainer, monkeypatch, table, scale_rewards):
    """TRL's inline advantage code (via _generate_and_score_completions) vs group_advantages."""
    configure(monkeypatch, trainer, scale_rewards=scale_rewards, beta=0.0, mask_truncated_completions=False)
    logged = fresh_metrics(monkeypatch, trainer)
    rewards = torch.tensor(REWARD_TABLES[table])  # float32, as TRL stores rewards
    out = generate(trainer, REWARD_TABLES[table])

    ours, stats = group_advantages(rewards, G, scale_rewards)
    torch.testing.assert_close(ours, out["advantages"], atol=1e-6, rtol=0)
    assert ours[torch.isnan(rewards)].eq(0).all()
    assert ours.abs().sum() > 0
    assert stats["reward"].item() == pytest.approx(logged["reward"][0], abs=1e-6)
    assert stats["reward_std"].item() == pytest.approx(logged["reward_std"][0], abs=1e-6)
    assert stats["frac_reward_missing"].item() == pytest.approx(torch.isnan(rewards).float().mean().item())
    if scale_rewards != "batch":  # under "batch" TRL reports whether the batch std is zero instead
        assert stats["frac_reward_zero_std"].item() == pytest.approx(logged["frac_reward_zero_std"][0])
    # only "mixed" has a zero-std group (0.5 x4); groups with < 2 scores have std NaN and do not count
    assert stats["frac_reward_zero_std"].item() == pytest.approx(1 / 3 if table == "mixed" else 0.0)


def test_advantages_by_hand():
    """The rule in words: NaN left out of mean and std, its advantage 0; Bessel std; +1e-4."""
    rewards = torch.tensor([1.0, 2.0, NAN, 3.0, 5.0, 5.0, 5.0, 5.0], dtype=torch.float64)
    adv, stats = group_advantages(rewards, 4, "group")
    std = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).std()  # Bessel: 1.0
    expected = torch.tensor([-1 / (std + 1e-4), 0, 0, 1 / (std + 1e-4), 0, 0, 0, 0], dtype=torch.float64)
    torch.testing.assert_close(adv, expected)
    assert stats["frac_reward_zero_std"].item() == 0.5
    assert nanstd(torch.tensor([NAN, 2.0])).isnan()  # one value: no std, as TRL
    with pytest.raises(ValueError):
        group_advantages(rewards, 3)


def test_mask_truncated_matches_trl(trainer, monkeypatch):
    """TRL's mask_truncated_completions (in _generate_and_score_completions) vs ours."""
    rewards = REWARD_TABLES["mixed"]
    configure(monkeypatch, trainer, scale_rewards="group", beta=0.0, mask_truncated_completions=False)
    plain = generate(trainer, rewards, seed=3)
    configure(monkeypatch, trainer, mask_truncated_completions=True)
    masked = generate(trainer, rewards, seed=3)
    assert torch.equal(plain["completion_ids"], masked["completion_ids"])  # same seed, same samples

    truncated = ~torch.isin(plain["completion_ids"], torch.tensor(trainer.eos_token_ids)).any(1)
    assert 0 < truncated.sum() < len(truncated)  # both kinds present, or the test shows nothing
    ours = mask_truncated_completions(plain["completion_mask"], truncated)
    assert torch.equal(ours, masked["completion_mask"])
    assert ours.sum() == masked["num_items_in_batch"]


# --- the loss against TRL's _compute_loss -----------------------------------------------------

B, T, GA = 6, 7, 2  # a micro-batch of 6 rows, half of a 12-row generation batch


def loss_case(scale_rewards: str, truncate: bool, seed: int = 0) -> dict:
    """Random float64 tensors of one micro-batch: logps, old/ref logps off by up to ~±0.6 so ratios clip."""
    g = torch.Generator().manual_seed(seed)
    rewards = torch.rand(12, generator=g, dtype=torch.float64)
    rewards[[2, 7]] = NAN
    advantages, _ = group_advantages(rewards, G, scale_rewards)
    lengths = torch.tensor([7, 3, 5, 1, 6, 4])
    mask = (torch.arange(T) < lengths[:, None]).long()
    if truncate:
        mask = mask_truncated_completions(mask, lengths == T)  # the full-length row did not end
    logps = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    return {
        "logps": logps,
        "old": logps + (torch.rand(B, T, generator=g, dtype=torch.float64) - 0.5) * 1.2,
        "ref": logps + (torch.rand(B, T, generator=g, dtype=torch.float64) - 0.5) * 1.0,
        "entropies": torch.rand(B, T, generator=g, dtype=torch.float64) * 4,
        "advantages": advantages[:B],
        "mask": mask,
        "num_items_in_batch": mask.sum() + 17,  # tokens of the other micro-batch of the step
    }


def trl_loss(
    trainer, monkeypatch, case, *, loss_type, epsilon_high, beta, num_iterations, bias_kl=True, steps_per_generation=GA
):
    """TRL's _compute_loss on `case`, only its model forward replaced: (loss, d loss/d logps, logged metrics)."""
    logps = case["logps"].clone().requires_grad_()
    configure(
        monkeypatch,
        trainer,
        loss_type=loss_type,
        epsilon_low=0.2,
        epsilon_high=0.2 if epsilon_high is None else epsilon_high,
        beta=beta,
        max_completion_length=10,
        current_gradient_accumulation_steps=GA,
        _get_per_token_logps_and_entropies=lambda *a, **k: (logps, case["entropies"], None),
    )
    configure(monkeypatch, trainer.args, steps_per_generation=steps_per_generation, use_bias_correction_kl=bias_kl)
    logged = fresh_metrics(monkeypatch, trainer)
    inputs = {
        "prompt_ids": torch.ones(B, 2, dtype=torch.long),
        "prompt_mask": torch.ones(B, 2, dtype=torch.long),
        "completion_ids": torch.ones(B, T, dtype=torch.long),
        "completion_mask": case["mask"],
        "advantages": case["advantages"],
        "num_items_in_batch": case["num_items_in_batch"],
    }
    if num_iterations > 1:
        inputs["old_per_token_logps"] = case["old"]
    if beta:
        inputs["ref_per_token_logps"] = case["ref"]
    loss = trainer._compute_loss(trainer.model, inputs)
    loss.backward()
    return loss.detach(), logps.grad, {k: v[0] for k, v in logged.items()}


def our_loss(case, *, loss_type, epsilon_high, beta, num_iterations, bias_kl=True, num_items_in_batch=None):
    logps = case["logps"].clone().requires_grad_()
    loss, metrics = grpo_loss(
        logps,
        case["advantages"],
        case["mask"],
        old_logps=case["old"] if num_iterations > 1 else None,
        ref_logps=case["ref"] if beta else None,
        loss_type=loss_type,
        epsilon=0.2,
        epsilon_high=epsilon_high,
        beta=beta,
        use_bias_correction_kl=bias_kl,
        num_items_in_batch=case["num_items_in_batch"] if num_items_in_batch is None else num_items_in_batch,
        max_completion_length=10,
        gradient_accumulation_steps=GA,
    )
    loss.backward()
    return loss.detach(), logps.grad, metrics


GRID = [
    (loss_type, scale, eps_high, beta, bias_kl, truncate, iters)
    for loss_type, scale, eps_high, (beta, bias_kl), truncate, iters in itertools.product(
        ["grpo", "bnpo", "dr_grpo", "dapo"],  # loss_type
        ["group", "batch", "none"],  # scale_rewards
        [None, 0.28],  # epsilon_high: = epsilon, clip-higher
        [(0.0, True), (0.04, True), (0.04, False)],  # beta, use_bias_correction_kl
        [False, True],  # mask_truncated_completions
        [1, 2],  # num_iterations (2: old_logps differ from logps)
    )
]


@pytest.mark.parametrize("loss_type,scale_rewards,epsilon_high,beta,bias_kl,truncate,num_iterations", GRID)
def test_loss_matches_trl(
    trainer, monkeypatch, loss_type, scale_rewards, epsilon_high, beta, bias_kl, truncate, num_iterations
):
    case = loss_case(scale_rewards, truncate)
    kw = dict(loss_type=loss_type, epsilon_high=epsilon_high, beta=beta, num_iterations=num_iterations, bias_kl=bias_kl)
    trl_value, trl_grad, logged = trl_loss(trainer, monkeypatch, case, **kw)
    value, grad, metrics = our_loss(case, **kw)

    torch.testing.assert_close(value, trl_value, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(grad, trl_grad, atol=1e-12, rtol=1e-10)
    assert grad.abs().sum() > 0
    for name in ["clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"]:
        assert metrics[name].item() == pytest.approx(logged[name], abs=1e-6), name
    for name in ["clip_ratio/low_min", "clip_ratio/high_max"]:
        assert metrics[name].item() == pytest.approx(logged[name], abs=1e-6, nan_ok=True), name
    if beta:
        assert metrics["kl"].item() == pytest.approx(logged["kl"], abs=1e-12)
    else:
        assert "kl" not in metrics and "kl" not in logged
    assert masked_mean(case["entropies"], case["mask"]).item() == pytest.approx(logged["entropy"], abs=1e-12)
    if num_iterations > 1:  # the ratios really clip, on both sides once clip-higher differs
        assert metrics["clip_ratio/region_mean"] > 0
        assert metrics["ratio/mean"] != 1.0
    else:
        assert metrics["clip_ratio/region_mean"] == 0 and metrics["ratio/mean"] == 1.0


def test_dapo_normaliser_when_steps_per_generation_differs(trainer, monkeypatch):
    """TRL rescales num_items_in_batch by GA / steps_per_generation; ours takes the step's count directly."""
    case = loss_case("group", truncate=False)
    kw = dict(loss_type="dapo", epsilon_high=0.28, beta=0.04, num_iterations=2)
    trl_value, trl_grad, _ = trl_loss(trainer, monkeypatch, case, steps_per_generation=4, **kw)
    value, grad, _ = our_loss(case, num_items_in_batch=case["num_items_in_batch"] * GA / 4, **kw)
    torch.testing.assert_close(value, trl_value, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(grad, trl_grad, atol=1e-12, rtol=1e-10)


def test_gradient_accumulation_sums_to_the_full_batch_mean():
    """Summed over GA micro-batches, bnpo/dapo gradients equal one token-mean loss on the whole batch."""
    case = loss_case("group", truncate=True)
    logps, mask = case["logps"].clone().requires_grad_(), case["mask"]
    full, _ = grpo_loss(logps, case["advantages"], mask, old_logps=case["old"], num_items_in_batch=mask.sum())
    (full_grad,) = torch.autograd.grad(full, logps)
    halves = [slice(0, 3), slice(3, 6)]
    parts = [
        grpo_loss(logps[h], case["advantages"][h], mask[h], old_logps=case["old"][h], num_items_in_batch=mask.sum())[0]
        for h in halves
    ]
    (dapo_grad,) = torch.autograd.grad(sum(parts), logps)
    torch.testing.assert_close(dapo_grad, full_grad)
    # grpo averages per-sequence means: equal halves of a batch give the full batch mean
    full, _ = grpo_loss(logps, case["advantages"], mask, old_logps=case["old"], loss_type="grpo")
    parts = [
        grpo_loss(logps[h], case["advantages"][h], mask[h], old_logps=case["old"][h], loss_type="grpo",
                  gradient_accumulation_steps=2)[0]
        for h in halves
    ]
    torch.testing.assert_close(sum(parts), full)


def test_loss_rejects_missing_arguments():
    case = loss_case("group", truncate=False)
    args = case["logps"], case["advantages"], case["mask"]
    with pytest.raises(ValueError, match="num_items_in_batch"):
        grpo_loss(*args, loss_type="dapo")
    with pytest.raises(ValueError, match="max_completion_length"):
        grpo_loss(*args, loss_type="dr_grpo")
    with pytest.raises(ValueError, match="ref_logps"):
        grpo_loss(*args, loss_type="bnpo", beta=0.1)
    with pytest.raises(ValueError, match="loss_type"):
        grpo_loss(*args, loss_type="cispo")


# --- end to end on the real model -------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False], ids=["fused_lora", "peft_lora"])
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_end_to_end_gradients_match_trl(trainer, monkeypatch, loss_type, fused):
    """TRL's _compute_loss (fused LM head, adapter-off reference, peft's LoRA) vs completion_logps (chunked head,
    LoRA linears fused or peft's) -> grpo_loss."""
    configure(
        monkeypatch,
        trainer,
        scale_rewards="group",
        beta=0.04,
        mask_truncated_completions=True,
        loss_type=loss_type,
        epsilon_low=0.2,
        epsilon_high=0.28,
        current_gradient_accumulation_steps=1,
    )
    configure(monkeypatch, trainer.args, steps_per_generation=1)
    fresh_metrics(monkeypatch, trainer)
    model = trainer.model
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    saved = [p.detach().clone() for p in lora_b]
    try:
        batch = generate(trainer, [0.3, 0.9, 0.1, 0.6, 0.8, 0.2, 0.5, 0.4, 0.0, 1.0, 0.7, 0.35], seed=1)
        assert "old_per_token_logps" in batch and "ref_per_token_logps" in batch
        torch.manual_seed(0)
        with torch.no_grad():  # an optimizer step since sampling: policy != old != reference
            for p in lora_b:
                p.normal_(0, LORA_SHIFT)

        model.zero_grad()
        trl_value = trainer._compute_loss(model, batch)
        trl_value.backward()
        trl_grads = [p.grad.clone() for p in lora_b]
        trl_metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}

        model.zero_grad()
        mask = batch["completion_mask"]
        with lora_fused(model, fused):
            logps, entropy = completion_logps(model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"],
                                              mask, TEMPERATURE, batch_size=5)  # 12 rows: micro-batches of 5, 5, 2
        loss, metrics = grpo_loss(
            logps,
            batch["advantages"],
            mask,
            old_logps=batch["old_per_token_logps"],
            ref_logps=batch["ref_per_token_logps"],
            loss_type=loss_type,
            epsilon=0.2,
            epsilon_high=0.28,
            beta=0.04,
            num_items_in_batch=batch["num_items_in_batch"],
            max_completion_length=trainer.max_completion_length,
        )
        loss.backward()
    finally:
        with torch.no_grad():
            for p, s in zip(lora_b, saved):
                p.copy_(s)
    torch.testing.assert_close(loss, trl_value, atol=1e-6, rtol=1e-5)
    for ours, theirs in zip([p.grad for p in lora_b], trl_grads):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-4)
    assert sum(g.abs().sum() for g in trl_grads) > 0
    assert metrics["clip_ratio/region_mean"] > 0 and metrics["kl"] > 0
    for name in ["kl", "clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean"]:
        assert metrics[name].item() == pytest.approx(trl_metrics[name], abs=1e-6), name
    assert masked_mean(entropy, mask).item() == pytest.approx(trl_metrics["entropy"], abs=1e-5)


# --- log-probs and entropy --------------------------------------------------------------------


def naive(logits, ids, temperature):
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, ids[..., None]).squeeze(-1), -(logp.exp() * logp).sum(-1)


def head_case(seed, batch=3, tokens=8, hidden=6, vocab=50, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, tokens + 1, hidden, generator=g, dtype=dtype)[:, :-1]  # a strided view, as callers slice
    weight = torch.randn(vocab, hidden, generator=g, dtype=dtype)
    bias = torch.randn(vocab, generator=g, dtype=dtype)
    return h, weight, bias, torch.randint(0, vocab, (batch, tokens), generator=g)


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 2048])
def test_linear_logps_and_entropy_match_trl_and_the_full_logits(chunk_size):
    """Chunked head (any chunking, chunks crossing rows) against full logits through TRL's functions and log_softmax."""
    h, weight, bias, ids = head_case(0)
    logits = (h @ weight.T + bias) * 3
    logps, entropy = linear_logps_and_entropy(h, weight * 3, ids, TEMPERATURE, bias * 3, chunk_size=chunk_size)
    ref_logps, ref_entropy = naive(logits, ids, TEMPERATURE)
    torch.testing.assert_close(logps, ref_logps, atol=1e-12, rtol=0)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-12, rtol=0)
    torch.testing.assert_close(logps, selective_log_softmax(logits, ids, temperature=TEMPERATURE), atol=1e-12, rtol=0)
    torch.testing.assert_close(entropy, entropy_from_logits(logits / TEMPERATURE), atol=1e-12, rtol=0)


def test_linear_logps_and_entropy_gradients():
    """gradcheck in hidden, head weight and bias; each output alone against autograd through the full logits."""
    h, weight, bias, ids = head_case(1, batch=2, tokens=5, hidden=4, vocab=11)
    inputs = [t.detach().clone().requires_grad_() for t in (h, weight, bias)]
    f = lambda x, w, b: linear_logps_and_entropy(x, w, ids, TEMPERATURE, b, chunk_size=3)  # noqa: E731
    assert torch.autograd.gradcheck(f, inputs)
    w = torch.randn(2, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    for k in range(2):
        ours = torch.autograd.grad((f(*inputs)[k] * w).sum(), inputs)
        x, wt, b = inputs
        ref = torch.autograd.grad((naive(x @ wt.T + b, ids, TEMPERATURE)[k] * w).sum(), inputs)
        for a, r in zip(ours, ref):
            torch.testing.assert_close(a, r, atol=1e-12, rtol=0)
    frozen = linear_logps_and_entropy(inputs[0], weight, ids, TEMPERATURE, None)[0]  # a frozen head: no head grads
    assert torch.autograd.grad(frozen.sum(), inputs[0])[0].abs().sum() > 0


def test_linear_logps_compiled_tiles_match_eager():
    """torch.compile's fused tiles (the CUDA default) give the eager values and gradients."""
    h, weight, _, ids = head_case(5, dtype=torch.float32)
    results = []
    for compile in (False, True):
        x = h.detach().clone().requires_grad_()
        logps, entropy = linear_logps_and_entropy(x, weight, ids, TEMPERATURE, chunk_size=5, compile=compile)
        (logps.sum() + 0.3 * entropy.sum()).backward()
        results.append((logps, entropy, x.grad))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_linear_logps_fall_back_to_eager_tiles_where_compiling_fails(monkeypatch):
    """A machine whose compiler toolchain fails still trains, with the same numbers and a warning."""
    from lit_watercolour.kernels import lm_head

    def broken_compile(fn, **kwargs):
        def run(*args):
            raise RuntimeError("no C compiler")
        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    monkeypatch.setattr(lm_head, "_tile_kernels", functools.cache(lm_head._tile_kernels.__wrapped__))  # a fresh cache
    h, weight, _, ids = head_case(6)
    h.requires_grad_()
    with pytest.warns(UserWarning, match="no C compiler"):
        logps, entropy = linear_logps_and_entropy(h, weight, ids, TEMPERATURE, chunk_size=4, compile=True)
        logps.sum().backward()  # the backward tile's own fallback
    ref_logps, ref_entropy = naive(h.detach() @ weight.T, ids, TEMPERATURE)
    torch.testing.assert_close(logps, ref_logps, atol=1e-12, rtol=0)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-12, rtol=0)
    assert h.grad.abs().sum() > 0


def test_linear_logps_from_bfloat16_are_float32_with_bfloat16_gradients():
    h, weight, _, ids = head_case(2, dtype=torch.float32)
    h, weight = h.bfloat16().requires_grad_(), weight.bfloat16()
    logps, entropy = linear_logps_and_entropy(h, weight, ids, TEMPERATURE)
    assert logps.dtype == entropy.dtype == torch.float32
    ref_logps, ref_entropy = naive((h @ weight.T).detach().float(), ids, TEMPERATURE)  # the logits rounded to bf16
    torch.testing.assert_close(logps, ref_logps, atol=1e-5, rtol=0)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-5, rtol=0)
    logps.sum().backward()
    assert h.grad.dtype == torch.bfloat16 and h.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="must be"):
        linear_logps_and_entropy(h, weight, ids[:, :3])
    with pytest.raises(ValueError, match="temperature"):
        linear_logps_and_entropy(h, weight, ids, 0.0)


def test_linear_logps_keep_no_vocab_sized_tensor():
    """Autograd keeps the inputs and O(tokens) statistics, where log_softmax of the logits keeps [N, V] copies."""

    def saved_bytes(fn, *inputs):
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            fn(*inputs)
        inputs_ = {t.untyped_storage().data_ptr() for t in inputs}
        return sum(t.nbytes for t in saved if t.untyped_storage().data_ptr() not in inputs_)

    h = torch.randn(2, 64, 16, requires_grad=True)
    weight = torch.randn(1000, 16)
    ids = torch.randint(0, 1000, (2, 64))
    ours = saved_bytes(lambda x, w: linear_logps_and_entropy(x, w, ids, TEMPERATURE), h, weight)
    full = saved_bytes(lambda x, w: naive(x @ w.T, ids, TEMPERATURE), h, weight)
    assert 0 < ours <= 2 * 64 * (8 + 4 + 4)  # ids, log-normaliser, E_p[z]
    assert full >= 2 * 64 * 1000 * 4


def test_completion_logps_chunked_head_agrees_with_the_models_own_logits(trainer):
    """The policy's path (backbone -> chunked head) against the model's forward -> full logits -> log_softmax:
    log-probs, entropies and the LoRA gradients of a loss of both, left-padded prompts and right padding included."""
    model = trainer.model
    g = torch.Generator().manual_seed(7)
    prompt_ids = torch.randint(2, 8, (4, 3), generator=g)
    prompt_mask = torch.tensor([[1, 1, 1], [0, 1, 1], [0, 0, 1], [1, 1, 1]])
    completion_ids = torch.randint(0, 8, (4, 6), generator=g)
    completion_mask = (torch.arange(6) < torch.tensor([6, 4, 1, 5])[:, None]).long()
    weights = torch.randn(2, 4, 6, generator=g)
    lora = [p for n, p in model.named_parameters() if "lora_" in n]
    results = []
    for chunked in (True, False):
        model.zero_grad()
        if chunked:
            logps, entropy = completion_logps(model, prompt_ids, prompt_mask, completion_ids, completion_mask,
                                              TEMPERATURE, batch_size=3)
        else:
            ids, attn = torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1)
            logits = model(input_ids=ids, attention_mask=attn).logits[:, 2:-1]
            logps, entropy = naive(logits, completion_ids, TEMPERATURE)
        m = completion_mask
        ((logps * weights[0] * m).sum() + (entropy * weights[1] * m).sum()).backward()
        results.append((logps * m, entropy * m, [p.grad.clone() for p in lora]))
    (logps, entropy, grads), (ref_logps, ref_entropy, ref_grads) = results
    torch.testing.assert_close(logps, ref_logps, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert sum(g.abs().sum() for g in ref_grads) > 0


def test_adapter_matmuls_run_in_bfloat16_with_float32_weights_and_gradients():
    """`lora_autocast`: a bf16 policy's LoRA layers multiply in bf16 (peft would upcast the activations to its
    float32 weights), the weights and their gradients stay float32, and the result is the float32 path's to bf16 accuracy."""
    from lit_watercolour.policy import PolicyConfig, adapter_in_model_dtype, load_policy

    model, _ = load_policy(PolicyConfig(tiny="qwen3", dtype="bfloat16", tiny_config={"hidden_size": 64},
                                        gradient_checkpointing=True, fused_lora=False))  # peft's LoRA modules
    model.train()
    lora = {n: p for n, p in model.named_parameters() if p.requires_grad}
    torch.manual_seed(0)
    with torch.no_grad():
        for n, p in lora.items():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    assert {p.dtype for p in lora.values()} == {torch.float32}
    layer = next(m for n, m in model.named_modules() if n.endswith("q_proj.lora_A.default"))
    seen = []
    layer.register_forward_hook(lambda mod, inp, out: seen.append((inp[0].dtype, out.dtype)))
    g = torch.Generator().manual_seed(1)
    prompt_ids, completion_ids = torch.randint(3, 100, (2, 4), generator=g), torch.randint(3, 100, (2, 6), generator=g)
    ones = torch.ones_like
    results = []
    for autocast in (True, False):
        model.zero_grad()
        logps, entropy = completion_logps(model, prompt_ids, ones(prompt_ids), completion_ids, ones(completion_ids),
                                          TEMPERATURE, batch_size=2, lora_autocast=autocast)
        with adapter_in_model_dtype(model, autocast):  # the checkpointed recomputation happens in backward
            (logps.sum() + entropy.sum()).backward()
        results.append((logps.detach(), {n: p.grad for n, p in lora.items()}))
    # forward and the checkpointed recomputation, each time in the dtype asked for
    assert seen == [(torch.bfloat16, torch.bfloat16)] * 2 + [(torch.float32, torch.float32)] * 2
    (fast, fast_grads), (slow, slow_grads) = results
    torch.testing.assert_close(fast, slow, atol=0.05, rtol=0.02)
    assert all(grad.dtype == torch.float32 for grad in fast_grads.values())
    a, b = torch.cat([g.flatten() for g in fast_grads.values()]), torch.cat([g.flatten() for g in slow_grads.values()])
    assert torch.nn.functional.cosine_similarity(a, b, dim=0) > 0.99


# --- the update path's speed knobs: same numbers, fewer passes ---------------------------------


def lora_case(dtype=torch.float64, dropout=0.0, seed=0):
    """A peft LoRA model of two linears with biases, B non-zero, and an input that requires grad."""
    torch.manual_seed(seed)
    base = torch.nn.Sequential(torch.nn.Linear(12, 20), torch.nn.SiLU(), torch.nn.Linear(20, 8)).to(dtype)
    model = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=12, target_modules=["0", "2"], lora_dropout=dropout))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)
    return model, torch.randn(3, 5, 12, dtype=dtype, requires_grad=True)


def forward_backward(model, x):
    x.grad = None
    model.zero_grad()
    y = model(x)
    (y * torch.linspace(-1, 1, y.shape[-1], dtype=y.dtype)).sum().backward()
    return y.detach(), x.grad.clone(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def test_fused_lora_linear_matches_peft_values_and_gradients():
    """`fuse_lora_linears`: output, input gradient and A/B gradients as peft's, to float64 rounding."""
    model, x = lora_case()
    y, gx, grads = forward_backward(model, x)
    with lora_fused(model):
        calls = []
        model.base_model.model[0].register_forward_hook(lambda *a: calls.append(1))  # still the same modules
        fy, fgx, fgrads = forward_backward(model, x)
        lora_a = model.base_model.model[0].lora_A.default
        lora_a.register_forward_hook(lambda *a: calls.append("peft"))  # peft's own A module is not run
        forward_backward(model, x)
    assert calls == [1, 1]
    torch.testing.assert_close(fy, y, atol=1e-12, rtol=0)
    torch.testing.assert_close(fgx, gx, atol=1e-12, rtol=0)
    assert fgrads.keys() == grads.keys() and len(grads) == 4
    for n in grads:
        torch.testing.assert_close(fgrads[n], grads[n], atol=1e-12, rtol=0)


def test_fused_lora_falls_back_to_peft_where_peft_differs():
    """Adapter off, merged, dropout in training: peft's forward (its dropout draws, its merged weights)."""
    model, x = lora_case(dropout=0.5)
    seq = model.base_model.model
    with lora_fused(model), torch.no_grad():
        with model.disable_adapter():
            torch.testing.assert_close(model(x), seq[2].base_layer(torch.nn.functional.silu(seq[0].base_layer(x))))
        model.eval()
        unmerged = model(x)
        model.merge_adapter()
        assert seq[0].merged
        torch.testing.assert_close(model(x), unmerged, atol=1e-12, rtol=0)  # peft's merged weights
        model.unmerge_adapter()
    with lora_fused(model):
        model.train()
        torch.manual_seed(3)
        fused_train = model(x)
        model.eval()
        fused_eval = model(x)  # dropout off: the fused path
    model.train()
    torch.manual_seed(3)
    torch.testing.assert_close(fused_train, model(x), atol=0, rtol=0)  # the same dropout draws: peft's path
    model.eval()
    torch.testing.assert_close(fused_eval, model(x), atol=1e-12, rtol=0)
    assert not torch.allclose(fused_train, fused_eval)


def test_fused_lora_in_bfloat16_under_autocast():
    """A bf16 base with a float32 adapter: under autocast the fused layer matches peft + autocast to bf16
    accuracy with float32 gradients; without autocast it is peft's float32 adapter path exactly."""
    model, x = lora_case(dtype=torch.float32)
    for name, module in model.named_modules():
        if name.endswith("base_layer"):
            module.to(torch.bfloat16)
    xb = x.detach().to(torch.bfloat16).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, gx, grads = forward_backward(model, xb)
        with lora_fused(model):
            fy, fgx, fgrads = forward_backward(model, xb)
    assert fy.dtype == y.dtype == torch.bfloat16 and fgx.dtype == torch.bfloat16
    torch.testing.assert_close(fy, y, atol=0.05, rtol=0.02)
    torch.testing.assert_close(fgx, gx, atol=0.05, rtol=0.02)
    for n in grads:
        assert fgrads[n].dtype == torch.float32
        assert torch.nn.functional.cosine_similarity(fgrads[n].flatten(), grads[n].flatten(), dim=0) > 0.999, n
    plain = forward_backward(model, xb)
    with lora_fused(model):
        fused_plain = forward_backward(model, xb)
    torch.testing.assert_close(fused_plain[0], plain[0], atol=0, rtol=0)


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("fused", [True, False], ids=["fused_lora", "peft_lora"])
def test_checkpoint_keep_saves_recomputation_not_numbers(fused):
    """`checkpoint_keep`: the same log-probs and LoRA gradients as full recomputation; backward runs no attention
    kernel when attention outputs are kept, and fewer matmuls when the output projections are kept too."""
    from lit_watercolour.kernels.checkpointing import ATTENTION_OPS
    from lit_watercolour.policy import PolicyConfig, load_policy

    g = torch.Generator().manual_seed(1)
    prompt_ids, completion_ids = torch.randint(3, 100, (2, 5), generator=g), torch.randint(3, 100, (2, 7), generator=g)
    prompt_mask = torch.ones_like(prompt_ids)
    prompt_mask[1, :2] = 0  # left padding: the masked attention path
    results = {}
    for keep in ("inputs", "attention", "attention+out_proj"):
        torch.manual_seed(0)
        model, _ = load_policy(PolicyConfig(tiny="qwen3", dtype="float32", fused_lora=fused, checkpoint_keep=keep,
                                            tiny_config={"hidden_size": 64}))
        model.train()
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        logps, entropy = completion_logps(model, prompt_ids, prompt_mask, completion_ids, torch.ones_like(completion_ids),
                                          TEMPERATURE, batch_size=2)
        with OpCounter() as ops:
            (logps.sum() + 0.1 * entropy.sum()).backward()
        attention = sum(n for op, n in ops.counts.items() if op in ATTENTION_OPS)
        matmuls = ops.counts[torch.ops.aten.mm.default] + ops.counts[torch.ops.aten.addmm.default]
        results[keep] = logps.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}, attention, matmuls
    layers = 2
    full, attention, out_proj = results["inputs"], results["attention"], results["attention+out_proj"]
    assert full[2] == layers and attention[2] == out_proj[2] == 0
    # each layer's o_proj, down_proj and (heads x head_dim = hidden here) q_proj base matmul
    assert out_proj[3] == attention[3] - 3 * layers == full[3] - 3 * layers
    for other in (attention, out_proj):
        torch.testing.assert_close(other[0], full[0], atol=0, rtol=0)
        for n, grad in full[1].items():
            torch.testing.assert_close(other[1][n], grad, atol=1e-6, rtol=1e-5)
    assert sum(grad.abs().sum() for grad in full[1].values()) > 0


def test_attention_backend_holds_in_forward_and_recomputation(monkeypatch):
    """`attention_backend`: every attention call, the checkpointed recomputation's too, runs inside sdpa_kernel
    with that backend first; the numbers are the default's."""
    import torch.nn.attention

    from lit_watercolour.policy import PolicyConfig, load_policy

    real, firsts = torch.nn.attention.sdpa_kernel, []

    def spy(backends, set_priority=False):
        firsts.append(backends[0])
        return real(backends, set_priority=set_priority)

    monkeypatch.setattr(torch.nn.attention, "sdpa_kernel", spy)
    g = torch.Generator().manual_seed(2)
    prompt_ids, completion_ids = torch.randint(3, 100, (2, 4), generator=g), torch.randint(3, 100, (2, 6), generator=g)
    results = []
    for backend in ("default", "flash"):
        torch.manual_seed(0)
        model, _ = load_policy(PolicyConfig(tiny="qwen3", dtype="float32", attention_backend=backend))
        model.train()
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        logps, _ = completion_logps(model, prompt_ids, torch.ones_like(prompt_ids), completion_ids,
                                    torch.ones_like(completion_ids), TEMPERATURE, batch_size=2)
        logps.sum().backward()
        results.append((logps.detach(), [p.grad for p in model.parameters() if p.requires_grad]))
    assert firsts == [torch.nn.attention.SDPBackend.FLASH_ATTENTION] * 4  # 2 layers: forward, then recomputation
    torch.testing.assert_close(results[1][0], results[0][0], atol=0, rtol=0)
    for a, b in zip(results[1][1], results[0][1]):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
