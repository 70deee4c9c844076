"""`ThreadedRenderPool`: the render pool on a background event loop for Lightning's synchronous
training loop: `submit` returns a `concurrent.futures.Future`, so renders overlap scoring."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Sequence

from lit_watercolour.records import RenderResult
from lit_watercolour.sandbox.config import RenderConfig
from lit_watercolour.sandbox.pool import RenderPool

CLOSE_BUDGET_S = 10.0  # the whole of RenderPool.close()


class ThreadedRenderPool:
    """A RenderPool on a background event-loop thread, for synchronous callers.

    `with ThreadedRenderPool(size=4) as pool: futures = [pool.submit(c, s) ...]`.
    Takes the same arguments as RenderPool.
    """

    def __init__(self, size: int = 4, config: RenderConfig | None = None, **fields) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="render-pool", daemon=True)
        self._thread.start()
        self.pool = RenderPool(size, config, **fields)
        try:
            self._call(self.pool.start()).result()
        except BaseException:
            self.close()
            raise

    def _call(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def submit(self, code: str, seed: int = 0, timeout_s: float | None = None) -> concurrent.futures.Future[RenderResult]:
        return self._call(self.pool.render(code, seed, timeout_s))

    def render_many(self, codes: Sequence[str], seeds: Sequence[int]) -> list[RenderResult]:
        if len(codes) != len(seeds):
            raise ValueError("one seed per code")
        futures = [self.submit(c, s) for c, s in zip(codes, seeds)]
        return [f.result() for f in futures]

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._loop.is_running():
            self._call(self.pool.close()).result(timeout=CLOSE_BUDGET_S + 5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def __enter__(self) -> ThreadedRenderPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
