"""Reply policies for the loopback judge server (lit_watercolour.offline.judge_server) in the judge tests."""

from __future__ import annotations

import io
import time

import numpy as np
from PIL import Image

from lit_watercolour.offline.judge_server import JudgeServer, Policy, completion, request_images, serving

__all__ = ["JudgeServer", "always", "completion", "failing_first", "prefers_less_ink", "request_images", "serving", "slow"]


def always(letter: str) -> Policy:
    return lambda body, i: (200, {}, completion(f"{letter}. The washes are softer."))


def prefers_less_ink() -> Policy:
    """Picks the image with more paper left white: a content judgement, so order does not matter."""
    def ink(png: bytes) -> float:
        return float(255 - np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float32).mean())
    def policy(body, i):
        a, b = request_images(body)
        return 200, {}, completion("A" if ink(a) < ink(b) else "B")
    return policy


def failing_first(n: int, status: int, then: Policy, headers: dict | None = None) -> Policy:
    """Answers `status` to the first n calls, then defers to `then`."""
    def policy(body, i):
        return (status, headers or {}, b'{"error": "busy"}') if i < n else then(body, i)
    return policy


def slow(delay_s: float, then: Policy) -> Policy:
    def policy(body, i):
        time.sleep(delay_s)  # a server slower than the client's timeout
        return then(body, i)
    return policy
