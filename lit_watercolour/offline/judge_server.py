"""An OpenAI-compatible chat-completions server on 127.0.0.1, answering from a policy function.

`serving(backend)` answers with an in-process judge backend (e.g. `TransformersJudge` on a
Qwen3-VL model), so the HTTP backend (`OpenAIJudge`) can be exercised end to end, over real
HTTP, where no `vllm serve` exists: `scripts/rehearse_recipe.py` and the judge tests. Every
request body is kept in `received` so callers can check what the judge was actually sent.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from lit_watercolour.offline.loopback import LoopbackServer

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


def serving(backend) -> Policy:
    """Answers each request with an in-process judge backend's verdict, one request at a time."""
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
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})  # names are case-insensitive
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
