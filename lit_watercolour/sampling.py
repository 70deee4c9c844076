"""Samplers: turn chat prompts into completions plus the log-probs of the policy that sampled them.

A `Sampler` hides the generation backend. The `hf` backend runs transformers `generate` on
the training model itself; a vLLM backend implements the same two methods and keeps its own
copy of the weights, refreshed by `sync_weights` after every optimizer step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor
from transformers import StoppingCriteria, StoppingCriteriaList

from lit_watercolour import graph_decoding
from lit_watercolour.decoding import LeanDecoder, sample_logits, supports
from lit_watercolour.policy import adapter_merged, completion_logps


@dataclass
class SamplingConfig:
    temperature: float = 1.0
    top_p: float = 1.0  # 1.0: off
    top_k: int = 0  # 0: off
    max_completion_length: int = 256
    generation_batch_size: int = 8  # rows per `generate` call; each row starts rendering as it finishes
    logprob_batch_size: int = 8  # rows per forward when scoring the sampled tokens
    # decode with the LoRA adapter folded into the base weights (restored exactly afterwards):
    # faster for small models, whose decoding steps are dominated by per-matmul overhead; costs
    # a copy of the adapted weights, so it is off for large ones
    merge_adapter: bool = False
    # dense Qwen3 policies decode with a flat KV-cached loop instead of `generate` (lit_watercolour.decoding:
    # per-token overhead, not FLOPs, bounds a small model); other architectures always use `generate`
    lean_decode: bool = True
    # Qwen3.5-MoE policies on CUDA decode by replaying one captured step (lit_watercolour.graph_decoding)
    graph_decode: bool = True


@dataclass
class SampleBatch:
    """`n` completions of each prompt, rows grouped by prompt (prompt i owns rows i*n .. i*n+n-1)."""

    prompt_ids: Tensor  # [N, P] left-padded
    prompt_mask: Tensor  # [N, P]
    completion_ids: Tensor  # [N, C] right-padded
    completion_mask: Tensor  # [N, C] 1 up to and including the first end-of-turn token
    texts: list[str]  # decoded completions, special tokens dropped
    truncated: Tensor  # [N] bool: no end-of-turn token within max_completion_length
    # [N, C] log-prob of each sampled token under the policy, log_softmax(logits / temperature) over the
    # whole vocabulary as the loss computes it (0 where masked): the importance ratio's one definition
    logps: Tensor
    groups: list[int]  # the prompt index of each row
    seconds: float = 0.0  # generation wall clock, log-prob scoring included
    # what a sampling engine (vLLM) reported for the distribution it drew from (after top-k/top-p);
    # None where `logps` is already that (hf)
    sampler_logps: Tensor | None = None

    @property
    def num_tokens(self) -> Tensor:
        return self.completion_mask.sum(1)


OnCompletion = Callable[[int, str], None]  # (row, decoded text), called as soon as a row is decoded


class Sampler(Protocol):
    def sample(self, prompts: list[str], n: int, on_completion: OnCompletion | None = None) -> SampleBatch: ...

    def sync_weights(self, model: torch.nn.Module) -> None: ...

    def close(self) -> None: ...


def stop_token_ids(model, tokenizer) -> list[int]:
    """End-of-turn ids: the tokenizer's eos plus any the generation config lists (Qwen has two)."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    return sorted({tokenizer.eos_token_id, *ids})


def completion_mask_and_truncation(completion_ids: Tensor, stop_ids: list[int]) -> tuple[Tensor, Tensor]:
    """Mask tokens after the first stop token; a row without one was cut off (truncated)."""
    is_stop = torch.isin(completion_ids, torch.tensor(stop_ids, device=completion_ids.device))
    seen_before = (is_stop.cumsum(1) - is_stop.long()) > 0  # a stop token appeared strictly earlier
    return (~seen_before).long(), ~is_stop.any(1)


def decode(tokenizer, token_ids: list[int], stop_ids: list[int]) -> str:
    """A completion's text up to its first stop token, special tokens dropped (every backend)."""
    cut = next((i + 1 for i, t in enumerate(token_ids) if t in stop_ids), len(token_ids))
    return tokenizer.decode(token_ids[:cut], skip_special_tokens=True)


