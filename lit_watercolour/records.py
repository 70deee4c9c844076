"""The records that flow through one GRPO step: render report, gate verdict, rollout, the step's
rollout batch and what the step did with it.

Every stage reads and writes these plain dataclasses, so the renderer, the gate, the reward
terms, the module and its callbacks agree on one vocabulary and can be tested apart.
Shapes: N rows = prompts x completions per prompt on this rank, group-major (row i is in
group i // n); T tokens of the longest completion.
"""

from __future__ import annotations

import io
import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from PIL import Image

if TYPE_CHECKING:  # annotations only: the renderer and the gate use these records without torch's weight
    from torch import Tensor

    from lit_watercolour.sampling import SampleBatch

CANVAS_RANGE = (256, 1024)  # the sides, in canvas units, a sketch's createCanvas may have
SKETCH_WORDS_CHARS = 300  # the most characters of a sketch's own words (its error) that the gate repeats
# Controls, format characters (bidirectional overrides and isolates, zero-width joiners), surrogates, line and paragraph separators
_UNPRINTED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SPACES = re.compile(r"\s+")


def sketch_words(text: str | None, limit: int = SKETCH_WORDS_CHARS) -> str:
    """What a sketch said (its error, what it reached for) as data the gate can repeat: unpaired surrogates
    become U+FFFD, controls, bidirectional and other invisible format characters go (line breaks and tabs
    become one space), it is cut to `limit` characters, and it is returned as one JSON string literal, its
    quotes and backslashes escaped, so it stays on one line inside quotes that it cannot close: it reads as
    a quotation, never as the gate's own words. Valid UTF-8 wherever it is written."""
    text = (text or "").encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # pairs joined, lone ones replaced
    text = "".join(" " if c.isspace() else c for c in text if c.isspace() or unicodedata.category(c) not in _UNPRINTED)
    text = _SPACES.sub(" ", text).strip()
    if len(text) > limit:
        text = text[:limit - 1] + "\u2026"
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class TextHit:
    """Words the picture's text check read (lit_watercolour.sandbox.text_check)."""

    text: str
    score: float  # the recogniser's confidence, 0-1
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in capture pixels


@dataclass
class RenderResult:
    """What the browser reports for one sketch."""

    png: bytes | None  # the canvas composited onto white; None when nothing was captured
    error: str | None = None  # first uncaught error / rejection, or a harness failure ("timeout")
    console: list[str] = field(default_factory=list)  # console messages, capped
    elapsed_s: float = 0.0  # wall clock of pool.render, queueing excluded
    cpu_s: float = 0.0  # CPU time of the page's renderers and GPU process while it painted (alone on its browser)
    waited_s: float = 0.0  # wall clock in which those processes neither ran nor queued for a core (alone on its browser)
    js_s: float = 0.0  # in-page time from sketch start to the done signal
    calls: dict[str, int] = field(default_factory=dict)  # "brush.fill" / "p5.ellipse" -> count
    painted_fraction: float = 0.0  # share of pixels far from the modal background colour
    violations: list[str] = field(default_factory=list)  # runtime cheating seen by the page
    timed_out: bool = False
    infra_error: bool = False  # the browser failed, not the sketch (after one retry)
    text_found: list[TextHit] = field(default_factory=list)  # words a judge could read in the capture (gate: `text`)
    width: int = 0  # the canvas the sketch created, in canvas units (the PNG is this times the density)
    height: int = 0

    @cached_property
    def image(self) -> Image.Image | None:
        """The capture decoded once, as RGB; every reader shares this one."""
        if self.png is None:
            return None
        with Image.open(io.BytesIO(self.png)) as img:
            return img.convert("RGB")


@dataclass
class GateResult:
    passed: bool
    reason: str  # a reason code, "ok" when passed; see lit_watercolour.gate.REASONS
    detail: str = ""  # a human-readable explanation


@dataclass
class Rollout:
    """One completion and everything learned about it during the step."""

    prompt: str  # the subject, e.g. "a peach hibiscus"
    completion: str  # the raw model text
    group: int  # completions of the same prompt share a group (and its reference draw)
    seed: int  # the render and reference-draw seed, shared by the group
    code: str | None = None  # the extracted sketch
    render: RenderResult | None = None
    gate: GateResult | None = None
    num_tokens: int = 0  # completion tokens
    feedback: str | None = None  # a revision (turn 2): what the painter was told about its first sketch


@dataclass
class RolloutBatch:
    """One step's rollouts on this rank: sampled, extracted, gated, rendered and (in fit and validate) scored."""

    samples: SampleBatch  # prompt ids/mask [N, P], completion ids/mask and log-probs [N, T]
    rollouts: list[Rollout]  # [N], row i of `samples`
    metrics: dict[str, float]  # time/* of sampling, rendering and scoring; the reward terms' metrics
    policy_version: int = 0  # the optimizer step count of the weights that sampled it
    # [N, T] the sampling policy's log-probs, the importance ratio's denominator: kept when an older policy
    # sampled the batch or it is used for several optimizer steps; None on-policy (the ratio is then 1)
    old_logps: Tensor | None = None
    rewards: Tensor | None = None  # [N] the reward mix, NaN where missing; None when nothing scored it
    scores: dict[str, Tensor] = field(default_factory=dict)  # term name -> [N], 0 where a gated term skipped
    # two turns (`lit_watercolour.turns`): the first sketches, row for row, scored; this batch's rows are the
    # revisions and its samples the whole trajectories
    turn1: RolloutBatch | None = None


@dataclass
class StepResult:
    """What one training step did, returned to the callbacks (gallery, run log) as `outputs["step"]`."""

    batch: RolloutBatch
    scores: dict[str, Tensor]  # term name -> [N], 0 where a gated term skipped a rollout
    rewards: Tensor  # [N] the mix; NaN: missing (a failed service or browser)
    group_rewards: Tensor  # [groups x num_generations]: every rank's rows, whole groups
    advantages: Tensor  # [N]
    metrics: dict[str, float]  # everything the step logged
