"""The outcome of a tuning run: tasks, every evaluation, the fitted model and the output transform."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .problem import Problem
from .transforms import OutputTransform
from .trials import Status

__all__ = ["TuningResult"]


@dataclass
class TuningResult:
    """problem, tasks (list of dicts), history (the finished trials, :class:`gptask.trials.Trial`
    records in id order; they also read like dicts: ``r["value"]``), model (the last fitted LCM,
    or None), transform (the output transform the model was fitted under), pending (trials asked
    and not told, e.g. stopped by ``max_time``: the next run with the same history re-proposes
    them), closed (task index -> why the task stopped before its budget: target reached, or every
    feasible configuration run)."""

    problem: Problem
    tasks: list[dict]
    history: list
    model: Any = None
    transform: OutputTransform | None = None
    pending: list = field(default_factory=list)
    closed: dict = field(default_factory=dict)

    def records(self, i: int, status: Status | str | None = Status.COMPLETE) -> list:
        """Task ``i``'s finished trials (only complete ones by default; ``status=None``: all)."""
        self._check_index(i)
        return [r for r in self.history if r["task_index"] == i and (status is None or r["status"] == status)]

    def _check_index(self, i: int) -> None:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(self.tasks):
            raise ValueError(f"task index must be an integer in 0..{len(self.tasks) - 1}, got {i!r}")

    def best(self, i: int) -> tuple[dict, float]:
        """(params, value) of the best complete evaluation of task ``i``."""
        ok = self.records(i)
        if not ok:
            raise ValueError(f"task {i} ({self.tasks[i]}) has no complete evaluation")
        r = min(ok, key=lambda r: r["value"])
        return dict(r["params"]), float(r["value"])

    def best_so_far(self, i: int) -> list[float]:
        """Running minimum of task ``i``'s values, one entry per evaluation (failed ones repeat it)."""
        out, cur = [], float("inf")
        for r in self.records(i, status=None):
            if r["status"] == Status.COMPLETE:
                cur = min(cur, r["value"])
            out.append(cur)
        return out

    def save_model(self, path: Any, accuracy: bool = True) -> Any:
        """Write a model file (JSON, no pickle) for run-free prediction; see :mod:`gptask.model_io`.

        accuracy: also store the leave-one-task-out accuracy report. Returns the path written.
        """
        from .model_io import save_model

        return save_model(self, path, accuracy=accuracy)

    def table(self) -> list[dict[str, Any]]:
        """One row per task: the task, its best parameters and value, evaluations and failures."""
        rows = []
        for i, t in enumerate(self.tasks):
            all_r = self.records(i, status=None)
            row: dict[str, Any] = {"task_index": i, **t}
            try:
                p, v = self.best(i)
                row.update(p)
                row["best"] = v
            except ValueError:
                row["best"] = None
            row["evaluations"] = len(all_r)
            row["failed"] = sum(r["status"] == Status.FAILED for r in all_r)
            rows.append(row)
        return rows
