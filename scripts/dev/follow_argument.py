"""Follow one argument of ``gt.tune`` through the package, statically (issue 41): how many
functions and files it passes through, and how often the walk comes back to a file it already left.

    python scripts/dev/follow_argument.py sources        # the chain, then the counts
    python scripts/dev/follow_argument.py history --json # the counts as one JSON line
    python scripts/dev/follow_argument.py data --start gptask.sources.importing.store:import_runs

The rule, applied to the source text alone (the ``ast`` of every module of ``gptask/``; nothing is
imported or run):

* The walk starts at ``gptask.api.campaign.tune`` (or the function ``--start MODULE:FUNCTION``) with
  the followed name (the parameter ``ARG``).
* Inside a function, a name *holds the value* when it is the followed parameter, or is bound from a
  value it holds by plain assignment (``y = x``, ``y = x.attr``, ``y = x[k]``, ``y = x or z``),
  by iteration (``for y in x``, ``for k, y in enumerate(x)`` / ``zip(..)`` / ``list(..)`` /
  ``sorted(..)`` / ``reversed(..)``, comprehensions alike), by a conversion (``Path(x)``,
  ``str(x)``, ``list(x)``, ``tuple(x)``, ``dict(x)``, ``os.fspath(x)``) or by ``with x as y``.
  A record of the package built from it holds it too (``s = Source(x, value=v)``, a ``@dataclass``
  class; also as an argument: ``f(Source(x))`` passes the value). Any other call's result never holds the value (``s = open_storage(history)`` stops the walk at ``s``), nor does an
  attribute stored on ``self``.
* A call passes the value when an argument (positional, keyword, ``*a`` or ``**kw``) is such a name
  or an attribute / item of one. The callee is followed when it resolves to a function of the
  ``gptask`` package: a module-level function of the same module, a name imported from a gptask
  module (at module level or inside the function), ``module.func`` for an imported gptask module, a
  class (its ``__init__``), ``self.method`` (the class and its gptask bases) or ``v.method`` where
  ``v`` was bound to a gptask class constructed in the function (``v = C(..)``, ``with C(..) as v``).
  In the callee the parameter the argument binds to holds the value (``**kw`` passes it to the
  parameter of the followed name when there is one, else to the callee's ``**`` parameter).
* Each function is entered once (depth first, in source order of the calls).

Counts: *functions* entered (``gptask.api.campaign.tune`` included); *files* they are in; *returns*: the
entries, in walk order, into a function whose file differs from the previous entry's and was
entered before (the walk left that file and came back). A hand count (issue 41's figures) may
differ: it followed values a call derives (the history's storage, say), which this rule does not.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "gptask"
START = ("gptask.api.campaign", "tune")
ITERATORS = {"enumerate", "zip", "list", "sorted", "reversed", "tuple", "iter"}
#: calls that convert a value without deriving another (``Path(x)`` holds what ``x`` holds)
CONVERSIONS = {"Path", "str", "list", "tuple", "dict", "os.fspath", "fspath"}


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # alias -> (module, attr or None)


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


def _imports_of(node: ast.AST, module: str, is_package: bool) -> dict[str, tuple[str, str | None]]:
    out: dict[str, tuple[str, str | None]] = {}
    for n in ast.walk(node) if not isinstance(node, ast.Module) else node.body:
        if isinstance(n, ast.ImportFrom):
            base = _resolve_relative(module, is_package, n.level, n.module) if n.level else (n.module or "")
            for a in n.names:
                out[a.asname or a.name] = (base, a.name)
        elif isinstance(n, ast.Import):
            for a in n.names:
                out[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
    return out


def load_package(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the package by its dotted name."""
    modules: dict[str, Module] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts)
        tree = ast.parse(path.read_text(), str(path))
        m = Module(name, path, tree)
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                m.functions[n.name] = n
            elif isinstance(n, ast.ClassDef):
                m.classes[n.name] = n
        m.imports = _imports_of(tree, name, is_package)
        m.imports["__is_package__"] = ("", "1" if is_package else None)
        modules[name] = m
    return modules


