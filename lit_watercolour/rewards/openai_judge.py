"""Judge backend: any OpenAI-compatible chat-completions endpoint (vLLM, HF Inference Providers).

Images travel as base64 PNG data URLs. Calls run concurrently on an httpx.AsyncClient, each with a
timeout, on the caller's event loop (the rollout pipeline's, which also drives the render pool) and
bounded there by one semaphore, so every rollout's calls share the bound. Tenacity retries timeouts, transport errors and
transient statuses with jittered exponential backoff, and a 429 waits for its Retry-After. The API token is
read from the environment variable named in the config and is never logged.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import logging
import os
import time

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from lit_watercolour.rewards.judge import CallRecord, parse_winner

log = logging.getLogger(__name__)
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class TransientStatus(Exception):
    """A status worth asking again for (RETRY_STATUS), with the response for its Retry-After."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"http {response.status_code}")
        self.response = response


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def retry_after_s(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def wait_retry_after(fallback, max_wait_s: float):
    """A tenacity wait: a 429's Retry-After when it gives one (capped at `max_wait_s`), else `fallback`."""
    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, TransientStatus) and error.response.status_code == 429:
            told = retry_after_s(error.response.headers.get("retry-after"))
            if told is not None:
                return min(told, max_wait_s)
        return fallback(state)
    return wait


def describe(error: BaseException) -> str:
    """The failure as the call record names it: "timeout", "transport: ...", "http 503"."""
    if isinstance(error, httpx.HTTPStatusError):
        return f"http {error.response.status_code}"
    if isinstance(error, httpx.TimeoutException):
        return "timeout"
    if isinstance(error, httpx.TransportError):
        return f"transport: {type(error).__name__}"
    return str(error)


class OpenAIJudge:
    def __init__(self, base_url: str = "http://127.0.0.1:8000/v1", model: str = "Qwen/Qwen3-VL-30B-A3B-Instruct",
                 api_key_env: str = "HF_TOKEN", max_concurrency: int = 16, timeout_s: float = 90.0,
                 attempts: int = 3, backoff_s: float = 5.0, max_backoff_s: float = 60.0,
                 max_tokens: int = 64, temperature: float = 0.0, seed: int | None = 0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key_env = model, api_key_env
        self.max_concurrency, self.timeout_s = max_concurrency, timeout_s
        self.attempts, self.backoff_s, self.max_backoff_s = max(attempts, 1), backoff_s, max_backoff_s
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def slots(self) -> asyncio.Semaphore:
        """The bound on calls in flight, one per event loop (a semaphore belongs to the loop it waits on)."""
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.max_concurrency))
        return self._slots[1]

    def _body(self, a: bytes, b: bytes, prompt: str) -> dict:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": prompt},
                {"type": "image_url", "image_url": {"url": data_url(a)}},
                {"type": "image_url", "image_url": {"url": data_url(b)}},
            ]}],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        return body

    def _retrying(self) -> AsyncRetrying:
        """A fresh policy per call: tenacity keeps its attempt count on the instance."""
        backoff = wait_exponential_jitter(multiplier=self.backoff_s, max=self.max_backoff_s, jitter=self.backoff_s)
        return AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_retry_after(backoff, self.max_backoff_s),
            retry=retry_if_exception_type((httpx.TransportError, TransientStatus)),
            before_sleep=lambda s: log.info("judge call failed (%s), retry %d in %.2fs",
                                            describe(s.outcome.exception()), s.attempt_number, s.upcoming_sleep),
            reraise=True,
        )

    async def _post(self, client: httpx.AsyncClient, body: dict) -> str | None:
        """The reply's text; raises on a failed call (retried or not, as `_retrying` decides)."""
        async with self.slots():
            resp = await client.post(self.url, json=body)
        if resp.status_code in RETRY_STATUS:
            raise TransientStatus(resp)
        resp.raise_for_status()  # any other error: a bad request does not get better by asking again
        try:
            return resp.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None  # not retried: at temperature 0 the same reply would come back

    async def _call(self, client: httpx.AsyncClient, body: dict) -> tuple[str | None, CallRecord]:
        t0 = time.perf_counter()
        retrying = self._retrying()
        try:
            reply = await retrying(self._post, client, body)
        except (httpx.HTTPError, TransientStatus) as e:
            attempts = retrying.statistics.get("attempt_number", 1)
            log.warning("judge call failed after %d attempts: %s", attempts, describe(e))
            return None, CallRecord(time.perf_counter() - t0, False, attempts, describe(e))
        winner = parse_winner(reply)
        rec = CallRecord(time.perf_counter() - t0, winner is not None, retrying.statistics.get("attempt_number", 1),
                         "" if winner else f"malformed: {str(reply)[:80]!r}")
        log.debug("judge call %s in %.2fs (attempt %d) %s", winner, rec.latency_s, rec.attempts, rec.error)
        return winner, rec

    async def acompare(self, pairs: list[tuple[bytes, bytes]], prompt: str) -> tuple[list[str | None], list[CallRecord]]:
        """`compare` as a coroutine, on the caller's event loop."""
        headers = {}
        token = os.environ.get(self.api_key_env) if self.api_key_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        limits = httpx.Limits(max_connections=self.max_concurrency)
        async with httpx.AsyncClient(headers=headers, timeout=self.timeout_s, limits=limits) as client:
            results = await asyncio.gather(*(self._call(client, self._body(a, b, prompt)) for a, b in pairs))
        return [w for w, _ in results], [r for _, r in results]

    def compare(self, pairs: list[tuple[bytes, bytes]], prompt: str) -> tuple[list[str | None], list[CallRecord]]:
        """`acompare` for a caller with no event loop of its own (a script, a test)."""
        return asyncio.run(self.acompare(pairs, prompt))
