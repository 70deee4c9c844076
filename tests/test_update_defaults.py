"""The update's "auto" settings per model family and device, and the compiled decoder layers' eager fallback."""

import functools
import logging
import os
import warnings
from pathlib import Path

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)
from torch._dynamo.backends.registry import lookup_backend
from torch._dynamo.utils import counters

from lit_watercolour.kernels import compile as kcompile
from lit_watercolour.kernels.defaults import model_family, resolve_update_defaults
from lit_watercolour.policy import PolicyConfig, completion_logps, decoder_layers, load_policy, update_defaults
from lit_watercolour.offline.tiny_models import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def compile_cache(monkeypatch, tmp_path):
    """Inductor's cache folder (which a compiled policy sets) restored after each test."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


def settings(d) -> tuple:
    return d.micro_batch_size, d.checkpoint_keep, d.compile_layers


def test_auto_resolves_to_the_documented_settings_per_family_and_device():
    assert settings(resolve_update_defaults("dense", "cuda")) == (1, "attention+out_proj", True)
    assert settings(resolve_update_defaults("dense", "cuda:1")) == (1, "attention+out_proj", True)
    for family in ("hybrid", "moe"):
        assert settings(resolve_update_defaults(family, "cuda")) == (4, "inputs", False)
    for family in ("dense", "hybrid", "moe"):
        assert settings(resolve_update_defaults(family, "cpu")) == (8, "inputs", False)
    assert not resolve_update_defaults("dense", "cuda", quantized=True).compile_layers  # not measured: eager
    assert str(resolve_update_defaults("dense", "cuda")).startswith("dense model on cuda: micro_batch_size 1")


def test_explicit_settings_are_honoured():
    d = resolve_update_defaults("hybrid", "cuda", micro_batch_size=2, checkpoint_keep="attention", compile_layers=True)
    assert settings(d) == (2, "attention", True)
    d = resolve_update_defaults("dense", "cuda", micro_batch_size=8, checkpoint_keep="inputs", compile_layers=False)
    assert settings(d) == (8, "inputs", False)
    assert resolve_update_defaults("dense", "cuda", compile_layers=True, quantized=True).compile_layers


def test_model_family_from_the_config():
    assert model_family(tiny_config("qwen3", 100)) == "dense"
    assert model_family(tiny_config("qwen3_moe", 100)) == "moe"
    assert model_family(tiny_config("qwen3_5_moe", 100, num_layers=4)) == "hybrid"


def test_a_run_resolves_its_settings_once_from_the_config_before_any_weight_loads(tmp_path):
    """`policy.update_defaults`: the one resolution a run makes (`GRPOModule.configure_model` passes it to
    `load_policy` and, as `grpo.micro_batch_size`, to the update), on a CPU and for CUDA, read off the checkpoint's
    config alone: the folder below holds a config.json and no weights."""
    dense = PolicyConfig(tiny="qwen3", dtype="float32")
    assert settings(update_defaults(dense, "cpu")) == (8, "inputs", False)
    assert settings(update_defaults(dense, "cuda")) == (1, "attention+out_proj", True)
    assert settings(update_defaults(PolicyConfig(tiny="qwen3_5_moe", tiny_config={"num_layers": 4}), "cuda", 2)) == (
        2, "inputs", False)
    tiny_config("qwen3_moe", 100).save_pretrained(tmp_path)
    moe = update_defaults(PolicyConfig(model=str(tmp_path), checkpoint_keep="attention"), "cuda")
    assert (moe.family, *settings(moe)) == ("moe", 4, "attention", False)


def compiled(model) -> list[bool]:
    return [getattr(layer._compiled_call_impl, "compiling", False) for layer in decoder_layers(model)]


def test_load_policy_applies_the_resolution_for_the_device():
    """"auto" compiles a dense policy's layers for CUDA and leaves them eager on a CPU and for Qwen3.5-MoE; explicit
    values win. (Nothing runs here: compiling is lazy, so CUDA can be checked on a CPU.)"""
    dense = PolicyConfig(tiny="qwen3", dtype="float32")
    assert compiled(load_policy(dense, "cpu")[0]) == [False, False]
    assert compiled(load_policy(dense, "cuda")[0]) == [True, True]
    assert compiled(load_policy(PolicyConfig(tiny="qwen3", dtype="float32", compile_layers=True), "cpu")[0]) == [True, True]
    hybrid = PolicyConfig(tiny="qwen3_5_moe", dtype="float32", tiny_config={"num_layers": 4})
    assert not any(compiled(load_policy(hybrid, "cuda")[0]))
    assert not any(compiled(load_policy(PolicyConfig(tiny="qwen3", dtype="float32", compile_layers=False), "cuda")[0]))


def logps_and_grads(model, rows: int = 2):
    g = torch.Generator().manual_seed(3)
    prompt, completion = torch.randint(3, 100, (rows, 4), generator=g), torch.randint(3, 100, (rows, 6), generator=g)
    model.train()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    logps, _ = completion_logps(model, prompt, torch.ones_like(prompt), completion, torch.ones_like(completion), 1.0, 2)
    logps.sum().backward()
    return logps.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]


SELECTIVE = "attention+out_proj"  # the dense CUDA default: selective checkpointing, whose early stop compile must let through


def eager_reference(keep: str = "auto"):
    torch.manual_seed(0)
    cfg = PolicyConfig(tiny="qwen3", dtype="float32", compile_layers=False, checkpoint_keep=keep)
    return logps_and_grads(load_policy(cfg, "cpu")[0])


def assert_same(a, b, atol=0.0, rtol=0.0):
    torch.testing.assert_close(a[0], b[0], atol=atol, rtol=rtol)
    for x, y in zip(a[1], b[1]):
        torch.testing.assert_close(x, y, atol=atol, rtol=rtol)


def ours(caught) -> list[str]:
    return [str(w.message) for w in caught if "policy.compile_layers" in str(w.message)]


def test_a_compiled_layer_that_fails_after_running_falls_back_to_eager_with_one_warning(monkeypatch):
    """The compiled graph runs (its activations saved inside the layer's checkpoint), then fails: the eager retry
    gives the eager numbers exactly, backward included, and says so once, however many steps follow."""
    eager = lookup_backend("eager")  # Dynamo's graph run op by op: its activations saved through the checkpoint's hooks

    def fails_after_running(gm, example_inputs):
        compiled_graph = eager(gm, example_inputs)

        def run(*args):
            compiled_graph(*args)
            raise RuntimeError("a kernel failed")
        return run

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend=fails_after_running))
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, _ = load_policy(PolicyConfig(tiny="qwen3", dtype="float32", compile_layers=True, checkpoint_keep=SELECTIVE), "cpu")
    assert compiled(model) == [True, True]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = logps_and_grads(model)
        logps_and_grads(model)  # a second step: no second warning
    assert len(ours(caught)) == 1 and "a kernel failed" in ours(caught)[0] and "eagerly" in ours(caught)[0]
    assert compiled(model) == [False, False]
    assert_same(result, eager_reference(SELECTIVE))


def test_compilation_past_its_budget_falls_back_to_eager_with_one_warning(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)  # "compiles" instantly ...
    clock = iter(range(0, 10_000, 100))
    monkeypatch.setattr(kcompile, "compile_seconds", lambda: float(next(clock)))  # ... yet 100 s a look
    torch.manual_seed(0)
    model, _ = load_policy(PolicyConfig(tiny="qwen3", dtype="float32", compile_layers=True, compile_budget_s=150), "cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = logps_and_grads(model)
    assert len(ours(caught)) == 1 and "past policy.compile_budget_s" in ours(caught)[0]
    assert compiled(model) == [False, False]
    assert_same(result, eager_reference())


def test_compiled_layers_under_selective_checkpointing_give_the_eager_numbers(monkeypatch, tmp_path, caplog):
    """Really compiled (Dynamo + AOTAutograd, eager kernels: no C++ toolchain needed), one graph for both layers,
    forward, the selective checkpoint's recomputation (its early stop raised through the compiled graph) and
    backward; the warm-up's seconds in one log line; the cache folder is Inductor's."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    cfg = PolicyConfig(tiny="qwen3", dtype="float32", compile_layers=True, checkpoint_keep=SELECTIVE,
                       compile_cache_dir=str(tmp_path / "cache"))
    model, _ = load_policy(cfg, "cpu")
    before = kcompile.compile_seconds()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        result = logps_and_grads(model, rows=4)  # two micro-batches: the second's forward reports the warm-up
    assert not ours(caught)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    assert compiled(model) == [True, True] and kcompile.compile_seconds() > before
    warm_up = [r.getMessage() for r in caplog.records if "compiled in" in r.getMessage()]
    assert len(warm_up) == 1 and str(tmp_path / "cache") in warm_up[0]
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache")
    torch.manual_seed(0)
    eager = load_policy(PolicyConfig(tiny="qwen3", dtype="float32", compile_layers=False, checkpoint_keep=SELECTIVE), "cpu")[0]
    assert_same(result, logps_and_grads(eager, rows=4), atol=1e-5, rtol=1e-4)


