"""Samplers: turn chat prompts into completions, reporting each row the moment it ends.

A `Sampler` hides the generation backend: `hf` (`hf.py`) decodes on the training model itself;
`vllm` (`vllm.py`, a colocated engine) and `vllm-server` (`vllm_server.py`, a `vllm serve` over
HTTP) keep their own copy of the weights, refreshed by `sync_weights` after every optimizer step
(`vllm_weights.py`: what an engine is given of the policy; `vllm_worker.py`: what its worker does with it).
What they share is in `base.py`. The vLLM modules are imported by `build_sampler` only, so
importing this package never imports vLLM.
"""

from lit_watercolour.sampling.base import (
    OnCompletion,
    SampleBatch,
    Sampler,
    SamplingConfig,
    VLLMConfig,
    completion_mask_and_truncation,
)
from lit_watercolour.sampling.hf import FinishedRowHook, HFSampler

__all__ = ["FinishedRowHook", "HFSampler", "OnCompletion", "SampleBatch", "Sampler", "SamplingConfig", "VLLMConfig",
           "build_sampler", "completion_mask_and_truncation"]


def build_sampler(config: SamplingConfig, model, tokenizer, backend: str = "hf", vllm_config: VLLMConfig | None = None,
                  need_logps: bool = False, processor=None, threads: int = 0) -> Sampler:
    """The `backend` sampler of `model`. `need_logps`: every batch carries the policy's log-probs even where
    they cost a forward (a loss that reuses the batch, num_iterations > 1, needs them). `processor`: the policy's,
    where it is shown images (the vllm engine runs its own from the processor's settings). `threads`: torch's
    intra-op threads while the hf sampler decodes (0: the process's)."""
    if backend == "hf":
        return HFSampler(model, tokenizer, config, need_logps, threads)
    if backend == "vllm":
        from lit_watercolour.sampling.vllm import VLLMSampler

        return VLLMSampler(model, tokenizer, config, vllm_config or VLLMConfig(), need_logps, processor)
    if backend == "vllm-server":
        from lit_watercolour.sampling.vllm_server import VLLMServerSampler

        return VLLMServerSampler(model, tokenizer, config, vllm_config or VLLMConfig(), need_logps)
    raise ValueError(f"unknown sampler backend {backend!r}; available: hf, vllm, vllm-server")
