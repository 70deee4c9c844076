"""The `vllm-server` sampler: generation on an existing `vllm serve` (OpenAI-compatible, over HTTP).

Like the colocated `vllm` sampler: the adapter saved after each step is loaded under a new name
(`AdapterSnapshots`), each row seeded from torch's RNG, each completion reported as it arrives.
Start the server with `--logprobs-mode processed_logprobs`, so `sampler_logps` is the
distribution it drew from (see `lit_watercolour.sampling.base`).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import httpx
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


def parse_choice(choice: dict) -> Completion:
    """Token ids and log-probs of one /v1/completions choice sent with return_tokens_as_token_ids."""
    lp = choice["logprobs"]
    ids = [int(t.removeprefix("token_id:")) for t in lp["tokens"]]
    return Completion(ids, [float(x) for x in lp["token_logprobs"]])


class VLLMServerSampler(EngineSampler):
    """Generation on an existing `vllm serve` (other GPUs), adapter synced through a shared path.

    Start the server with LoRA and runtime adapter updates on, e.g.
    `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve <base> --enable-lora --max-lora-rank 64
    --logprobs-mode processed_logprobs`, and set `adapter_dir` to a folder it can read.
    One request per prompt (or per row, `split_generations`), all in flight at once.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig,
                 need_logps: bool = False) -> None:
        super().__init__(model, tokenizer, config, vllm_config, need_logps)
        api_key = os.environ.get(vllm_config.api_key_env) if vllm_config.api_key_env else None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(
            base_url=vllm_config.base_url.rstrip("/"), headers=headers, timeout=vllm_config.request_timeout_s,
            limits=httpx.Limits(max_connections=vllm_config.max_concurrent_requests),
        )
        self.sync_weights(model)

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model
        snap = self.snapshots.save(model)
        self._post("/load_lora_adapter", snap.load_body())
        if self.adapter is not None:  # free the server's adapter slot
            self._post("/unload_lora_adapter", {"lora_name": self.adapter.name})
        self.adapter = snap

    def _post(self, path: str, body: dict) -> httpx.Response:
        response = self.client.post(path, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"vllm-server {path} answered {response.status_code}: {response.text[:500]}")
        return response

    def request_body(self, prompt_ids: list[int], n: int, seed: int) -> dict:
        c = self.config
        return {
            "model": self.adapter.name,
            "prompt": prompt_ids,
            "n": n,
            "max_tokens": c.max_completion_length,
            "temperature": c.temperature,
            "top_p": c.top_p,
            "top_k": c.top_k if c.top_k > 0 else -1,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "stop_token_ids": self.stop_ids,
            "skip_special_tokens": False,
            "seed": seed,  # vLLM gives the request's k-th completion seed + k
        }

    def _complete(self, body: dict) -> list[Completion]:
        choices = sorted(self._post("/completions", body).json()["choices"], key=lambda ch: ch["index"])
        return [parse_choice(ch) for ch in choices]

    def sample(self, prompts: list[PromptInput], n: int, on_completion: OnCompletion | None = None) -> SampleBatch:
        start = time.perf_counter()
        ids = prompt_token_ids(self.tokenizer, prompts)
        per_request = 1 if self.vllm_config.split_generations else n
        # (first row, body): prompt i's rows are i*n .. i*n+n-1
        firsts = [(i, j) for i in range(len(prompts)) for j in range(0, n, per_request)]
        requests = [(i * n + j, self.request_body(ids[i], per_request, seed)) for (i, j), seed in zip(firsts, row_seeds(len(firsts)))]
        done: dict[int, Completion] = {}
        with ThreadPoolExecutor(max_workers=min(len(requests), self.vllm_config.max_concurrent_requests)) as pool:
            futures = {pool.submit(self._complete, body): first for first, body in requests}
            for future in as_completed(futures):  # this thread reports, in the order they finish
                for k, c in enumerate(future.result()):
                    row = futures[future] + k
                    done[row] = c
                    if on_completion is not None:
                        on_completion(row, decode(self.tokenizer, c.token_ids, self.stop_ids))
        return self.batch(ids, n, done, start)

    def close(self) -> None:
        self.client.close()
