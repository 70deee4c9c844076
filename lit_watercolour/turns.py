"""Two-turn trajectories: the painter sees what its sketch painted and revises it (issue 38).

    turn 1: prompt -> completion 1 -> extract, gate, render (as a single-turn step)
    turn 2: prompt | completion 1 | feedback -> completion 2 -> extract, gate, render, score
    loss:   prompt | completion 1 | feedback | completion 2, one sequence, one forward
    mask:     -    |      1       |    0     |      1

Turn 2's prompt is turn 1's prompt ids, its sampled ids and the feedback's ids, token for token (the
turn-1 text is never tokenised again), so the loss's single forward over the conversation sees exactly
what each turn's sampler saw. The feedback's ids are the policy's chat template's own: the template
renders [user, assistant, user(feedback)] with the generation prompt, and what follows the assistant's
content (its end of turn, the user turn, the opening of the next assistant turn) is the feedback segment.
A turn-1 sketch that fails the gate still gets its turn 2: the feedback says why. Text feedback carries what
each reward term says of the first sketch (`RewardTerm.feedback`: its score, or its parts), so turn 2 is
sampled once turn 1 is rendered, gated and scored, a judge's replies included.

Two turns do not overlap with `max_staleness >= 1`: a batch sampled ahead samples both its turns on the
policy's thread, and its turn 2 waits there for its turn-1 renders and scores, in series with the step's
update (`GRPOModule` warns).

Image feedback (`feedback: image | both`, a vision-language policy): the feedback turn holds the first
sketch's render as an image, through the policy's own processor (its placeholder expanded to the image's
tokens, the pixels patched); turn 2 is sampled with those pixels and the loss's forward gets them again
(`SampleBatch.images`). Image tokens are feedback tokens: attended, never learned. A first sketch with no
render gets the text feedback, which says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_watercolour.policy import PolicyConfig, has_vision_tower
from lit_watercolour.sampling.base import ImagePrompt, PromptInput
from lit_watercolour.vision import RowImage

if TYPE_CHECKING:
    from PIL import Image

    from lit_watercolour.records import Rollout
    from lit_watercolour.sampling import SampleBatch, VLLMConfig

Feedback = Literal["text", "image", "both"]
SENTINEL = "\u2063sketch\u2063"  # stands for turn 1's content while the template renders the feedback segment
REVISE = "Revise the sketch so the watercolour is better. Answer with one ```js code block."
SHOWN = "This is what your sketch painted."


@dataclass(frozen=True)
class TurnsConfig:
    """How many turns a trajectory has and what the painter is shown between them."""

    turns: int = 1
    """1: one sketch per trajectory (the recipe's GRPO); 2: the sketch is gated, rendered and fed back, and the
    policy writes a revision in the same conversation; the trajectory is scored on the revision."""
    feedback: Feedback = "text"
    """What turn 2 is shown: text (the gate's verdict and reason, the painted fraction, each reward term's
    `feedback`: its score or its parts), image (the render, for a vision-language policy) or both."""
    turn1_weight: float = 0.0
    """The trajectory's reward is the revision's plus this times the first sketch's."""

    def __post_init__(self) -> None:
        if self.turns not in (1, 2):
            raise ValueError(f"turns is 1 or 2, not {self.turns}")
        if self.feedback not in ("text", "image", "both"):
            raise ValueError(f"feedback is text, image or both, not {self.feedback!r}")

    @property
    def shows_image(self) -> bool:
        """Whether turn 2 is shown the render: the policy must see (a vision tower and its processor)."""
        return self.turns == 2 and self.feedback != "text"


def check_policy(turns: TurnsConfig, policy: PolicyConfig, sampler: str, vllm: VLLMConfig) -> None:
    """Refuse, as the run is configured, image feedback the policy or its sampler cannot see."""
    if not turns.shows_image:
        return
    if not has_vision_tower(policy):
        raise ValueError(f"feedback={turns.feedback!r} shows the policy its render, but the policy "
                         f"({policy.tiny or policy.model}) is text-only, with no vision tower: use feedback: text, "
                         "or a vision-language policy (Qwen3.5)")
    if sampler == "vllm-server":
        raise ValueError(f"feedback={turns.feedback!r}: the vllm-server sampler sends token ids over HTTP, with no "
                         "image; use sampler hf or vllm")
    if sampler == "vllm" and vllm.language_model_only:
        raise ValueError(f"feedback={turns.feedback!r} with sampler 'vllm': the engine must load the vision tower; "
                         "set vllm.language_model_only false")


def feedback_text(rollout: Rollout, parts: dict[str, float] | None) -> str:
    """What the painter is told about its sketch: the gate's verdict, how much it painted, the terms' `feedback`."""
    gate, render = rollout.gate, rollout.render
    if gate.passed:
        lines = ["Your sketch passed the gate."]
    else:
        lines = [f"Your sketch failed the gate ({gate.reason}): {gate.detail or 'it scores 0'}."]
    if render is not None and render.png is not None:
        lines.append(f"It painted {render.painted_fraction:.1%} of the canvas.")
    else:
        lines.append("Nothing was rendered.")
    if parts:
        lines.append("Scores from 0 to 1: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()) + ".")
    return "\n".join([*lines, REVISE])


def feedback_for(rollout: Rollout, parts: dict[str, float] | None, turns: TurnsConfig) -> tuple[str, Image.Image | None]:
    """What turn 2 is shown of a first sketch: text, the render with a line (`image`) or with the text (`both`);
    the text alone where nothing was rendered."""
    image = rollout.render.image if turns.shows_image and rollout.render is not None else None
    if image is not None and turns.feedback == "image":
        return f"{SHOWN}\n{REVISE}", image
    return feedback_text(rollout, parts), image


class Conversation:
    """Turn 2's prompts as token ids, and the two turns joined into one trajectory for the loss. `processor`:
    the policy's own (`policy.load_processor`), for image feedback."""

    def __init__(self, tokenizer, processor=None) -> None:
        self.tokenizer, self.processor = tokenizer, processor
        self.kwargs = {"enable_thinking": False} if "enable_thinking" in (tokenizer.chat_template or "") else {}

    def feedback_ids(self, text: str, last_token: int | None, image: Image.Image | None = None
                     ) -> tuple[list[int], RowImage | None]:
        """The feedback segment's ids after a completion whose last token is `last_token`, and its image as the
        processor made it: the template's end of turn is left out where the completion ended with it (else it
        closes the cut-off turn)."""
        content = text if image is None else [{"type": "image"}, {"type": "text", "text": text}]
        rendered = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": "paint"}, {"role": "assistant", "content": SENTINEL},
             {"role": "user", "content": content}], tokenize=False, add_generation_prompt=True, **self.kwargs)
        segment, inputs = rendered[rendered.index(SENTINEL) + len(SENTINEL):], None
        if image is None:
            ids = self.tokenizer(segment, add_special_tokens=False).input_ids
        else:
            encoded = self.processor(text=[segment], images=[image], return_tensors="pt")
            ids, inputs = encoded.input_ids[0].tolist(), RowImage(encoded.pixel_values, encoded.image_grid_thw)
        return (ids[1:] if ids and ids[0] == last_token else ids), inputs

    def next_prompts(self, first: SampleBatch, feedback: list[str], images: list[Image.Image | None] | None = None
                     ) -> tuple[list[PromptInput], list[list[int]]]:
        """Each row's turn-2 prompt (prompt | completion 1 | feedback; with an image, an `ImagePrompt`) and its
        feedback ids."""
        prompts, segments = [], []
        for row, (text, image) in enumerate(zip(feedback, images or [None] * len(feedback), strict=True)):
            prompt = first.prompt_ids[row][first.prompt_mask[row].bool()].tolist()
            completion = first.completion_ids[row][first.completion_mask[row].bool()].tolist()
            segment, inputs = self.feedback_ids(text, completion[-1] if completion else None, image)
            segments.append(segment)
            ids = prompt + completion + segment
            prompts.append(ids if inputs is None else ImagePrompt(ids, image, inputs))
        return prompts, segments


