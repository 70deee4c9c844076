"""`kernels.linear_attention`: which layers it marks, and that its dispatcher hands everything it does not send to fla
(tensors off CUDA here) to transformers' own code unchanged, in a forward and in cached decoding."""

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)

from lit_watercolour.graph_decoding import GraphDecoder
from lit_watercolour.kernels import linear_attention
from lit_watercolour.kernels.linear_attention import FLAG, gated_deltanet_layers, marked, use_fla_glue
from lit_watercolour.policy import PolicyConfig, load_policy

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_model_without_gated_deltanet_is_left_alone():
    model, _ = load_policy(PolicyConfig(tiny="qwen3", dtype="float32"))
    assert gated_deltanet_layers(model) == [] and use_fla_glue(model) is False


def test_marked_layers_off_cuda_run_transformers_code(monkeypatch):
    import transformers.models.qwen3_5_moe.modeling_qwen3_5_moe as modeling

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
