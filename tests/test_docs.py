"""The docs describe the tree as it is: every path, module, test and link the README and docs/ cite exists, every
gate reason, config, script and render setting is documented, the README's figures are results.md's, nothing points
outside the repository, and no comment cites a README section that is gone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lit_watercolour.gate import REASONS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lit_watercolour"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("lit_watercolour", "scripts", "configs", "renderer", "tests", "docs")
INNER = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_"))
# a path into the tree: from a top folder, or a file from inside the package (`rewards/base.py`, as the README's layout)
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w|(?:%s)/[\w/]*\w\.py)" % ("|".join(TOP), "|".join(INNER)))
FILE = re.compile(r"`(\w+\.(?:py|sh))`")  # a file named alone: it must be where such files are
MODULE = re.compile(r"(?<![\w./-])(lit_watercolour(?:\.\w+)+)")
SHORT = re.compile(r"`(\w+(?:\.\w+)+)`")  # `grpo.group_advantages`, `policy.lora_r`: a module's name or a config's field
LINK = re.compile(r"\]\(([^)\s]+)\)")
TEST = re.compile(r"tests/(\w+\.py)::(\w+)")  # a test by name
# a figure: a number standing alone or after an `x` (x82), never part of a name (Qwen3, H100)
NUMBER = re.compile(r"(?:(?<=\bx)|(?<![\w.]))(\d[\d,]*(?:\.\d+)?)")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
SCRIPT_CALL = re.compile(r"(scripts/[\w/]+\.(?:py|sh))([^`\n|]*)")  # a script and what follows it in its code span
OPTION = re.compile(r"(?<![\w-])--([a-z][\w-]*)(?![\w.-])")  # `--model.x` is fit's, passed through: not matched
# config sections of `model:` and the dataclass each is (their fields are cited as `grpo.beta`)
SECTIONS = {"policy": ("policy.py", "PolicyConfig"), "sampling": ("sampling/base.py", "SamplingConfig"),
            "grpo": ("update.py", "GRPOConfig"), "optim": ("update.py", "OptimConfig"),
            "threads": ("update.py", "ThreadsConfig"), "vllm": ("sampling/base.py", "VLLMConfig"),
            "render": ("sandbox/config.py", "RenderConfig")}
CLI_SECTIONS = {"model", "data", "trainer"}  # `data.source` is a command line key, not lit_watercolour.data's
# a citation of a README section: README, "Section" / README: Section / README.md#anchor; or a bare README
README_CITE = re.compile(r"README(?:\.md)?(?:#([\w-]+)|, \"([^\"]+)\"|: ([A-Z][\w ]*\w))?")
CODE = [*PACKAGE.rglob("*.py"), *(ROOT / "scripts").rglob("*.py"), *(ROOT / "scripts").rglob("*.sh"),
        *(ROOT / "configs").glob("*.yaml"), *(ROOT / "tests").glob("*.py"),
        *(p for p in (ROOT / "renderer").glob("*.*") if p.suffix in (".js", ".html"))]


def dataclass_fields(file: str, name: str) -> set[str]:
    cls = next(n for n in ast.walk(ast.parse((PACKAGE / file).read_text())) if isinstance(n, ast.ClassDef) and n.name == name)
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}


def config_fields(section: str) -> set[str]:
    return dataclass_fields(*SECTIONS[section])


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text().splitlines() if re.match(r"#{1,6} ", line)]


def defines(module: Path, name: str) -> bool:
    return re.search(rf"^\s*(?:async def|def|class) {name}\b|^\s*{name}\s*[:=]|import .*\b{name}\b",
                     module.read_text(), re.M) is not None


def module_exists(dotted: str) -> bool:
    """`lit_watercolour.a.b` as a module or package, or a name one defines (`...pool.RenderPool.render`: the class)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        found = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if found.is_file():
            return i == len(parts) or defines(found, parts[i])
    return False


