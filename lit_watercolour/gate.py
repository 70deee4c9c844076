"""The gate: does a sketch honestly paint with p5.brush? Checked twice.

`static_gate(code)` runs before rendering on the source (comments stripped, strings
blanked, identifier escapes decoded) and turns away what need not reach a browser.
`gate(code, render)` runs after rendering on what the page saw: errors, timeouts, and the
violations the sandbox itself recorded (renderer/prelude.js and harness.js block and record
network, DOM, storage, text and canvas tampering, however obfuscated the call).

Plain-p5 rule (measured by the page, not guessed from source): the harness counts every
call the sketch makes to p5's own shape primitives (ellipse, rect, line, vertex, ...;
calls p5.brush makes internally are not counted) and to p5.brush's painting methods.
A sketch fails `bare_primitives` if it makes any bare primitive call at all — the same rule
the static scan applies, so an obfuscated call (`window["ell" + "ipse"]`) is caught too —
and fails `no_brush_painting` if it makes no painting call on `brush`, whatever it drew.
"""

from __future__ import annotations

import re

from lit_watercolour.rollout import GateResult, RenderResult
from lit_watercolour.sketch import (
    brackets_balance,
    brush_methods,
    called_names,
    decode_identifier_escapes,
    is_truncated,
    scan_source,
    strip_comments,
)

BLANK_FRACTION = 0.005  # recipe: real sketches paint 2.6-5.0%, an errored one 0.07%

REASONS: dict[str, str] = {
    "ok": "the sketch rendered, painted with p5.brush and did not cheat",
    "no_code": "the completion contains no sketch",
    "truncated": "the completion was cut off: an open code fence or unbalanced brackets",
    "no_setup": "the sketch defines neither setup() nor draw()",
    "not_webgl": "the canvas is not createCanvas(w, h, WEBGL), which p5.brush requires",
    "network": "the sketch tries to reach the network (fetch, XHR, WebSocket, import(), ...)",
    "external_load": "the sketch loads or saves files (loadImage, loadJSON, createImg, data: images, ...)",
    "dom": "the sketch touches the page outside the canvas (document, window, storage, elements)",
    "text": "the sketch writes text instead of painting",
    "eval": "the sketch evaluates strings as code (eval, Function)",
    "canvas": "the sketch replaces, resizes or mis-sizes the canvas",
    "unknown_brush_method": "the sketch calls a brush.* name that p5.brush 2.2.2 does not export",
    "bare_primitives": "the sketch paints with bare p5 shapes (ellipse, rect, line, ...) instead of p5.brush",
    "no_brush_painting": "the sketch makes no p5.brush painting call",
    "syntax_error": "the sketch does not parse",
    "runtime_error": "the sketch threw while running",
    "timeout": "the sketch did not finish painting within the time limit",
    "blank_canvas": f"less than {BLANK_FRACTION:.1%} of the canvas differs from the background",
    "infra_error": "the renderer failed twice; not the sketch's fault",
}

# Object.keys(brush) of p5.brush 2.2.2 (tests/test_gate.py checks it against the real page).
BRUSH_EXPORTS = frozenset(
    "Plot Polygon Position add addField arc beginShape beginStroke box circle clip endShape endStroke "
    "field fill fillBleed fillTexture flowLine hatch hatchArray hatchStyle instance line listFields load "
    "mass massArray move noClip noField noFill noHatch noMass noStroke noWash noiseSeed pick polygon rect "
    "refreshField scaleBrushes seed set spline stroke strokeWeight vertex wRand wash wiggle".split()
)
# brush.* calls that put paint on the canvas.
BRUSH_PAINTING = frozenset(
    "arc circle endShape endStroke flowLine hatchArray line polygon rect spline massArray".split()
)
# p5 shape primitives a sketch must not call bare.
P5_PRIMITIVES = frozenset(
    "arc bezier box circle cone curve cylinder ellipse ellipsoid image line plane point quad rect sphere "
    "spline square torus triangle beginShape endShape vertex bezierVertex splineVertex quadraticVertex "
    "curveVertex beginContour endContour model".split()
)

_NETWORK = re.compile(
    r"\b(fetch|XMLHttpRequest|WebSocket|EventSource|RTCPeerConnection|webkitRTCPeerConnection|RTCDataChannel"
    r"|sendBeacon|Worker|SharedWorker|WebTransport|BroadcastChannel|importScripts)\b|\bimport\s*\(|\bimport\s+[\w{*]"
)
_EXTERNAL = re.compile(
    r"\b(load(?!Pixels)[A-Z]\w*|save(Canvas|Frames|Gif|JSON|Strings|Table|Bytes)?|http(Get|Post|Do)"
    r"|create(Img|Video|Audio|Capture))\s*\("
)
_DATA_URI = re.compile(r"data:\s*image/|\bblob:", re.IGNORECASE)
_DOM = re.compile(
    r"\b(document|window|globalThis|location|navigator|localStorage|sessionStorage"
    r"|indexedDB|caches|cookieStore|opener)\b"
    r"|\b(create(Element|Div|P|Span|A|Slider|Button|Checkbox|Select|Radio|ColorPicker|Input|FileInput|Writer)"
    r"|select|selectAll|removeElements|alert|confirm|prompt)\s*\("
    r"|\.\s*(innerHTML|outerHTML|insertAdjacentHTML|appendChild|parentNode|parentElement|elt)\b"
    r"|\b__lw\w*|\b__proto__\b|\bprototype\b|\bnew\s+p5\b|\bp5\s*[.\[]"
)
_EVAL = re.compile(r"\b(eval|Function|WebAssembly)\b|\.\s*constructor\b|\bset(Timeout|Interval)\s*\(\s*['\"`]")
_TEXT = re.compile(r"(?<![\w$.])(text|textFont|textToPoints|textSize)\s*\(")
_CANVAS = re.compile(r"\b(resizeCanvas|noCanvas|createGraphics|createFramebuffer)\s*\(|(?<![\w$.])remove\s*\(\s*\)")
_CREATE_CANVAS = re.compile(r"\bcreateCanvas\s*\(([^)]*)\)")
_SETUP = re.compile(r"\bfunction\s+(setup|draw)\s*\(|\b(setup|draw)\s*=")


