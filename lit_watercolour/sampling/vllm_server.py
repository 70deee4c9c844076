"""The `vllm-server` sampler: generation on an existing `vllm serve` (OpenAI-compatible, over HTTP).

Like the colocated `vllm` sampler: the adapter saved after each step is loaded under a new name
(`AdapterSnapshots`), each row seeded from the caller's generator, each completion reported as it arrives.
Start the server with `--logprobs-mode processed_logprobs`, so `sampler_logps` is the
distribution it drew from (see `lit_watercolour.sampling.base`).
"""

from __future__ import annotations

import asyncio
import os
import time

import openai
import torch

from lit_watercolour.sampling.base import (
    Completion,
    OnCompletion,
    PromptInput,
    SampleBatch,
    SamplingConfig,
    VLLMConfig,
    decode,
    prompt_token_ids,
    row_seeds,
)
from lit_watercolour.sampling.vllm import EngineSampler


def parse_choice(choice) -> Completion:
    """Token ids and log-probs of one /v1/completions choice sent with return_tokens_as_token_ids."""
    ids = [int(t.removeprefix("token_id:")) for t in choice.logprobs.tokens]
    return Completion(ids, [float(x) for x in choice.logprobs.token_logprobs])


class VLLMServerSampler(EngineSampler):
    """Generation on an existing `vllm serve` (other GPUs), adapter synced through a shared path.

    Start the server with LoRA and runtime adapter updates on, e.g.
    `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve <base> --enable-lora --max-lora-rank 64
    --logprobs-mode processed_logprobs`, and set `adapter_dir` to a folder it can read.
    One request per prompt (or per row, `split_generations`), all in flight at once on the caller's event
    loop (`asample`: the rollout pipeline's), through the `openai` SDK's async client.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig,
                 need_logps: bool = False) -> None:
        super().__init__(model, tokenizer, config, vllm_config, need_logps)
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop the requests run on (the rollout pipeline sets its own); None: a fresh one per call."""
        self.sync_weights(model)

    def run(self, coro):
        """`coro` on `loop` (from another thread: the caller's), else on a fresh loop; the result, once done."""
        if self.loop is not None:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        return asyncio.run(coro)

    def client(self) -> openai.AsyncOpenAI:
        """A client for one batch's calls (a client's connections belong to the event loop that opened them)."""
        key = os.environ.get(self.vllm_config.api_key_env) if self.vllm_config.api_key_env else None
        return openai.AsyncOpenAI(base_url=self.vllm_config.base_url, api_key=key or "EMPTY",
                                  timeout=self.vllm_config.request_timeout_s)

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model
        snap = self.snapshots.save(model)
        self.run(self.swap_adapter(snap))
        self.adapter = snap

    async def swap_adapter(self, snap) -> None:
        async with self.client() as client:
            await self._post(client, "/load_lora_adapter", snap.load_body())
            if self.adapter is not None:  # free the server's adapter slot
                await self._post(client, "/unload_lora_adapter", {"lora_name": self.adapter.name})

    @staticmethod
    async def _post(client: openai.AsyncOpenAI, path: str, body: dict) -> str:
        try:
            return await client.post(path, body=body, cast_to=str)
        except openai.APIStatusError as e:
            raise RuntimeError(f"vllm-server {path} answered {e.status_code}: {e.response.text[:500]}") from e

    def request_body(self, prompt_ids: list[int], n: int, seed: int) -> dict:
        """The arguments of one `completions.create`; what the OpenAI API lacks goes in `extra_body`."""
        c = self.config
        return {
            "model": self.adapter.name,
            "prompt": prompt_ids,
            "n": n,
            "max_tokens": c.max_completion_length,
            "temperature": c.temperature,
            "top_p": c.top_p,
            "logprobs": 0,
            "seed": seed,  # vLLM gives the request's k-th completion seed + k
            "extra_body": {"top_k": c.top_k if c.top_k > 0 else -1, "return_tokens_as_token_ids": True,
                           "stop_token_ids": self.stop_ids, "skip_special_tokens": False},
        }

    async def _complete(self, client: openai.AsyncOpenAI, slots: asyncio.Semaphore, body: dict) -> list[Completion]:
        try:
            async with slots:
                reply = await client.completions.create(**body)
        except openai.APIStatusError as e:
            raise RuntimeError(f"vllm-server /completions answered {e.status_code}: {e.response.text[:500]}") from e
        return [parse_choice(ch) for ch in sorted(reply.choices, key=lambda ch: ch.index)]

    async def request(self, ids: list[list[int]], n: int, on_completion: OnCompletion | None,
                      generator: torch.Generator | None = None) -> dict[int, Completion]:
        """Every row's completion by row, each reported (on the loop) as its request returns; the requests'
        seeds drawn from `generator` (`row_seeds`)."""
        per_request = 1 if self.vllm_config.split_generations else n
        # (first row, body): prompt i's rows are i*n .. i*n+n-1
        firsts = [(i, j) for i in range(len(ids)) for j in range(0, n, per_request)]
        requests = [(i * n + j, self.request_body(ids[i], per_request, seed)) for (i, j), seed in zip(firsts, row_seeds(len(firsts), generator))]
        done: dict[int, Completion] = {}
        slots = asyncio.Semaphore(self.vllm_config.max_concurrent_requests)

        async def complete(client: openai.AsyncOpenAI, first: int, body: dict) -> None:
            for k, c in enumerate(await self._complete(client, slots, body)):
                done[first + k] = c
                if on_completion is not None:
                    on_completion(first + k, decode(self.tokenizer, c.token_ids, self.stop_ids))

        async with self.client() as client:
            await asyncio.gather(*(complete(client, first, body) for first, body in requests))
        return done

    def sample(self, prompts: list[PromptInput], n: int, on_completion: OnCompletion | None = None,
               generator: torch.Generator | None = None) -> SampleBatch:
        start = time.perf_counter()
        ids = prompt_token_ids(self.tokenizer, prompts)
        done = self.run(self.request(ids, n, on_completion, generator))
        return self.batch(prompts, ids, n, done, start)  # the policy's log-probs, if asked for, on this thread

    def close(self) -> None:
        """Nothing held between calls: each batch's client closes with its batch."""
