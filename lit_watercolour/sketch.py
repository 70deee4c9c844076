"""From a model's completion to the sketch source, and the lexical helpers the gate scans with.

A completion is prose around one or more fenced code blocks (```js, ```javascript or bare
```), or bare code. The last complete block wins (models revise); an opening fence that is
never closed means the completion was cut off.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(js|javascript|jsx|ts|p5|p5js)?[ \t]*\n", re.IGNORECASE)
_CLOSE = re.compile(r"\n[ \t]*```")


def _blocks(completion: str) -> tuple[list[str], bool]:
    """The complete fenced blocks in order, and whether a final fence was left open."""
    blocks, pos = [], 0
    while (opening := _FENCE.search(completion, pos)) is not None:
        closing = _CLOSE.search(completion, opening.end() - 1)
        if closing is None:
            return blocks, True
        blocks.append(completion[opening.end() : closing.start()])
        pos = closing.end()
    return blocks, False


def extract_code(completion: str) -> str | None:
    """The sketch in a completion, or None when there is none.

    With fences, the last complete block; with only an unterminated fence, its partial text
    (the gate calls it truncated, see `is_truncated`); without fences, the whole reply when it
    looks like code (it defines a function).
    """
    blocks, open_fence = _blocks(completion)
    if blocks:
        code = blocks[-1]
    elif open_fence:
        code = completion[_FENCE.search(completion).end() :]
    elif re.search(r"\bfunction\b|=>", completion):
        code = completion
    else:
        return None
    code = code.strip()
    return code or None


def is_truncated(completion: str) -> bool:
    """True when the completion has no complete fenced block but opens one."""
    blocks, open_fence = _blocks(completion)
    return not blocks and open_fence


_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"""
    r"""|(?P<string>"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?|`(?:[^`\\]|\\.)*`?)""",
    re.DOTALL,
)


def strip_comments(code: str) -> str:
    """Code with // and /* */ comments replaced by a space; strings are left intact.

    Comments are stripped before every scan: prose such as `// the centre point (256,256)`
    must not read as a call to point()."""
    return _TOKEN.sub(lambda m: " " if m.group("comment") else m.group(0), code)


def mask_strings(code: str) -> str:
    """Comment-free code with the contents of string literals blanked (quotes kept), so
    scans for identifiers do not fire on a colour name or a sentence in a string."""
    def blank(m: re.Match) -> str:
        if m.group("comment"):
            return " "
        s = m.group(0)
        return s[0] + " " * max(len(s) - 2, 0) + (s[-1] if len(s) > 1 else "")

    return _TOKEN.sub(blank, code)


_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]+)\}|\\u([0-9a-fA-F]{4})")


def decode_identifier_escapes(code: str) -> str:
    """Resolve \\uXXXX and \\u{...} escapes, which JS allows inside identifiers
    (`\\u0066etch` is `fetch`), so a scan sees the name the engine will see."""
    def char(m: re.Match) -> str:
        try:
            return chr(int(m.group(1) or m.group(2), 16))
        except (ValueError, OverflowError):
            return m.group(0)

    return _ESCAPE.sub(char, code)


def scan_source(code: str) -> str:
    """The text the static gate scans: escapes decoded, comments removed, strings blanked."""
    return mask_strings(decode_identifier_escapes(code))


def called_names(source: str) -> set[str]:
    """Names called bare, as `name(`, not as a method `obj.name(`."""
    return set(re.findall(r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*\(", source))


def brush_methods(source: str) -> set[str]:
    """Every `brush.X` (and `brush["X"]`) name the code touches."""
    return set(re.findall(r"\bbrush\s*\.\s*([A-Za-z_$][\w$]*)", source))


def brackets_balance(source: str) -> bool:
    """True when (), [] and {} nest correctly in string-blanked, comment-free code."""
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in source:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack
