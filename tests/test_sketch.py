"""Code extraction and the lexical helpers the gate scans with."""

from __future__ import annotations

from lit_watercolour.sketch import (
    brackets_balance,
    called_names,
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


def test_called_names_are_bare_calls_only():
    assert called_names("ellipse(1); brush.circle(2); x.rect(3); line (4)") == {"ellipse", "line"}


def test_brackets_balance():
    assert brackets_balance("function f() { return [1, (2)]; }")
    assert not brackets_balance("function f() { return [1, (2]; }")
    assert not brackets_balance("function f() {")
