"""The `hf` sampler: decoding on the training model itself, in this process.

Dense Qwen3 policies decode with the lean loop (`lit_watercolour.decoding`), Qwen3.5-MoE policies on
CUDA with the captured step (`lit_watercolour.graph_decoding`); both read each token's log-prob off
the logits it was drawn from. Any other model runs transformers `generate` (each token drawn by the sampler,
`DrawnToken`, as the decoders draw theirs), whose log-probs cost a second forward over the batch, run only for a
sampler built with `need_logps`. A batch with an image in it (a render fed back to a vision-language policy)
decodes with the captured step too, whose prefill runs the vision tower (off CUDA, eagerly), or else with
`generate`, the rows' pixels passed to either. Every path draws from the generator `sample` is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from lit_watercolour import graph_decoding
from lit_watercolour.decoding import LeanDecoder, sample_logits, supports
from lit_watercolour.adapter_merge import adapter_merged
from lit_watercolour.sampling.base import (
    OnCompletion,
    PromptInput,
    SampleBatch,
    SamplingConfig,
    completion_mask_and_truncation,
    decode,
    prompt_images,
    prompt_token_ids,
    slot_token_ids,
    stop_token_ids,
    with_policy_logps,
)
from lit_watercolour.vision import RowImage, image_inputs


class FinishedRowHook(StoppingCriteria):
    """Called after every decoding step; hands each row to `on_completion` at the step where it emits
    its first stop token, so its sketch renders while the rest of the batch decodes. It is a
    `StoppingCriteria` only because that is `generate`'s per-step hook: it never stops a row."""

    def __init__(self, decode: Callable[[Tensor], str], first_row: int, prompt_width: int, stop_ids: list[int],
                 on_completion: OnCompletion) -> None:
        self.decode, self.first_row, self.prompt_width, self.on_completion = decode, first_row, prompt_width, on_completion
        self.stop_ids = torch.tensor(stop_ids)
        self.reported: set[int] = set()

    def __call__(self, input_ids: Tensor, scores=None, **kwargs) -> Tensor:
        # a finished row is padded from then on; where pad is a stop token too, `reported` skips it
        ended = torch.isin(input_ids[:, -1], self.stop_ids.to(input_ids.device))
        for i in ended.nonzero().flatten().tolist():
            if i not in self.reported:
                self.reported.add(i)
                self.on_completion(self.first_row + i, self.decode(input_ids[i, self.prompt_width :]))
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class DrawnToken(LogitsProcessor):
    """`generate`'s token drawn by `draw` (the sampler's, from its generator), last of `generate`'s processors: every
    other score is set to -inf, so `generate`'s greedy step takes it (transformers' sampling takes no generator)."""

    def __init__(self, draw: Callable[[Tensor], Tensor]) -> None:
        self.draw = draw

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        return torch.full_like(scores, float("-inf")).scatter_(1, self.draw(scores)[:, None], 0.0)


