"""RenderConfig: how the sandbox renders a sketch (canvas, limits, browser, backend)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lit_watercolour.records import CANVAS_RANGE
from lit_watercolour.sandbox.text_check import TextCheck

Backend = Literal["auto", "swiftshader", "gpu"]


@dataclass(frozen=True)
class RenderConfig:
    """Everything about one render but the pool's size (docs/rendering.md)."""

    canvas: tuple[int, int] = CANVAS_RANGE
    """(min, max) side in canvas units of the sketch's one createCanvas(w, h, WEBGL); the capture has
    the size the sketch made, times pixel_density."""
    pixel_density: float = 1.0
    """Pixels per canvas unit of the capture: 0.5 paints a 512 sketch as a 256x256 image, a cheaper
    render for scorers that look at 256 px anyway."""
    timeout_s: float = 60.0
    """Limit of one render: CPU seconds of its own renderer and GPU process while it works, wall-clock
    seconds while it waits (see sandbox.faults)."""
    max_frames: int = 5
    """Animated sketches are stopped after this many draw() frames."""
    executable_path: str | None = None
    """Chromium binary; None: $LIT_WATERCOLOUR_CHROMIUM, Debian's /usr/bin/chromium, or Playwright's own."""
    launch_args: tuple[str, ...] | None = None
    """Chromium flags, used as given with no fallback; None for the backend's own."""
    relaunch_every: int = 500
    """Renders after which a browser is replaced (Chrome gives up on GL after repeated GPU-process
    crashes; a fresh browser also bounds memory growth)."""
    browsers: int | None = None
    """Browsers the pages are spread over; None: one per page on SwiftShader, one per 16 cores on a GPU."""
    render_backend: Backend = "auto"
    """How WebGL draws: swiftshader (CPU), gpu (ANGLE on Vulkan), auto (the GPU when the machine has a device node)."""
    memory_cap_gib: float = 4.0
    """RLIMIT_DATA of every browser process, in GiB; 0 for none."""
    accelerated_canvas2d: bool = False
    """On the gpu backend, let Canvas2D (p5.brush's fill masks) draw on the GPU too (never on SwiftShader)."""
    reuse_pages: bool = True
    """After a clean render, navigate the same page to a new sandbox document (its renderer process
    and V8's compilation cache kept, the old document discarded) instead of opening a new context."""
    page_dir: str | None = None
    """Folder of the sandbox page's own files (sandbox.html, prelude.js, harness.js); None for renderer/."""
    text_check: TextCheck = field(default_factory=TextCheck)
    """The capture read for words a judge could read (gate reason `text`): on by default (docs/gate.md#the-text-check)."""

    def __post_init__(self) -> None:
        if isinstance(self.text_check, dict):  # from a checkpoint's or a caller's plain dict
            object.__setattr__(self, "text_check", TextCheck(**self.text_check))
        if not 0 < self.pixel_density <= 1:
            raise ValueError("pixel_density must be in (0, 1]")
        if self.render_backend not in ("auto", "swiftshader", "gpu"):
            raise ValueError(f"render_backend must be auto, swiftshader or gpu, not {self.render_backend!r}")
        if self.browsers is not None and self.browsers < 1:
            raise ValueError("browsers must be >= 1")
        if self.memory_cap_gib < 0:
            raise ValueError("memory_cap_gib must be >= 0")
        if not 0 < self.canvas[0] <= self.canvas[1]:
            raise ValueError("canvas must be (min_side, max_side) with 0 < min_side <= max_side")
        object.__setattr__(self, "canvas", tuple(self.canvas))
        if self.launch_args is not None:
            object.__setattr__(self, "launch_args", tuple(self.launch_args))
