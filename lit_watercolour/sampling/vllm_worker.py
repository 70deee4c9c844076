"""What the colocated sampler asks of vLLM's worker process: mixed into it with
`worker_extension_cls="lit_watercolour.sampling.vllm_worker.TrainerWeights"` and called by name
through `LLM.collective_rpc`. Imported only inside the engine's worker.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager

import torch


class TrainerWeights:
    """Methods vLLM's worker gains (`self` is the worker: `self.model_runner.model` is the engine's model)."""

    def load_trainer_weights(self, payload: bytes) -> None:
        """Load the trainer's weights, checkpoint-named: (name, tensor) pairs, or on a GPU (name, (rebuild, args))
        CUDA IPC handles to the trainer's own tensors, read in place. vLLM's in-place reload loads each layer
        and redoes what it does after loading (kernel layouts), as for a checkpoint."""
        pairs = pickle.loads(payload)
        weights = ((name, t if isinstance(t, torch.Tensor) else t[0](*t[1])) for name, t in pairs)
        with lora_layers_unwrapped(self.model_runner.model):
            self.model_runner.reload_weights(weights_iterator=weights)
        retie_lm_heads(self.model_runner.model)
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the trainer may free or change its tensors once this returns

    def lora_modules_not_served(self, lora_path: str) -> list[str]:
        """The adapter's modules (vLLM's names) that the engine has no LoRA layer for: vLLM would load the
        adapter and silently leave them out."""
        from vllm.lora.request import LoRARequest

        manager = self.model_runner.lora_manager
        lora = manager._load_adapter(LoRARequest("target-check", 2**31 - 1, lora_path))
        layers = manager._adapter_manager
        served = set()
        for name in layers.modules:
            prefix, _, last = name.rpartition(".")
            served.add(name)
            served.update(f"{prefix}.{part}" for part in layers.packed_modules_mapping.get(last, []))
        return sorted(set(lora.loras) - served)


@contextmanager
def lora_layers_unwrapped(model: torch.nn.Module):
    """Each LoRA layer replaced by the layer it wraps while weights load: a loader looks parameters up by their
    checkpoint names (`conv1d.weight`), which LoRA's wrappers hide under `base_layer.`; the wrapped layer holds the
    very tensors the wrapper computes with, so loading into it loads into the engine."""
    from vllm.lora.layers import BaseLayerWithLoRA

    wrapped = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if isinstance(child, BaseLayerWithLoRA) and isinstance(getattr(child, "base_layer", None), torch.nn.Module)]
    for parent, name, child in wrapped:
        setattr(parent, name, child.base_layer)
    try:
        yield
    finally:
        for parent, name, child in wrapped:
            setattr(parent, name, child)


def retie_lm_heads(model: torch.nn.Module) -> None:
    """An LM head tied to the input embeddings loads nothing of its own, so vLLM's reload leaves whatever its
    kernel made of the old weights (the CPU backend packs them): it is made again from the new ones."""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    embeddings = {id(m.weight) for m in model.modules() if type(m) is VocabParallelEmbedding}
    for m in model.modules():
        if isinstance(m, ParallelLMHead) and id(m.weight) in embeddings:
            m.quant_method.process_weights_after_loading(m)
