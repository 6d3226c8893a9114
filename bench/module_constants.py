"""Benchmark variants that are the library with some of a module's constants set for their runs.

A variant of a benchmark (``gptask_mf_cheap``: the fidelity schedule with ``CHEAP_DESIGN_SHARE =
0.11``) runs the library's own code with module constants of e.g. :mod:`gptask.tuning.fidelity` set,
and restores them afterwards, so that the next method in the same process (and a test suite that
imports the benchmark) sees the library's own values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

__all__ = ["constants_set"]


@contextmanager
def constants_set(module: ModuleType, values: Mapping[str, Any]) -> Iterator[None]:
    """``module``'s attributes named in ``values`` set to them inside, restored on exit (even on an
    exception). A name the module lacks is an AttributeError naming it: a misspelt constant would
    otherwise be set beside the one the library reads and change nothing."""
    missing = [name for name in values if not hasattr(module, name)]
    if missing:
        raise AttributeError(f"{module.__name__} has no constant {', '.join(missing)}")
    old = {name: getattr(module, name) for name in values}
    try:
        for name, value in values.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in old.items():
            setattr(module, name, value)
