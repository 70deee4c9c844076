"""Two-turn trajectories (issue 38): the conversation the loss sees is the one each turn was sampled from,
token for token; feedback tokens carry no gradient; one turn is today's update. Image feedback: a real
render reaches a tiny random Qwen3.5 vision-language policy through its own processor, in the sampler and
in the loss, and its tokens carry no gradient. The pipeline's two turns are tested in test_stream_scoring.py,
on its warm render pool."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image
from transformers import AutoTokenizer

from lit_watercolour.data import chat_prompt
from lit_watercolour.grpo import grpo_loss
from lit_watercolour.module import GRPOModule
from lit_watercolour.offline.tiny_models import save_tiny_policy
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy, load_processor
from lit_watercolour.records import GateResult, RenderResult, Rollout
from lit_watercolour.sampling import HFSampler, SamplingConfig
from lit_watercolour.sampling.base import ImagePrompt, slot_token_ids
from lit_watercolour.sampling.vllm import engine_prompt
from lit_watercolour.turns import SHOWN, Conversation, TurnsConfig, feedback_for, join_turns
from lit_watercolour.update import GRPOConfig, OptimConfig, policy_update
from cpu_threads import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
ADVANTAGES = torch.tensor([0.8, -0.8])
FEEDBACK = ["Your sketch failed the gate (no_code): no sketch.", "It painted 3.0% of the canvas."]
POOL = Path(__file__).resolve().parents[1] / "renderer" / "pool"  # p5.brush sketches rendered by the project's renderer


def render(name: str) -> Image.Image:
    """A pool render at the processor's least size (256 x 256: 64 image tokens), so the tiny policy reads it fast."""
    return Image.open(POOL / name).convert("RGB").resize((256, 256))
VL_POLICY = PolicyConfig(tiny="qwen3_5_moe", tiny_config={"hidden_size": 64, "num_layers": 2}, dtype="float32",
                         gradient_checkpointing=False, lora_r=4, lora_alpha=8)


def moved(model):
    """The policy with its LoRA adapter moved (lora_B non-zero), in train mode."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model.train()


@pytest.fixture(scope="module")
def policy():
    """A random one-layer Qwen3 with a LoRA adapter that has moved."""
    model, tokenizer = load_policy(PolicyConfig(tiny="qwen3", tiny_config={"hidden_size": 32, "num_layers": 1},
                                                dtype="float32", gradient_checkpointing=False, lora_r=4, lora_alpha=8))
    return moved(model), tokenizer


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


def forward(model, samples, grad: bool = False, images=None) -> torch.Tensor:
    with torch.set_grad_enabled(grad):
        return completion_logps(model, samples.prompt_ids, samples.prompt_mask, samples.completion_ids,
                                samples.completion_mask, 1.0, 8, images=images or samples.images)[0]


def update_grads(model, samples, loss_type: str = "dapo") -> tuple[list[torch.Tensor], float]:
    """policy_update's gradients and loss (an optimizer with lr 0 leaves the weights as they are)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    metrics = policy_update(model, samples, ADVANTAGES, GRPOConfig(num_generations=2, micro_batch_size=2, loss_type=loss_type),
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


def test_dr_grpo_divides_a_trajectory_by_the_tokens_of_two_completions(policy, turns):
    model, _ = policy
    trajectory = turns[3]
    _, loss = update_grads(model, trajectory, "dr_grpo")
    written, _ = grpo_loss(forward(model, trajectory), ADVANTAGES, trajectory.sampled_mask, loss_type="dr_grpo",
                           max_completion_length=2 * SamplingConfig().max_completion_length)
    assert loss == pytest.approx(written.item(), rel=1e-6)


def test_one_turn_is_the_update_as_it_was_bit_for_bit(policy, turns):
    model, _ = policy
    first = turns[0]
    assert first.sampled_mask is None
    ours, loss = update_grads(model, first)
    written, written_loss = written_grads(model, first, first.completion_mask)
    assert loss == written_loss
    assert all(torch.equal(a, b) for a, b in zip(ours, written, strict=True))


@pytest.fixture(scope="module")
def seen():
    """Each forward of the vision tower: the patch rows it was given."""
    return []


