"""vLLM samplers: backend selection, what an adapter sync sends, batch packing, and the
vllm-server backend over real loopback HTTP against a server sampling from a real tiny model."""

import copy
import importlib.util

import pytest
import torch
from completions_server import CompletionsServer
from cpu_threads import one_thread  # noqa: F401  (fixture)
from peft import PeftModel

from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy
from lit_watercolour.sampling import SamplingConfig
from lit_watercolour.sampling_vllm import (
    AdapterSnapshots,
    Completion,
    VLLMConfig,
    base_model_path,
    build_vllm_sampler,
    merged_weights,
    pack_batch,
)
from lit_watercolour.tiny_models import build_tiny_model, save_tiny_policy

pytestmark = pytest.mark.usefixtures("one_thread")
HAS_VLLM = importlib.util.find_spec("vllm") is not None
PROMPTS = ["<|im_start|>user\nPaint a fox<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>user\nA pear<|im_end|>\n"]


@pytest.fixture
def policy():
    return load_policy(PolicyConfig(tiny="qwen3", dtype="float32", lora_r=4, lora_alpha=8, gradient_checkpointing=False))


def perturb_adapter(model, seed: int) -> None:
    """Give lora_B (zero at init) weights, so the adapter changes what the model samples."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def policy_logps(model, batch, temperature):
    model.eval()
    return completion_logps(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                            batch.completion_mask, temperature, 8)[0] * batch.completion_mask


# --- selection and errors ------------------------------------------------------------------------


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed: the missing-package error cannot happen")
def test_vllm_backend_without_vllm_says_how_to_install(policy):
    model, tokenizer = policy
    with pytest.raises(ImportError, match="pip install vllm"):
        build_vllm_sampler("vllm", model, tokenizer, SamplingConfig())


def test_unknown_backend_is_refused(policy):
    with pytest.raises(ValueError, match="vllm-server"):
        build_vllm_sampler("sglang", *policy, SamplingConfig())


def test_base_model_path_needs_a_folder(policy, tmp_path):
    with pytest.raises(ValueError, match="save_tiny_policy"):
        base_model_path(policy[0])  # built in memory
    path = save_tiny_policy(tmp_path / "tiny")
    model, _ = load_policy(PolicyConfig(model=str(path), dtype="float32", gradient_checkpointing=False))
    assert base_model_path(model) == str(path)


# --- what a sync sends --------------------------------------------------------------------------


def test_adapter_snapshots_fresh_ids_folders_and_pruning(policy, tmp_path):
    model, _ = policy
    snaps = AdapterSnapshots(str(tmp_path), keep=2)
    saved = []
    for step in range(3):
        perturb_adapter(model, seed=step)
        saved.append(snaps.save(model))
    assert [s.int_id for s in saved] == [1, 2, 3]
    assert [s.name for s in saved] == ["policy-1", "policy-2", "policy-3"]
    assert saved[2].lora_request_args() == {"lora_name": "policy-3", "lora_int_id": 3, "lora_path": saved[2].path}
    assert saved[2].load_body() == {"lora_name": "policy-3", "lora_path": saved[2].path}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy-2", "policy-3"]  # the oldest is gone
    # the newest folder holds exactly the current adapter
    reloaded = PeftModel.from_pretrained(build_tiny_model("qwen3", policy[1]), saved[2].path)
    current = {n: p for n, p in model.named_parameters() if "lora_" in n}
    for n, p in reloaded.named_parameters():
        if "lora_" in n:
            torch.testing.assert_close(p, current[n])


@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installable on this machine (no GPU wheel); runs where it is")
def test_snapshot_builds_a_vllm_lora_request(policy, tmp_path):
    from vllm.lora.request import LoRARequest

    snap = AdapterSnapshots(str(tmp_path)).save(policy[0])
    request = LoRARequest(**snap.lora_request_args())
    assert (request.lora_name, request.lora_int_id, request.lora_path) == (snap.name, 1, snap.path)


def test_merged_weights_match_peft_merge_and_leave_the_policy_unmerged(policy):
    model, tokenizer = policy
    perturb_adapter(model, seed=3)
    ids = torch.tensor([tokenizer("<|im_start|>user\nA fox").input_ids])
    before = model(input_ids=ids).logits
    expected = copy.deepcopy(model).merge_and_unload().state_dict()
    merged = {name: t.clone() for name, t in merged_weights(model)}
    assert set(merged) == {n for n, _ in build_tiny_model("qwen3", tokenizer).named_parameters()}
    for name, t in merged.items():
        torch.testing.assert_close(t, expected[name])
    torch.testing.assert_close(model(input_ids=ids).logits, before)  # unmerged again


# --- packing --------------------------------------------------------------------------------------


def test_pack_batch_pads_masks_and_flags_truncation(policy):
    _, tokenizer = policy
    pad, stop = tokenizer.pad_token_id, tokenizer.eos_token_id
    completions = [Completion([5, 6, stop], [-1.0, -2.0, -0.5]), Completion([7, 8, 9, 10], [-1.0] * 4),
                   Completion([stop], [-0.25]), Completion([11, 12], [-3.0, -3.0])]
    batch = pack_batch([[1, 2, 3], [4]], 2, completions, tokenizer, [stop], seconds=1.5)
    assert batch.prompt_ids.tolist() == [[1, 2, 3], [1, 2, 3], [pad, pad, 4], [pad, pad, 4]]
    assert batch.prompt_mask.tolist() == [[1, 1, 1], [1, 1, 1], [0, 0, 1], [0, 0, 1]]
    assert batch.completion_ids.tolist() == [[5, 6, stop, pad], [7, 8, 9, 10], [stop, pad, pad, pad], [11, 12, pad, pad]]
    assert batch.completion_mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]]
    assert batch.truncated.tolist() == [False, True, False, True]
    assert batch.logps.tolist() == [[-1.0, -2.0, -0.5, 0.0], [-1.0] * 4, [-0.25, 0, 0, 0], [-3.0, -3.0, 0, 0]]
    assert batch.groups == [0, 0, 1, 1] and batch.seconds == 1.5
    assert batch.texts[0] == tokenizer.decode([5, 6], skip_special_tokens=True) and batch.texts[2] == ""


# --- vllm-server over loopback HTTP ---------------------------------------------------------------


def test_server_sampler_syncs_the_adapter_and_reports_completions_as_they_finish(policy, tmp_path):
    model, tokenizer = policy
    cfg = SamplingConfig(temperature=0.8, max_completion_length=12)
    with CompletionsServer(build_tiny_model("qwen3", tokenizer), tokenizer, hold_first=True) as server:
        vcfg = VLLMConfig(base_url=server.base_url, adapter_dir=str(tmp_path / "adapters"))
        sampler = build_vllm_sampler("vllm-server", model, tokenizer, cfg, vcfg)
        assert server.loaded == [{"lora_name": "policy-1", "lora_path": str((tmp_path / "adapters" / "policy-1").resolve())}]

        seen = []
        torch.manual_seed(0)
        batch = sampler.sample(PROMPTS, n=3, on_completion=lambda row, text: seen.append((row, text)))
        # both requests were in flight at once; the held one was reported last, the other as soon as it came
        held = [tokenizer(p, add_special_tokens=False).input_ids for p in PROMPTS].index(server.held)
        assert sorted(r for r, _ in seen) == list(range(6))
        assert [r // 3 for r, _ in seen] == [1 - held] * 3 + [held] * 3
        assert server.answered[-1] == server.held
        body = server.completion_requests[0]
        assert {k: body[k] for k in ("model", "n", "max_tokens", "temperature", "top_p", "top_k", "logprobs",
                                     "return_tokens_as_token_ids")} == {
            "model": "policy-1", "n": 3, "max_tokens": 12, "temperature": 0.8, "top_p": 1.0, "top_k": -1,
            "logprobs": 0, "return_tokens_as_token_ids": True}

        assert batch.groups == [0, 0, 0, 1, 1, 1]
        for row, text in seen:
            assert batch.texts[row] == text
            kept = batch.completion_ids[row][batch.completion_mask[row].bool()].tolist()
            assert text == tokenizer.decode(kept, skip_special_tokens=True)
        # the server's log-probs are the trainer's own, left padding and all
        torch.testing.assert_close(batch.logps, policy_logps(model, batch, cfg.temperature), atol=2e-4, rtol=0)

        # a trained step: a new adapter under a new name, the old one unloaded, sampling uses it
        perturb_adapter(model, seed=1)
        sampler.sync_weights(model)
        assert [b["lora_name"] for b in server.loaded] == ["policy-1", "policy-2"] and server.unloaded == ["policy-1"]
        batch = sampler.sample(PROMPTS[:1], n=2)
        assert server.completion_requests[-1]["model"] == "policy-2"
        new = policy_logps(model, batch, cfg.temperature)
        torch.testing.assert_close(batch.logps, new, atol=2e-4, rtol=0)
        with model.disable_adapter():
            base = policy_logps(model, batch, cfg.temperature)
        assert (base - new).abs().max() > 1e-2  # the adapter really changed the distribution served


def test_server_sampler_split_generations_sends_one_request_per_row(policy, tmp_path):
    model, tokenizer = policy
    with CompletionsServer(build_tiny_model("qwen3", tokenizer), tokenizer) as server:
        vcfg = VLLMConfig(base_url=server.base_url, adapter_dir=str(tmp_path), split_generations=True)
        sampler = build_vllm_sampler("vllm-server", model, tokenizer, SamplingConfig(max_completion_length=6, top_k=20), vcfg)
        batch = sampler.sample(PROMPTS, n=2)
    assert [b["n"] for b in server.completion_requests] == [1, 1, 1, 1]
    assert all(b["top_k"] == 20 for b in server.completion_requests)
    assert batch.completion_ids.shape[0] == 4 and batch.groups == [0, 0, 1, 1]


def test_server_errors_are_reported(policy, tmp_path):
    model, tokenizer = policy
    with CompletionsServer(build_tiny_model("qwen3", tokenizer), tokenizer) as server:
        sampler = build_vllm_sampler("vllm-server", model, tokenizer, SamplingConfig(max_completion_length=4),
                                     VLLMConfig(base_url=server.base_url, adapter_dir=str(tmp_path)))
        server.adapters.clear()  # the server restarted and lost the adapter
        with pytest.raises(RuntimeError, match="404"):
            sampler.sample(PROMPTS[:1], n=1)
