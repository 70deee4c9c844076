"""Policy loading from local folders (Qwen3, Qwen3.5-MoE), LoRA placement, the adapter-free reference."""

import importlib.util

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)

from lit_watercolour.data import chat_prompt
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy, right_padded, trainable_state_dict
from lit_watercolour.offline.tiny_models import save_tiny_policy

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    return save_tiny_policy(tmp_path_factory.mktemp("qwen3"), "qwen3")


def lora_modules(model) -> set[str]:
    return {n.split(".lora_A")[0].rsplit(".", 1)[-1] for n, _ in model.named_parameters() if "lora_A" in n}


def forward_backward(model, tokenizer) -> None:
    enc = tokenizer(["brush.fill(", "brush.circle(256, 256, 40);"], return_tensors="pt", padding=True)
    out = model(**enc, labels=enc.input_ids.masked_fill(enc.attention_mask == 0, -100))
    out.loss.backward()
    assert torch.isfinite(out.loss)


def test_qwen3_local_folder_lora_trains_adapter_only(qwen3_dir):
    cfg = PolicyConfig(model=str(qwen3_dir), dtype="float32", lora_r=4, lora_alpha=8)
    model, tokenizer = load_policy(cfg)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    assert lora_modules(model) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert model.base_model.model.is_gradient_checkpointing
    model.train()
    forward_backward(model, tokenizer)
    for n, p in model.named_parameters():
        assert (p.grad is not None) == p.requires_grad, n
    assert set(trainable_state_dict(model)) == trainable


def test_qwen35_moe_loads_as_vlm_class_lora_on_text_only(tmp_path):
    path = save_tiny_policy(tmp_path / "q35", "qwen3_5_moe", num_layers=4)
    model, tokenizer = load_policy(PolicyConfig(model=str(path), dtype="float32", lora_r=4, lora_alpha=8))
    base = model.get_base_model()
    assert type(base).__name__ == "Qwen3_5MoeForConditionalGeneration"  # module names match the checkpoint's
    names = {n for n, _ in model.named_parameters() if "lora_A" in n}
    assert names and not any("visual" in n for n in names)
    # the linear-attention layers (3 of 4) and the full-attention layer are both adapted
    assert {"in_proj_qkv", "out_proj", "q_proj", "o_proj", "shared_expert_gate"} <= lora_modules(model)
    assert any(".language_model.layers.3.self_attn.q_proj" in n for n in names)
    model.train()
    forward_backward(model, tokenizer)
    assert all(p.grad is None for n, p in model.named_parameters() if not p.requires_grad)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters() if "lora_B" in n)


def test_reference_is_the_adapter_switched_off(qwen3_dir):
    model, tokenizer = load_policy(PolicyConfig(model=str(qwen3_dir), dtype="float32", gradient_checkpointing=False))
    base_params = sum(p.numel() for p in model.parameters())
    prompt = tokenizer(["<|im_start|>user\nPaint"], return_tensors="pt")
    completion = tokenizer(["brush.fill(\"#f6a57f\", 120);"], return_tensors="pt")
    args = (prompt.input_ids, prompt.attention_mask, completion.input_ids, completion.attention_mask, 1.0, 4)
    with torch.no_grad():
        before = completion_logps(model, *args)[0]
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
        adapted = completion_logps(model, *args)[0]
        with model.disable_adapter():
            reference = completion_logps(model, *args)[0]
    assert torch.allclose(reference, before, atol=1e-6)  # LoRA starts as the identity
    assert not torch.allclose(adapted, reference, atol=1e-3)
    assert sum(p.numel() for p in model.parameters()) == base_params  # no second copy was made


def test_right_padded_rows_run_unmasked_and_score_as_each_row_alone(qwen3_dir):
    """Rows of one prompt, completions of different lengths: the batch skips the mask (causal attention
    never sees a row's padding before its end), and each row's log-probs and gradients are the row's alone."""
    model, tokenizer = load_policy(PolicyConfig(model=str(qwen3_dir), dtype="float32", gradient_checkpointing=False))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)
    prompt = tokenizer(["<|im_start|>user\nPaint"] * 2, return_tensors="pt")
    completion = tokenizer(["brush.fill(\"#f6a57f\", 120);", "brush.noFill();"], return_tensors="pt", padding=True,
                           padding_side="right")
    mask = torch.cat([prompt.attention_mask, completion.attention_mask], 1)
    assert right_padded(mask) and not right_padded(mask.flip(1)) and not right_padded(torch.tensor([[1, 0, 1]]))
    batch, _ = completion_logps(model, prompt.input_ids, prompt.attention_mask, completion.input_ids,
                                completion.attention_mask, 1.0, 2)
    batch[completion.attention_mask.bool()].sum().backward()
    batch_grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    for row in range(2):
        keep = completion.attention_mask[row].bool()
        alone, _ = completion_logps(model, prompt.input_ids[row : row + 1], prompt.attention_mask[row : row + 1],
                                    completion.input_ids[row : row + 1, keep], completion.attention_mask[row : row + 1, keep], 1.0, 1)
        torch.testing.assert_close(alone[0], batch[row, keep], atol=1e-6, rtol=1e-6)
        alone.sum().backward()
    for p, g in zip((p for p in model.parameters() if p.requires_grad), batch_grads):
        torch.testing.assert_close(p.grad, g, atol=1e-6, rtol=1e-5)


def test_chat_prompt_switches_thinking_off(qwen3_dir):
    _, tokenizer = load_policy(PolicyConfig(model=str(qwen3_dir), dtype="float32"))
    text = chat_prompt(tokenizer, "a peach hibiscus")
    assert "p5.brush" in text and "Paint a peach hibiscus" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.parametrize("quantization", ["4bit", "8bit"])
def test_quantization_without_bitsandbytes_says_what_to_install(qwen3_dir, quantization, monkeypatch):
    find_spec = importlib.util.find_spec  # where it is installed (the test extra), as if it were not
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else find_spec(name, *a))
    with pytest.raises(ImportError, match="pip install bitsandbytes"):
        load_policy(PolicyConfig(model=str(qwen3_dir), quantization=quantization))
