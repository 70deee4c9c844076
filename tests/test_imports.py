"""The package's import graph: every module imports in a fresh interpreter, the package-internal imports (at
module level, inside functions, or for type checking only) form no cycle, and the layers hold (the contract
below, in the style of import-linter's forbidden contracts: no chain of imports at all, direct or not)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lit_watercolour"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, modules: set[str]) -> set[str]:
    """The package's modules this tree imports, wherever the import statement stands."""
    out = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import submodule` imports the submodule; `from module import name` the module
            out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names}
        todo.extend(ast.iter_child_nodes(node))
    return out & modules


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imported(ast.parse(path.read_text()), set(files)) - {name} for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules (first == last), or None: depth-first search with colours."""
    state, stack = {}, []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_import_graph_has_no_cycle():
    graph = import_graph()
    assert {"lit_watercolour.module", "lit_watercolour.rollout", "lit_watercolour.records"} <= set(graph)
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_imports_in_a_fresh_interpreter():
    names = sorted(import_graph())
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run([sys.executable, "-c", code, *names], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


OFFLINE = "lit_watercolour.offline"
REWARD_CONTRACT = {"lit_watercolour.rewards.base", "lit_watercolour.rewards.mix"}  # the terms' contract and their mix


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each broken rule as 'importer -> imported: rule', over every chain of imports:
    - the runtime (every module outside `offline`) imports no offline stand-in;
    - the rollout pipeline and the turns import no concrete reward term, only the contract and the mix;
    - the samplers import nothing of the rewards."""
    broken = []
    for module in sorted(graph):
        reached = reachable(graph, module) - {module}
        if not under(module, OFFLINE):
            broken += [f"{module} -> {m}: the runtime imports no offline stand-in" for m in sorted(reached) if under(m, OFFLINE)]
        if module in ("lit_watercolour.rollout", "lit_watercolour.turns"):
            broken += [f"{module} -> {m}: no concrete reward term" for m in sorted(reached)
                       if under(m, "lit_watercolour.rewards") and m not in REWARD_CONTRACT]
        if under(module, "lit_watercolour.sampling"):
            broken += [f"{module} -> {m}: the samplers import no rewards" for m in sorted(reached)
                       if under(m, "lit_watercolour.rewards")]
    return broken


def test_the_layers_hold():
    graph = import_graph()
    assert {"lit_watercolour.rollout", "lit_watercolour.turns", "lit_watercolour.sampling.hf", OFFLINE} <= set(graph)
    assert layer_violations(graph) == []


def test_the_layer_rules_catch_what_they_forbid():
    """Each rule on a small graph that breaks it through a chain, and a graph that keeps them all."""
    kept = {"lit_watercolour.policy": set(), "lit_watercolour.offline.tiny_models": {"lit_watercolour.policy"},
            "lit_watercolour.turns": {"lit_watercolour.rewards.base"}, "lit_watercolour.rewards.base": set(),
            "lit_watercolour.rewards.judge": {"lit_watercolour.rewards.base"}, "lit_watercolour.sampling.hf": set()}
    assert layer_violations(kept) == []
    chains = {
        "the runtime imports no offline stand-in": {"lit_watercolour.policy": {"lit_watercolour.kernels"},
                                                      "lit_watercolour.kernels": {"lit_watercolour.offline.tiny_models"}},
        "no concrete reward term": {"lit_watercolour.turns": {"lit_watercolour.rewards.image_stats"}},
        "the samplers import no rewards": {"lit_watercolour.sampling.hf": {"lit_watercolour.rewards.base"}},
    }
    for rule, edges in chains.items():
        graph = {**kept, **{k: kept.get(k, set()) | v for k, v in edges.items()}}
        graph.update({m: graph.get(m, set()) for targets in edges.values() for m in targets})
        assert any(rule in b for b in layer_violations(graph)), rule


def test_a_real_checkpoint_loads_with_no_stand_in(tmp_path):
    """A policy from a transformers folder, and its processor, load without importing `offline` (only
    `PolicyConfig.tiny` does), and the processor is the checkpoint's own class, built with no patch."""
    from lit_watercolour.offline.tiny_models import save_tiny_policy

    path = save_tiny_policy(tmp_path / "vl", "qwen3_5_moe", hidden_size=32, num_layers=1)
    code = (
        "import sys, transformers\n"
        "from PIL import Image\n"
        "from lit_watercolour.policy import PolicyConfig, load_policy, load_processor\n"
        "cfg = PolicyConfig(model=sys.argv[1], dtype='float32', gradient_checkpointing=False)\n"
        "model, tokenizer = load_policy(cfg, 'cpu')\n"
        "processor = load_processor(cfg, tokenizer)\n"
        "out = processor(text=['<|vision_start|><|image_pad|><|vision_end|>'], images=[Image.new('RGB', (64, 64))],"
        " return_tensors='pt')\n"
        "assert out.pixel_values.shape[0] > 0 and processor.video_processor is None\n"
        "assert isinstance(processor, getattr(transformers, type(processor).__name__)), type(processor).__mro__\n"
        "print(sorted(m for m in sys.modules if m.startswith('lit_watercolour.offline')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