def stale_citations(text: str, where: Path) -> list[str]:
    """What `text` (a doc at `where`) cites that does not exist: paths, files, modules, config fields, relative
    links and their anchors."""
    stale = []
    blocks = re.split(r"\n\s*\n", text)
    parts = [unit for block in blocks for unit in (block.splitlines() if block.lstrip().startswith("|") else [block])]
    for part in parts:  # a paragraph or a table row at a time
        cited = [p.rstrip(".") for p in PATH.findall(part) if "*" not in p and "<" not in p]
        folders = [ROOT, PACKAGE, *(ROOT / d for d in TOP)]
        for path in cited:
            found = [f / path for f in (ROOT, PACKAGE) if (f / path).exists() or (f / path).with_suffix("").exists()]
            if not found:
                stale.append(path)
            folders += [f if f.is_dir() else f.parent for f in found]
        # a file named alone lives in a top folder or in a folder the same paragraph cites
        stale += [f for f in FILE.findall(part) if not any((d / f).is_file() for d in folders)]
    stale += [m for m in MODULE.findall(text) if not module_exists(m.rstrip("."))]
    for dotted in SHORT.findall(text):
        head, rest = dotted.split(".", 1)
        if dotted.startswith("lit_watercolour.") or head in CLI_SECTIONS or not (
                (PACKAGE / head).is_dir() or (PACKAGE / f"{head}.py").is_file()):
            continue  # checked above, a command line key (data.seed), or not this package's (torch.compile)
        if "." not in rest and head in SECTIONS and rest in config_fields(head):
            continue
        if not module_exists(f"lit_watercolour.{dotted}") and not re.fullmatch(r"\w+\.(py|sh|yaml|md|json|jsonl)", dotted):
            stale.append(dotted)
    stale += [f"tests/{f}::{name}" for f, name in TEST.findall(text)
              if not (ROOT / "tests" / f).is_file() or not defines(ROOT / "tests" / f, name)]
    for link in LINK.findall(text):
        if re.match(r"[a-z]+:", link):  # a web address
            continue
        file, _, anchor = link.partition("#")
        target = (where.parent / file).resolve() if file else where
        if not target.exists():
            stale.append(link)
        elif anchor and target.suffix == ".md" and anchor not in {slug(h) for h in headings(target)}:
            stale.append(link)
    return stale


def test_every_path_module_and_link_the_docs_cite_exists():
    stale = {doc.relative_to(ROOT).as_posix(): found for doc in DOCS if (found := stale_citations(doc.read_text(), doc))}
    assert stale == {}


def test_a_stale_citation_is_caught():
    """The checker itself, on a doc that cites what is gone (so the test above can fail)."""
    doc = ROOT / "docs" / "design.md"
    text = ("| `lit_watercolour/render.py` and `rewards/base.py` | `lit_watercolour/policy.py`, `experts.py` |\n"
            "| `lit_watercolour/kernels/`, `experts.py`, `render.py` |\n\n")
    text += ("`lit_watercolour.render.RenderPool` and `lit_watercolour.sandbox.pool.RenderPool`; "
             "`grpo.linear_logps_and_entropy`, `grpo.group_advantages`, `grpo.beta`, `policy.lora_rank`; "
             "`tests/test_gate.py::test_gone`, `tests/test_docs.py::test_a_stale_citation_is_caught`; "
             "[gone](overlap.md#no-such-part), [here](gate.md#reason-codes)")
    assert stale_citations(text, doc) == ["lit_watercolour/render.py", "experts.py", "lit_watercolour.render.RenderPool",
                                          "grpo.linear_logps_and_entropy", "policy.lora_rank", "tests/test_gate.py::test_gone",
                                          "overlap.md#no-such-part"]


def test_every_gate_reason_is_documented():
    gate_doc = (ROOT / "docs" / "gate.md").read_text()
    assert [r for r in REASONS if f"`{r}`" not in gate_doc] == []


def test_every_config_and_script_is_documented():
    """The README's config table names every config; docs/benchmarks.md every script under scripts/ and scripts/gpu/
    (the `_*` modules are not tools)."""
    readme, benchmarks = (ROOT / "README.md").read_text(), (ROOT / "docs" / "benchmarks.md").read_text()
    assert [c.name for c in sorted((ROOT / "configs").glob("*.yaml")) if f"`{c.name}`" not in readme] == []
    scripts = [p.relative_to(ROOT / "scripts").as_posix() for d in ("scripts", "scripts/gpu") for p in sorted((ROOT / d).iterdir())
               if p.suffix in (".py", ".sh") and not p.name.startswith("_")]
    assert [s for s in scripts if f"`{s}`" not in benchmarks and f"`{s} " not in benchmarks] == []


