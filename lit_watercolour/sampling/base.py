"""What every sampler shares: its configs, the `SampleBatch` it returns, the `Sampler` protocol, and the
helpers that turn token ids into a batch (stop tokens, masks, decoded text, the policy's log-probs).

Log-probs, one definition: `SampleBatch.logps` is, for every backend, the trainer's
log_softmax(logits / temperature) over the whole vocabulary (`policy.completion_logps`, the
quantity the loss differentiates), so an importance ratio (`num_iterations > 1`) compares like
with like. Lean and graph decoding read it off the logits they sample from, for free; other
backends (transformers `generate`, vLLM) run one no-grad forward of the policy over the sampled
batch for it, only when the sampler is built with `need_logps` (else `logps` is None).
What a sampling engine reported itself (vLLM, with `logprobs_mode="processed_logprobs"`: the
distribution it drew from, after temperature, top-k and top-p, renormalised over the kept tokens)
is `SampleBatch.sampler_logps`; the two differ by the log of the kept probability mass (up to
-ln(top_p)), logged as `sampling/logp_diff_mean`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import torch
from torch import Tensor

from lit_watercolour.bounds import require
from lit_watercolour.policy import completion_logps
from lit_watercolour.vision import RowImage


@dataclass
class SamplingConfig:
    temperature: float = 1.0
    """Sampling temperature; the loss's log-probs use the same."""
    top_p: float = 1.0
    """Nucleus sampling: keep the likeliest tokens up to this mass; 1.0: off."""
    top_k: int = 0
    """Keep the k likeliest tokens; 0: off."""
    max_completion_length: int = 256
    """Most tokens a completion may have; longer ones are cut (truncated)."""
    generation_batch_size: int = 8
    """Rows per generate call; each row starts rendering as it finishes."""
    logprob_batch_size: int = 8
    """Rows per forward when scoring the sampled tokens."""
    merge_adapter: bool = False
    """generate and the captured step (graph_decode) decode with the adapter folded into copies of the adapted
    weights (`adapter_merge.adapter_merged`; the base is never written): no adapter matmuls or float32 casts a token, a
    copy of the adapted weights held while sampling. Lean decoding always folds it."""
    lean_decode: bool = True
    """Dense Qwen3: decode with the flat KV-cached loop (lit_watercolour/decoding.py: per-token overhead, not FLOPs,
    bounds a small model) instead of generate."""
    graph_decode: bool = True
    """Qwen3.5-MoE on CUDA: decode by replaying one captured CUDA-graph step (lit_watercolour/graph_decoding.py)."""

    def __post_init__(self) -> None:
        o = "model.sampling."
        require(self.temperature > 0, o + "temperature", "> 0", self.temperature)
        require(0 < self.top_p <= 1, o + "top_p", "in (0, 1] (1: off)", self.top_p)
        require(self.top_k >= 0, o + "top_k", ">= 0 (0: off)", self.top_k)
        require(self.max_completion_length >= 1, o + "max_completion_length", ">= 1", self.max_completion_length)
        require(self.generation_batch_size >= 1, o + "generation_batch_size", ">= 1", self.generation_batch_size)
        require(self.logprob_batch_size >= 1, o + "logprob_batch_size", ">= 1", self.logprob_batch_size)


