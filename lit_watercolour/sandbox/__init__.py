"""The sandbox that renders untrusted p5.brush sketches in headless Chromium, one job per file:

- config.py: RenderConfig, how a sketch is rendered (canvas, limits, browser, backend);
- browser.py: which Chromium with which flags for which WebGL backend, launch, probes, shutdown;
- processes.py: a render's CPU time, killing what a browser leaves behind;
- pages.py: warm pages, served from memory, renewed between sketches;
- faults.py: whose fault a failure is, and reading the page's report;
- picture.py: the capture decoded once and its painted fraction;
- pool.py / threaded.py: the asyncio pool and its thread-backed wrapper for synchronous callers.

The page itself (what a sketch can reach, and what it cannot) is renderer/harness.js.
"""

from lit_watercolour.sandbox.browser import chromium_executable, default_browsers, gpu_present
from lit_watercolour.sandbox.config import RenderConfig
from lit_watercolour.sandbox.pool import RenderPool
from lit_watercolour.sandbox.threaded import ThreadedRenderPool

__all__ = ["RenderConfig", "RenderPool", "ThreadedRenderPool", "chromium_executable", "default_browsers", "gpu_present"]