def unknown_script_options(text: str) -> list[str]:
    """Each `--option` a doc passes to a script that the script does not define (argparse's `--no-X` for `--X`)."""
    unknown = []
    for script, rest in SCRIPT_CALL.findall(text):
        source = (ROOT / script).read_text() if (ROOT / script).is_file() else ""
        unknown += [f"{script} --{o}" for o in OPTION.findall(rest)
                    if not any(f'"--{n}"' in source or f"'--{n}'" in source for n in (o, o.removeprefix("no-")))]
    return unknown


def test_every_script_option_the_docs_use_exists():
    assert {doc.name: found for doc in DOCS if doc.name != "results.md" and (found := unknown_script_options(doc.read_text()))} == {}
    assert unknown_script_options("`python scripts/render.py x.js --out a.png --size 3` and `scripts/bench_render.py "
                                  "--no-compare --no-such`") == ["scripts/render.py --size", "scripts/bench_render.py --no-such"]


def test_every_setting_is_in_its_table():
    """docs/rendering.md's table of `model.render` has a row per RenderConfig field; docs/gate.md names each of the text
    check's settings."""
    rendering, gate_doc = (ROOT / "docs" / "rendering.md").read_text(), (ROOT / "docs" / "gate.md").read_text()
    assert sorted(f for f in dataclass_fields("sandbox/config.py", "RenderConfig") if f"| `{f}` |" not in rendering) == []
    assert sorted(f for f in dataclass_fields("sandbox/text_check.py", "TextCheck") if f"`{f}`" not in gate_doc) == []


def unsourced_figures(readme: str, results: str) -> list[str]:
    """Each figure of the README's Results tables that the results.md entries of its date (the row's, or the
    paragraph's above the table) do not hold, as 'date: figure'."""
    entries = {}
    for entry in re.split(r"\n(?=## )", results):
        if m := re.match(r"## (\d{4}-\d{2}-\d{2}) ", entry):
            entries[m[1]] = entries.get(m[1], "") + entry
    section = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    missing, dates = [], []
    for block in re.split(r"\n\s*\n", section):  # a table is its own block; the paragraph above gives its date
        lines = block.splitlines()
        dates = DATE.findall(" ".join(line for line in lines if not line.startswith("|"))) or dates
        for row in [line for line in lines if line.startswith("|")][2:]:  # past the header and its rule
            date = (DATE.findall(row) or dates)[0]
            held = entries.get(date, "")
            missing += [f"{date}: {n}" for n in NUMBER.findall(DATE.sub("", row))
                        if not re.search(rf"(?<![\d.]){re.escape(n)}(?!\d|\.\d)", held)]
    return missing


def test_the_readme_figures_are_results_md_figures():
    assert unsourced_figures((ROOT / "README.md").read_text(), (ROOT / "docs" / "results.md").read_text()) == []


def test_an_unsourced_figure_is_caught():
    results = "## 2026-01-02 A run\n1.58x at 0.38x, 109.4 s\n\n## 2026-01-03 Another\n7 min\n"
    readme = ("# x\n\n## Results\n\nThe learning (2026-01-03):\n\n| a | b |\n|---|---|\n| 7 min | 8 min |\n\n"
              "| what | date | result |\n|---|---|---|\n| H100 step | 2026-01-02, H100 | 1.58x at 0.25x; 109 s |\n\n## Next\n")
    assert unsourced_figures(readme, results) == ["2026-01-03: 8", "2026-01-02: 0.25", "2026-01-02: 109"]


def test_nothing_points_outside_the_repository():
    outside = [f"{p.relative_to(ROOT)}:{n}" for p in [*DOCS, *CODE] if p.name != Path(__file__).name for n, line in enumerate(p.read_text().splitlines(), 1)
               if "../shared" in line or "/work/" in line]
    assert outside == [], "\n".join(outside)


def test_no_comment_cites_a_readme_section_that_is_gone():
    """A citation of the README names a section it has (`README, "Section"`, `README: Section`, `README.md#anchor`);
    a bare "README" names none, so nothing could say when it went stale."""
    sections = headings(ROOT / "README.md")
    anchors = {slug(h) for h in sections}
    bad = []
    for path in CODE:
        if path.name == Path(__file__).name:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in README_CITE.finditer(line):
                anchor, quoted, after_colon = m.groups()
                if line[m.end():m.end() + 1] == "`" or re.search(r"[/\w]README|README\.md[\"'`]", line):
                    continue  # a file named README.md (a path, a dataset card), not a citation
                section = quoted or after_colon
                ok = (anchor in anchors) if anchor else any(s.startswith(section) for s in sections) if section else False
                if not ok:
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert bad == [], "\n".join(bad)
