"""A small OpenAI-compatible chat-completions server on 127.0.0.1 for the judge tests.

It runs stdlib http.server in a thread. A *policy* decides each reply from the request body and
the call's index; every request body is kept in `received` so tests can check what the judge
was actually sent (image order, prompt, headers).
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Callable

import numpy as np
from PIL import Image

from loopback import LoopbackServer


# policy(body, index) -> (status, headers, reply text or raw bytes)
Policy = Callable[[dict, int], tuple[int, dict, "str | bytes"]]


def completion(text: str) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "model": "judge",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}).encode()


def request_images(body: dict) -> list[bytes]:
    """The PNGs of a chat-completions request, in the order they were sent."""
    out = []
    for part in body["messages"][0]["content"]:
        if part["type"] == "image_url":
            out.append(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
    return out


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


def serving(backend) -> Policy:
    """Serves an in-process judge backend (e.g. TransformersJudge) over HTTP."""
    lock = threading.Lock()
    def policy(body, i):
        prompt = body["messages"][0]["content"][0]["text"]
        with lock:
            (verdict,), _ = backend.compare([tuple(request_images(body))], prompt)
        return 200, {}, completion(f"{verdict}: more translucent.")
    return policy


class JudgeServer(LoopbackServer):
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.received: list[dict] = []
        self.headers: list[dict] = []
        self.times: list[float] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with server._lock:
                    index = len(server.received)
                    server.received.append(body)
                    server.headers.append(dict(self.headers))
                    server.times.append(time.monotonic())
                status, headers, reply = server.policy(body, index)
                data = reply if isinstance(reply, bytes) else reply.encode()
                try:
                    self.send_response(status)
                    for k, v in {"content-type": "application/json", **headers}.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        super().__init__(Handler)