@pytest.fixture(scope="module")
def vl_turns(seen):
    """A tiny random Qwen3.5 vision-language policy, two rows sampled for two turns: row 0 shown a real render
    of its first sketch, row 1 (nothing rendered) told so in text."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a module's fixture is set up before the tests' `one_thread`
    model, tokenizer = load_policy(VL_POLICY)
    model = moved(model)
    model.get_base_model().model.visual.register_forward_hook(lambda module, args, out: seen.append(args[0].shape[0]))
    torch.manual_seed(0)
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=8), need_logps=True)
    first = sampler.sample([chat_prompt(tokenizer, "a peach hibiscus")], 2)
    processor = load_processor(VL_POLICY, tokenizer)
    prompts, segments = Conversation(tokenizer, processor).next_prompts(first, [SHOWN, FEEDBACK[0]],
                                                                        [render("love/love_00.png"), None])
    seen.clear()
    second = sampler.sample(prompts, 1)
    torch.set_num_threads(threads)
    return model, processor, prompts, segments, join_turns(first, segments, second, tokenizer.pad_token_id)


def test_a_render_reaches_the_vision_language_policy_through_its_processor(vl_turns, seen):
    model, processor, prompts, segments, trajectory = vl_turns
    image = prompts[0].inputs
    assert isinstance(prompts[1], list)  # nothing rendered: text feedback, token ids only
    merged = int(image.image_grid_thw.prod()) // 4  # 2x2 patches make one token
    image_token = model.config.image_token_id
    assert segments[0].count(image_token) == merged > 0 and image_token not in segments[1]
    # turn 2's prefill ran the vision tower on the render's patches, once: the decoder reads log-probs off its logits
    assert seen == [image.pixel_values.shape[0]]
    # another render in the same conversation changes what the policy predicts after it
    other = processor.image_processor(render("meh/meh_00.png"), return_tensors="pt")
    assert torch.equal(other.image_grid_thw, image.image_grid_thw)
    shown = forward(model, trajectory)
    swapped = forward(model, trajectory, images=[type(image)(other.pixel_values, other.image_grid_thw), None])
    last_image_token = int((trajectory.completion_ids[0] == image_token).nonzero().max())
    revision = trajectory.sampled_mask[0].bool() & (torch.arange(trajectory.completion_ids.shape[1]) > last_image_token)
    assert revision.any() and not torch.allclose(shown[0][revision], swapped[0][revision])
    torch.testing.assert_close(shown[1], swapped[1])  # the row with no image is untouched


def test_image_tokens_get_no_gradient_and_one_forward_gives_both_turns_logps(vl_turns, seen):
    model, _, _, _, trajectory = vl_turns
    torch.testing.assert_close(forward(model, trajectory) * trajectory.sampled_mask, trajectory.logps,
                               atol=1e-5, rtol=1e-4)
    logps = forward(model, trajectory, grad=True)
    logps.retain_grad()
    grpo_loss(logps, ADVANTAGES, trajectory.policy_mask, num_items_in_batch=trajectory.policy_mask.sum())[0].backward()
    image = trajectory.completion_ids == model.config.image_token_id
    assert image.sum() > 0 and (logps.grad[image] == 0).all() and (logps.grad[trajectory.sampled_mask.bool()] != 0).any()
    seen.clear()
    model.zero_grad()
    ours, _ = update_grads(model, trajectory)
    assert seen == [trajectory.images[0].pixel_values.shape[0]]  # the update's forward saw the render too
    assert all(torch.isfinite(g).all() for g in ours) and any(g.abs().sum() > 0 for g in ours)
    assert not any(p.requires_grad for n, p in model.named_parameters() if "visual" in n)  # the tower stays frozen


def test_the_policy_never_writes_an_image_slot(vl_turns):
    """Turn 1's sketch goes back into turn 2's prompt, where an image slot the policy wrote would be read as a place
    for an image (a random policy with a small vocabulary writes them often). With the slots made by far the likeliest
    tokens, neither decoding path samples one: `generate` (text) and the captured-step decoder (eager on a CPU)."""
    model, processor, prompts, _, _ = vl_turns
    slots = torch.tensor(slot_token_ids(model))
    assert model.config.image_token_id in slots.tolist()
    boost = torch.zeros(model.get_output_embeddings().out_features).index_fill(0, slots, 1e4)
    handle = model.get_output_embeddings().register_forward_hook(lambda module, args, out: out + boost)
    sampler = HFSampler(model, processor.tokenizer, SamplingConfig(max_completion_length=6))
    prompt = chat_prompt(processor.tokenizer, "a peach hibiscus")
    try:
        torch.manual_seed(0)
        banned = [sampler.sample([prompt], 2), sampler.sample(prompts[:1], 2)]
        assert sampler.decode_path == "eager"  # the image row's decoder; the text row's: `generate`
        sampler.slot_ids = []  # the control: without the ban every token sampled is a slot
        allowed = [sampler.sample([prompt], 2), sampler.sample(prompts[:1], 2)]
    finally:
        handle.remove()
    for ban, control in zip(banned, allowed):
        assert not torch.isin(ban.completion_ids[ban.completion_mask.bool()], slots).any()
        assert torch.isin(control.completion_ids[control.completion_mask.bool()], slots).all()


def test_image_feedback_needs_a_policy_that_sees(tmp_path):
    with pytest.raises(ValueError, match="text-only"):
        GRPOModule(policy=PolicyConfig(tiny="qwen3"), turns=2, feedback="image")
    with pytest.raises(ValueError, match="language_model_only"):
        GRPOModule(policy=VL_POLICY, turns=2, feedback="both", sampler="vllm")
    blank = Rollout(prompt="a peach hibiscus", completion="", group=0, seed=0, gate=GateResult(False, "no_code", "no sketch"))
    text, image = feedback_for(blank, None, TurnsConfig(2, "image"))
    assert image is None and "Nothing was rendered" in text
    painted = Rollout(prompt="a peach hibiscus", completion="", group=0, seed=0, gate=GateResult(True, "ok"),
                      render=RenderResult(png=(POOL / "love" / "love_00.png").read_bytes(), painted_fraction=0.04))
    shown, both = feedback_for(painted, None, TurnsConfig(2, "image")), feedback_for(painted, None, TurnsConfig(2, "both"))
    assert shown[0].startswith(SHOWN) and shown[1].size == both[1].size and "painted 4.0%" in both[0]
    # what the vllm engine is given: the ids with each image's tokens one placeholder again (vLLM's processor expands
    # it) and the picture itself (its processor makes the pixels)
    prompt = ImagePrompt([1, 9, 9, 9, 2, 9, 3], shown[1], None)
    assert engine_prompt(prompt, prompt.ids, 9) == {"prompt_token_ids": [1, 9, 2, 9, 3], "multi_modal_data": {"image": shown[1]}}
    # a saved vision-language policy's processor loads from its folder as the tiny one is built
    path = save_tiny_policy(tmp_path / "q35", "qwen3_5_moe", hidden_size=32, num_layers=1)
    loaded = load_processor(PolicyConfig(model=str(path)), AutoTokenizer.from_pretrained(path))
    text, image = ["<|vision_start|><|image_pad|><|vision_end|>"], [render("love/love_01.png")]
    ours = load_processor(VL_POLICY, loaded.tokenizer)(text=text, images=image, return_tensors="pt")
    theirs = loaded(text=text, images=image, return_tensors="pt")
    assert ours.input_ids.tolist() == theirs.input_ids.tolist()
    torch.testing.assert_close(ours.pixel_values, theirs.pixel_values)


def test_two_turns_with_staleness_warn_that_they_do_not_overlap(recwarn):
    GRPOModule(policy=PolicyConfig(tiny="qwen3"), turns=2, max_staleness=1)
    assert any("does not overlap" in str(w.message) for w in recwarn.list)
    recwarn.clear()
    GRPOModule(policy=PolicyConfig(tiny="qwen3"), turns=2)
    GRPOModule(policy=PolicyConfig(tiny="qwen3"), max_staleness=1)
    assert not any("does not overlap" in str(w.message) for w in recwarn.list)
