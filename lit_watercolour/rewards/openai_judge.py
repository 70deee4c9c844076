"""Judge backend: any OpenAI-compatible chat-completions endpoint (vLLM, HF Inference Providers).

Images travel as base64 PNG data URLs. Calls go through the `openai` SDK's async client on the caller's
event loop (the rollout pipeline's, which also drives the render pool), bounded there by one semaphore, so
every rollout's calls share the bound. The SDK retries timeouts, connection errors, 408/409/429 and 5xx
(`max_retries` times) with jittered exponential backoff, or after the server's Retry-After when it sends
one. A call still failing then is a failed comparison, never a verdict. The API token is read from the
environment variable named in the config and is never logged.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import time

import openai

from lit_watercolour.rewards.judge import CallRecord, parse_winner

log = logging.getLogger(__name__)


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def describe(error: openai.APIError) -> str:
    """The failure as the call record names it: "timeout", "connection", "http 503"."""
    if isinstance(error, openai.APITimeoutError):
        return "timeout"
    if isinstance(error, openai.APIConnectionError):
        return "connection"
    if isinstance(error, openai.APIStatusError):
        return f"http {error.status_code}"
    return type(error).__name__


def attempts_of(error: openai.APIError) -> int:
    """Requests the SDK sent for a call that failed: it numbers each retry in a request header."""
    request = getattr(error, "request", None)
    return int(request.headers.get("x-stainless-retry-count", 0)) + 1 if request is not None else 1


class OpenAIJudge:
    def __init__(self, base_url: str = "http://127.0.0.1:8000/v1", model: str = "Qwen/Qwen3-VL-30B-A3B-Instruct",
                 api_key_env: str = "HF_TOKEN", max_concurrency: int = 16, timeout_s: float = 90.0,
                 max_retries: int = 2, max_tokens: int = 64, temperature: float = 0.0, seed: int | None = 0) -> None:
        self.base_url, self.model, self.api_key_env = base_url, model, api_key_env
        self.max_concurrency, self.timeout_s, self.max_retries = max_concurrency, timeout_s, max_retries
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def slots(self) -> asyncio.Semaphore:
        """The bound on calls in flight, one per event loop (a semaphore belongs to the loop it waits on)."""
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.max_concurrency))
        return self._slots[1]

    def client(self) -> openai.AsyncOpenAI:
        token = os.environ.get(self.api_key_env) if self.api_key_env else None
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=token or "EMPTY", timeout=self.timeout_s,
                                  max_retries=self.max_retries)

    def _messages(self, a: bytes, b: bytes, prompt: str) -> list[dict]:
        return [{"role": "user", "content": [
            {"type": "text", "text": prompt},
            {"type": "image_url", "image_url": {"url": data_url(a)}},
            {"type": "image_url", "image_url": {"url": data_url(b)}},
        ]}]

    async def _call(self, client: openai.AsyncOpenAI, messages: list[dict]) -> tuple[str | None, CallRecord]:
        t0 = time.perf_counter()
        try:
            async with self.slots():
                raw = await client.chat.completions.with_raw_response.create(
                    model=self.model, messages=messages, max_tokens=self.max_tokens, temperature=self.temperature,
                    **({"seed": self.seed} if self.seed is not None else {}))
        except openai.APIError as e:
            attempts = attempts_of(e)
            log.warning("judge call failed after %d attempts: %s", attempts, describe(e))
            return None, CallRecord(time.perf_counter() - t0, False, attempts, describe(e))
        try:
            reply = raw.parse().choices[0].message.content
        except (ValueError, AttributeError, IndexError, TypeError, openai.APIResponseValidationError):
            reply = None  # not retried: at temperature 0 the same reply would come back
        winner = parse_winner(reply)
        rec = CallRecord(time.perf_counter() - t0, winner is not None, raw.retries_taken + 1,
                         "" if winner else f"malformed: {str(reply)[:80]!r}")
        log.debug("judge call %s in %.2fs (attempt %d) %s", winner, rec.latency_s, rec.attempts, rec.error)
        return winner, rec

    async def acompare(self, pairs: list[tuple[bytes, bytes]], prompt: str) -> tuple[list[str | None], list[CallRecord]]:
        """`compare` as a coroutine, on the caller's event loop."""
        async with self.client() as client:
            results = await asyncio.gather(*(self._call(client, self._messages(a, b, prompt)) for a, b in pairs))
        return [w for w, _ in results], [r for _, r in results]

    def compare(self, pairs: list[tuple[bytes, bytes]], prompt: str) -> tuple[list[str | None], list[CallRecord]]:
        """`acompare` for a caller with no event loop of its own (a script, a test)."""
        return asyncio.run(self.acompare(pairs, prompt))
