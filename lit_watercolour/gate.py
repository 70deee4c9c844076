"""The gate: does a sketch honestly paint with p5.brush? Checked twice.

`static_gate(code)` runs before rendering. It parses the source with tree-sitter's JavaScript
grammar and resolves names through the sketch's own scopes, so a local `point`, a helper called
`loadPalette()` or `let location` is the sketch's own and not p5's or the browser's, and brush
methods reached through `const {circle} = brush` or `const c = brush.circle` are still brush.
It turns away what need not reach a browser; anything it cannot decide (computed names such as
`this["fe" + "tch"]`, strings assembled at run time) is left to the page.

`gate(code, render)` runs after rendering on what the page saw: errors, timeouts, the
violations the sandbox recorded (renderer/harness.js), and words the picture's text check read in
the capture (lit_watercolour/sandbox/text_check.py).

The page (harness.js) keeps the sketch out of the referee's reach: SES `lockdown()` freezes every
built-in, and the sketch runs in a Compartment whose globals are exactly the allowlist
(lit_watercolour/allowlist.py): a refused name (fetch, document, storeItem, eval, Compartment, text,
drawingContext, ...) is a trap that records its category, the reason here; any other name not on the list
does not exist. Objects handed back (buffers, vectors, colours, brush polygons, a custom tip's surface) are
views through a membrane that answer only to the list's names; everything handed to the libraries is copied
to plain data, counted in values, its functions wrapped. So every call that draws comes through the facade:
- shapes exist only on a custom tip's surface while its callback runs (counted as `tip.*`); the surface
  ends with the callback and is never read or printed; any other drawing from inside a p5.brush callback,
  the methods of kept brush objects included, is `raw_drawing`;
- image() prints only the sketch's own layers that p5.brush painted, each once a frame, and a layer's
  own paper (its background()) only as a whole new paper or invisibly, never as a flat block;
- buffers are charged in bytes as they are (format, samples, density, snapshots), no side past the page's;
  what p5.brush allocates on its own account is bounded apart (docs/gate.md);
- the report is built out of the sketch's reach; one the pool cannot read is `tamper`.

Plain-p5 rule: a sketch fails `bare_primitives` if it makes any bare primitive call at all, and
`no_brush_painting` if it makes no painting call on `brush` (or on a brush.Polygon/Plot).
The canvas: one createCanvas(w, h, WEBGL) with each side within the pool's range (default
256-1024); the picture is captured at that size, and the painted-fraction rule is a fraction,
the same at any size.
"""

from __future__ import annotations

import re

from lit_watercolour.allowlist import REFUSED, WORLD
from lit_watercolour.records import CANVAS_RANGE, GateResult, RenderResult, sketch_words
from lit_watercolour.sketch import analyse, decode_identifier_escapes, is_truncated

BLANK_FRACTION = 0.005  # recipe: real sketches paint 2.6-5.0%, an errored one 0.07%

