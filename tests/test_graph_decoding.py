"""The captured-step decoder for Qwen3.5-MoE policies, run eagerly (no CUDA here): token for token `generate`,
prompts with a render in them (turn 2 shown its painting) included."""

from contextlib import contextmanager

import pytest
import torch
from cpu_threads import one_thread  # noqa: F401  (fixture)
from test_turns import render

from lit_watercolour import decoding
from lit_watercolour.graph_decoding import GraphDecoder, capture_failure, supports
from lit_watercolour.policy import PolicyConfig, completion_logps, load_policy, load_processor
from lit_watercolour.vision import RowImage, image_inputs
from lit_watercolour.sampling import HFSampler, SamplingConfig
from lit_watercolour.sampling.base import ImagePrompt, prompt_images, prompt_token_ids

pytestmark = pytest.mark.usefixtures("one_thread")
PROMPTS = ["<|im_start|>user\nPaint a heron by a lake<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>user\nA pear<|im_end|>\n"]


@pytest.fixture(scope="module")
def policy():
    # four layers: three Gated DeltaNet and one full attention, routed and shared experts
    model, tokenizer = load_policy(PolicyConfig(tiny="qwen3_5_moe", tiny_config={"num_layers": 4}, dtype="float32",
                                                lora_r=4, lora_alpha=8))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)  # a trained adapter: decoding must apply it
    return model.eval(), tokenizer


def greedy_both(model, tokenizer, n, stop, min_new=0, prompts=PROMPTS):
    """`generate`'s and the decoder's greedy completions of `prompts` (text, or sampler inputs with images)."""
    enc = tokenizer.pad({"input_ids": prompt_token_ids(tokenizer, prompts)}, padding=True, padding_side="left",
                        return_tensors="pt")
    shown = image_inputs(prompt_images(prompts, 1), enc.input_ids, model.config)
    model.get_base_model().generation_config.min_new_tokens = min_new or None
    try:
        out = model.generate(**shown, input_ids=enc.input_ids, attention_mask=enc.attention_mask, do_sample=False,
                             max_new_tokens=n, min_new_tokens=min_new or None, eos_token_id=stop,
                             pad_token_id=tokenizer.pad_token_id, output_logits=True, return_dict_in_generate=True)
        ref = out.sequences[:, enc.input_ids.shape[1]:]
        ref_logps = torch.stack(out.logits, 1).float().log_softmax(-1).gather(-1, ref[..., None])[..., 0]
        steps = []
        decoder = GraphDecoder(model)
        ids, logps = decoder.generate(enc.input_ids, enc.attention_mask, n, lambda logits: logits.argmax(-1), stop,
                               tokenizer.pad_token_id, on_step=lambda so_far: steps.append(so_far.shape[1]), images=shown)
    finally:
        model.get_base_model().generation_config.min_new_tokens = None
    return ref, ids, steps, decoder, enc.input_ids.shape[1], ref_logps, logps


def test_graph_decoder_is_generate_token_for_token(policy):
    """Greedy, left padding, a trained unmerged adapter, rows ending at different steps: the same
    tokens as transformers `generate`, padded after each row's stop token."""
    model, tokenizer = policy
    assert supports(model)
    free, *_ = greedy_both(model, tokenizer, 20, [tokenizer.eos_token_id])
    # the first token the first row picks for the first time after its second: here it is its stop token
    at = next(i for i in range(2, free.shape[1]) if int(free[0, i]) not in free[0, :i].tolist())
    stop = int(free[0, at])
    ref, ids, steps, decoder, width, ref_logps, logps = greedy_both(model, tokenizer, 20, [stop])
    assert decoder.path == "eager"  # no capture off CUDA
    assert torch.equal(ids, ref) and ids[0, at] == stop and (ids[0, at + 1:] == tokenizer.pad_token_id).all()
    assert ids.shape[1] > at + 1  # the other row decodes on after the first has stopped
    live = torch.ones_like(ids, dtype=torch.bool)
    live[0, at + 1:] = False  # after its stop token a row's log-probs are padding
    torch.testing.assert_close(logps[live], ref_logps[live], atol=1e-4, rtol=1e-4)  # the log-probs that drew each token
    assert steps == list(range(width + 1, width + ids.shape[1] + 1))  # on_step after every token


