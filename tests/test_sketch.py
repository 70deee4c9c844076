"""Code extraction and the lexical helpers the gate scans with."""

from __future__ import annotations

from lit_watercolour.sketch import (
    analyse,
    brackets_balance,
    decode_identifier_escapes,
    extract_code,
    is_truncated,
    scan_source,
    strip_comments,
)


def test_last_complete_block_wins():
    completion = "First try:\n```js\nfunction setup() { one(); }\n```\nBetter:\n```javascript\nfunction setup() { two(); }\n```\nDone."
    assert extract_code(completion) == "function setup() { two(); }"


def test_bare_fence_and_bare_code():
    assert extract_code("```\nfunction setup() {}\n```") == "function setup() {}"
    assert extract_code("function setup() {\n  noLoop();\n}") == "function setup() {\n  noLoop();\n}"
    assert extract_code("I would paint a flower.") is None
    assert extract_code("```js\n\n```") is None


def test_unterminated_fence_is_truncated():
    cut = "Here:\n```js\nfunction setup() {\n  createCanvas(512, 512, WEBGL);\n"
    assert is_truncated(cut)
    assert extract_code(cut).startswith("function setup()")
    assert not is_truncated("```js\nfunction setup() {}\n```\nand then ```js\nmore")  # a complete block exists


def test_comments_stripped_strings_kept():
    code = 'const a = "// not a comment"; // point(1, 2)\n/* text("x") */ brush.circle(1, 2, 3);'
    stripped = strip_comments(code)
    assert '"// not a comment"' in stripped and "point" not in stripped and "text" not in stripped
    assert "brush.circle" in stripped


def test_scan_blanks_strings_and_decodes_escapes():
    source = scan_source('brush.fill("#ellipse(", 100); \\u0066etch(x);')
    assert "ellipse" not in source and "fetch(x)" in source
    assert decode_identifier_escapes("\\u{65}val") == "eval"


def test_free_calls_are_bare_calls_only():
    assert set(analyse("ellipse(1); brush.circle(2); x.rect(3); line (4)").free_calls) == {"ellipse", "line"}


def test_brackets_balance():
    assert brackets_balance("function f() { return [1, (2)]; }")
    assert not brackets_balance("function f() { return [1, (2]; }")
    assert not brackets_balance("function f() {")


def test_analyse_resolves_names_through_scopes():
    facts = analyse(
        "const point = (x) => x;\n"
        "function setup() { let location = point(1); ellipse(1, 2, 3, 4); }\n"
        "function other(text) { return text; }\n"
        "try { f(); } catch (document) { document.x; }"
    )
    assert facts.free_calls.count("ellipse") == 1 and "point" not in facts.free_refs
    assert not {"location", "text", "document"} & facts.free_refs
    assert {"ellipse", "f"} <= facts.free_refs
    assert facts.entry_points == {"setup"}


def test_analyse_follows_brush_aliases():
    facts = analyse("const {circle, rect: r, bleed} = brush;\nconst b = brush, c = brush.line;\ncircle(1, 2, 3); r(1, 2, 3, 4); b.fill(1); c(1, 2, 3, 4); new brush.Polygon([]);")
    assert facts.brush_used == {"circle", "rect", "bleed", "fill", "line", "Polygon"}
    assert facts.brush_called == {"circle", "rect", "fill", "line"}
    assert facts.brush_classes == {"Polygon"}
    assert not analyse("function f(brush) { brush.anything(); }").brush_used  # a parameter, not p5.brush


def test_analyse_is_not_fooled_by_regexes_templates_and_spreads():
    facts = analyse("const re = /x\\//; const s = `a ${b} /* c */`; const r2 = /`/; text(...xs); fetch(re);")
    assert {"text", "fetch", "b"} <= set(facts.free_calls) | facts.free_refs
    assert "c" not in facts.free_refs


def test_analyse_reads_create_canvas_arguments():
    assert analyse("createCanvas(600, 600, WEBGL);").canvases == [(True, 600.0, 600.0)]
    assert analyse("createCanvas(min(512, windowWidth), 512, WEBGL);").canvases == [(True, None, 512.0)]
    assert analyse("createCanvas(512, 512);").canvases == [(False, 512.0, 512.0)]
    assert analyse("createCanvas(...size);").canvases == [(None, None, None)]


def test_analyse_flags_a_missing_closing_bracket():
    assert analyse("function setup() { createCanvas(512, 512, WEBGL);").truncated
    assert not analyse("function setup() { const re = /[(]/; }").truncated
