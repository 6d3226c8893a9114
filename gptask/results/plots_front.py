"""The Pareto front of each task, drawn: data first (:func:`front_data`, testable), drawing second.

One panel per task, the first two objectives on the axes (each in its own unit and direction):
every complete evaluation (grey; those outside a limit hollow), the task's front (dark, joined
as a staircase), the problem's default configuration (a square, when it was measured) and the
recommendation (a star, by the one rule of :mod:`gptask.results.recommend`, ``rule=`` for the front).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["front_data", "plot_fronts"]


def front_data(result: Any, i: int, rule: Any = None) -> dict[str, Any]:
    """Task ``i``'s points for the figure, each a list of (x, y) in user units of the first two
    objectives: ``all`` (complete evaluations meeting the limits), ``outside`` (those that do not),
    ``front``, ``default`` (or None) and ``recommended`` (or None when nothing meets the limits);
    ``axes``: the two objectives' names, ``labels``: theirs with the direction ("time (minimised)")."""
    spec = result.problem.outputs
    if spec is None or len(spec.objectives) < 2:
        raise ValueError("a front needs two objectives or more (Problem(objectives=...))")
    a, b = spec.objectives[:2]
    done = [r for r in result.records(i) if r["values"]]
    inside = [r for r in done if spec.meets_limits(r["values"])]
    point = lambda v: (float(v[a]), float(v[b]))  # noqa: E731
    front = [point(p.values) for p in result.pareto(i)]
    d = result.default(i)
    default = None
    if d is not None:
        hits = [r for r in done if dict(r["params"]) == d[0]]
        default = point(hits[0]["values"]) if hits else None
    try:
        rec = result.recommend(i, progress=False, rule=rule)
        picked = [r for r in done if dict(r["params"]) == rec.params]
        recommended = point(picked[0]["values"]) if picked else None
    except ValueError:
        recommended = None
    return {"all": [point(r["values"]) for r in inside],
            "outside": [point(r["values"]) for r in done if r not in inside],
            "front": front, "default": default, "recommended": recommended, "axes": (a, b),
            "labels": (spec.label(a), spec.label(b))}


def plot_fronts(result: Any, path: str | Path, rule: Any = None, title: str = "") -> Path:
    """Write the figure of every task's front (module docstring) to ``path`` (PNG, PDF, SVG, ...)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ..core.labels import task_label

    n = len(result.tasks)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    for i in range(rows * cols):
        ax = axes[i // cols][i % cols]
        if i >= n:
            ax.axis("off")
            continue
        d = front_data(result, i, rule)
        if d["all"]:
            ax.scatter(*zip(*d["all"]), s=12, color="0.6", label="evaluated")
        if d["outside"]:
            ax.scatter(*zip(*d["outside"]), s=12, facecolors="none", edgecolors="0.6", label="outside a limit")
        if d["front"]:
            ax.step(*zip(*d["front"]), where="post", color="C0", lw=1)
            ax.scatter(*zip(*d["front"]), s=18, color="C0", label="front")
        if d["default"] is not None:
            ax.scatter(*d["default"], marker="s", s=60, color="C3", label="default")
        if d["recommended"] is not None:
            ax.scatter(*d["recommended"], marker="*", s=160, color="C2", label="recommended")
        ax.set_xlabel(d["labels"][0])
        ax.set_ylabel(d["labels"][1])
        ax.set_title(f"task {i}: {task_label(result.tasks[i])}", fontsize=9)
        if i == 0:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