class Walker:
    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules
        self.seen: set[tuple[str, str]] = set()
        self.order: list[tuple[str, str, str]] = []  # (module, qualified function, file)

    # ---- resolution ------------------------------------------------------------------------------------
    def lookup(self, module: str, name: str, depth: int = 0) -> tuple[str, str, ast.AST] | None:
        """(module, name, node) of a function or class ``name`` seen from ``module`` (re-exports followed)."""
        m = self.modules.get(module)
        if m is None or depth > 10:
            return None
        if name in m.functions:
            return module, name, m.functions[name]
        if name in m.classes:
            return module, name, m.classes[name]
        if name in m.imports and name != "__is_package__":
            base, attr = m.imports[name]
            if attr is None:
                return None
            if f"{base}.{attr}" in self.modules:
                return None  # a module, not a function
            return self.lookup(base, attr, depth + 1)
        return None

    def module_alias(self, module: str, alias: str, local: dict[str, tuple[str, str | None]]) -> str | None:
        for table in (local, self.modules[module].imports):
            if alias in table:
                base, attr = table[alias]
                full = f"{base}.{attr}" if attr else base
                if full in self.modules:
                    return full
        return None

    def method(self, module: str, cls: str, name: str, depth: int = 0) -> tuple[str, str, ast.AST] | None:
        m = self.modules.get(module)
        if m is None or cls not in m.classes or depth > 10:
            return None
        node = m.classes[cls]
        for n in node.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
                return module, f"{cls}.{name}", n
        for b in node.bases:
            if isinstance(b, ast.Name):
                found = self.lookup(module, b.id)
                if found and isinstance(found[2], ast.ClassDef):
                    got = self.method(found[0], found[1], name, depth + 1)
                    if got:
                        return got
        return None

    # ---- the walk ---------------------------------------------------------------------------------------
    def enter(self, module: str, qualname: str, fn: ast.AST, held: set[str], followed: str,
              cls: str | None) -> None:
        key = (module, qualname)
        if key in self.seen:
            return
        self.seen.add(key)
        self.order.append((module, qualname, str(self.modules[module].path.relative_to(ROOT))))
        is_package = self.modules[module].imports["__is_package__"][1] is not None
        local_imports = _imports_of(fn, module, is_package)
        local_types: dict[str, tuple[str, str]] = {}  # variable -> (module, class)
        held = set(held)
        changed = True
        while changed:  # the names holding the value, to a fixed point
            changed = False
            for n in ast.walk(fn):
                for target, value in _bindings(n):
                    if _holds(value, held) or self.wraps(module, value, held, local_imports):
                        for name in _names(target):
                            if name not in held:
                                held.add(name)
                                changed = True
        for n in ast.walk(fn):  # the variables bound to constructed gptask classes
            for target, value in _bindings(n, calls=True):
                if isinstance(value, ast.Call) and isinstance(target, ast.Name):
                    c = self.resolve_callee(module, value.func, local_imports, {}, cls)
                    if c and isinstance(c[2], ast.ClassDef):
                        local_types[target.id] = (c[0], c[1])
        calls = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
        for call in calls:
            passed = [(k, a) for k, a in enumerate(call.args) if _holds(a, held)]
            passed += [(k, a) for k, a in enumerate(call.args) if (k, a) not in passed
                       and self.wraps(module, a, held, local_imports)]
            kw = [k for k in call.keywords if _holds(k.value, held) or self.wraps(module, k.value, held, local_imports)]
            if not passed and not kw:
                continue
            callee = self.resolve_callee(module, call.func, local_imports, local_types, cls)
            if callee is None:
                continue
            cmod, cname, node = callee
            ccls = cname.split(".")[0] if "." in cname else None
            if isinstance(node, ast.ClassDef):
                init = self.method(cmod, cname, "__init__")
                if init is None:
                    continue
                cmod, cname, node = init
                ccls = cname.split(".")[0]
            params = _params(node)
            bound = ccls is not None and params and params[0] in ("self", "cls")
            positional = params[1:] if bound else params
            new_held: set[str] = set()
            for k, a in passed:
                if isinstance(a, ast.Starred):
                    new_held.update(positional[k:])
                elif k < len(positional):
                    new_held.add(positional[k])
                elif node.args.vararg:
                    new_held.add(node.args.vararg.arg)
            names = set(params) | {a.arg for a in node.args.kwonlyargs}
            for k in kw:
                if k.arg is None:  # **mapping
                    if followed in names:
                        new_held.add(followed)
                    elif node.args.kwarg:
                        new_held.add(node.args.kwarg.arg)
                elif k.arg in names:
                    new_held.add(k.arg)
                elif node.args.kwarg:
                    new_held.add(node.args.kwarg.arg)
            if new_held:
                self.enter(cmod, cname, node, new_held, followed, ccls)

    def wraps(self, module: str, e: ast.AST, held: set[str], local_imports: dict) -> bool:
        """Whether ``e`` constructs a record of the package (a ``@dataclass`` class) from a held value:
        ``Source(data, value=...)`` holds what ``data`` holds."""
        if not isinstance(e, ast.Call) or not any(_holds(a, held) for a in [*e.args, *(k.value for k in e.keywords)]):
            return False
        c = self.resolve_callee(module, e.func, local_imports, {}, None)
        return bool(c) and isinstance(c[2], ast.ClassDef) and any(
            "dataclass" in ast.unparse(d) for d in c[2].decorator_list)

    def resolve_callee(self, module: str, func: ast.AST, local_imports: dict, local_types: dict,
                       cls: str | None) -> tuple[str, str, ast.AST] | None:
        if isinstance(func, ast.Name):
            if func.id in local_imports:
                base, attr = local_imports[func.id]
                if attr is not None and f"{base}.{attr}" not in self.modules:
                    return self.lookup(base, attr)
                return None
            return self.lookup(module, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = func.value.id
            if owner in ("self", "cls") and cls is not None:
                return self.method(module, cls, func.attr)
            if owner in local_types:
                return self.method(*local_types[owner], func.attr)
            mod = self.module_alias(module, owner, local_imports)
            if mod is not None:
                return self.lookup(mod, func.attr)
            found = self.lookup(module, owner) if owner not in local_imports else (
                self.lookup(*local_imports[owner]) if local_imports[owner][1] else None)
            if found and isinstance(found[2], ast.ClassDef):  # Class.method(...)
                return self.method(found[0], found[1], func.attr)
        return None


def _params(node: ast.AST) -> list[str]:
    a = node.args
    return [p.arg for p in (*a.posonlyargs, *a.args)]


def _names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


def _iterated(it: ast.AST) -> ast.AST:
    """The iterable under enumerate(..)/zip(..)/list(..) and the like."""
    while isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ITERATORS and it.args:
        return ast.Tuple(elts=list(it.args), ctx=ast.Load())
    return it


def _bindings(n: ast.AST, calls: bool = False):
    """(target, value) pairs a statement or comprehension binds."""
    if isinstance(n, ast.Assign):
        for t in n.targets:
            yield t, n.value
    elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
        yield n.target, n.value
    elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
        yield n.target, n.iter if calls else _iterated(n.iter)
    elif isinstance(n, (ast.With, ast.AsyncWith)):
        for item in n.items:
            if item.optional_vars is not None:
                yield item.optional_vars, item.context_expr


def _holds(e: ast.AST, held: set[str]) -> bool:
    """Whether expression ``e`` is a held name, an attribute or item of one, or a plain combination
    (``a or b``, a tuple, ``*a``, ``x if c else y``) of such."""
    if isinstance(e, ast.Name):
        return e.id in held
    if isinstance(e, (ast.Attribute, ast.Subscript)):
        return _holds(e.value, held)
    if isinstance(e, ast.Starred):
        return _holds(e.value, held)
    if isinstance(e, ast.BoolOp):
        return any(_holds(v, held) for v in e.values)
    if isinstance(e, ast.IfExp):
        return _holds(e.body, held) or _holds(e.orelse, held)
    if isinstance(e, (ast.Tuple, ast.List)):
        return any(_holds(v, held) for v in e.elts)
    if isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords and ast.unparse(e.func) in CONVERSIONS:
        return _holds(e.args[0], held)
    return False


def follow(arg: str, root: Path = ROOT, start: tuple[str, str] = START) -> dict:
    """The walk for ``arg`` from the function ``start`` (module, name; module docstring):
    {"chain": [(module, function, file)], "functions", "files", "returns"}."""
    modules = load_package(root)
    w = Walker(modules)
    mod, name = start
    if mod not in modules or name not in modules[mod].functions:
        raise SystemExit(f"follow_argument: no function {name!r} in module {mod!r}")
    fn = modules[mod].functions[name]
    if arg not in _params(fn) + [a.arg for a in fn.args.kwonlyargs]:
        raise SystemExit(f"follow_argument: {mod}.{name} has no parameter {arg!r}")
    w.enter(mod, name, fn, {arg}, arg, None)
    files = [f for _, _, f in w.order]
    returns, entered = 0, set()
    for k, f in enumerate(files):
        if k and f != files[k - 1] and f in entered:
            returns += 1
        entered.add(f)
    return {"chain": w.order, "functions": len(w.order), "files": len(set(files)), "returns": returns}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arg", help="a parameter of gt.tune, e.g. sources or history")
    parser.add_argument("--start", default=":".join(START), metavar="MODULE:FUNCTION",
                        help=f"the function the walk starts at (default {':'.join(START)})")
    parser.add_argument("--json", action="store_true", help="print the counts (and the chain) as one JSON line")
    args = parser.parse_args(argv)
    module, _, function = args.start.partition(":")
    if not function:
        parser.error(f"--start must be MODULE:FUNCTION, got {args.start!r}")
    out = follow(args.arg, start=(module, function))
    if args.json:
        print(json.dumps({k: out[k] for k in ("functions", "files", "returns", "chain")}))
        return 0
    last = None
    for k, (module, name, path) in enumerate(out["chain"]):
        mark = "  (back)" if last is not None and path != last and path in {p for _, _, p in out["chain"][:k]} else ""
        print(f"{k + 1:3d}  {path}:{name}{mark}")
        last = path
    print(f"{args.arg}: {out['functions']} functions, {out['files']} files, {out['returns']} returns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
