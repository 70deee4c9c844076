"""The shipped tiny policy: loads offline from the package, chats like Qwen3, writes a valid sketch."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from lit_watercolour.assets import TINY_POLICY
from lit_watercolour.gate import static_gate
from lit_watercolour.prompts import SYSTEM_PROMPT, chat_messages
from lit_watercolour.sketch import extract_code


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(TINY_POLICY, local_files_only=True)


@pytest.fixture(scope="module")
def model():
    # float32: the checkpoint is bf16 on disk, but bf16 generate on a CPU without bf16 units is several times slower
    return AutoModelForCausalLM.from_pretrained(TINY_POLICY, dtype=torch.float32, local_files_only=True).eval()


def test_checkpoint_is_a_small_standard_transformers_folder(model):
    names = {p.name for p in TINY_POLICY.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} <= names
    assert (TINY_POLICY / "model.safetensors").stat().st_size < 10_000_000
    config = json.loads((TINY_POLICY / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["dtype"] == "bfloat16" and config["tie_word_embeddings"]
    assert 1e6 < sum(p.numel() for p in model.parameters()) < 1e7


def test_tokenizer_special_tokens(tok, model):
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert model.generation_config.pad_token_id == tok.pad_token_id
    assert 1_000 <= len(tok) <= 4_000
    code = 'brush.fill("#f6a57f", 150);\n  brush.vertex(256, 198);'
    assert tok.decode(tok(code, add_special_tokens=False)["input_ids"]) == code


def test_chat_template_is_qwen_style(tok):
    messages = chat_messages("a peach hibiscus")
    thinking = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    plain = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    assert thinking.startswith("<|im_start|>system\n" + SYSTEM_PROMPT + "<|im_end|>\n")
    assert "<|im_start|>user\nPaint a peach hibiscus in loose watercolour.<|im_end|>\n" in thinking
    assert thinking.endswith("<|im_start|>assistant\n")
    assert plain == thinking + "<think>\n\n</think>\n\n"
    no_prompt = tok.apply_chat_template(messages, tokenize=False)
    assert no_prompt.endswith("<|im_end|>\n")
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=False, return_dict=True)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>") and len(ids) < 200


@pytest.mark.timeout(300)
def test_greedy_generation_is_a_sketch_that_passes_the_static_gate(tok, model):
    batch = tok.apply_chat_template(
        chat_messages("a bowl of lemons"), add_generation_prompt=True, enable_thinking=False, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        out = model.generate(**batch, do_sample=False, max_new_tokens=1024)
    new = out[0, batch["input_ids"].shape[1] :]
    assert new[-1] == tok.eos_token_id  # it stopped by itself
    completion = tok.decode(new, skip_special_tokens=True)
    code = extract_code(completion)
    assert "```js\n" in completion and code.startswith("function setup() {")
    assert static_gate(code, completion) is None


@pytest.mark.timeout(300)
def test_make_tiny_policy_rebuilds_the_shipped_tokenizer_and_architecture(tmp_path):
    """The script reproduces the checkpoint's folder: the same tokenizer byte for byte and the same
    config; only the weights need its full training run (a few steps here)."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "make_tiny_policy.py"
    subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--steps", "2", "--batch-size", "2"], check=True)
    assert (tmp_path / "tokenizer.json").read_bytes() == (TINY_POLICY / "tokenizer.json").read_bytes()

    def settings(folder, name):
        return {k: v for k, v in json.loads((folder / name).read_text()).items() if k != "transformers_version"}

    for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
        assert settings(tmp_path, name) == settings(TINY_POLICY, name)

    def shapes(folder):
        return {name: t.shape for name, t in safetensors.torch.load_file(folder / "model.safetensors").items()}

    assert shapes(tmp_path) == shapes(TINY_POLICY)
    assert AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).num_parameters() > 1e6