def test_graph_decoder_keeps_min_new_tokens(policy):
    """With `min_new_tokens` (the rehearsal samples its full length) a stop token is masked as `generate` masks it."""
    model, tokenizer = policy
    free, *_ = greedy_both(model, tokenizer, 12, [tokenizer.eos_token_id])
    stop = int(free[0, 4])
    ref, ids, *_ = greedy_both(model, tokenizer, 12, [stop], min_new=12)
    assert ids.shape[1] == 12 and torch.equal(ids, ref) and ids[0, 4] != stop


def shown_renders(tokenizer) -> list:
    """Turn-2-like prompts: two real renders of different sizes (64 and 80 image tokens) through the policy's
    processor, and a row of text only, so left padding differs across all three."""
    processor = load_processor(PolicyConfig(tiny="qwen3_5_moe"), tokenizer)
    rows = []
    for image in (render("love/love_00.png"), render("meh/meh_00.png").resize((320, 256))):
        text = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Revise it<|im_end|>\n<|im_start|>assistant\n"
        encoded = processor(text=[text], images=[image], return_tensors="pt")
        inputs = RowImage(encoded.pixel_values, encoded.image_grid_thw)
        rows.append(ImagePrompt(encoded.input_ids[0].tolist(), image, inputs))
    return [rows[0], PROMPTS[1], rows[1]]


def test_graph_decoder_reads_images_as_generate_does(policy):
    """Rows shown a render (M-RoPE positions, the vision tower in the prefill) and a text row: `generate`'s tokens
    and log-probs; the hf sampler decodes such a batch on this decoder, its log-probs a full forward's."""
    model, tokenizer = policy
    prompts = shown_renders(tokenizer)
    sizes = [int(p.inputs.image_grid_thw.prod()) // 4 for p in prompts if isinstance(p, ImagePrompt)]
    assert sizes == [64, 80]
    ref, ids, steps, decoder, width, ref_logps, logps = greedy_both(model, tokenizer, 10, [tokenizer.eos_token_id],
                                                                    prompts=prompts)
    assert decoder.path == "eager" and torch.equal(ids, ref) and ids.shape[1] == 10
    torch.testing.assert_close(logps, ref_logps, atol=1e-4, rtol=1e-4)
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=6))
    torch.manual_seed(0)
    batch = sampler.sample(prompts, 1)
    assert sampler.decode_path == "eager"  # not `generate`: the captured step's decoder, uncaptured off CUDA
    forward, _ = completion_logps(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask,
                                  sampler.config.temperature, 3, images=batch.images)
    torch.testing.assert_close(forward * batch.completion_mask, batch.logps, atol=1e-5, rtol=1e-4)


def test_slot_ids_past_a_stand_ins_vocabulary_are_not_banned():
    """A stand-in whose vocabulary is smaller than its config's image slot ids (`bench_sampler.py --preset
    qwen3.5-moe-3b`): the slots banned are the ones it has, so the decoder's draw indexes none past its logits (on CUDA
    an index past them is a device-side assert in the captured step); a slot it has is never drawn."""
    from lit_watercolour.offline.tiny_models import build_tiny_model, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    model = build_tiny_model("qwen3_5_moe", tokenizer, num_layers=2)
    vocab = model.config.get_text_config().vocab_size
    assert model.config.image_token_id >= vocab  # the config's default slot ids, past this vocabulary
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=4))
    assert sampler.slot_ids == []
    enc = tokenizer.pad({"input_ids": prompt_token_ids(tokenizer, PROMPTS)}, padding=True, padding_side="left",
                        return_tensors="pt")
    ids, _ = GraphDecoder(model).generate(enc.input_ids, enc.attention_mask, 4, sampler.draw, [tokenizer.eos_token_id],
                                          tokenizer.pad_token_id)
    assert ids.shape == (2, 4) and int(ids.max()) < vocab
    model.config.video_token_id = 7  # one slot inside the vocabulary, made the likeliest token: never drawn
    sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=4))
    assert sampler.slot_ids == [7]
    logits = torch.zeros(64, vocab)
    logits[:, 7] = 50.0
    assert not (sampler.draw(logits) == 7).any()


