"""The hf sampler: shapes, masks, truncation, knobs, and log-probs the loss agrees with."""

import copy

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)

from lit_watercolour import grpo
from lit_watercolour.decoding import LeanDecoder, sample_logits, supports
from lit_watercolour.adapter_merge import adapter_merged, merged_weights
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy
from lit_watercolour.sampling import FinishedRowHook, HFSampler, SamplingConfig, completion_mask_and_truncation
from lit_watercolour.sampling.base import row_seeds

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def policy():
    return load_policy(PolicyConfig(tiny="qwen3", dtype="float32", lora_r=4, lora_alpha=8))


def test_mask_stops_after_first_stop_token_and_flags_truncation():
    ids = torch.tensor([[5, 9, 2, 7], [5, 6, 7, 8], [2, 2, 0, 0]])
    mask, truncated = completion_mask_and_truncation(ids, stop_ids=[2])
    assert mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert truncated.tolist() == [False, True, False]


def test_sample_groups_masks_texts_and_streaming(policy):
    model, tokenizer = policy
    torch.manual_seed(0)
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=12, generation_batch_size=2))
    seen = []
    prompts = ["<|im_start|>user\nPaint a fox<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>user\nA pear<|im_end|>\n"]
    batch = sampler.sample(prompts, n=3, on_completion=lambda row, text: seen.append((row, text)))
    assert sorted(row for row, _ in seen) == list(range(6))  # every row reported once, as it finishes
    seen = dict(seen)
    assert batch.groups == [0, 0, 0, 1, 1, 1]
    assert batch.completion_ids.shape == batch.completion_mask.shape == batch.logps.shape
    assert batch.completion_ids.shape[1] <= 12
    stop = set(sampler.stop_ids)
    for row in range(6):
        kept = batch.completion_ids[row][batch.completion_mask[row].bool()].tolist()
        assert batch.truncated[row] == (not any(t in stop for t in kept))
        assert batch.texts[row] == seen[row] == tokenizer.decode(kept, skip_special_tokens=True)
    assert (batch.logps <= 0).all() and (batch.logps[batch.completion_mask == 0] == 0).all()
    assert batch.seconds > 0


def test_sampling_logps_match_the_loss_logps(policy):
    """The loss's own forward (training mode, one row at a time, no padding) gives a ratio of 1."""
    model, tokenizer = policy
    torch.manual_seed(1)
    cfg = SamplingConfig(temperature=0.7, top_p=0.9, top_k=20, max_completion_length=10, logprob_batch_size=4)
    prompts = ["<|im_start|>user\nPaint<|im_end|>\n", "<|im_start|>user\nA much longer prompt, a harbour at dusk<|im_end|>\n"]
    model.train()
    batch = HFSampler(model, tokenizer, cfg).sample(prompts, n=2)
    assert model.training  # restored after generation
    for row in range(4):
        keep = batch.prompt_mask[row].bool()
        logps, _ = completion_logps(
            model, batch.prompt_ids[row : row + 1, keep], batch.prompt_mask[row : row + 1, keep],
            batch.completion_ids[row : row + 1], batch.completion_mask[row : row + 1], cfg.temperature, 1,
        )
        mask = batch.completion_mask[row : row + 1]
        torch.testing.assert_close(logps * mask, batch.logps[row : row + 1], atol=1e-5, rtol=1e-5)
        _, metrics = grpo.grpo_loss(logps, torch.ones(1), mask, old_logps=batch.logps[row : row + 1], loss_type="grpo")
        assert abs(metrics["ratio/mean"].item() - 1.0) < 1e-5


