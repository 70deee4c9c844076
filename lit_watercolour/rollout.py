"""The records that flow through one GRPO step: render report, gate verdict, rollout.

Every stage reads and writes these plain dataclasses, so the renderer, the gate, the reward
terms and the module agree on one vocabulary and can be tested apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CANVAS_RANGE = (256, 1024)  # the sides, in canvas units, a sketch's createCanvas may have


@dataclass
class RenderResult:
    """What the browser reports for one sketch."""

    png: bytes | None  # the canvas composited onto white; None when nothing was captured
    error: str | None = None  # first uncaught error / rejection, or a harness failure ("timeout")
    console: list[str] = field(default_factory=list)  # console messages, capped
    elapsed_s: float = 0.0  # wall clock of pool.render, queueing excluded
    js_s: float = 0.0  # in-page time from sketch start to the done signal
    calls: dict[str, int] = field(default_factory=dict)  # "brush.fill" / "p5.ellipse" -> count
    painted_fraction: float = 0.0  # share of pixels far from the modal background colour
    violations: list[str] = field(default_factory=list)  # runtime cheating seen by the page
    timed_out: bool = False
    infra_error: bool = False  # the browser failed, not the sketch (after one retry)
    width: int = 0  # the canvas the sketch created, in canvas units (the PNG is this times the density)
    height: int = 0


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