def _fail(reason: str, detail: str) -> GateResult:
    return GateResult(passed=False, reason=reason, detail=detail)


def static_gate(code: str | None, completion: str | None = None) -> GateResult | None:
    """A failure found in the source alone, or None when the sketch should be rendered.

    Give `completion` too so that an unterminated fence reads as truncated. Syntax errors
    are left to the browser, which parses JS exactly.
    """
    if completion is not None and is_truncated(completion):
        return _fail("truncated", "the code fence is never closed")
    if not code or not code.strip():
        return _fail("no_code", "no code block and no bare code")
    src = scan_source(code)  # strings blanked: names inside them are not calls
    raw = decode_identifier_escapes(strip_comments(code))  # strings kept: for URIs
    if not brackets_balance(src):
        return _fail("truncated", "brackets do not balance")
    if not _SETUP.search(src):
        return _fail("no_setup", "define function setup() { ... }")
    for pattern, reason in ((_NETWORK, "network"), (_EXTERNAL, "external_load")):
        if m := pattern.search(src):
            return _fail(reason, f"uses {m.group(0).strip()}")
    if m := _DATA_URI.search(raw):
        return _fail("external_load", f"embeds a {m.group(0)} URI")
    for pattern, reason in ((_EVAL, "eval"), (_DOM, "dom"), (_TEXT, "text"), (_CANVAS, "canvas")):
        if m := pattern.search(src):
            return _fail(reason, f"uses {m.group(0).strip()}")
    canvases = _CREATE_CANVAS.findall(src)
    if not canvases or not all(re.search(r"\bWEBGL\b", args) for args in canvases):
        return _fail("not_webgl", "call createCanvas(512, 512, WEBGL)")
    if len(canvases) > 1:
        return _fail("canvas", "createCanvas is called more than once")
    if re.search(r"\bbrush\s*\[", src):
        return _fail("unknown_brush_method", "brush[...] computed access")
    if unknown := sorted(brush_methods(src) - BRUSH_EXPORTS):
        return _fail("unknown_brush_method", "brush." + ", brush.".join(unknown))
    if bare := sorted(called_names(src) & P5_PRIMITIVES):
        return _fail("bare_primitives", "bare p5 calls: " + ", ".join(bare))
    if not any(name in BRUSH_PAINTING for name in brush_methods(src)):
        return _fail("no_brush_painting", "no brush painting call (circle, endShape, rect, ...)")
    return None


# Violation kinds recorded by the page (renderer/*.js) -> reason, most telling first: a blocked
# fetch also throws, and a blocked text() may also trip a DOM guard.
_VIOLATION_REASON = {"network": "network", "load": "external_load", "eval": "eval", "text": "text", "canvas": "canvas", "dom": "dom"}


def gate(code: str | None, render: RenderResult | None) -> GateResult:
    """The verdict after rendering: the static checks, then what the page recorded."""
    if (verdict := static_gate(code)) is not None:
        return verdict
    if render is None:
        return _fail("infra_error", "the sketch was not rendered")
    if render.infra_error:
        return _fail("infra_error", render.error or "")
    if render.timed_out:
        return _fail("timeout", render.error or "timeout")
    if render.violations:
        kinds = {v.split(":", 1)[0] for v in render.violations}
        reason = next((r for k, r in _VIOLATION_REASON.items() if k in kinds), "dom")
        return _fail(reason, ", ".join(render.violations))
    if render.error:
        reason = "syntax_error" if render.error.startswith("SyntaxError") else "runtime_error"
        return _fail(reason, render.error)
    if render.png is None:
        return _fail("runtime_error", "nothing was captured")
    bare = {k: v for k, v in render.calls.items() if k.startswith("p5.")}
    if bare:
        return _fail("bare_primitives", ", ".join(f"{k} x{v}" for k, v in sorted(bare.items())))
    if not any(render.calls.get(f"brush.{name}", 0) for name in BRUSH_PAINTING):
        return _fail("no_brush_painting", "the page saw no brush painting call")
    if render.painted_fraction < BLANK_FRACTION:
        return _fail("blank_canvas", f"painted fraction {render.painted_fraction:.4f}")
    return GateResult(passed=True, reason="ok")
