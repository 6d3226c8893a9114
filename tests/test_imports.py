"""The package's imports go one way: no module reaches itself through the modules it imports.

Every ``import`` in gptask is counted, at module level and inside functions (a lazy import is a
dependency all the same), plus the ``__init__`` of each sub-package a module imports from outside
that package (Python runs it first). Three kinds of import are not dependencies and are skipped: the
root package ``gptask`` (a facade that resolves the public names), the ``__getattr__`` of a
package ``__init__`` (a facade resolving names on first use) and the body of ``if TYPE_CHECKING:``
(read by type checkers for annotations only, never run)."""

import ast
from pathlib import Path

import gptask

PKG = Path(gptask.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _facade_nodes(tree: ast.Module, is_init: bool) -> set[int]:
    skip: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skip |= {id(n) for n in ast.walk(node)}
        if is_init and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        is_init = path.name == "__init__.py"
        package = name if is_init else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        skip = _facade_nodes(tree, is_init)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            for t in targets:
                if t not in mods or t == "gptask" or t == name:
                    continue
                graph[name].add(t)
                parts = t.split(".")
                for k in range(2, len(parts)):  # the sub-packages Python runs first
                    parent = ".".join(parts[:k])
                    if parent in mods and not name.startswith(parent + ".") and parent != name:
                        graph[name].add(parent)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_no_import_cycles():
    assert find_cycle(import_graph()) is None, " -> ".join(find_cycle(import_graph()))


def test_the_checker_sees_a_cycle_and_the_layers_it_guards():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    g = import_graph()
    assert "gptask.transfer.model" in g["gptask.model_io"]  # model files build on transfer ...
    assert not any(m.startswith("gptask.model_io") for m in g["gptask.transfer.model"])  # ... never back
    assert "gptask.model_io" in g["gptask.result"]  # result.save_model: result sits above model files
    assert "gptask.tuning.loop" in g["gptask.transfer.tla2"]  # TLA2 runs on the tuning engine
    assert not {m for m in g["gptask.transfer"] if m.endswith("tla2")}  # which model files never import
    assert not {m for m in g["gptask.models.lcm"] if not m.startswith("gptask.models")}  # pure numerics