REASONS: dict[str, str] = {
    "ok": "the sketch rendered, painted with p5.brush and did not cheat",
    "no_code": "the completion contains no sketch",
    "truncated": "the completion was cut off: an open code fence or unbalanced brackets",
    "no_setup": "the sketch defines neither setup() nor draw()",
    "not_webgl": "the canvas is not createCanvas(w, h, WEBGL), which p5.brush requires",
    "network": "the sketch tries to reach the network (fetch, XHR, WebSocket, import(), ...)",
    "external_load": "the sketch loads or saves files (loadImage, loadJSON, createImg, data: images, ...)",
    "dom": "the sketch touches the page outside the canvas (document, window, storage, elements, dialogs, cursor, timers)",
    "text": "the sketch writes text instead of painting: text() calls, or words a judge could read in the picture",
    "eval": "the sketch evaluates strings as code (eval, Function, the hardening library's Compartment and helpers)",
    "canvas": "the sketch replaces, resizes or mis-sizes the canvas (one createCanvas, sides within the allowed range), or makes buffers over their byte budget or side",
    "raw_drawing": "the sketch draws around p5.brush: images, pixel writes, shaders, raw WebGL/2D calls, or paint from inside a brush callback",
    "hidden_code": "the sketch hands p5.brush values it cannot copy as data (Proxies, values too large or too deep)",
    "unknown_brush_method": "the sketch calls a brush.* name that p5.brush 2.2.2 does not export",
    "bare_primitives": "the sketch paints with bare p5 shapes (ellipse, rect, line, ...) instead of p5.brush, or prints a layer p5.brush did not paint",
    "no_brush_painting": "the sketch makes no p5.brush painting call",
    "syntax_error": "the sketch does not parse",
    "runtime_error": "the sketch threw while running",
    "timeout": "the sketch did not finish painting within the time limit",
    "blank_canvas": f"less than {BLANK_FRACTION:.1%} of the canvas differs from the background",
    "tamper": "the page's report could not be read: only the sketch can have broken it",
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
# brush classes whose instances paint through their methods (new brush.Polygon(...).fill()).
BRUSH_PAINTING_CLASSES = {name: frozenset("draw fill hatch wash mass show".split()) for name in ("Polygon", "Plot")}
# p5 shape primitives a sketch must not call bare.
P5_PRIMITIVES = frozenset(
    "arc bezier box circle cone curve cylinder ellipse ellipsoid line plane point quad rect sphere "
    "spline square torus triangle beginShape endShape vertex bezierVertex splineVertex quadraticVertex "
    "curveVertex beginContour endContour model".split()
)

_NETWORK = frozenset(
    "fetch XMLHttpRequest WebSocket EventSource RTCPeerConnection webkitRTCPeerConnection RTCDataChannel "
    "sendBeacon Worker SharedWorker WebTransport BroadcastChannel importScripts".split()
)
_EXTERNAL = re.compile(
    r"^(load(?!Pixels$)[A-Z]\w*|save(Canvas|Frames|Gif|JSON|Strings|Table|Bytes)?|http(Get|Post|Do)"
    r"|create(Img|Video|Audio|Capture)|createImageBitmap|ImageDecoder)$"
)
_DATA_URI = re.compile(r"data:\s*image/|\bblob:", re.IGNORECASE)
_DOM_GLOBALS = frozenset(
    "document window globalThis self top parent frames opener location navigator localStorage sessionStorage "
    "indexedDB caches cookieStore history screen visualViewport".split()
)
_DOM_CALLS = re.compile(
    r"^(create(Element|Div|P|Span|A|Slider|Button|Checkbox|Select|Radio|ColorPicker|Input|FileInput|Writer)"
    r"|select|selectAll|removeElements|alert|confirm|prompt|__lw\w*)$"
)
_DOM_MEMBERS = frozenset("innerHTML outerHTML insertAdjacentHTML appendChild parentNode parentElement elt __proto__ prototype".split())
_EVAL_NAMES = frozenset("eval Function WebAssembly".split())
_TEXT = frozenset("text textFont textToPoints textToContours textToModel textSize".split())
_CANVAS = frozenset("resizeCanvas noCanvas remove".split())
_RAW_NAMES = frozenset(
    "drawingContext updatePixels createShader createFilterShader shader strokeShader imageShader baseMaterialShader "
    "baseNormalShader baseColorShader baseStrokeShader baseFilterShader buildMaterialShader buildNormalShader "
    "buildColorShader buildStrokeShader buildFilterShader".split()
)
_RAW_MEMBERS = re.compile(r"^(_renderer|_curElement|_pInst|drawingContext|_render\w*)$")
_P5_MEMBERS = frozenset({"Vector"})  # p5.X a sketch may read: the vector class and its statics
_SOURCE_URL = re.compile(r"[#@]\s*source(Mapping)?URL\s*=")


def _fail(reason: str, detail: str) -> GateResult:
    return GateResult(passed=False, reason=reason, detail=detail)


def static_gate(
    code: str | None, completion: str | None = None, canvas: tuple[int, int] = CANVAS_RANGE
) -> GateResult | None:
    """A failure found in the source alone, or None when the sketch should be rendered.

    Give `completion` too so that an unterminated fence reads as truncated. Syntax errors
    are left to the browser, which parses JS exactly. `canvas`: the allowed (min, max) side.
    """
    if completion is not None and is_truncated(completion):
        return _fail("truncated", "the code fence is never closed")
    if not code or not code.strip():
        return _fail("no_code", "no code block and no bare code")
    facts = analyse(code)
    if facts.truncated:
        return _fail("truncated", "brackets do not balance")
    if not facts.entry_points:
        return _fail("no_setup", "define function setup() { ... }")
    free, calls, values = facts.free_refs, set(facts.free_calls), facts.free_values

    def first(names) -> str:
        return sorted(names)[0]

    if network := (free & _NETWORK) | ({"import"} if facts.imports else set()):
        return _fail("network", f"uses {first(network)}")
    if external := {n for n in free if _EXTERNAL.match(n)}:
        return _fail("external_load", f"uses {first(external)}")
    strings = [decode_identifier_escapes(t) for t in facts.strings]
    if uri := next((m.group(0) for t in strings if (m := _DATA_URI.search(t))), None):
        return _fail("external_load", f"embeds a {uri} URI")
    if evals := (free & _EVAL_NAMES) | ({".constructor"} if "constructor" in facts.members else set()):
        return _fail("eval", f"uses {first(evals)}")
    if facts.string_timer:
        return _fail("eval", "a timer given a string")
    if _SOURCE_URL.search(code):
        return _fail("eval", "a sourceURL comment")
    dom = (free & _DOM_GLOBALS) | {n for n in free if _DOM_CALLS.match(n)} | (facts.members & _DOM_MEMBERS)
    if facts.free_uses.get("p5", set()) - _P5_MEMBERS:  # p5 itself (p5.prototype, new p5, p5.instance): the page's machinery
        dom.add("p5")
    if dom:
        return _fail("dom", f"uses {first(dom)}")
    if text := free & _TEXT:
        return _fail("text", f"uses {first(text)}")
    if raw := (free & _RAW_NAMES) | {m for m in facts.members if _RAW_MEMBERS.match(m)}:
        return _fail("raw_drawing", f"uses {first(raw)}")
    if refused := sorted(n for n in free if WORLD.get(n) in REFUSED and WORLD[n] != "bare_primitives"):
        return _fail(WORLD[refused[0]], f"uses {refused[0]}")  # the rest of the table's refused names
    if canvas_calls := free & _CANVAS:
        return _fail("canvas", f"uses {first(canvas_calls)}")
    if "createCanvas" in values:
        return _fail("canvas", "createCanvas is passed around instead of called")
    if not facts.canvases or any(webgl is False for webgl, _, _ in facts.canvases):
        return _fail("not_webgl", "call createCanvas(width, height, WEBGL)")
    if len(facts.canvases) > 1:
        return _fail("canvas", "createCanvas is called more than once")
    _, width, height = facts.canvases[0]
    if any(side is not None and not canvas[0] <= side <= canvas[1] for side in (width, height)):
        return _fail("canvas", f"each side of the canvas must be within {canvas[0]}-{canvas[1]}")
    if facts.brush_computed:
        return _fail("unknown_brush_method", "brush[...] computed access")
    if unknown := sorted(facts.brush_used - BRUSH_EXPORTS):
        return _fail("unknown_brush_method", "brush." + ", brush.".join(unknown))
    if bare := sorted(free & P5_PRIMITIVES & (calls | values)):
        return _fail("bare_primitives", "bare p5 calls: " + ", ".join(bare))
    if not (facts.brush_called & BRUSH_PAINTING or facts.brush_classes & set(BRUSH_PAINTING_CLASSES)):
        return _fail("no_brush_painting", "no brush painting call (circle, endShape, rect, new brush.Polygon(...).fill(), ...)")
    return None


# Violation kinds recorded by the page (renderer/*.js: a refused name records its category, which is the
# reason; the older short kinds stay readable) -> reason, most telling first: a blocked fetch also throws,
# and a blocked text() may also trip a DOM guard.
_VIOLATION_REASON = {
    "tamper": "tamper", "network": "network", "load": "external_load", "external_load": "external_load", "eval": "eval",
    "hidden": "hidden_code", "hidden_code": "hidden_code", "text": "text", "raw": "raw_drawing", "raw_drawing": "raw_drawing",
    "canvas": "canvas", "bare_primitives": "bare_primitives", "dom": "dom",
}


def gate(code: str | None, render: RenderResult | None) -> GateResult:
    """The verdict after rendering: the static checks, then what the page recorded."""
    if (verdict := static_gate(code)) is not None:
        return verdict
    if render is None:
        return _fail("infra_error", "the sketch was not rendered")
    # what the page reports may hold the sketch's own words (its error, a name it reached for): quoted as data
    if render.infra_error:
        return _fail("infra_error", sketch_words(render.error))
    if render.timed_out:
        return _fail("timeout", render.error or "timeout")  # the pool's words
    if render.violations:
        kinds = {v.split(":", 1)[0] for v in render.violations}
        reason = next((r for k, r in _VIOLATION_REASON.items() if k in kinds), "dom")
        return _fail(reason, f"the page recorded {sketch_words(', '.join(render.violations))}")
    if render.error:
        reason = "syntax_error" if render.error.startswith("SyntaxError") else "runtime_error"
        return _fail(reason, f"the sketch threw {sketch_words(render.error)}")
    if render.png is None:
        return _fail("runtime_error", "nothing was captured")
    if render.text_found:  # sandbox.text_check: letters spelled with allowed calls are still words to a judge
        read = ", ".join(f"{sketch_words(hit.text, 60)} ({hit.score:.2f}) at {hit.box}" for hit in render.text_found[:8])
        return _fail("text", f"the picture reads {read}")
    bare = {k: v for k, v in render.calls.items() if k.startswith("p5.")}
    if bare:
        return _fail("bare_primitives", ", ".join(f"{k} x{v}" for k, v in sorted(bare.items())))
    painting = {f"brush.{n}" for n in BRUSH_PAINTING}
    painting |= {f"brush.{cls}.{m}" for cls, methods in BRUSH_PAINTING_CLASSES.items() for m in methods}
    if not any(render.calls.get(name, 0) for name in painting):
        return _fail("no_brush_painting", "the page saw no brush painting call")
    if render.painted_fraction < BLANK_FRACTION:
        return _fail("blank_canvas", f"painted fraction {render.painted_fraction:.4f}")
    return GateResult(passed=True, reason="ok")