def test_after_each_sync_the_sampler_samples_the_trainers_current_weights(policy):
    """An optimizer step then `sync_weights`: the next batch's log-probs are the updated model's (a sampler
    left on the weights of an earlier sync would sample a policy the trainer no longer has)."""
    model, tokenizer = copy.deepcopy(policy[0]), policy[1]
    cfg = SamplingConfig(max_completion_length=6, lean_decode=False)
    sampler = HFSampler(model, tokenizer, cfg, need_logps=True)
    prompts = ["<|im_start|>user\nA heron<|im_end|>\n"]
    for step in range(2):
        with torch.no_grad():  # an optimizer step's worth of change to the adapter
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.add_(0.05 * (step + 1))
        sampler.sync_weights(model)
        torch.manual_seed(step)
        batch = sampler.sample(prompts, n=2)
        logps, _ = completion_logps(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                                    batch.completion_mask, cfg.temperature, 2)
        torch.testing.assert_close(logps * batch.completion_mask, batch.logps, atol=1e-5, rtol=1e-5)


def test_sampler_decodes_on_its_own_thread_count_and_gives_the_process_its_own_back(policy):
    model, tokenizer = policy
    torch.set_num_threads(2)  # the update's (model.threads.update); the fixture restores the test process's after
    during = []
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=4), threads=1)
    sampler.sample(["<|im_start|>user\n"], n=2, on_completion=lambda row, text: during.append(torch.get_num_threads()))
    assert during == [1, 1] and torch.get_num_threads() == 2


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "generate"])
def test_draws_come_from_the_callers_generator_and_leave_torchs_alone(policy, lean):
    """Both decoding paths draw from the generator they are given (`generate`'s token through `DrawnToken`): the
    same seed samples the same rows, another seed others, and torch's global random state is where it was."""
    model, tokenizer = policy
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=12, lean_decode=lean))
    prompts = ["<|im_start|>user\nPaint a fox<|im_end|>\n<|im_start|>assistant\n"]
    torch.manual_seed(5)
    before = torch.get_rng_state()
    first = sampler.sample(prompts, n=4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(6)  # the global state plays no part
    again = sampler.sample(prompts, n=4, generator=torch.Generator().manual_seed(3))
    other = sampler.sample(prompts, n=4, generator=torch.Generator().manual_seed(4))
    assert sampler.decode_path == ("lean" if lean else "generate")
    assert first.texts == again.texts and torch.equal(first.completion_ids, again.completion_ids)
    assert other.texts != first.texts and len(set(first.texts)) > 1  # rows of one group differ too


def test_vllm_row_seeds_come_from_the_callers_generator():
    """The vLLM samplers' per-row request seeds (`row_seeds`): a seeded generator gives the same seeds again, another
    seed others, and torch's global random state is where it was."""
    torch.manual_seed(5)
    before = torch.get_rng_state()
    seeds = row_seeds(6, torch.Generator().manual_seed(3))
    assert torch.equal(torch.get_rng_state(), before)
    assert seeds == row_seeds(6, torch.Generator().manual_seed(3)) != row_seeds(6, torch.Generator().manual_seed(4))
    assert len(set(seeds)) == 6


def test_top_k_one_is_greedy(policy):
    model, tokenizer = policy
    batch = HFSampler(model, tokenizer, SamplingConfig(top_k=1, max_completion_length=8)).sample(["<|im_start|>user\n"], n=3)
    assert batch.texts[0] == batch.texts[1] == batch.texts[2]
    assert torch.equal(batch.completion_ids[0], batch.completion_ids[2])


def test_rows_are_reported_at_the_step_they_end_not_when_the_batch_does():
    """Row 1 ends at step 2 and row 0 at step 4: each is handed over at its own step, once,
    though the batch goes on and pads the finished row with a pad that is also a stop token."""
    reported = []
    reporter = FinishedRowHook(lambda ids: ids.tolist(), first_row=10, prompt_width=1, stop_ids=[2, 0],
                               on_completion=lambda row, text: reported.append((step, row, text)))
    steps = [[7, 5], [8, 2], [9, 0], [2, 0]]  # new token of rows 0 and 1 at each step
    ids = torch.tensor([[1], [1]])
    for step, new in enumerate(steps, 1):
        ids = torch.cat([ids, torch.tensor(new)[:, None]], 1)
        assert not reporter(ids, None).any()  # it stops nothing: generate's own stop tokens do
    assert reported == [(2, 11, [5, 2]), (4, 10, [7, 8, 9, 2])]


def test_merged_adapter_decodes_the_same_policy_and_restores_the_base_exactly(policy):
    model, tokenizer = policy
    with torch.no_grad():  # a trained adapter, so merging changes the weights
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    prompts = ["<|im_start|>user\nPaint a heron<|im_end|>\n<|im_start|>assistant\n"]
    batches = [HFSampler(model, tokenizer, SamplingConfig(top_k=1, max_completion_length=16, merge_adapter=merge, lean_decode=False),
                         need_logps=True).sample(prompts, n=2)
               for merge in (False, True)]
    assert torch.equal(batches[0].completion_ids, batches[1].completion_ids)  # greedy: same tokens
    torch.testing.assert_close(batches[0].logps, batches[1].logps, atol=1e-5, rtol=1e-5)
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n  # bit-exact, not merged-then-subtracted


def test_merging_for_decoding_leaves_a_bf16_base_bit_identical():
    """A bf16 policy with a trained adapter, sampled 100 times through every path that folds the adapter in
    (`generate` under `adapter_merged`, the lean decoder's copies, vLLM's `merged_weights` sync): the base
    weights, which are the KL reference, are bit for bit what they were. peft's own merge/unmerge is not."""
    model, tokenizer = load_policy(PolicyConfig(tiny="qwen3", dtype="bfloat16", lora_r=4, lora_alpha=8))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    base = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    assert {p.dtype for p in base.values()} == {torch.bfloat16}
    prompts = ["<|im_start|>user\nPaint a heron<|im_end|>\n<|im_start|>assistant\n"]
    generate = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=2, merge_adapter=True, lean_decode=False))
    lean = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=2, lean_decode=True))
    for _ in range(100):
        generate.sample(prompts, n=2)
        lean.sample(prompts, n=2)
        synced = dict(merged_weights(model))  # what a merged-weight vLLM sync sends
    assert generate.decode_path == "generate" and lean.decode_path == "lean"
    q = synced["model.layers.0.self_attn.q_proj.weight"]
    assert q.dtype == torch.bfloat16 and not torch.equal(q, base["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"])
    for n, p in model.named_parameters():
        if n in base:
            assert torch.equal(p, base[n]), n

    ids = tokenizer(prompts, return_tensors="pt").input_ids
    with torch.no_grad():
        adapted = model(input_ids=ids).logits
        with adapter_merged(model):
            merged = model(input_ids=ids).logits
        with model.disable_adapter():
            reference = model(input_ids=ids).logits
    assert (merged - adapted).abs().max() < 0.1 * (reference - adapted).abs().max()  # the adapter is really folded in

    drifting = copy.deepcopy(model)  # peft's in-place merge and unmerge, as the vLLM sync used to do
    for _ in range(100):
        drifting.merge_adapter()
        drifting.unmerge_adapter()
    assert any(not torch.equal(p, base[n]) for n, p in drifting.named_parameters() if n in base)


