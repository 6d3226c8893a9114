"""The package's imports go one way: layers, bottom first, and no module reaches itself.

The packages of gptask are layers (generated with the layout by relayout.py, issue 41)::

    ['core', 'data', 'space', 'problem', 'evaluation', 'model', 'propose', 'results', 'tuning', 'transfer', 'sources', 'api', 'insight', 'cli']

A module imports from its own package and the packages below it, never above.  Every ``import`` in
gptask is counted: at module level, inside functions (a lazy import is a dependency all the same) and
under ``if TYPE_CHECKING:`` (a type-only import still ties the two modules together for a reader),
plus the ``__init__`` of each sub-package a module imports from outside that package (Python runs it
first).  Two kinds of import are not dependencies: the root package ``gptask`` (a facade resolving
the public names, with ``gptask._moved``, the aliases of old module paths) and the ``__getattr__`` of
a package ``__init__`` (a facade resolving names on first use).  An upward import is allowed only
inside a function, with a comment ``# upward: <why>`` on its line or the line above, and it may
still close no cycle."""

import ast
from pathlib import Path

import gptask

PKG = Path(gptask.__file__).parent
LAYERS = ['core', 'data', 'space', 'problem', 'evaluation', 'model', 'propose', 'results', 'tuning', 'transfer', 'sources', 'api', 'insight', 'cli']


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _facade_nodes(tree: ast.Module, is_init: bool) -> set[int]:
    skip: set[int] = set()
    for node in tree.body:
        if is_init and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def _in_function(tree: ast.Module) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= {id(n) for n in ast.walk(node) if n is not node}
    return inside


def import_edges() -> list[tuple[str, str, int, bool, str]]:
    """(module, imported module, line, inside a function, the comment on or above the line)."""
    mods = _modules()
    edges = []
    for name, path in mods.items():
        is_init = path.name == "__init__.py"
        package = name if is_init else name.rpartition(".")[0]
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        skip = _facade_nodes(tree, is_init)
        inside = _in_function(tree)
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
            if not targets:
                continue
            comment = " ".join(lines[max(0, node.lineno - 2):node.end_lineno])
            for t in targets:
                if t not in mods or t in ("gptask", "gptask._moved") or t == name:
                    continue
                edges.append((name, t, node.lineno, id(node) in inside, comment))
                parts = t.split(".")
                for k in range(2, len(parts)):  # the sub-packages Python runs first
                    parent = ".".join(parts[:k])
                    if parent in mods and not name.startswith(parent + ".") and parent != name:
                        edges.append((name, parent, node.lineno, id(node) in inside, comment))
    return edges


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for a, b, *_ in import_edges():
        graph[a].add(b)
    return graph


def layer(module: str) -> int | None:
    """The layer index of a module of gptask (None: the root facade and its helpers)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def upward_imports() -> list[str]:
    bad = []
    for a, b, line, inside, comment in import_edges():
        la, lb = layer(a), layer(b)
        if la is None or lb is None or lb <= la:
            continue
        if inside and "# upward:" in comment:
            continue
        bad.append(f"{a}:{line} imports {b} ({LAYERS[la]} below {LAYERS[lb]})")
    return bad


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


def test_no_upward_imports():
    assert upward_imports() == []


def test_every_module_sits_in_a_layer():
    loose = [m for m in _modules() if layer(m) is None and m not in ("gptask", "gptask.__main__", "gptask._moved")]
    assert loose == [], "a module outside the layers: add its package to LAYERS or move it"


def test_the_checker_sees_a_cycle_and_the_layers_it_guards():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert layer("gptask.core.labels") < layer("gptask.space.dimensions") < layer("gptask.tuning.tuner")
    g = import_graph()
    assert "gptask.transfer.model" in g["gptask.transfer.model_io"]  # model files build on transfer ...
    assert not any(m.endswith("model_io") for m in g["gptask.transfer.model"])  # ... never back
    assert "gptask.tuning.loop" in g["gptask.transfer.tla2"]  # TLA2 runs on the tuning engine
    assert not {m for m in g["gptask.transfer"] if m.endswith("tla2")}  # which model files never import
    assert not {m for m in g["gptask.model.numerics.lcm"] if not m.startswith("gptask.model.numerics")}  # pure