class RowReporter(StoppingCriteria):
    """Hands each row to `on_completion` at the decoding step where it emits its first stop token,
    so its sketch renders while the rest of the batch decodes. It stops nothing itself."""

    def __init__(self, decode: Callable[[Tensor], str], first_row: int, prompt_width: int, stop_ids: list[int],
                 on_completion: OnCompletion) -> None:
        self.decode, self.first_row, self.prompt_width, self.on_completion = decode, first_row, prompt_width, on_completion
        self.stop_ids = torch.tensor(stop_ids)
        self.reported: set[int] = set()

    def __call__(self, input_ids: Tensor, scores, **kwargs) -> Tensor:
        # a finished row is padded from then on; where pad is a stop token too, `reported` skips it
        ended = torch.isin(input_ids[:, -1], self.stop_ids.to(input_ids.device))
        for i in ended.nonzero().flatten().tolist():
            if i not in self.reported:
                self.reported.add(i)
                self.on_completion(self.first_row + i, self.decode(input_ids[i, self.prompt_width :]))
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class HFSampler:
    """transformers `generate` on the training model: batched, KV-cached, adapter applied."""

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig) -> None:
        self.model, self.tokenizer, self.config = model, tokenizer, config
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.decode_path = "not run"  # how the last `sample` decoded: generate, lean, cuda-graph or eager

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model  # generation runs on the live model: nothing to copy

    def close(self) -> None:
        pass  # nothing of its own to free

    def decode(self, ids: Tensor) -> str:
        return decode(self.tokenizer, ids.tolist(), self.stop_ids)

    @torch.no_grad()
    def sample(self, prompts: list[str], n: int, on_completion: OnCompletion | None = None) -> SampleBatch:
        start, c = time.perf_counter(), self.config
        rows = [p for p in prompts for _ in range(n)]
        enc = self.tokenizer(rows, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        device = next(self.model.parameters()).device
        prompt_ids, prompt_mask = enc.input_ids.to(device), enc.attention_mask.to(device)
        was_training = self.model.training
        self.model.eval()  # gradient checkpointing is off in eval, so the KV cache is used
        chunks, lean_logps = [], []
        report = on_completion or (lambda row, text: None)
        lean = LeanDecoder(self.model) if c.lean_decode and supports(self.model) else None
        if lean is None and c.graph_decode and device.type == "cuda" and graph_decoding.supports(self.model):
            lean = graph_decoding.GraphDecoder(self.model)
        merged = adapter_merged(self.model) if c.merge_adapter and lean is None else nullcontext()
        with merged:
            for lo in range(0, len(rows), c.generation_batch_size):
                hi = min(lo + c.generation_batch_size, len(rows))
                reporter = RowReporter(self.decode, lo, prompt_ids.shape[1], self.stop_ids, report)
                if lean is not None:
                    ids, lps = lean.generate(
                        prompt_ids[lo:hi], prompt_mask[lo:hi], c.max_completion_length,
                        lambda logits: sample_logits(logits, c.temperature, c.top_k, c.top_p),
                        self.stop_ids, self.tokenizer.pad_token_id, on_step=lambda ids: reporter(ids, None),
                        temperature=c.temperature,
                    )
                    lean_logps.append(lps)
                else:
                    ids = self.model.generate(
                        input_ids=prompt_ids[lo:hi],
                        attention_mask=prompt_mask[lo:hi],
                        do_sample=True,
                        temperature=c.temperature,
                        top_p=c.top_p,
                        top_k=c.top_k,
                        max_new_tokens=c.max_completion_length,
                        eos_token_id=self.stop_ids,
                        pad_token_id=self.tokenizer.pad_token_id,
                        use_cache=True,
                        stopping_criteria=StoppingCriteriaList([reporter]),
                    )[:, prompt_ids.shape[1] :]
                texts = [self.decode(row) for row in ids]
                for i in sorted(set(range(hi - lo)) - reporter.reported):  # cut off at max_completion_length
                    report(lo + i, texts[i])
                chunks.append((ids, texts))
            self.decode_path = "generate" if lean is None else getattr(lean, "path", "lean")
            width = max(ids.shape[1] for ids, _ in chunks)
            pad = self.tokenizer.pad_token_id
            completion_ids = torch.cat([torch.nn.functional.pad(ids, (0, width - ids.shape[1]), value=pad) for ids, _ in chunks])
            completion_mask, truncated = completion_mask_and_truncation(completion_ids, self.stop_ids)
            if lean is not None:  # read off while decoding: no second forward over the batch
                logps = torch.cat([torch.nn.functional.pad(lps, (0, width - lps.shape[1])) for lps in lean_logps])
            else:
                logps = completion_logps(
                    self.model, prompt_ids, prompt_mask, completion_ids, completion_mask, c.temperature, c.logprob_batch_size
                )[0]
        self.model.train(was_training)
        return SampleBatch(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=completion_mask,
            texts=[t for _, texts in chunks for t in texts],
            truncated=truncated,
            logps=logps * completion_mask,
            groups=[i for i in range(len(prompts)) for _ in range(n)],
            seconds=time.perf_counter() - start,
        )


def build_sampler(backend: str, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config=None) -> Sampler:
    if backend == "hf":
        return HFSampler(model, tokenizer, config)
    if backend in ("vllm", "vllm-server"):
        from lit_watercolour.sampling_vllm import build_vllm_sampler  # sampling_vllm imports this module

        return build_vllm_sampler(backend, model, tokenizer, config, vllm_config)
    raise ValueError(f"unknown sampler backend {backend!r}; available: hf, vllm, vllm-server")