def test_generate_runs_the_log_prob_forward_only_when_asked(policy):
    """`generate` draws tokens without their log-probs: the forward that scores them runs for `need_logps`
    only (a batch reused by num_iterations > 1). Lean decoding has them for free either way."""
    model, tokenizer = policy
    prompts = ["<|im_start|>user\nA pear<|im_end|>\n"]
    for need in (False, True):
        batch = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=6, lean_decode=False), need_logps=need).sample(prompts, n=2)
        assert (batch.logps is not None) == need and batch.sampler_logps is None
    assert HFSampler(model, tokenizer, SamplingConfig(max_completion_length=6)).sample(prompts, n=2).logps is not None


def test_lean_decoding_is_generate_token_for_token(policy):
    """Greedy, with a trained unmerged adapter and prompts of different lengths (left padding):
    the lean loop and transformers `generate` pick the same tokens and report the same rows."""
    model, tokenizer = policy
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    prompts = ["<|im_start|>user\nPaint a heron by a lake<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>user\nA pear<|im_end|>\n"]
    batches, seen = [], []
    for lean in (False, True):
        reported = []
        sampler = HFSampler(model, tokenizer, SamplingConfig(top_k=1, max_completion_length=24, lean_decode=lean), need_logps=True)
        batches.append(sampler.sample(prompts, n=2, on_completion=lambda row, text: reported.append((row, text))))
        seen.append(sorted(reported))
    assert supports(model)
    assert torch.equal(batches[0].completion_ids, batches[1].completion_ids)
    assert batches[0].texts == batches[1].texts and seen[0] == seen[1] and len(seen[1]) == 4
    torch.testing.assert_close(batches[0].logps, batches[1].logps)


def test_lean_sampling_logps_are_the_trainers_without_a_second_forward(policy):
    """Sampled (temperature 0.7, top-p 0.9), with a trained adapter and left padding: the log-probs the
    lean loop reads off while decoding are the trainer's `completion_logps` on the same tokens."""
    model, tokenizer = policy
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    torch.manual_seed(0)
    config = SamplingConfig(temperature=0.7, top_p=0.9, max_completion_length=32, lean_decode=True)
    batch = HFSampler(model, tokenizer, config).sample(["<|im_start|>user\nA heron<|im_end|>\n", "A pear"], n=2)
    ref, _ = completion_logps(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask,
                              config.temperature, batch_size=4)
    m = batch.completion_mask.bool()
    assert m.sum() > 8 and (batch.logps[~m] == 0).all()
    torch.testing.assert_close(batch.logps[m], ref[m], atol=1e-4, rtol=1e-4)


def test_lean_decoder_logits_match_the_model_forward(policy):
    """Step by step, the lean decoder's next-token logits are the model's own on the same tokens."""
    model, tokenizer = policy
    model.eval()
    enc = tokenizer(["<|im_start|>user\nA fox in snow<|im_end|>\n", "<|im_start|>user\nA pear<|im_end|>\n"],
                    return_tensors="pt", padding=True, padding_side="left")
    captured = []

    def greedy(logits):
        captured.append(logits)
        return logits.argmax(-1)

    ids, _ = LeanDecoder(model).generate(enc.input_ids, enc.attention_mask, 6, greedy, stop_ids=[-1], pad_id=0)
    full = torch.cat([enc.input_ids, ids], 1)
    mask = torch.cat([enc.attention_mask, torch.ones_like(ids)], 1)
    with torch.no_grad():
        ref = model(input_ids=full, attention_mask=mask).logits[:, enc.input_ids.shape[1] - 1 : -1].float()
    torch.testing.assert_close(torch.stack(captured, 1), ref, atol=1e-4, rtol=1e-4)
    model.train()


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 0.95), (0.7, 20, 0.9), (1.0, 5, 1.0), (1.3, 0, 0.5)])
def test_sample_logits_draws_from_the_warped_distribution(temperature, top_k, top_p):
    """Empirical frequencies against transformers' own temperature / top-k / top-p warpers; a small
    `head` makes the fall-back to the full sort happen too."""
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    torch.manual_seed(0)
    logits = torch.randn(2, 60) * 3
    ref = logits / temperature
    if top_k:
        ref = TopKLogitsWarper(top_k)(None, ref)
    if top_p < 1:
        ref = TopPLogitsWarper(top_p)(None, ref)
    ref = ref.softmax(-1)
    n = 40000
    draws = sample_logits(logits.repeat_interleave(n, 0), temperature, top_k, top_p, head=4).view(2, n)
    freq = torch.stack([torch.bincount(d, minlength=60).float() / n for d in draws])
    assert ((freq > 0) <= (ref > 0)).all()  # never a token the warpers remove
    assert (freq - ref).abs().max() < 0.012