@dataclass
class VLLMConfig:
    """The `vllm` (colocated engine) and `vllm-server` samplers' settings."""

    gpu_memory_utilization: float = 0.3
    """vllm: share of the GPU's memory the engine may hold (weights + KV cache); at start-up at least this much must be
    free beside the trainer. On a CPU, of host RAM, unless engine_kwargs sets kv_cache_memory_bytes."""
    max_model_len: int | None = None
    """vllm: the engine's context length; None: the model config's."""
    enable_sleep_mode: bool | None = None
    """vllm: the engine sleeps while the trainer updates (its GPU memory given back) and wakes to sample; None: where
    the platform can (GPUs)."""
    sleep_level: int = 1
    """vllm: 1: weights to host memory and back, KV cache dropped; 2: weights dropped too, and copied again from the
    trainer's policy on waking (GPU to GPU)."""
    weight_sync: Literal["lora", "merged"] = "lora"
    """vllm: serve the trainer's LoRA adapter (saved each step), or push the weights with the adapter merged in."""
    max_lora_rank: int = 64
    """vllm: the largest adapter rank the engine serves: at least PolicyConfig.lora_r."""
    enable_prefix_caching: bool = True
    """vllm: the n completions of a prompt share its KV cache."""
    load_from_trainer: bool = True
    """vllm: the engine starts with placeholder weights (load_format dummy: nothing read from disk) and takes every
    weight from the trainer's policy, so the two are one policy (random-init stand-ins included); False: the
    engine reads the checkpoint itself."""
    language_model_only: bool = True
    """vllm: a vision-language checkpoint (Qwen3.5) runs its language model alone, with no vision tower, image
    processor or image slots: the policy is prompted with text only."""
    gdn_prefill_backend: Literal["flashinfer", "triton", "cutedsl"] | None = None
    """vllm: Gated DeltaNet (Qwen3.5, Qwen3-Next) prefill kernel; None: FlashInfer's where flashinfer.gdn_prefill is
    installed, else Triton's (vLLM's own default on Hopper is FlashInfer, which dies where it is missing)."""
    engine_kwargs: dict | None = None
    """vllm: further `vllm.LLM` arguments, which win over the ones above, e.g. {enforce_eager: true,
    kv_cache_memory_bytes: 268435456}."""
    engine_folders: str = "~/.cache/lit_watercolour/vllm_engines"
    """vllm: where the engine's folder (the policy's config and tokenizer, no weights) is kept between runs, named by
    its contents: one path per policy, so vLLM's compile cache serves later starts."""
    adapter_dir: str | None = None
    """Both: adapters are saved here each sync (the server must read it); None: a temporary folder."""
    keep_adapters: int = 2
    """Both: newest adapter snapshots kept on disk."""
    base_url: str = "http://127.0.0.1:8000/v1"
    """vllm-server: the server's OpenAI-compatible URL."""
    api_key_env: str | None = None
    """vllm-server: name of the environment variable holding the server's key (never the key: configs are logged)."""
    request_timeout_s: float = 3600.0
    """vllm-server: seconds one request may take."""
    max_concurrent_requests: int = 32
    """vllm-server: requests in flight at once."""
    split_generations: bool = False
    """vllm-server: n requests of n=1 per prompt, so each completion returns as it ends."""

    def __post_init__(self) -> None:
        o = "model.vllm."
        require(0 < self.gpu_memory_utilization <= 1, o + "gpu_memory_utilization", "in (0, 1]",
                self.gpu_memory_utilization)
        require(self.max_model_len is None or self.max_model_len >= 1, o + "max_model_len", "None or >= 1",
                self.max_model_len)
        require(self.sleep_level in (1, 2), o + "sleep_level", "1 or 2", self.sleep_level)
        require(self.max_lora_rank >= 1, o + "max_lora_rank", ">= 1", self.max_lora_rank)
        require(self.keep_adapters >= 1, o + "keep_adapters", ">= 1", self.keep_adapters)
        require(self.request_timeout_s > 0, o + "request_timeout_s", "> 0", self.request_timeout_s)
        require(self.max_concurrent_requests >= 1, o + "max_concurrent_requests", ">= 1", self.max_concurrent_requests)


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
    # whole vocabulary as the loss computes it (0 where masked): the importance ratio's one definition.
    # None where it would cost a forward and the sampler was not built with `need_logps`
    logps: Tensor | None
    groups: list[int]  # the prompt index of each row
    seconds: float = 0.0  # generation wall clock, log-prob scoring included
    # what a sampling engine (vLLM) reported for the distribution it drew from (after top-k/top-p);
    # None where the backend has no engine of its own (hf)
    sampler_logps: Tensor | None = None
    # [N, C] 1 on the tokens the policy sampled, where the completion holds others too (a two-turn trajectory's
    # feedback, `lit_watercolour.turns`); None: every completion token is the policy's
    sampled_mask: Tensor | None = None
    # each row's image (None: a row of text) where a vision-language policy was shown one (a render fed back);
    # every forward over these rows takes them (`policy.image_inputs`). None: no row has one
    images: list[RowImage | None] | None = None

    @property
    def policy_mask(self) -> Tensor:
        """[N, C] the tokens the policy sampled: the ones the loss counts."""
        return self.completion_mask if self.sampled_mask is None else self.sampled_mask

    @property
    def num_tokens(self) -> Tensor:
        return self.policy_mask.sum(1)


