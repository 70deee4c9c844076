"""A vision-language policy's images: its processor, built from a tokenizer and an image processor, and a row's
image as that processor made it, passed with its token ids into every forward (`policy.completion_logps`,
the samplers)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch


def build_processor(processor_cls: type, tokenizer, image_processor):
    """A processor of `processor_cls` from a tokenizer and an image processor, with no video processor."""
    return without_video(processor_cls)(image_processor=image_processor, tokenizer=tokenizer, video_processor=None,
                                        chat_template=tokenizer.chat_template)


@functools.cache
def without_video(processor_cls: type) -> type:
    """`processor_cls` that takes None for its video processor: its class check would import the video processor's
    class, which needs torchvision, and nothing here passes video. Every other argument is still checked."""
    def check_argument_for_proper_class(self, argument_name, argument):
        if argument_name == "video_processor" and argument is None:
            return None
        return processor_cls.check_argument_for_proper_class(self, argument_name, argument)

    return type(processor_cls.__name__, (processor_cls,), {
        "check_argument_for_proper_class": check_argument_for_proper_class, "__module__": processor_cls.__module__,
        "__doc__": processor_cls.__doc__})


@dataclass
class RowImage:
    """One row's image as the policy's processor made it."""

    pixel_values: torch.Tensor  # [patches, channels x temporal patch x patch x patch]
    image_grid_thw: torch.Tensor  # [1, 3]: the image's patch grid (time, height, width)


def image_inputs(images: list[RowImage | None] | None, ids: torch.Tensor, config) -> dict:
    """A vision-language model's image arguments for rows `ids` [B, T], whose images are `images` (one or None a
    row): the pixels and grids in row order and which tokens are image tokens (M-RoPE's positions); {} where no
    row has one."""
    shown = [im for im in images or [] if im is not None]
    if not shown:
        return {}
    return {"pixel_values": torch.cat([im.pixel_values for im in shown]).to(ids.device),
            "image_grid_thw": torch.cat([im.image_grid_thw for im in shown]).to(ids.device),
            "mm_token_type_ids": (ids == config.image_token_id).int()}
