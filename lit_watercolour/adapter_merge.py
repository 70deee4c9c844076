"""The LoRA adapter folded into the base weights without writing them: for decoding, which then skips the
adapter's matmuls (`adapter_merged`, the lean decoder's copies), and for engines that take whole weights (vLLM's
merged-weight sync, `merged_weights`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from peft import PeftModel


def merged_weight(layer: torch.nn.Module) -> torch.Tensor:
    """The weight a linear layer (LoRA-wrapped or not) applies now, its active adapters folded in.

    The one place the adapter is merged: lean decoding, `adapter_merged` and vLLM's merged-weight sync
    all read it. A folded weight is a new tensor (the sum in float32, rounded once to the base dtype);
    the base weight, which is also the KL reference, is never written. peft's merge/unmerge adds and
    subtracts in place in the base dtype, which drifts a bf16 base a little every step.
    """
    from peft.tuners.lora import LoraLayer

    if not isinstance(layer, LoraLayer):
        return layer.weight
    weight = layer.get_base_layer().weight
    names = [a for a in layer.active_adapters if a in layer.lora_A]
    if layer.merged or layer.disable_adapters or not names:
        return weight
    if not weight.is_floating_point():
        raise ValueError("folding the adapter into the weights needs unquantised base weights: set "
                         "sampling.merge_adapter false, or use weight_sync: lora")
    with torch.no_grad():
        return (weight.float() + sum(layer.get_delta_weight(a).float() for a in names)).to(weight.dtype)


def merged_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The base model's weights under the base model's names, with the adapter folded in (`merged_weight`),
    one at a time: for engines that take whole weights (vLLM) instead of an adapter."""
    from peft.tuners.lora import LoraLayer

    adapted = {id(m.get_base_layer().weight): m for m in model.modules() if isinstance(m, LoraLayer)}
    for name, param in model.named_parameters():
        if "lora_" in name or "modules_to_save" in name:
            continue
        name = name.removeprefix("base_model.model.").replace(".base_layer", "").replace(".original_module", "")
        yield name, merged_weight(adapted[id(param)]) if id(param) in adapted else param.detach()


@contextmanager
def adapter_merged(model: PeftModel) -> Iterator[None]:
    """The LoRA adapter folded into the base weights for the duration: decoding then skips the
    adapter's extra matmuls (`sampling.merge_adapter`; docs/results.md, 2026-12-03). Each adapted layer's
    weight is swapped for its `merged_weight` and its adapter switched off; the original weight
    tensors, never written, are put back afterwards, so the base stays bit-identical. A model without an
    adapter is left as it is."""
    from peft.tuners.lora import LoraLayer

    if not isinstance(model, PeftModel):
        yield
        return
    swaps = []
    for m in model.modules():
        if isinstance(m, LoraLayer) and (merged := merged_weight(m)) is not m.get_base_layer().weight:
            swaps.append((m.get_base_layer(), m.get_base_layer().weight, torch.nn.Parameter(merged, requires_grad=False)))
    for base, _, merged in swaps:
        base.weight = merged
    try:
        with model.disable_adapter():
            yield
    finally:
        for base, original, _ in swaps:
            base.weight = original
