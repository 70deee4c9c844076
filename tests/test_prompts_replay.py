"""The rehearsal's stand-in text: the policy samples (its tokens are trained on), scripted recipe sketches are painted."""

import torch

from lit_watercolour.offline.replay import ReplaySampler, recipe_sketch
from lit_watercolour.sampling import HFSampler, SamplingConfig
from lit_watercolour.offline.tiny_models import build_tiny_model, tiny_tokenizer


def test_policy_samples_its_full_length_while_the_replay_supplies_the_text():
    tok = tiny_tokenizer()
    model = build_tiny_model("qwen3_5_moe", tok, seed=0, hidden_size=32, num_layers=2)
    model.generation_config.min_new_tokens = 12  # as the rehearsal sets it: a random policy must not stop early
    inner = HFSampler(model, tok, SamplingConfig(max_completion_length=12, generation_batch_size=4), need_logps=True)
    sampler = ReplaySampler(inner)
    seen: dict[int, str] = {}
    torch.manual_seed(0)
    first = sampler.sample(["<|im_start|>user\nPaint<|im_end|>\n<|im_start|>assistant\n"], 4, seen.__setitem__)
    assert seen == {row: recipe_sketch(row) for row in range(4)} and first.texts == [recipe_sketch(r) for r in range(4)]
    assert first.num_tokens.tolist() == [12] * 4 and first.completion_ids.shape == (4, 12)  # the policy's own tokens
    assert bool((first.logps < 0).all())  # and their log-probs under the policy
    second = sampler.sample(["<|im_start|>user\nPaint<|im_end|>\n<|im_start|>assistant\n"], 4)
    assert second.texts == [recipe_sketch(r) for r in range(4, 8)]  # every step paints new sketches
    assert len({recipe_sketch(r) for r in range(8)}) == 8
    sampler.close()  # the module's teardown closes whatever sampler it holds