def test_the_4b_recipe_is_the_recipe_on_a_4b_policy_with_the_shipped_update_defaults():
    import yaml

    configs = Path(__file__).resolve().parent.parent / "configs"
    recipe, small = (yaml.safe_load((configs / name).read_text()) for name in ("hibiscus_qwen35_a3b.yaml", "hibiscus_qwen3_4b.yaml"))
    assert small["model"]["rewards"] == recipe["model"]["rewards"] and small["data"] == recipe["data"]
    assert small["model"]["optim"] == recipe["model"]["optim"]
    assert small["trainer"]["max_steps"] == recipe["trainer"]["max_steps"]
    for key in ("temperature", "top_p", "top_k", "max_completion_length", "generation_batch_size"):
        assert small["model"]["sampling"][key] == recipe["model"]["sampling"][key]
    grpo = {k: v for k, v in recipe["model"]["grpo"].items() if k != "micro_batch_size"}
    # the micro-batch size left to the defaults; its engine samples a step ahead, reweighted by a capped ratio
    assert {k: v for k, v in small["model"]["grpo"].items() if k != "importance_sampling_cap"} == grpo
    policy = small["model"]["policy"]
    assert policy["model"] == "Qwen/Qwen3-4B-Instruct-2507" and "checkpoint_keep" not in policy and "compile_layers" not in policy
    assert {k: v for k, v in policy.items() if k != "model"} == \
        {k: v for k, v in recipe["model"]["policy"].items() if k in policy and k != "model"}


def test_a_compiled_qwen35_moe_keeps_its_linear_attention_eager(monkeypatch):
    """Asked for on the Gated DeltaNet family, the layers compile around the linear-attention modules (graph breaks:
    fla's Triton kernels are called, not traced) and give the eager numbers."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    torch._dynamo.reset()
    results = []
    for compile_layers in (False, True):
        torch.manual_seed(0)
        cfg = PolicyConfig(tiny="qwen3_5_moe", dtype="float32", compile_layers=compile_layers, tiny_config={"num_layers": 4})
        model, _ = load_policy(cfg, "cuda")  # resolved as for a GPU; runs on the CPU
        gdn = [m for m in model.modules() if type(m).__name__.endswith("GatedDeltaNet")]
        assert len(gdn) == 3 and all(("forward" in vars(m)) == compile_layers for m in gdn)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append(logps_and_grads(model))
        assert not ours(caught)
        assert all(compiled(model)) == compile_layers
    assert_same(results[1], results[0], atol=1e-5, rtol=1e-4)
