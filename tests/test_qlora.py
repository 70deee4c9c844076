"""QLoRA (`policy.quantization`) and the 8-bit optimizer through the real update, on bitsandbytes' CPU backend."""

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)

from lit_watercolour.grpo import group_advantages
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy
from lit_watercolour.sampling import SampleBatch, SamplingConfig
from lit_watercolour.offline.tiny_models import save_tiny_policy
from lit_watercolour.update import GRPOConfig, OptimConfig, policy_update

bnb = pytest.importorskip("bitsandbytes")
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    return save_tiny_policy(tmp_path_factory.mktemp("qwen3"), "qwen3")


def rollouts(n: int = 4) -> SampleBatch:
    g = torch.Generator().manual_seed(0)
    prompt, completion = torch.randint(3, 100, (n, 3), generator=g), torch.randint(3, 100, (n, 5), generator=g)
    return SampleBatch(prompt_ids=prompt, prompt_mask=torch.ones_like(prompt), completion_ids=completion,
                       completion_mask=torch.ones_like(completion), texts=[""] * n, truncated=torch.zeros(n, dtype=torch.bool),
                       logps=None, groups=[0] * n)


@pytest.mark.parametrize("quantization, layer", [("4bit", "Linear4bit"), ("8bit", "Linear8bitLt")])
def test_a_quantized_base_trains_its_adapter_with_the_8bit_optimizer(qwen3_dir, quantization, layer):
    """The base's linear layers quantized (the LM head and embeddings left in bf16, not upcast), log-probs near the
    bf16 base's, and one update with AdamW8bit moves the adapter only."""
    samples = rollouts()
    args = (samples.prompt_ids, samples.prompt_mask, samples.completion_ids, samples.completion_mask, 1.0, 4)
    plain, _ = load_policy(PolicyConfig(model=str(qwen3_dir), dtype="bfloat16"), "cpu")
    with torch.no_grad():
        reference = completion_logps(plain, *args)[0]

    model, _ = load_policy(PolicyConfig(model=str(qwen3_dir), dtype="bfloat16", quantization=quantization), "cpu")
    base = model.get_base_model()
    assert type(base.model.layers[0].mlp.down_proj.base_layer).__name__ == layer
    assert base.get_output_embeddings().weight.dtype == base.get_input_embeddings().weight.dtype == torch.bfloat16
    with torch.no_grad():
        quantized = completion_logps(model, *args)[0]
    torch.testing.assert_close(quantized, reference, atol=0.1, rtol=0)

    model.train()
    adapter = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad and p.is_floating_point()}
    optimizer = bnb.optim.AdamW8bit([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    advantages, _ = group_advantages(torch.tensor([0.0, 1.0, 0.5, 0.2]), 4)
    out = policy_update(model, samples, advantages, GRPOConfig(num_generations=4, micro_batch_size=4), SamplingConfig(), OptimConfig(),
                        optimizer, scheduler, lambda loss: loss.backward())
    assert out["train/skipped_nonfinite"] == 0.0 and out["grad_norm"] > 0 and out["time/compile_s"] == 0.0
    moved = [n for n, p in model.named_parameters() if p.requires_grad and not torch.equal(p, adapter[n])]
    assert moved and all("lora_B" in n for n in moved)  # B starts at zero: only its gradient is non-zero at step 1
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
