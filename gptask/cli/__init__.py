"""The ``gptask`` command line, one module per group of commands (:mod:`.main` parses and dispatches).

``gptask.cli`` was one module until issue 41; its names are re-exported here from
:mod:`.main`, so ``from gptask.cli import ...`` keeps working."""

from .main import (main, parse_assignments, format_assignments, format_table, best_table, result_from_history, recommendation_table,
                   NamedObjective, NamedObjectiveWithDeadline)

__all__ = ["main", "parse_assignments", "format_assignments", "format_table", "best_table", "result_from_history", "recommendation_table", "NamedObjective", "NamedObjectiveWithDeadline"]
