"""The attention kernel tried first: transformers' sdpa attention inside `torch.nn.attention.sdpa_kernel`."""

from __future__ import annotations

from typing import Literal

from transformers import PreTrainedModel

AttentionBackend = Literal["default", "flash", "cudnn", "efficient"]


def use_attention_backend(model: PreTrainedModel, backend: str) -> None:
    """Make `model`'s sdpa attention try `backend`'s kernel first, in forward and in checkpointed recomputation.

    Registered with transformers as an attention implementation "sdpa_<backend>_first": transformers' own sdpa
    function (and its masks) inside `torch.nn.attention.sdpa_kernel`, so the choice holds wherever the
    layer runs, with no context for callers to enter around backward.
    """
    if backend == "default":
        return
    if model.config._attn_implementation != "sdpa":
        raise ValueError(f"attention_backend={backend!r} needs attn_implementation 'sdpa', not {model.config._attn_implementation!r}")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    order = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    first = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]

    def attention(*args, **kwargs):
        with sdpa_kernel([first] + [b for b in order if b != first], set_priority=True):
            return sdpa_attention_forward(*args, **kwargs)

    name = f"sdpa_{'fa2' if backend == 'flash' else backend}_first"  # transformers reads "flash" in a name as FlashAttention's
    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, sdpa_mask)
    model.set_attn_implementation(name)
