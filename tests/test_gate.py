"""The gate, static and at runtime: each bad program fails with its own reason, good ones pass.

Runtime cases run through real Chromium; the "evasive" variants slip past the static scan on
purpose (computed names via `this[...]`, which is window inside setup/draw) so that the
page's own blocking and recording are what catches them.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lit_watercolour import allowlist
from lit_watercolour.gate import BRUSH_EXPORTS, REASONS, gate, static_gate
from lit_watercolour.prompts import skeleton
from lit_watercolour.sketch import extract_code


def sketch(extra: str = "", canvas: str = "createCanvas(512, 512, WEBGL);", paint: str | None = None) -> str:
    paint = 'brush.fill("#c2366a", 160);\n  brush.circle(256, 256, 80);' if paint is None else paint
    return skeleton(f"  brush.noStroke();\n  {paint}\n  {extra}", canvas=canvas)


GOOD = sketch()

STATIC_CASES = {
    "no_code": ("Sorry, I cannot paint.", None),
    "truncated_fence": ("Here:\n```js\nfunction setup() {\n  createCanvas(512, 512, WEBGL);\n", "truncated"),
    "unbalanced": (sketch().rstrip().rstrip("}"), "truncated"),
    "no_setup": ("function paint() { brush.circle(1, 1, 1); }", "no_setup"),
    "not_webgl": (sketch(canvas="createCanvas(512, 512);"), "not_webgl"),
    "fetch": (sketch('fetch("http://127.0.0.1:9/x");'), "network"),
    "escaped_fetch": (sketch('\\u0066etch("http://127.0.0.1:9/x");'), "network"),
    "dynamic_import": (sketch('import("http://127.0.0.1:9/x.js");'), "network"),
    "websocket": (sketch('new WebSocket("ws://127.0.0.1:9");'), "network"),
    "load_image": (sketch('loadImage("flower.png");'), "external_load"),
    "image_request": (sketch('const im = new Image(); im.src = "http://127.0.0.1:9/x.png";'), "external_load"),
    "store_item": (sketch('storeItem("palette", "#c2366a");'), "dom"),
    "ses_compartment": (sketch('new Compartment().evaluate("1");'), "eval"),
    "data_uri": (sketch('const src = "data:image/png;base64,AAAA";'), "external_load"),
    "inner_html": (sketch('document.body.innerHTML = "<img src=x>";'), "dom"),
    "local_storage": (sketch('localStorage.setItem("a", "b");'), "dom"),
    "create_element": (sketch('createDiv("hello");'), "dom"),
    "text": (sketch('text("a hibiscus", 100, 100);'), "text"),
    "eval": (sketch('eval("1 + 1");'), "eval"),
    "function_ctor": (sketch('new Function("return 1")();'), "eval"),
    "resize": (sketch("resizeCanvas(1024, 1024);"), "canvas"),
    "two_canvases": (sketch(canvas="createCanvas(512, 512, WEBGL); createCanvas(512, 512, WEBGL);"), "canvas"),
    "unknown_brush": (sketch("brush.bleed(0.2);"), "unknown_brush_method"),
    "computed_brush": (sketch('brush["fi" + "ll"]("#000", 100);'), "unknown_brush_method"),
    "bare_ellipse": (sketch("ellipse(100, 100, 50, 50);"), "bare_primitives"),
    "no_painting": (sketch(paint=""), "no_brush_painting"),
}


@pytest.mark.parametrize("name", sorted(STATIC_CASES))
def test_static_gate_rejects(name):
    completion, reason = STATIC_CASES[name]
    code = extract_code(completion) if completion.startswith(("Sorry", "Here")) else completion
    verdict = static_gate(code, completion)
    expected = reason or "no_code"
    assert verdict is not None and verdict.reason == expected, verdict
    assert verdict.reason in REASONS


def test_static_gate_ignores_comments_and_strings():
    code = sketch('// a point(256, 256) at the centre, like text("x") or fetch()\n  const note = "ellipse(1,2) document";')
    assert static_gate(code) is None


def test_fixture_sketches_pass_static_gate(sketches):
    assert len(sketches) >= 6
    for name, code in sketches.items():
        assert static_gate(code) is None, name


@pytest.fixture(scope="module")
def fresh_page() -> dict:
    """What a fresh pool's warm sandbox page holds before any sketch: `brush`'s own names, and the allowed
    globals it lacks (one page for both readings)."""
    from lit_watercolour.sandbox import RenderPool

    async def read():
        async with RenderPool(size=1) as pool:
            warm = await pool._take_page()
            try:
                return {"brush": set(await warm.page.evaluate("Object.keys(brush)")),
                        "missing": await warm.page.evaluate("[...__lw.missing]")}
            finally:
                await pool._discard(warm)

    return asyncio.run(read())


def test_brush_export_table_matches_the_real_library(fresh_page):
    assert fresh_page["brush"] == BRUSH_EXPORTS  # the page's own view of `brush`


def test_the_page_provides_every_allowed_name(fresh_page):
    """The allowlist holds no dead name: every allowed global exists in the page (p5's, the language's or the page's own)."""
    assert fresh_page["missing"] == []


def test_docs_list_the_allowlist():
    """docs/gate.md carries the table exactly as lit_watercolour.allowlist renders it."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "gate.md").read_text()
    listed = docs.split("<!-- allowlist:begin -->\n", 1)[1].split("<!-- allowlist:end -->", 1)[0]
    assert listed == allowlist.markdown()
    assert set(allowlist.REFUSED) <= set(REASONS)  # a refused category is the gate's reason
    for name, category in allowlist.WORLD.items():
        assert f"`{name}`" in listed and category in allowlist.CATEGORIES


# Runtime: (code, reason, must the static gate let it through?)
RUNTIME_CASES = {
    "syntax_error": (sketch("let x = ;"), "syntax_error"),
    "throws": (sketch('throw new Error("boom");'), "runtime_error"),
    "throws_non_error": (sketch("throw 42;"), "runtime_error"),
    "infinite_loop": (sketch("while (true) {}"), "timeout"),
    "blank": (sketch(paint='brush.fill("#c2366a", 160);\n  brush.circle(-400, -400, 30);'), "blank_canvas"),
    "fetch_evasive": (sketch('this["fe" + "tch"]("http://127.0.0.1:9/x");'), "network"),
    "image_request": (sketch('const im = new this["Im" + "age"](); im.src = "http://127.0.0.1:9/x.png";'), "external_load"),  # no Image to make
    "load_image_evasive": (sketch('this["load" + "Image"]("flower.png");'), "external_load"),
    "inner_html_evasive": (sketch('this["docu" + "ment"].body["inner" + "HTML"] = "<h1>hibiscus</h1>";'), "dom"),
    "storage_evasive": (sketch('this["local" + "Storage"].setItem("a", "b");'), "dom"),
    "text_evasive": (sketch('this["te" + "xt"]("a hibiscus", 100, 100);'), "text"),
    "eval_evasive": (sketch('[].map["constr" + "uctor"]("return 1")();'), "eval"),
    "giant_canvas": (sketch(canvas="createCanvas(2 ** 12, 2 ** 12, WEBGL);"), "canvas"),  # literal sizes: static
    "bare_evasive": (sketch('this["ell" + "ipse"](100, 100, 80, 80);'), "bare_primitives"),
}


@pytest.fixture(scope="module")
def runtime_verdicts(render_pool):
    names = sorted(RUNTIME_CASES)
    # Only the sketches meant to time out get a short limit (a second of CPU proves a loop as well as more
    # would): the others must get their own verdict however loaded the machine is.
    futures = {n: render_pool.submit(RUNTIME_CASES[n][0], 1, timeout_s=1.0 if RUNTIME_CASES[n][1] == "timeout" else 120.0) for n in names}
    good = render_pool.submit(GOOD, 1)
    verdicts = {n: gate(RUNTIME_CASES[n][0], f.result()) for n, f in futures.items()}
    after = render_pool.submit(GOOD, 1).result()  # the pool keeps serving afterwards
    return verdicts, gate(GOOD, good.result()), gate(GOOD, after)


@pytest.mark.parametrize("name", sorted(RUNTIME_CASES))
def test_runtime_gate_rejects(name, runtime_verdicts):
    code, reason = RUNTIME_CASES[name]
    assert static_gate(code) is None, "the static scan must let this one through to the page"
    verdict = runtime_verdicts[0][name]
    assert not verdict.passed and verdict.reason == reason, verdict


def test_good_sketch_passes_before_and_after_bad_ones(runtime_verdicts):
    _, before, after = runtime_verdicts
    assert before.passed and before.reason == "ok"
    assert after.passed and after.reason == "ok"


def test_fixture_sketches_pass_the_gate(rendered, sketches):
    names = sorted(sketches)
    results = rendered([sketches[n] for n in names], [0] * len(names))
    for name, result in zip(names, results):
        verdict = gate(sketches[name], result)
        assert verdict.passed, (name, verdict)


LEGIT = Path(__file__).resolve().parent / "legit"


def legit_corpus() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(LEGIT.glob("*.js"))}


# Honest patterns the parser must not mistake for cheating.
LEGIT_STATIC = {
    "local_point": sketch("const point = (x, y) => [x, y];\n  const p = point(1, 2);"),
    "helper_load_palette": "function loadPalette() { return ['#fff']; }\n" + sketch("loadPalette();"),
    "let_location": sketch("let location = 3, navigator = 4;\n  location += navigator;"),
    "param_named_text": sketch("const label = (text) => text.length;\n  label('x');"),
    "destructured": "const {circle, fill: paint} = brush;\n" + sketch(paint='paint("#123456", 100);\n  circle(256, 256, 80);'),
    "aliased_brush": sketch(paint='const b = brush;\n  b.fill("#c2366a", 160);\n  b.circle(256, 256, 80);'),
    "polygon_class": sketch(paint="new brush.Polygon([[10, 10], [300, 40], [200, 300]]).fill();"),
    "canvas_expression": sketch(canvas="createCanvas(min(512, windowWidth), 512, WEBGL);"),
    "regex_with_slash": sketch("const re = /a\\/b/g;\n  const t = `x${1}`;"),
    "p5_vector": sketch("const v = p5.Vector.fromAngle(0.5, 10);\n  brush.circle(v.x + 256, v.y + 256, 40);"),
    "strings_and_comments": sketch('// a point(256, 256) at the centre, like text("x") or fetch()\n  const note = "ellipse(1,2) document";'),
}


@pytest.mark.parametrize("name", sorted(LEGIT_STATIC))
def test_static_gate_passes_honest_patterns(name):
    assert static_gate(LEGIT_STATIC[name]) is None


STATIC_EVASIONS = {
    "regex_hides_fetch": (sketch('const re = /x\\//; fetch("http://127.0.0.1:9/");'), "network"),
    "backtick_regex": (sketch("const a = /`/; ellipse(1, 2, 3, 4); const b = /`/;"), "bare_primitives"),
    "spread_text": (sketch('text(...["hi", 1, 2]);'), "text"),
    "alias_ellipse": (sketch("const e = ellipse; e(1, 2, 3, 4);"), "bare_primitives"),
    "global_this_computed": (sketch('globalThis["ell" + "ipse"](1, 2, 3, 4);'), "dom"),
    "drawing_context": (sketch("drawingContext.clear(16384);"), "raw_drawing"),
    "source_url": (sketch("//# sourceURL=p5.min.js"), "eval"),
    "canvas_too_small": (sketch(canvas="createCanvas(100, 100, WEBGL);"), "canvas"),
    "canvas_too_large": (sketch(canvas="createCanvas(600, 2000, WEBGL);"), "canvas"),
    "aliased_create_canvas": (sketch(canvas="const c = createCanvas; c(512, 512, WEBGL);"), "canvas"),
    "destructured_unknown": ("const {bleed} = brush;\n" + sketch("bleed(0.2);"), "unknown_brush_method"),
    "p5_instance_mode": ("new p5((p) => { p.setup = () => p.createCanvas(512, 512, p.WEBGL); });\n" + sketch(), "dom"),
    "p5_instance": (sketch("p5.instance.line(1, 2, 3, 4);"), "dom"),
    "shadowed_only_in_other_scope": ("function f() { const ellipse = 1; return ellipse; }\n" + sketch("ellipse(1, 2, 3, 4);"), "bare_primitives"),
}


@pytest.mark.parametrize("name", sorted(STATIC_EVASIONS))
def test_static_gate_sees_through_the_tokenizer_evasions(name):
    code, reason = STATIC_EVASIONS[name]
    verdict = static_gate(code)
    assert verdict is not None and verdict.reason == reason, verdict


def test_legit_corpus_passes(rendered):
    corpus = legit_corpus()
    assert len(corpus) >= 15
    names = sorted(corpus)
    for name in names:
        assert static_gate(corpus[name]) is None, name
    results = rendered([corpus[n] for n in names], [3] * len(names))
    failed = {n: gate(corpus[n], r) for n, r in zip(names, results) if not gate(corpus[n], r).passed}
    assert not failed, failed


def test_recipe_skeleton_comes_back_at_its_own_size(rendered):
    code = legit_corpus()["recipe_skeleton_600"]
    (result,) = rendered([code], [3])
    assert gate(code, result).passed
    assert (result.width, result.height) == (600, 600)
    assert Image.open(io.BytesIO(result.png)).size == (600, 600)  # the conftest pool paints at density 1


def test_canvas_resized_or_repeated_or_out_of_range_fails(render_pool):
    cases = {
        "resized": sketch('this["resize" + "Canvas"](700, 700);'),
        "second_canvas": sketch('this["create" + "Canvas"](512, 512, WEBGL);'),
        "out_of_range": sketch(canvas="createCanvas(50 * 2, 512, WEBGL);"),
    }
    for name, code in cases.items():
        assert static_gate(code) is None, name
    results = {n: render_pool.submit(c, 1).result() for n, c in cases.items()}
    for name, result in results.items():
        verdict = gate(cases[name], result)
        assert verdict.reason == "canvas", (name, verdict)


def test_same_code_and_seed_paint_the_same_picture(render_pool):
    """Time (Date, performance.now, millis, second() ... year(), frame time) and crypto's randomness are the page's
    own, virtual and seeded: SwiftShader's rasteriser noise is all that may differ."""
    corpus = legit_corpus()
    for name in ("clock_date_now", "clock_performance_millis", "clock_p5_parts", "crypto_seeded"):
        first, second = render_pool.render_many([corpus[name]] * 2, [11, 11])
        a, b = (np.asarray(Image.open(io.BytesIO(r.png)).convert("RGB"), dtype=np.int16) for r in (first, second))
        differing = int((np.abs(a - b).max(axis=2) > 0).sum())
        assert differing <= 64, (name, differing)


# A sampled sketch can be any text: a header repeated mid-call, a cut at any character, a bracket
# dropped. tree-sitter recovers with ERROR nodes (even at the root); the gate must still answer.
MALFORMED_SEED = (
    "function setup() {\n  createCanvas(512, 512,function setup() {\n  noLoop();\n"
    "function draw() {\n  background(250);\n  brush.circle(256, 256, 120);\n}\n"
)


def malformed_variants() -> list[str]:
    hostile = Path(__file__).resolve().parent / "hostile"
    sources = [MALFORMED_SEED, GOOD, *legit_corpus().values(), *(p.read_text() for p in sorted(hostile.glob("*.js")))]
    variants = []
    for source in sources:
        variants += [source[:cut] for cut in range(0, len(source), max(1, len(source) // 23))]
        variants += [source.replace(bracket, "", 1) for bracket in "{}()[]`\"'/"]
        variants += [source.replace("{", "{ function setup() {", 1), source.replace(")", ", (", 1), source[::-1]]
    return variants


def test_static_gate_answers_every_malformed_sketch():
    variants = malformed_variants()
    assert len(variants) > 1000
    for code in variants:
        verdict = static_gate(code)
        assert verdict is None or verdict.reason in REASONS, (verdict, code)
    assert static_gate(MALFORMED_SEED) is not None  # unbalanced: truncated, never rendered


def test_malformed_sketch_fails_with_its_reason_and_the_pool_goes_on(render_pool):
    broken = GOOD.replace("{", "{ createCanvas(512, 512,", 1)  # balanced, but the browser cannot parse it
    results = render_pool.render_many([broken, GOOD], [0, 0])
    verdicts = [static_gate(code) or gate(code, result) for code, result in zip([broken, GOOD], results)]
    assert not verdicts[0].passed and verdicts[0].reason in REASONS and verdicts[0].reason != "ok", verdicts[0]
    assert verdicts[1].passed, verdicts[1]
