"""Whose fault is a failure, and what the page's report says.

The rules, in order:
- A sketch alone on its browser (no other page painting there at any moment of its render: the
  default on SwiftShader, one browser per page) is judged by its own time: the renderers' and the
  GPU process's user + system time while it works, and the wall clock while it waits, that is while
  none of their threads runs or queues for a core (a promise that never settles, a frame rate near
  zero; sandbox.processes). It is a `timeout` when that reaches the limit (one that is mostly waiting
  says so), or when the wall clock reaches SOLO_BACKSTOP times the limit (a render the machine's load
  starves of CPU: it queues, so it never counts as waiting).
- A render that ran past its limit beside other pages of its browser, or alone on a browser whose
  GPU process then fails a canary (sandbox.browser.gpu_answers), whose page crashed, or whose browser's GPU process was replaced while
  it painted, may have been hurt by its neighbours (a shader that starves the shared GPU process, a
  wedged GPU process) or by the load. It is run again alone, in a fresh browser of its own, and that
  run decides, by the rule above.
- A browser on which a render timed out is retired (no new pages; closed when its last render
  ends): its GPU process may be wedged.
- Alone, a page crash or a GPU-process crash is the sketch's own: it fails with a runtime error
  that names the memory cap (every browser process runs under RLIMIT_DATA, sandbox.browser), is not
  retried again and is not infra.
- A browser that dies under a render (killed, crashed) is the infrastructure's: the render is
  retried on another page once, then reported as `infra_error`.
- A sketch that navigates or destroys its page fails with a `dom` violation.
- The report is the page's referee speaking (renderer/harness.js, out of the sketch's reach); a
  report that is missing or malformed can only be the sketch's doing: a `tamper` violation.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from lit_watercolour.records import RenderResult

SOLO_BACKSTOP = 4.0  # a sketch alone is cut off at this many times its limit of wall clock
PNG_PREFIX = "data:image/png;base64,"


@dataclass(eq=False)
class Lane:
    """One render painting on a browser."""

    shared: bool = False  # another page of the same browser painted at some moment of this render


class PageCrashed(Exception):
    pass


class Retired(Exception):
    """A page was warming on a browser that has been retired since."""


class Suspect(Exception):
    """The render may have been spoiled by its neighbours: it is decided alone."""


def navigated(message: str) -> bool:
    """Playwright's word for a page whose document was replaced under a running evaluate."""
    return "context was destroyed" in message or "navigation" in message.lower()


def _strings(value, limit: int) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v[:300] for v in value[:limit]]


def from_report(report, elapsed_s: float, cpu_s: float, refused: list[str]) -> RenderResult:
    """The RenderResult of a page's report; `refused`: requests the router turned away, seen
    outside the page. Anything but the harness's own shape is the sketch's tampering."""
    try:
        calls = report["calls"]
        if not (isinstance(calls, dict) and all(isinstance(k, str) and type(v) is int for k, v in calls.items())):
            raise TypeError("calls")
        violations, console = _strings(report["violations"], 64), _strings(report["console"], 51)
        error, png = report["error"], report["png"]
        if violations is None or console is None or not (error is None or isinstance(error, str)):
            raise TypeError("violations, console or error")
        if not (png is None or (isinstance(png, str) and png.startswith(PNG_PREFIX))):
            raise TypeError("png")
        width, height, js_ms = int(report["width"]), int(report["height"]), float(report["js_ms"])
        data = base64.b64decode(png[len(PNG_PREFIX):], validate=True) if png else None
    except (KeyError, TypeError, ValueError) as exc:
        return RenderResult(png=None, error=f"the page's report was malformed ({exc})", elapsed_s=elapsed_s,
                            cpu_s=cpu_s, violations=sorted({"tamper:report", *refused}))
    return RenderResult(
        png=data, error=error, console=console, elapsed_s=elapsed_s, cpu_s=cpu_s, js_s=js_ms / 1000.0, calls=dict(calls),
        violations=sorted(set(violations) | set(refused)), width=width, height=height,
    )
