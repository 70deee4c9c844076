"""From a model's completion to the sketch source, and what the gate reads in it.

`analyse` parses a sketch with tree-sitter's JavaScript grammar and resolves its names through
its own scopes (see `Facts`); the lexical helpers below it (comments, strings, brackets) serve
the length reward and the corpus checks.

A completion is prose around one or more fenced code blocks (```js, ```javascript or bare
```), or bare code. The last complete block wins (models revise); an opening fence that is
never closed means the completion was cut off.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

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


# The parser-based view of a sketch (tree-sitter's JavaScript grammar): which names the code
# binds itself, in which scope, and what the rest of its references, calls and strings are.
_FUNCTIONS = frozenset(
    "function_declaration generator_function_declaration function_expression function generator_function "
    "arrow_function method_definition".split()
)
_BLOCKS = frozenset("program statement_block for_statement for_in_statement switch_body class_body catch_clause".split())
_BRUSH = "brush"


@dataclass
class Facts:
    """What the parser saw in a sketch. Free names are those the sketch does not bind itself
    (globals: p5's functions, the browser's, `brush`); a local `point` or `location` is not free."""

    truncated: bool = False  # a closing bracket is missing at the end
    free_calls: list[str] = field(default_factory=list)  # f(...) with f free
    free_refs: set[str] = field(default_factory=set)  # every free name read, called or not
    free_values: set[str] = field(default_factory=set)  # free names used as values (aliased, passed on)
    free_new: set[str] = field(default_factory=set)  # new F(...) with F free
    members: set[str] = field(default_factory=set)  # property names accessed with a dot
    free_uses: dict[str, set[str]] = field(default_factory=dict)  # free name -> X of name.X ("*": any other use)
    brush_used: set[str] = field(default_factory=set)  # brush.X, whether called, aliased or destructured
    brush_called: set[str] = field(default_factory=set)  # brush.X(...) or a call through an alias of it
    brush_classes: set[str] = field(default_factory=set)  # new brush.X(...)
    brush_computed: bool = False  # brush[expr]
    canvases: list[tuple[bool | None, float | None, float | None]] = field(default_factory=list)  # createCanvas: (WEBGL?, w, h)
    strings: list[str] = field(default_factory=list)  # string and template literal text
    string_timer: bool = False  # setTimeout/setInterval given a string
    imports: bool = False  # import(...) or an import statement
    entry_points: set[str] = field(default_factory=set)  # setup/draw defined at the top level


def _pattern_names(node) -> list:
    """The identifier nodes a binding pattern declares."""
    if node.type in ("identifier", "shorthand_property_identifier_pattern"):
        return [node]
    if node.type == "pair_pattern":
        return _pattern_names(node.child_by_field_name("value"))
    if node.type in ("assignment_pattern", "object_assignment_pattern"):
        return _pattern_names(node.child_by_field_name("left"))
    if node.type in ("object_pattern", "array_pattern", "rest_pattern"):
        return [n for c in node.named_children for n in _pattern_names(c)]
    return []


def _enclosing(node, kinds: frozenset):
    """The nearest ancestor of one of `kinds`, else the root (an ERROR node where recovery failed)."""
    node = node.parent
    while node.parent is not None and node.type not in kinds:
        node = node.parent
    return node


@functools.lru_cache(maxsize=1)
def _parser():
    import tree_sitter
    import tree_sitter_javascript

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))


def analyse(code: str) -> Facts:
    """Parse `code` and resolve its names: a call is a p5 or browser call only when the sketch
    does not bind that name itself in an enclosing scope."""
    tree = _parser().parse(code.encode("utf-8", "surrogatepass"))
    facts = Facts()
    nodes = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(reversed(node.children))
        if node.is_missing and node.type in (")", "]", "}"):
            facts.truncated = True
    text = lambda n: decode_identifier_escapes(n.text.decode("utf-8", "replace"))  # noqa: E731

    # Pass 1: declarations, each in its scope; aliases of brush and of its methods.
    scopes: dict[int, set[str]] = {}
    binding_ids: set[int] = set()
    aliases: dict[tuple[int, str], str | None] = {}  # (scope, name) -> brush method, None for brush itself

    def declare(scope, ident) -> None:
        binding_ids.add(ident.id)
        if scope.parent is None and text(ident) == _BRUSH:
            return  # redeclaring the page's brush at the top level is the browser's SyntaxError, not a local
        scopes.setdefault(scope.id, set()).add(text(ident))

    for node in nodes:
        kind = node.type
        if kind == "variable_declarator":
            target = node.child_by_field_name("name")
            decl = node.parent
            scope = _enclosing(node, _FUNCTIONS) if decl.type == "variable_declaration" else _enclosing(node, _BLOCKS)
            for ident in _pattern_names(target):
                declare(scope, ident)
            value = node.child_by_field_name("value")
            if value is not None:
                facts.brush_used |= _note_alias(target, value, scope, aliases, text)
        elif kind in ("function_declaration", "generator_function_declaration", "class_declaration"):
            name = node.child_by_field_name("name")
            if name is not None:
                declare(_enclosing(node, _BLOCKS), name)
        elif kind in ("function_expression", "function", "generator_function", "class"):
            name = node.child_by_field_name("name")
            if name is not None:
                declare(node, name)
        elif kind == "formal_parameters":
            for param in node.named_children:
                for ident in _pattern_names(param):
                    declare(node.parent, ident)
        elif kind == "arrow_function":
            param = node.child_by_field_name("parameter")
            if param is not None:
                declare(node, param)
        elif kind == "catch_clause":
            param = node.child_by_field_name("parameter")
            if param is not None:
                for ident in _pattern_names(param):
                    declare(node, ident)
        elif kind == "for_in_statement" and node.child_by_field_name("kind") is not None:
            for ident in _pattern_names(node.child_by_field_name("left")):
                declare(node if text(node.child_by_field_name("kind")) != "var" else _enclosing(node, _FUNCTIONS), ident)

    def resolve(ident) -> tuple[bool, str | None | bool]:
        """(bound by the sketch?, brush alias: a method name, None for brush itself, False if none)."""
        name = text(ident)
        scope = ident.parent
        while scope is not None:
            if name in scopes.get(scope.id, ()):
                return True, aliases.get((scope.id, name), False)
            scope = scope.parent
        return False, (None if name == _BRUSH else False)

    # Pass 2: references.
    for node in nodes:
        kind = node.type
        if kind in ("string_fragment", "template_string") or (kind == "string" and not node.named_children):
            facts.strings.append(text(node))
        if kind == "import_statement" or kind == "import":
            facts.imports = True
        if kind == "member_expression":
            prop = node.child_by_field_name("property")
            if prop is not None:
                facts.members.add(text(prop))
            obj = node.child_by_field_name("object")
            if obj.type == "identifier" and resolve(obj)[1] is None and prop is not None:
                facts.brush_used.add(text(prop))
                parent = node.parent
                if parent.type == "call_expression" and parent.child_by_field_name("function") == node:
                    facts.brush_called.add(text(prop))
                if parent.type == "new_expression":
                    facts.brush_classes.add(text(prop))
        elif kind == "subscript_expression":
            obj = node.child_by_field_name("object")
            if obj.type == "identifier" and resolve(obj)[1] is None:
                facts.brush_computed = True
        elif kind in ("identifier", "shorthand_property_identifier") and node.id not in binding_ids:
            parent = node.parent
            if parent.type in ("labeled_statement", "break_statement", "continue_statement"):
                continue
            bound, alias = resolve(node)
            name = text(node)
            is_call = parent.type == "call_expression" and parent.child_by_field_name("function") == node
            if alias not in (False, None):
                facts.brush_used.add(alias)
                if is_call:
                    facts.brush_called.add(alias)
            if bound:
                continue
            facts.free_refs.add(name)
            member = parent.type == "member_expression" and parent.child_by_field_name("object") == node
            prop = parent.child_by_field_name("property") if member else None
            facts.free_uses.setdefault(name, set()).add(text(prop) if prop is not None else "*")
            if is_call:
                facts.free_calls.append(name)
                args = parent.child_by_field_name("arguments")
                if name == "createCanvas":
                    facts.canvases.append(_canvas_args(args, text))
                if name in ("setTimeout", "setInterval") and args is not None and args.named_children:
                    facts.string_timer |= args.named_children[0].type in ("string", "template_string")
            elif parent.type == "new_expression" and parent.child_by_field_name("constructor") == node:
                facts.free_new.add(name)
            elif not (parent.type == "member_expression" and parent.child_by_field_name("object") == node) and not (
                parent.type == "subscript_expression" and parent.child_by_field_name("object") == node
            ) and not (parent.type == "assignment_expression" and parent.child_by_field_name("left") == node):
                facts.free_values.add(name)
            if parent.type == "assignment_expression" and parent.child_by_field_name("left") == node and name in ("setup", "draw"):
                facts.entry_points.add(name)
    facts.entry_points |= {n for n in ("setup", "draw") if n in scopes.get(tree.root_node.id, ())}
    return facts


def _note_alias(target, value, scope, aliases, text) -> set[str]:
    """Record `const b = brush`, `const c = brush.circle`, `const {circle, rect: r} = brush`;
    return the brush names destructuring reads."""
    before = set(aliases.values())
    is_brush = value.type == "identifier" and text(value) == _BRUSH
    if target.type == "identifier":
        if is_brush:
            aliases[(scope.id, text(target))] = None
        elif value.type == "member_expression":
            obj, prop = value.child_by_field_name("object"), value.child_by_field_name("property")
            if obj.type == "identifier" and text(obj) == _BRUSH and prop is not None:
                aliases[(scope.id, text(target))] = text(prop)
    elif target.type == "object_pattern" and is_brush:
        for part in target.named_children:
            if part.type == "shorthand_property_identifier_pattern":
                aliases[(scope.id, text(part))] = text(part)
            elif part.type == "pair_pattern":
                key, val = part.child_by_field_name("key"), part.child_by_field_name("value")
                for ident in _pattern_names(val):
                    aliases[(scope.id, text(ident))] = text(key).strip("\"'")
            elif part.type == "object_assignment_pattern":
                for ident in _pattern_names(part):
                    aliases[(scope.id, text(ident))] = text(ident)
        return {v for v in aliases.values() if v is not None} - {v for v in before if v is not None}
    return set()


def _canvas_args(args, text) -> tuple[bool | None, float | None, float | None]:
    """(renderer is WEBGL: True/False, None when not evident; width and height when literal)."""
    if args is None:
        return False, None, None
    items = args.named_children
    if any(a.type == "spread_element" for a in items):
        return None, None, None
    renderer = items[2] if len(items) > 2 else None
    webgl = renderer is not None and (text(renderer) == "WEBGL" or text(renderer).strip("\"'`").lower() == "webgl")
    if renderer is not None and not webgl and renderer.type not in ("string", "identifier") :
        webgl = None  # an expression: the page decides

    def number(i):
        if i < len(items) and items[i].type == "number":
            try:
                return float(text(items[i]).replace("_", ""))
            except ValueError:
                return None
        return None

    return webgl, number(0), number(1)