def test_the_captured_step_decodes_with_the_adapter_merged(policy):
    """`merge_adapter`: the captured step's decoder runs on the folded weights (no adapter matmuls a token) and draws
    what it draws unmerged, with the same log-probs; the base weights are untouched."""
    model, tokenizer = policy
    prompts = shown_renders(tokenizer)
    base = {n: p.clone() for n, p in model.named_parameters() if "lora_" not in n and "q_proj" in n}
    layer = next(m for n, m in model.named_modules() if n.endswith("q_proj"))
    original, weights = layer.get_base_layer().weight, []
    hook = layer.register_forward_pre_hook(lambda m, args: weights.append(m.get_base_layer().weight is original))
    batches = []
    for merge in (False, True):
        sampler = HFSampler(model, tokenizer, SamplingConfig(max_completion_length=6, merge_adapter=merge))
        torch.manual_seed(0)
        batches.append(sampler.sample(prompts, 1))
        assert sampler.decode_path == "eager"
        assert weights and (not any(weights) if merge else all(weights))  # each step on the merged copy, or the base
        weights.clear()
    hook.remove()
    assert torch.equal(batches[0].completion_ids, batches[1].completion_ids)
    torch.testing.assert_close(batches[1].logps, batches[0].logps, atol=1e-4, rtol=1e-4)
    assert all(torch.equal(p, base[n]) for n, p in model.named_parameters() if n in base)


def test_a_captured_draw_reads_nothing_back(monkeypatch):
    """Top-p without top-k (configs/default.yaml's) reads back whether the likeliest `head` tokens hold the nucleus, a
    host sync that breaks a capture; while a graph is recorded (here: said to be) the draw orders every token instead,
    reads nothing back, and draws what the full order draws."""
    logits = torch.randn(8, 300) * 3

    def read_back(tensor):
        raise AssertionError("read back to the host")

    monkeypatch.setattr(torch.Tensor, "__bool__", read_back)
    with pytest.raises(AssertionError, match="read back"):
        decoding.sample_logits(logits, 1.0, 0, 0.95, head=4)
    monkeypatch.setattr(decoding, "capturing", lambda t: True)
    drawn = decoding.sample_logits(logits, 1.0, 0, 0.95, head=4, generator=torch.Generator().manual_seed(0))
    monkeypatch.undo()
    assert torch.equal(drawn, decoding.sample_logits(logits, 1.0, 0, 0.95, head=300,
                                                     generator=torch.Generator().manual_seed(0)))


def test_a_failed_capture_names_the_call_that_broke_it():
    """Ending a broken capture raises again in torch, over the step's own error; the reason kept is the step's error at
    its innermost line outside torch, the first line of its message."""

    @contextmanager
    def capture():  # as `torch.cuda.graph`, whose exit raises (in torch) while the step's error is handled
        try:
            yield
        finally:
            torch.nn.functional.dropout(torch.zeros(2), p=2.0)  # raises in torch's own code

    def step():
        torch.nn.functional.softmax(torch.zeros(2), dim=5)  # raises in torch's own code too, called from here

    with pytest.raises(ValueError) as caught, capture():
        step()
    assert caught.value.__context__ is not None  # the error caught is the exit's, over the step's
    line = step.__code__.co_firstlineno + 1
    assert capture_failure(caught.value) == (f"IndexError at tests/test_graph_decoding.py:{line} in step: Dimension out "
                                             "of range (expected to be in range of [-1, 0], but got 5)")
