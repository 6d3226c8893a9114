"""Figures of a tuning run. Data first (plain records, testable), drawing second (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["convergence_data", "plot_convergence", "convergence_figure", "plot_formats", "y_label"]


def plot_formats() -> set[str]:
    """File suffixes matplotlib can write (``png``, ``pdf``, ``svg``, ...)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return set(Figure().canvas.get_supported_filetypes())


def convergence_data(records: Sequence[dict[str, Any]]) -> dict[int, dict[str, list]]:
    """Per task index: ``values`` (None for failures) and ``best`` (running minimum, None until the
    first complete evaluation), both one entry per evaluation in history order."""
    out: dict[int, dict[str, list]] = {}
    for r in records:
        d = out.setdefault(int(r["task_index"]), {"values": [], "best": []})
        v = r["value"] if r["status"] == "complete" else None
        d["values"].append(v)
        prev = d["best"][-1] if d["best"] else None
        d["best"].append(v if prev is None else (prev if v is None else min(prev, v)))
    return dict(sorted(out.items()))


def plot_convergence(records: Sequence[dict[str, Any]], path: str | Path, title: str = "",
                     tasks: Sequence[dict] | None = None, log_scale: bool | None = None,
                     defaults: Sequence[float | None] | None = None, unit: str = "") -> Path:
    """Best value so far versus evaluation number, one line per task; written as PNG to ``path``.

    defaults: per task index, the measured value of the default configuration (None: none), drawn
    as a dashed line in the task's colour, so the gain over the default is visible. unit: the
    objective's unit, on the y axis label. The x axis (evaluations) has integer ticks only.
    """
    import matplotlib.pyplot as plt

    fig = convergence_figure(records, title, tasks, log_scale, defaults, unit)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def convergence_figure(records: Sequence[dict[str, Any]], title: str = "", tasks: Sequence[dict] | None = None,
                       log_scale: bool | None = None, defaults: Sequence[float | None] | None = None,
                       unit: str = "") -> Any:
    """The matplotlib Figure that :func:`plot_convergence` writes (same arguments, no path); the
    caller closes it (``matplotlib.pyplot.close(fig)``)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    data = convergence_data(records)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    positive = True
    for i, d in data.items():
        xs = [k + 1 for k, b in enumerate(d["best"]) if b is not None]
        ys = [b for b in d["best"] if b is not None]
        positive = positive and all(y > 0 for y in ys)
        label = f"task {i}"
        if tasks is not None and i < len(tasks):
            label += " " + ",".join(f"{k}={_short(v)}" for k, v in tasks[i].items())
        (line,) = ax.plot(xs, ys, marker=".", label=label)
        if defaults is not None and i < len(defaults) and defaults[i] is not None:
            ax.axhline(defaults[i], color=line.get_color(), linestyle="--", linewidth=0.8, alpha=0.7)
            positive = positive and defaults[i] > 0
        fails = [k + 1 for k, v in enumerate(d["values"]) if v is None]
        if fails and ys:
            ax.plot(fails, [ys[-1]] * len(fails), "x", color="red", alpha=0.6)
    if (log_scale is None and positive and data) or log_scale:
        ax.set_yscale("log")
    ax.set_xlabel("evaluation of the task")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(y_label(unit))
    ax.set_title(title or "convergence per task (x: failed evaluation)")
    if defaults is not None and any(d is not None for d in defaults):
        ax.plot([], [], "k--", linewidth=0.8, label="default configuration")
    if len(data) <= 12:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def y_label(unit: str = "") -> str:
    """The y axis label of a convergence plot: ``best value so far (s)`` with a unit."""
    return "best value so far" + (f" ({unit})" if unit else "")


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