def join_turns(first: SampleBatch, feedback_ids: list[list[int]], second: SampleBatch, pad: int) -> SampleBatch:
    """One trajectory per row: turn 1's (left-padded) prompt, and as its completion completion 1 | feedback |
    completion 2 (right-padded), attended throughout; `sampled_mask` is 1 on the policy's tokens only; the
    feedback's images go with their rows."""
    ids, sampled, logps, engine = [], [], [], []
    for row, fb in enumerate(feedback_ids):
        c1, c2 = first.completion_mask[row].bool(), second.completion_mask[row].bool()
        parts = [first.completion_ids[row][c1].cpu(), torch.tensor(fb, dtype=torch.long),
                 second.completion_ids[row][c2].cpu()]
        ids.append(torch.cat(parts))
        sampled.append(torch.cat([torch.ones(len(parts[0])), torch.zeros(len(fb)), torch.ones(len(parts[2]))]))
        for out, name in ((logps, "logps"), (engine, "sampler_logps")):
            a, b = getattr(first, name), getattr(second, name)
            if a is not None and b is not None:
                out.append(torch.cat([a[row][c1].cpu(), torch.zeros(len(fb)), b[row][c2].cpu()]))
    width = max(len(x) for x in ids)
    device = first.completion_ids.device

    def stack(rows: list[Tensor], value: float = 0) -> Tensor | None:
        return torch.stack([F.pad(x, (0, width - len(x)), value=value) for x in rows]).to(device) if rows else None

    completion_ids = stack(ids, pad)
    attended = stack([torch.ones(len(x), dtype=torch.long) for x in ids])
    return replace(first, completion_ids=completion_ids, completion_mask=attended, texts=second.texts,
                   truncated=second.truncated, logps=stack(logps), sampler_logps=stack(engine),
                   seconds=first.seconds + second.seconds, sampled_mask=stack(sampled).to(attended.dtype),
                   images=second.images)


def trajectory_rewards(final: Tensor, first: Tensor, turn1_weight: float) -> Tensor:
    """The reward of each trajectory: its final painting's, plus `turn1_weight` times its first sketch's."""
    return final + turn1_weight * first if turn1_weight else final


def turn_metrics(final: Tensor, first: Tensor, first_rollouts: list[Rollout]) -> dict[str, float]:
    """Each turn's mean reward and the revision's mean gain over the first sketch (NaN-aware)."""
    return {"turns/reward_1": torch.nanmean(first).item(), "turns/reward_2": torch.nanmean(final).item(),
            "turns/gain": torch.nanmean(final - first).item(),
            "turns/gate_pass_rate_1": sum(r.gate.passed for r in first_rollouts) / max(1, len(first_rollouts))}
