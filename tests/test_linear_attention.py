"""`kernels.linear_attention`: which layers it marks, that its dispatcher hands everything it does not send to fla
(tensors off CUDA here) to transformers' own code unchanged, in a forward and in cached decoding, and, where triton and
fla are installed, that fla's kernels (run on the CPU by Triton's interpreter) compute what transformers' code does."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)

from lit_watercolour.graph_decoding import GraphDecoder
from lit_watercolour.kernels import linear_attention
from lit_watercolour.kernels.linear_attention import FLAG, fla_available, gated_deltanet_layers, marked, use_fla_glue
from lit_watercolour.policy import PolicyConfig, load_policy

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_model_without_gated_deltanet_is_left_alone():
    model, _ = load_policy(PolicyConfig(tiny="qwen3", dtype="float32"))
    assert gated_deltanet_layers(model) == [] and use_fla_glue(model) is False


def test_marked_layers_off_cuda_run_transformers_code(monkeypatch):
    import transformers.models.qwen3_5_moe.modeling_qwen3_5_moe as modeling

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # which would send CPU tensors to fla
    for name in ("causal_conv1d_fn", "causal_conv1d_update"):  # restored after the test
        monkeypatch.setattr(modeling, name, getattr(modeling, name))
    model, tokenizer = load_policy(PolicyConfig(tiny="qwen3_5_moe", tiny_config={"num_layers": 4}, dtype="float32",
                                                fla_glue=False))
    model.eval()
    layers = gated_deltanet_layers(model)
    assert len(layers) == 3  # three Gated DeltaNet layers, one full attention
    ids = tokenizer(["<|im_start|>user\nPaint a heron<|im_end|>\n"], return_tensors="pt").input_ids
    mask = torch.ones_like(ids)

    def run():
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits
            tokens, logps = GraphDecoder(model).generate(ids, mask, 6, lambda x: x.argmax(-1), [tokenizer.eos_token_id],
                                                         tokenizer.pad_token_id)
        return logits, tokens, logps

    before = run()
    monkeypatch.setattr(linear_attention, "fla_available", lambda: True)  # as on a GPU node with fla installed
    assert use_fla_glue(model) is True
    assert getattr(modeling.causal_conv1d_fn, FLAG) and getattr(modeling.causal_conv1d_update, FLAG)
    assert all(marked(m.conv1d.weight.squeeze(1)) and getattr(m.norm, FLAG) for m in layers)  # the view layers pass
    after = run()
    for a, b in zip(before, after):
        assert torch.equal(a, b)
    assert use_fla_glue(model, False) is False and not any(marked(m.conv1d.weight.squeeze(1)) for m in layers)


def test_a_modeling_module_without_the_convolution_functions_is_left_alone(monkeypatch):
    """A transformers whose Gated DeltaNet module names its convolution otherwise: no glue, no error."""
    import transformers.models.qwen3_5_moe.modeling_qwen3_5_moe as modeling

    monkeypatch.delattr(modeling, "causal_conv1d_update")
    monkeypatch.setattr(linear_attention, "fla_available", lambda: True)
    model, _ = load_policy(PolicyConfig(tiny="qwen3_5_moe", dtype="float32", fla_glue=False))
    assert use_fla_glue(model) is False and not hasattr(modeling.causal_conv1d_fn, FLAG)


def glue_against_transformers() -> dict:
    """Run in a process started with TRITON_INTERPRET=1: a tiny float32 Qwen3.5-MoE's logits, LoRA gradients and cached
    decoding with the glue off and on, and how often each of fla's functions ran."""
    import triton.runtime.autotuner as autotuner

    import fla.modules.causal_conv1d as conv
    import fla.modules.norm.fused_norm_gate as norm

    torch.set_num_threads(1)
    # the interpreter has no benchmarker, and every config computes the same: take the first
    autotuner.Autotuner._bench = lambda self, *args, config, **meta: [0.0, 0.0, 0.0]
    calls = {"causal_conv1d": 0, "causal_conv1d_update": 0, "rms_norm_gated": 0}
    for module, name in ((conv, "causal_conv1d"), (conv, "causal_conv1d_update"), (norm, "rms_norm_gated")):
        def counted(*args, _fn=getattr(module, name), _name=name, **kwargs):
            calls[_name] += 1
            return _fn(*args, **kwargs)
        setattr(module, name, counted)  # the dispatchers import fla's functions at each call
    model, tokenizer = load_policy(PolicyConfig(tiny="qwen3_5_moe", tiny_config={"num_layers": 4}, dtype="float32"))
    ids = tokenizer(["<|im_start|>user\nPaint a heron in the reeds<|im_end|>\n"] * 2, return_tensors="pt").input_ids
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)  # a trained adapter: every LoRA gradient non-zero

    def run(on: bool) -> dict:
        use_fla_glue(model, on)
        model.train().zero_grad(set_to_none=True)
        logits = model(input_ids=ids).logits
        logits.float().log_softmax(-1).mean().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.eval()
        with torch.no_grad():
            tokens, logps = GraphDecoder(model).generate(ids, torch.ones_like(ids), 6, lambda x: x.argmax(-1),
                                                         [tokenizer.eos_token_id], tokenizer.pad_token_id)
        return {"logits": logits.detach(), "grads": grads, "tokens": tokens, "logps": logps}

    off, on = run(False), run(True)
    return {"calls": calls, "tokens_equal": torch.equal(off["tokens"], on["tokens"]),
            "logits_max_abs_diff": float((off["logits"] - on["logits"]).abs().max()),
            "decode_logp_max_abs_diff": float((off["logps"] - on["logps"]).abs().max()),
            "grad_max_rel_err": max(float((on["grads"][n] - g).norm() / g.norm()) for n, g in off["grads"].items())}


@pytest.mark.skipif(not fla_available(), reason="needs triton and flash-linear-attention (a GPU install's extras)")
def test_fla_kernels_compute_what_transformers_code_does():
    """float32 on a CPU, so the only differences are the order of float32 sums: fla's conv, decoding step and gated
    norm, forward and backward, against transformers' PyTorch code, in a process of its own because Triton decides at
    import whether its kernels are interpreted."""
    here = Path(__file__).parent
    path = os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    code = "import json, test_linear_attention as t; print(json.dumps(t.glue_against_transformers()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(result["calls"].values()), result  # each of fla's kernels ran
    assert result["tokens_equal"], result
    assert result["logits_max_abs_diff"] < 1e-4 and result["decode_logp_max_abs_diff"] < 1e-4, result
    assert result["grad_max_rel_err"] < 1e-4, result
