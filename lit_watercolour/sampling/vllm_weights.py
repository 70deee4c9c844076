"""What a vLLM engine is given of the trainer's policy: the adapter snapshots both vLLM samplers serve, the folder an
engine with placeholder weights starts from, and the weights themselves, named as the checkpoint names them, for
the engine's worker (`vllm_worker.TrainerWeights`) to read.

Adapter sync: after every optimizer step the peft adapter is saved to a fresh folder and vLLM is told to use it under
a new name and integer id (vLLM caches adapters by id, so reusing one would keep serving the old weights). Weight
sync: the base weights (or with `weight_sync="merged"` the weights with the adapter folded in) go to the worker as
CUDA IPC handles to the trainer's own tensors on a GPU (copied GPU to GPU), by value elsewhere.
"""

from __future__ import annotations

import hashlib
import pickle
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from lit_watercolour.adapter_merge import merged_weights

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

    def __init__(self, root: str | None = None, keep: int = 2) -> None:
        self._tmp = None if root is not None else tempfile.TemporaryDirectory(prefix="lit-watercolour-adapters-")
        self.root = Path(root if root is not None else self._tmp.name)
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep = max(1, keep)
        self.saved: list[AdapterSnapshot] = []

    def save(self, model: torch.nn.Module) -> AdapterSnapshot:
        """The adapter, as a peft folder."""
        int_id = self.saved[-1].int_id + 1 if self.saved else 1
        name = f"policy-{int_id}"
        path = self.root / name
        model.save_pretrained(path)  # a PeftModel writes only the adapter
        snap = AdapterSnapshot(name=name, int_id=int_id, path=str(path.resolve()))
        self.saved.append(snap)
        # the previous one may still be read by a request in flight on the server
        for old in self.saved[: -self.keep]:
            shutil.rmtree(old.path, ignore_errors=True)
        self.saved = self.saved[-self.keep :]
        return snap


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def base_model_path(model: torch.nn.Module) -> str:
    """The folder or Hub id the policy's base weights came from, for an engine that reads them itself."""
    base = base_model(model)
    path = getattr(base, "name_or_path", "") or getattr(base.config, "_name_or_path", "")
    if not path:
        raise ValueError(
            "the vllm backend with load_from_trainer=False loads the base model from disk, and this policy was "
            "built in memory: point policy.model at a transformers folder (tiny_models.save_tiny_policy writes one)"
        )
    return path


def save_engine_folder(model: torch.nn.Module, tokenizer, path: Path, processor=None) -> str:
    """The policy's config, generation config and tokenizer (and its processor's image settings, where it is
    shown images), without weights: what an engine with placeholder weights reads."""
    base = base_model(model)
    config = base.config.to_dict()  # a model built from a config has no `architectures`: vLLM picks its class by it
    type(base.config).from_dict({**config, "architectures": [type(base).__name__]}).save_pretrained(path)
    if base.generation_config is not None:
        base.generation_config.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if processor is not None:
        processor.image_processor.save_pretrained(path)
    return str(path)


def engine_folder(model: torch.nn.Module, tokenizer, root: str, processor=None) -> str:
    """`save_engine_folder` under `root`, named by what it holds: the same policy gets the same folder every run, so
    vLLM's compile cache, whose key holds the model's path, serves the next start. Saved aside and renamed into
    place, so runs starting together each read a whole folder; a folder already there holds the same bytes."""
    root_path = Path(root).expanduser()
    root_path.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root_path))
    save_engine_folder(model, tokenizer, staging, processor)
    digest = hashlib.sha256()
    for file in sorted(f for f in staging.rglob("*") if f.is_file()):
        digest.update(file.relative_to(staging).as_posix().encode() + b"\0" + file.read_bytes())
    folder = root_path / digest.hexdigest()[:20]
    try:
        staging.rename(folder)
    except OSError:  # another run put it there first
        shutil.rmtree(staging)
    return str(folder)


def base_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The base model's weights under its own names, the adapter left out."""
    for name, param in model.named_parameters():
        if "lora_" not in name and "modules_to_save" not in name:
            yield name.removeprefix("base_model.model.").replace(".base_layer", "").replace(".original_module", ""), param.detach()


def checkpoint_weights(model: torch.nn.Module, merged: bool, skip_vision: bool) -> Iterator[tuple[str, torch.Tensor]]:
    """The policy's weights as its checkpoint names them (what vLLM's loader reads): the base's, or with
    `merged` the adapter folded in. transformers' fused MoE experts come back as the checkpoint's
    per-expert tensors, views of the fused ones."""
    from transformers.core_model_loading import revert_weight_conversion

    base = base_model(model)
    for name, tensor in merged_weights(model) if merged else base_weights(model):
        if skip_vision and "visual" in name.split("."):
            continue
        yield from revert_weight_conversion(base, {name: tensor}).items()


def weight_payload(weights: list[tuple[str, torch.Tensor]]) -> bytes:
    """`TrainerWeights.load_trainer_weights`'s argument: CUDA tensors as IPC handles (the worker reads them in
    place, GPU to GPU), others by value."""
    from torch.multiprocessing.reductions import reduce_tensor

    return pickle.dumps([(name, reduce_tensor(t) if t.is_cuda else t.contiguous()) for name, t in weights])