@dataclass
class ImagePrompt:
    """A prompt with an image in it (a render fed back to a vision-language policy): its token ids, the image's
    placeholder already expanded to its tokens by the policy's processor."""

    ids: list[int]
    image: object  # the PIL image, for an engine that runs the processor itself (vLLM)
    inputs: RowImage  # what the policy's processor made of it


# chat-templated text, token ids (a conversation's next turn: never re-tokenised), or token ids with an image
PromptInput = str | list[int] | ImagePrompt
OnCompletion = Callable[[int, str], None]  # (row, decoded text), called as soon as a row is decoded


class Sampler(Protocol):
    """Samples completions of chat prompts; `sync_weights` after every optimizer step. Its draws come from
    `generator` (on the policy's device; None: torch's global one), so a caller that seeds one gets the same rows
    for the same seed and leaves the process's random state alone (`RolloutPipeline`)."""

    def sample(self, prompts: list[PromptInput], n: int, on_completion: OnCompletion | None = None,
               generator: torch.Generator | None = None) -> SampleBatch: ...

    def sync_weights(self, model: torch.nn.Module) -> None: ...

    def close(self) -> None: ...


def stop_token_ids(model, tokenizer) -> list[int]:
    """End-of-turn ids: the tokenizer's eos plus any the generation config lists (Qwen has two)."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    return sorted({tokenizer.eos_token_id, *ids})


def slot_token_ids(model) -> list[int]:
    """A vision-language policy's image and video slot tokens, which no sampler lets it write: in the next turn's
    prompt the model would take one it wrote for a place to put an image (Qwen finds its images by these ids).
    An id past the vocabulary (a stand-in built with a smaller one keeps the config's defaults) is none it can write."""
    config = model.config
    if not hasattr(config, "vision_config"):
        return []
    vocab = config.get_text_config().vocab_size
    names = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    return sorted({i for i in (getattr(config, n, None) for n in names) if isinstance(i, int) and 0 <= i < vocab})


def completion_mask_and_truncation(completion_ids: Tensor, stop_ids: list[int]) -> tuple[Tensor, Tensor]:
    """Mask tokens after the first stop token; a row without one was cut off (truncated)."""
    is_stop = torch.isin(completion_ids, torch.tensor(stop_ids, device=completion_ids.device))
    seen_before = (is_stop.cumsum(1) - is_stop.long()) > 0  # a stop token appeared strictly earlier
    return (~seen_before).long(), ~is_stop.any(1)


def decode(tokenizer, token_ids: list[int], stop_ids: list[int]) -> str:
    """A completion's text up to its first stop token, special tokens dropped (every backend)."""
    cut = next((i + 1 for i, t in enumerate(token_ids) if t in stop_ids), len(token_ids))
    return tokenizer.decode(token_ids[:cut], skip_special_tokens=True)


@dataclass
class Completion:
    token_ids: list[int]
    logps: list[float]  # of each sampled token, under the distribution it was sampled from


def pack_batch(
    prompt_ids: list[list[int]],
    n: int,
    completions: list[Completion],
    tokenizer,
    stop_ids: list[int],
    device: torch.device | str = "cpu",
    seconds: float = 0.0,
) -> SampleBatch:
    """Rows i*n .. i*n+n-1 are prompt i's: left-padded prompts, right-padded completions, masks as hf's,
    the engine's log-probs as `sampler_logps`."""
    pad = tokenizer.pad_token_id
    rows = [ids for ids in prompt_ids for _ in range(n)]
    p_width = max(len(ids) for ids in rows)
    c_width = max(1, max(len(c.token_ids) for c in completions))
    prompt = torch.full((len(rows), p_width), pad, dtype=torch.long)
    prompt_mask = torch.zeros_like(prompt)
    completion = torch.full((len(rows), c_width), pad, dtype=torch.long)
    sampler_logps = torch.zeros(len(rows), c_width)
    for r, (ids, c) in enumerate(zip(rows, completions, strict=True)):
        prompt[r, p_width - len(ids) :] = torch.tensor(ids)
        prompt_mask[r, p_width - len(ids) :] = 1
        completion[r, : len(c.token_ids)] = torch.tensor(c.token_ids, dtype=torch.long)
        sampler_logps[r, : len(c.logps)] = torch.tensor(c.logps)
    stop_mask, truncated = completion_mask_and_truncation(completion, stop_ids)
    lengths = torch.tensor([len(c.token_ids) for c in completions])
    mask = stop_mask * (torch.arange(c_width) < lengths[:, None])  # right padding out too
    return SampleBatch(
        prompt_ids=prompt.to(device),
        prompt_mask=prompt_mask.to(device),
        completion_ids=completion.to(device),
        completion_mask=mask.to(device),
        texts=[decode(tokenizer, c.token_ids, stop_ids) for c in completions],
        truncated=truncated.to(device),
        logps=None,
        groups=[i for i in range(len(prompt_ids)) for _ in range(n)],
        seconds=seconds,
        sampler_logps=(sampler_logps * mask).to(device),
    )


@torch.no_grad()
def with_policy_logps(model: torch.nn.Module, batch: SampleBatch, config: SamplingConfig) -> SampleBatch:
    """The batch with `logps` from one no-grad forward of the policy (the one definition the loss uses)."""
    was_training = model.training
    model.eval()
    try:
        logps = completion_logps(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                                 batch.completion_mask, config.temperature, config.logprob_batch_size,
                                 images=batch.images)[0]
    finally:
        model.train(was_training)
    return replace(batch, logps=logps * batch.completion_mask)


def row_seeds(rows: int, generator: torch.Generator | None = None) -> list[int]:
    """One vLLM seed per row, drawn from `generator` (None: torch's global one; vLLM's own default is the same
    seed every call)."""
    device = generator.device if generator is not None else None
    return torch.randint(0, 2**31 - 1, (rows,), generator=generator, device=device).tolist()


def policy_device(model: torch.nn.Module) -> torch.device:
    """Where the trainer uses the batch; read at sample time, as Lightning moves the model after setup."""
    return next(model.parameters()).device


def prompt_token_ids(tokenizer, prompts: list[PromptInput]) -> list[list[int]]:
    """Each prompt's ids: text tokenised (the chat template already has its specials), ids as they are."""
    return [p if isinstance(p, list) else p.ids if isinstance(p, ImagePrompt) else
            tokenizer(p, add_special_tokens=False).input_ids for p in prompts]


def prompt_images(prompts: list[PromptInput], n: int) -> list[RowImage | None] | None:
    """Each of the n x prompts rows' image (`SampleBatch.images`); None where no prompt has one."""
    images = [p.inputs if isinstance(p, ImagePrompt) else None for p in prompts for _ in range(n)]
    return images if any(im is not None for im in images) else None


def completion_metrics(samples: SampleBatch) -> dict[str, float]:
    """The batch's completion lengths (the policy's tokens) and the share cut off at the length limit."""
    lengths = samples.num_tokens.float()
    return {"completions/mean_length": lengths.mean().item(), "completions/max_length": lengths.max().item(),
            "completions/clipped_ratio": samples.truncated.float().mean().item()}
