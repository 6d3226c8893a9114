"""``--problem``: the problems a command may load (built-in families, a project's function or Problem), and
objectives rebuilt by name in worker processes."""

from __future__ import annotations
import importlib
import inspect
import json
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ['load_problem', 'NamedObjective', 'pool_worker_start', 'NamedObjectiveWithDeadline']


#: what --problem accepts, for its error messages
_PROBLEM_TAKES = ("--problem takes demo, branin, sphere (the built-in families) or module:function, where the "
                  "module is a file of your project (found from the current directory or PYTHONPATH) or an "
                  "installed package, never Python's standard library, and the function (a plain Python function, "
                  "called with --problem-options as keywords) returns a gptask.Problem, or module:name of a "
                  "gptask.Problem itself")


def load_problem(spec: str, options: dict[str, Any] | None = None):
    """``demo``/``branin``/``sphere`` or ``module:function``; ``function(**options)`` -> Problem."""
    from ..problem.functions import FAMILIES
    from ..problem.definition import Problem

    options = options or {}
    if spec in FAMILIES:
        problem = FAMILIES[spec][0](**options)
    else:
        if ":" not in spec:
            raise ValueError(f"--problem must be one of {sorted(FAMILIES)} or module:function, got {spec!r}")
        mod_name, fn_name = spec.split(":", 1)
        top = mod_name.split(".")[0]
        if top in sys.stdlib_module_names or top in sys.builtin_module_names:
            raise ValueError(f"--problem {spec}: {top!r} is a module of Python's standard library; {_PROBLEM_TAKES}")
        if os.getcwd() not in sys.path and "" not in sys.path:
            # last, not first as `python -m` does: a module next to the user is found, but a file there
            # named like an installed package (pyswarms.py, numpy.py) never replaces it
            sys.path.append(os.getcwd())
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            raise ValueError(f"--problem {spec}: cannot import {exc.name!r} (searched the current directory "
                             "and PYTHONPATH; add the module's directory to PYTHONPATH)") from None
        fn = getattr(module, fn_name, None)
        if isinstance(fn, Problem):
            if options:
                raise ValueError(f"--problem {spec} is a Problem, not a function: it takes no --problem-options")
            return fn
        if not callable(fn):
            raise ValueError(f"{mod_name} has no callable {fn_name!r}")
        if not (inspect.isfunction(fn) or inspect.isclass(fn) and issubclass(fn, Problem)):
            raise ValueError(f"--problem {spec}: {fn_name!r} is a {type(fn).__name__}, not a function defined in "
                             f"Python; {_PROBLEM_TAKES}")
        home = (getattr(fn, "__module__", None) or "").split(".")[0]
        if home in sys.stdlib_module_names or home in sys.builtin_module_names:
            raise ValueError(f"--problem {spec}: {fn_name!r} comes from {home!r}, a module of Python's standard "
                             f"library; {_PROBLEM_TAKES}")
        problem = fn(**options)
    if not isinstance(problem, Problem):
        raise TypeError(f"{spec} returned {type(problem).__name__}, not a gptask.Problem")
    return problem


_LOADED: dict[str, Any] = {}


class NamedObjective:
    """The objective of the problem ``spec`` (``load_problem(spec, options)``), loaded on first call
    in each process: what ``gptask tune --workers`` sends to its worker processes instead of the
    objective itself (a demo's lambda or a closure does not pickle; a name and options do)."""

    def __init__(self, spec: str, options: Mapping[str, Any]) -> None:
        self.spec, self.options = spec, dict(options)

    def objective(self) -> Any:
        key = json.dumps([self.spec, self.options], sort_keys=True)
        if key not in _LOADED:
            _LOADED[key] = load_problem(self.spec, self.options).objective
        return _LOADED[key]

    def __call__(self, task: dict, params: dict) -> Any:
        return self.objective()(task, params)


def pool_worker_start(spec: str, options: Mapping[str, Any]) -> None:
    """Start of a ``--workers`` pool process: Ctrl-C is the tuner's to handle (it stops the runs and
    releases their trials), and the problem is loaded once here, before the runs are forked from it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    NamedObjective(spec, options).objective()


class NamedObjectiveWithDeadline(NamedObjective):
    """A :class:`NamedObjective` whose objective takes the pruning ``deadline`` keyword."""

    def __call__(self, task: dict, params: dict, deadline: float | None = None) -> Any:  # type: ignore[override]
        return self.objective()(task, params, deadline=deadline)