class HFSampler:
    """Batched, KV-cached decoding on the training model, adapter applied. `need_logps`: also return
    the policy's log-probs where they cost a forward (`generate`), for a loss that reuses the batch. `threads`:
    torch's intra-op threads while decoding (0: the process's; `GRPOModule` passes `model.threads.sampling`): on a
    CPU the render pool's Chromium works meanwhile, and a tiny model's kernels gain nothing from a second thread."""

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, need_logps: bool = False,
                 threads: int = 0) -> None:
        self.model, self.tokenizer, self.config, self.need_logps = model, tokenizer, config, need_logps
        self.threads = threads
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.slot_ids = slot_token_ids(model)  # never sampled (`slot_token_ids`)
        self.slots = torch.tensor(self.slot_ids, dtype=torch.long)
        self.decode_path = "not run"  # how the last `sample` decoded: generate, lean, cuda-graph or eager

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model  # generation runs on the live model: nothing to copy

    def close(self) -> None:
        pass  # nothing of its own to free

    def decode(self, ids: Tensor) -> str:
        return decode(self.tokenizer, ids.tolist(), self.stop_ids)

    def decoder(self, device: torch.device, images: bool = False, generator: torch.Generator | None = None
                ) -> LeanDecoder | graph_decoding.GraphDecoder | None:
        """The lean or captured-step decoder this model and config allow (`images`: the batch has one, which only
        the captured-step decoder reads, on any device; `generator`: what its captured step draws from); None:
        `generate`."""
        c = self.config
        if images:
            allowed = c.graph_decode and graph_decoding.supports(self.model)
            return graph_decoding.GraphDecoder(self.model, generator=generator) if allowed else None
        if c.lean_decode and supports(self.model):
            return LeanDecoder(self.model)
        if c.graph_decode and device.type == "cuda" and graph_decoding.supports(self.model):
            return graph_decoding.GraphDecoder(self.model, generator=generator)
        return None

    def draw(self, logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """One token per row from logits [B, V] (every decoding path's), the config's sampling settings, slot tokens
        banned, drawn from `generator`."""
        c = self.config
        if self.slot_ids:
            if self.slots.device != logits.device:  # made once, before a captured step replays this
                self.slots = self.slots.to(logits.device)
            logits = logits.index_fill(-1, self.slots, float("-inf"))
        return sample_logits(logits, c.temperature, c.top_k, c.top_p, generator=generator)

    def generate(self, prompt_ids: Tensor, prompt_mask: Tensor, hook: FinishedRowHook,
                 images: list[RowImage | None] | None, draw: Callable[[Tensor], Tensor]) -> Tensor:
        return self.model.generate(
            **image_inputs(images, prompt_ids, self.model.config),
            input_ids=prompt_ids,
            attention_mask=prompt_mask,
            do_sample=False,  # `draw` samples (`DrawnToken`): temperature, top-k and top-p are applied there
            logits_processor=LogitsProcessorList([DrawnToken(draw)]),
            max_new_tokens=self.config.max_completion_length,
            eos_token_id=self.stop_ids,
            pad_token_id=self.tokenizer.pad_token_id,
            use_cache=True,
            stopping_criteria=StoppingCriteriaList([hook]),
        )[:, prompt_ids.shape[1] :]

    @torch.no_grad()
    def sample(self, prompts: list[PromptInput], n: int, on_completion: OnCompletion | None = None,
               generator: torch.Generator | None = None) -> SampleBatch:
        start, c = time.perf_counter(), self.config
        rows = [p for p in prompts for _ in range(n)]
        enc = self.tokenizer.pad({"input_ids": prompt_token_ids(self.tokenizer, rows)}, padding=True, padding_side="left",
                                 return_tensors="pt")
        device = next(self.model.parameters()).device
        prompt_ids, prompt_mask = enc.input_ids.to(device), enc.attention_mask.to(device)
        was_training = self.model.training
        self.model.eval()  # gradient checkpointing is off in eval, so the KV cache is used
        chunks, chunk_logps = [], []
        report = on_completion or (lambda row, text: None)
        images = prompt_images(prompts, n)
        decoder = self.decoder(device, images is not None, generator)
        merge = c.merge_adapter and not isinstance(decoder, LeanDecoder)  # the lean decoder folds it itself
        draw = partial(self.draw, generator=generator)
        with adapter_merged(self.model) if merge else nullcontext(), torch_threads(self.threads):
            for lo in range(0, len(rows), c.generation_batch_size):
                hi = min(lo + c.generation_batch_size, len(rows))
                hook = FinishedRowHook(self.decode, lo, prompt_ids.shape[1], self.stop_ids, report)
                if decoder is None:
                    ids = self.generate(prompt_ids[lo:hi], prompt_mask[lo:hi], hook, images and images[lo:hi], draw)
                else:
                    shown = {} if images is None else {
                        "images": image_inputs(images[lo:hi], prompt_ids[lo:hi], self.model.config)}
                    ids, lps = decoder.generate(
                        prompt_ids[lo:hi], prompt_mask[lo:hi], c.max_completion_length, draw,
                        self.stop_ids, self.tokenizer.pad_token_id, on_step=hook, temperature=c.temperature, **shown,
                    )
                    chunk_logps.append(lps)
                texts = [self.decode(row) for row in ids]
                for i in sorted(set(range(hi - lo)) - hook.reported):  # cut off at max_completion_length
                    report(lo + i, texts[i])
                chunks.append((ids, texts))
        self.model.train(was_training)
        self.decode_path = "generate" if decoder is None else getattr(decoder, "path", "lean")
        width = max(ids.shape[1] for ids, _ in chunks)
        pad = self.tokenizer.pad_token_id
        completion_ids = torch.cat([F.pad(ids, (0, width - ids.shape[1]), value=pad) for ids, _ in chunks])
        completion_mask, truncated = completion_mask_and_truncation(completion_ids, self.stop_ids)
        logps = None  # read off while decoding: no second forward over the batch
        if chunk_logps:
            logps = torch.cat([F.pad(lps, (0, width - lps.shape[1])) for lps in chunk_logps]) * completion_mask
        batch = SampleBatch(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=completion_mask,
            texts=[t for _, texts in chunks for t in texts],
            truncated=truncated,
            logps=logps,
            groups=[i for i in range(len(prompts)) for _ in range(n)],
            images=images,
        )
        if logps is None and self.need_logps:
            batch = with_policy_logps(self.model, batch, c)
        batch.seconds = time.perf_counter() - start
        return batch


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to `n` for the duration (0: left as it is; the count is process-wide)."""
    if n <= 0:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
