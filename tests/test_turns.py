"""Two-turn trajectories (issue 38): the conversation the loss sees is the one each turn was sampled from,
token for token; feedback tokens carry no gradient; one turn is today's update. The pipeline's two turns
are tested in test_stream_scoring.py, on its warm render pool."""

from __future__ import annotations

import pytest
import torch

from lit_watercolour.data import chat_prompt
from lit_watercolour.grpo import grpo_loss
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy
from lit_watercolour.sampling import HFSampler, SamplingConfig
from lit_watercolour.turns import Conversation, join_turns
from lit_watercolour.update import GRPOConfig, OptimConfig, policy_update
from cpu_threads import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
ADVANTAGES = torch.tensor([0.8, -0.8])
FEEDBACK = ["Your sketch failed the gate (no_code): no sketch.", "It painted 3.0% of the canvas."]


@pytest.fixture(scope="module")
def policy():
    """A random one-layer Qwen3 with a LoRA adapter that has moved (lora_B non-zero)."""
    model, tokenizer = load_policy(PolicyConfig(tiny="qwen3", tiny_config={"hidden_size": 32, "num_layers": 1},
                                                dtype="float32", gradient_checkpointing=False, lora_r=4, lora_alpha=8))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model.train(), tokenizer


@pytest.fixture(scope="module")
def turns(policy):
    """Two rows sampled for two turns (a random policy: turn 1 mostly cut off at the length limit)."""
    model, tokenizer = policy
    torch.manual_seed(0)
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=10))
    first = sampler.sample([chat_prompt(tokenizer, "a peach hibiscus")], 2)
    prompts, segments = Conversation(tokenizer).next_prompts(first, FEEDBACK)
    second = sampler.sample(prompts, 1)
    return first, segments, second, join_turns(first, segments, second, tokenizer.pad_token_id)


def forward(model, samples, grad: bool = False) -> torch.Tensor:
    with torch.set_grad_enabled(grad):
        return completion_logps(model, samples.prompt_ids, samples.prompt_mask, samples.completion_ids,
                                samples.completion_mask, 1.0, 8)[0]


def update_grads(model, samples) -> tuple[list[torch.Tensor], float]:
    """policy_update's gradients and loss (an optimizer with lr 0 leaves the weights as they are)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    metrics = policy_update(model, samples, ADVANTAGES, GRPOConfig(num_generations=2, micro_batch_size=2),
                            SamplingConfig(), OptimConfig(max_grad_norm=0.0), optimizer, scheduler,
                            lambda loss: loss.backward())
    return [p.grad.clone() for p in params], metrics["loss"]


def written_grads(model, samples, mask: torch.Tensor) -> tuple[list[torch.Tensor], float]:
    """The DAPO loss as written before two turns existed: one forward, the tokens of `mask` counted."""
    model.zero_grad()
    loss, _ = grpo_loss(forward(model, samples, grad=True), ADVANTAGES, mask, num_items_in_batch=mask.sum())
    loss.backward()
    return [p.grad.clone() for p in model.parameters() if p.requires_grad], loss.item()


def test_the_conversation_is_each_turns_tokens_and_one_forward_gives_both_turns_logps(policy, turns):
    model, _ = policy
    first, segments, second, trajectory = turns
    for row, segment in enumerate(segments):
        attended, sampled = trajectory.completion_mask[row].bool(), trajectory.sampled_mask[row].bool()
        c1 = first.completion_ids[row][first.completion_mask[row].bool()]
        c2 = second.completion_ids[row][second.completion_mask[row].bool()]
        assert trajectory.completion_ids[row][attended].tolist() == c1.tolist() + segment + c2.tolist()
        assert trajectory.completion_ids[row][attended & ~sampled].tolist() == segment
        # turn 2 was sampled from exactly the conversation's prefix
        prompt = second.prompt_ids[row][second.prompt_mask[row].bool()].tolist()
        assert prompt == first.prompt_ids[row][first.prompt_mask[row].bool()].tolist() + c1.tolist() + segment
    assert (trajectory.num_tokens == first.num_tokens + second.num_tokens).all()
    # the decoders' per-turn log-probs against one forward over the whole conversation
    logps = forward(model, trajectory)
    torch.testing.assert_close(logps * trajectory.sampled_mask, trajectory.logps, atol=1e-5, rtol=1e-4)


def test_feedback_tokens_get_no_gradient(policy, turns):
    model, _ = policy
    trajectory = turns[3]
    ours, loss = update_grads(model, trajectory)
    learned, learned_loss = written_grads(model, trajectory, trajectory.sampled_mask)
    assert loss == pytest.approx(learned_loss, rel=1e-6)
    for a, b in zip(ours, learned, strict=True):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5)
    # the same conversation with its feedback learned too moves the adapter otherwise
    everything, _ = written_grads(model, trajectory, trajectory.completion_mask)
    assert any(not torch.allclose(a, b) for a, b in zip(ours, everything, strict=True))
    logps = forward(model, trajectory, grad=True)
    logps.retain_grad()
    grpo_loss(logps, ADVANTAGES, trajectory.policy_mask, num_items_in_batch=trajectory.policy_mask.sum())[0].backward()
    feedback = trajectory.completion_mask.bool() & ~trajectory.sampled_mask.bool()
    assert feedback.any() and (logps.grad[feedback] == 0).all() and (logps.grad[~feedback] != 0).any()


def test_one_turn_is_the_update_as_it_was_bit_for_bit(policy, turns):
    model, _ = policy
    first = turns[0]
    assert first.sampled_mask is None
    ours, loss = update_grads(model, first)
    written, written_loss = written_grads(model, first, first.completion_mask)
    assert loss == written_loss
    assert all(torch.equal(a, b) for a, b in zip(ours, written, strict=True))
