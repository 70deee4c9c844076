"""The frozen-experts autograd node against transformers' own experts forward, alone and inside the policy."""

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)
from transformers.integrations.moe import grouped_mm_experts_forward

from lit_watercolour.kernels.experts import NAME, frozen_grouped_mm_experts_forward
from lit_watercolour.policy import PolicyConfig, load_policy
from lit_watercolour.offline.tiny_models import save_tiny_policy, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


def experts_module(dtype: torch.dtype):
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeExperts

    cfg = tiny_config("qwen3_5_moe", 64, hidden_size=32).get_text_config()
    cfg.num_experts, cfg.moe_intermediate_size = 8, 16
    torch.manual_seed(0)
    experts = Qwen3_5MoeExperts(cfg)
    with torch.no_grad():
        experts.gate_up_proj.normal_(0, 0.2)
        experts.down_proj.normal_(0, 0.2)
    return experts.to(dtype).requires_grad_(False)


def routed(num_tokens: int, num_experts: int, k: int, dtype: torch.dtype):
    """Inputs with experts 0 and 1 never chosen (empty groups) and the rest chosen unevenly."""
    torch.manual_seed(1)
    hidden = torch.randn(num_tokens, 32, dtype=dtype, requires_grad=True)
    scores = torch.randn(num_tokens, num_experts)
    scores[:, :2] = -1e9
    scores[:, 2] += 2.0
    weights, index = torch.softmax(scores, -1).topk(k, dim=-1)
    weights = (weights / weights.sum(-1, keepdim=True)).to(dtype).requires_grad_()
    return hidden, index, weights


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_output_and_gradients_match_transformers_grouped_mm(dtype, tol):
    experts = experts_module(dtype)
    results = []
    for forward in (grouped_mm_experts_forward, frozen_grouped_mm_experts_forward):
        hidden, index, weights = routed(40, 8, 3, dtype)
        out = forward(experts, hidden, index, weights)
        grad_out = torch.randn_like(out, dtype=torch.float32, generator=torch.Generator().manual_seed(2)).to(dtype)
        out.backward(grad_out)
        results.append((out, hidden.grad, weights.grad))
    for ours, theirs, what in zip(results[1], results[0], ("output", "hidden grad", "routing-weight grad")):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, what
        scale = theirs.float().abs().max()
        assert scale > 0 and (ours.float() - theirs.float()).abs().max() <= tol * scale, what


def test_trainable_expert_weights_still_get_gradients():
    experts = experts_module(torch.float32)
    experts.gate_up_proj.requires_grad_(True)
    hidden, index, weights = routed(12, 8, 2, torch.float32)
    frozen_grouped_mm_experts_forward(experts, hidden, index, weights).sum().backward()
    assert experts.gate_up_proj.grad is not None and experts.gate_up_proj.grad.abs().sum() > 0


@pytest.mark.parametrize("keep", ["inputs", "attention+out_proj"])
def test_policy_loss_and_adapter_gradients_match_transformers_experts(tmp_path_factory, keep):
    path = save_tiny_policy(tmp_path_factory.mktemp("q35"), "qwen3_5_moe", num_layers=2)
    runs = []
    for frozen in (False, True):
        cfg = PolicyConfig(model=str(path), dtype="float32", lora_r=4, lora_alpha=8, checkpoint_keep=keep,
                           frozen_experts=frozen)
        torch.manual_seed(0)
        model, tokenizer = load_policy(cfg)
        assert (model.config.get_text_config()._experts_implementation == NAME) == frozen
        model.train()
        enc = tokenizer(["brush.fill(", "brush.circle(256, 256, 40);"], return_tensors="pt", padding=True)
        loss = model(**enc, labels=enc.input_ids.masked_fill(enc.attention_mask == 0, -100)).loss
        loss.backward()
        runs.append((loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}))
    (loss_theirs, grads_theirs), (loss_ours, grads_ours) = runs
    torch.testing.assert_close(loss_ours, loss_theirs, rtol=1e-5, atol=1e-6)
    assert grads_ours.keys() == grads_theirs.keys()
    assert any(g.abs().sum() > 0 for n, g in grads_ours.items() if "mlp" in n)
    for n in grads_theirs:
        torch.testing.assert_close(grads_ours[n], grads_theirs[n], rtol=1e-4, atol=1e-6, msg=n)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_compiles_in_one_graph_and_falls_back_where_grouped_mm_cannot(dtype, tol):
    """bf16 traces our node whole; compiled float32, which torch's grouped_mm rejects, takes transformers' fallback."""
    experts = experts_module(dtype)
    compiled = torch.compile(frozen_grouped_mm_experts_forward, backend="aot_eager", fullgraph=True)
    results = []
    for forward in (grouped_mm_experts_forward, compiled):
        hidden, index, weights = routed(40, 8, 3, dtype)
        out = forward(experts, hidden, index, weights)
        out.float().square().sum().backward()
        results.append((out, hidden.grad, weights.grad))
    for ours, theirs in zip(results[1], results[0]):
        scale = theirs.float().abs().max()
        assert scale > 0 and (ours.float() - theirs.float()).abs().max() <= tol * scale
