"""The report's figures (matplotlib, Agg): each function takes plain data and returns a Figure,
which :func:`gptask.insight.html.figure_html` embeds as a PNG and closes.

Why matplotlib and static PNGs: it is already a dependency, draws without a display or network on
a login node, and a PNG inside the HTML file needs no script, so the page opens the same from a
file, in a browser without network and in an e-mail client (which drops scripts)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.labels import task_label

__all__ = ["convergence_grid", "cost_curves", "sensitivity_bars", "heldout_scatter", "task_map", "task_line",
           "failure_region", "MAX_PANELS"]

#: the most tasks drawn as panels of the convergence figure
MAX_PANELS = 16
#: the most labelled ticks of a log axis (:func:`_log_axis`)
LOG_TICKS = 6


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _log_axis(ax: Any, which: str = "y") -> None:
    """A log scale on ``ax``'s ``which`` axis ("x" or "y") labelled at 1, 2 and 5 times powers of
    ten (at most about LOG_TICKS of them), as plain numbers to 3 significant digits, minor ticks
    unlabelled: matplotlib's default labels every minor tick of an axis spanning less than a decade,
    and those overlap in a small panel."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    getattr(ax, f"set_{which}scale")("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0), numticks=LOG_TICKS))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}"))
    axis.set_minor_formatter(NullFormatter())


def convergence_grid(series: Sequence[dict[str, Any]], unit: str = "") -> Any:
    """One panel per task: its measured values (dots; failures as red crosses at the top), the best
    so far (a line) and the default's value (dashed). series: dicts with label, values (None for a
    failure), default (or None)."""
    plt = _plt()
    n = min(len(series), MAX_PANELS)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.5 * rows), squeeze=False)
    for ax, s in zip(axes.flat, series[:n]):
        vals = s["values"]
        xs = [k + 1 for k, v in enumerate(vals) if v is not None]
        ys = [v for v in vals if v is not None]
        best = np.minimum.accumulate(ys) if ys else []
        positive = bool(ys) and min(ys) > 0 and (s.get("default") is None or s["default"] > 0)
        ax.plot(xs, ys, ".", color="0.6", markersize=4)
        ax.step(xs, best, where="post", color="C0")
        if s.get("default") is not None:
            ax.axhline(s["default"], color="C1", linestyle="--", linewidth=1)
        fails = [k + 1 for k, v in enumerate(vals) if v is None]
        if fails:
            top = max(ys) if ys else 1.0
            ax.plot(fails, [top] * len(fails), "x", color="red")
        if positive:
            _log_axis(ax)
        ax.set_title(s["label"], fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.supxlabel("evaluation of the task", fontsize=9)
    fig.supylabel("value" + (f" ({unit})" if unit else ""), fontsize=9)
    fig.tight_layout()
    return fig


def cost_curves(series: Sequence[dict[str, Any]], unit: str = "") -> Any:
    """One panel per tuned task of a run that recorded costs (docs/fidelity.md): the best value of
    its target-fidelity runs so far (a step line; the regret ``best - optimum`` where the series gives
    an ``optimum``) against the cumulative cost in seconds of every run of the history, its target
    runs as dots, and the runs below the target fidelity (orange) and of auxiliary tasks (green) as
    ticks along the bottom at the cumulative cost where they finished. series: dicts with label,
    cost (the cumulative cost after each target run, s), values (its value, None for a failure),
    low and aux (the cumulative costs after each such run), optimum (or None)."""
    plt = _plt()
    n = min(len(series), MAX_PANELS)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 2.8 * rows), squeeze=False)
    regret = any(s.get("optimum") is not None for s in series[:n])
    for ax, s in zip(axes.flat, series[:n]):
        opt = s.get("optimum")
        ok = [(c, v - (opt or 0.0)) for c, v in zip(s["cost"], s["values"]) if v is not None]
        xs = [c for c, _ in ok]
        ys = [v for _, v in ok]
        best = list(np.minimum.accumulate(ys)) if ys else []
        ax.plot(xs, ys, ".", color="0.6", markersize=4, label="target run")
        if xs:
            end = max([xs[-1], *s.get("low", []), *s.get("aux", [])])
            ax.step(xs + [end], best + best[-1:], where="post", color="C0", label="best at the target")
        fails = [c for c, v in zip(s["cost"], s["values"]) if v is None]
        if fails:
            ax.plot(fails, [max(ys) if ys else 1.0] * len(fails), "x", color="red", label="failed target run")
        for key, colour, what in (("low", "C1", "low-fidelity run"), ("aux", "C2", "auxiliary run")):
            if s.get(key):
                ax.plot(s[key], [0.02] * len(s[key]), "|", color=colour, markersize=9, mew=1.2,
                        transform=ax.get_xaxis_transform(), label=what)
        if ys and min(ys) > 0:
            _log_axis(ax)
        ax.set_title(s["label"], fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if n:
        axes.flat[0].legend(fontsize=6, loc="best")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.supxlabel("cumulative cost of the runs (s)", fontsize=9)
    fig.supylabel(("regret" if regret else "best value") + " at the target fidelity" + (f" ({unit})" if unit else ""),
                  fontsize=9)
    fig.tight_layout()
    return fig


def sensitivity_bars(names: Sequence[str], first: np.ndarray, first_conf: np.ndarray, total: np.ndarray,
                     total_conf: np.ndarray) -> Any:
    """Mean first-order and total indices per parameter, with their interval half-widths."""
    plt = _plt()
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(names) + 2), 3.4))
    ax.bar(x - 0.2, first, 0.4, yerr=first_conf, label="first order S1", color="C0", capsize=3)
    ax.bar(x + 0.2, total, 0.4, yerr=total_conf, label="total ST", color="C1", capsize=3)
    ax.set_xticks(x, list(names), rotation=30 if len(names) > 6 else 0)
    ax.set_ylim(0, max(1.0, float(np.max(total + total_conf)) if len(total) else 1.0))
    ax.set_ylabel("share of the variance")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def heldout_scatter(measured: np.ndarray, predicted: np.ndarray, task: np.ndarray, unit: str = "",
                    title: str = "") -> Any:
    """Predicted against measured values of held-out evaluations, one colour per task, the 1:1 line."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    for i in np.unique(task):
        k = task == i
        ax.plot(measured[k], predicted[k], ".", markersize=5, label=f"task {int(i)}")
    both = np.concatenate([measured, predicted])
    lo, hi = float(np.min(both)), float(np.max(both))
    ax.plot([lo, hi], [lo, hi], "k--", linewidth=1)
    if lo > 0:
        _log_axis(ax, "x")
        _log_axis(ax, "y")
    u = f" ({unit})" if unit else ""
    ax.set_xlabel("measured" + u)
    ax.set_ylabel("predicted" + u)
    ax.set_title(title, fontsize=9)
    if len(np.unique(task)) <= 10:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _level(values: list[Any]) -> tuple[np.ndarray, list[str] | None]:
    """Numbers as they are; other values (categories) as their index, with the labels."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=float), None
    labels = sorted({str(v) for v in values})
    return np.asarray([labels.index(str(v)) for v in values], dtype=float), labels


def task_map(xname: str, yname: str, xs: Sequence[float], ys: Sequence[float], value: np.ndarray,
             params: dict[str, list[Any]], unit: str = "", tuned: Sequence[tuple[float, float]] = ()) -> Any:
    """Heat maps over two task dimensions: the predicted value of the recommended configuration,
    then each parameter's recommended value. value: (len(ys), len(xs)); params[name]: row-major
    values (y slowest). tuned: the tuned tasks' (x, y), marked with circles."""
    plt = _plt()
    panels = 1 + len(params)
    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.1 * cols, 3.3 * rows), squeeze=False)
    X, Y = np.meshgrid(np.arange(len(xs)), np.arange(len(ys)))

    def draw(ax: Any, Z: np.ndarray, title: str, labels: list[str] | None, log: bool) -> None:
        from matplotlib.colors import LogNorm

        norm = LogNorm() if log and np.nanmin(Z) > 0 and np.nanmax(Z) > np.nanmin(Z) else None
        im = ax.pcolormesh(X, Y, Z, shading="nearest", cmap="viridis", norm=norm)
        ax.set_xticks(range(len(xs)), [f"{v:.4g}" for v in xs], fontsize=7, rotation=45)
        ax.set_yticks(range(len(ys)), [f"{v:.4g}" for v in ys], fontsize=7)
        ax.set_xlabel(xname, fontsize=8)
        ax.set_ylabel(yname, fontsize=8)
        ax.set_title(title, fontsize=9)
        bar = fig.colorbar(im, ax=ax)
        bar.ax.tick_params(labelsize=7)
        if labels is not None:
            bar.set_ticks(range(len(labels)), labels=labels)
        elif not log and np.all(np.isnan(Z) | (Z == np.round(Z))):  # an integer parameter: no 36.25
            from matplotlib.ticker import MaxNLocator

            bar.locator = MaxNLocator(integer=True)
            bar.update_ticks()
        for tx, ty in tuned:
            ax.plot(list(xs).index(tx) if tx in xs else np.interp(tx, xs, range(len(xs))),
                    list(ys).index(ty) if ty in ys else np.interp(ty, ys, range(len(ys))), "o", mfc="none",
                    mec="white", markersize=9)

    flat = list(axes.flat)
    draw(flat[0], value, "predicted value" + (f" ({unit})" if unit else ""), None, True)
    for ax, (name, vals) in zip(flat[1:], params.items()):
        z, labels = _level(vals)
        draw(ax, z.reshape(len(ys), len(xs)), f"recommended {name}", labels, False)
    for ax in flat[panels:]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def task_line(xname: str, xs: Sequence[float], value: np.ndarray, lower: np.ndarray, upper: np.ndarray,
              params: dict[str, list[Any]], unit: str = "") -> Any:
    """Along one task dimension: the predicted value with its 95 % band, then each parameter's
    recommended value."""
    plt = _plt()
    panels = 1 + len(params)
    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 2.9 * rows), squeeze=False)
    flat = list(axes.flat)
    ax = flat[0]
    ax.plot(xs, value, "o-", color="C0")
    ax.fill_between(xs, lower, upper, alpha=0.25, color="C0")
    if np.min(lower) > 0:
        _log_axis(ax)
    ax.set_title("predicted value" + (f" ({unit})" if unit else "") + ", 95 % band", fontsize=9)
    for ax, (name, vals) in zip(flat[1:], params.items()):
        z, labels = _level(vals)
        ax.step(xs, z, where="mid", color="C2")
        ax.plot(xs, z, ".", color="C2")
        if labels is not None:
            ax.set_yticks(range(len(labels)), labels)
        ax.set_title(f"recommended {name}", fontsize=9)
    for ax in flat[:panels]:
        ax.set_xlabel(xname, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in flat[panels:]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def _grid_position(value: Any, grid: Sequence[Any]) -> float:
    """Where ``value`` lies on the index axis of ``grid`` (its index, or interpolated between
    numeric grid values)."""
    if value in grid:
        return float(list(grid).index(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(np.interp(value, np.asarray(grid, dtype=float), np.arange(len(grid))))
    return float("nan")


def failure_region(fmap: Any) -> Any:
    """P(success) of a :class:`gptask.insight.failure_map.FailureMap` over its one or two parameters
    (green: likely to succeed, red: likely to fail; the 1/2 contour in black), the task's failed
    runs as red crosses and its complete runs as black dots."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.4 if len(fmap.names) > 1 else 2.2))
    X, Y = np.meshgrid(np.arange(len(fmap.xs)), np.arange(len(fmap.ys)))
    im = ax.pcolormesh(X, Y, fmap.p_success, shading="nearest", cmap="RdYlGn", vmin=0.0, vmax=1.0)
    if min(len(fmap.xs), len(fmap.ys)) >= 6 and np.nanmin(fmap.p_success) < 0.5 < np.nanmax(fmap.p_success):
        ax.contour(X, Y, fmap.p_success, levels=[0.5], colors="k", linewidths=1.2)
    def ticks(values: list[Any]) -> tuple[range, list[str]]:  # at most about 10 labelled values
        step = max(1, len(values) // 10)
        return range(0, len(values), step), [f"{v:.4g}" if isinstance(v, float) else str(v) for v in values[::step]]

    ax.set_xticks(*ticks(fmap.xs), fontsize=7, rotation=45)
    ax.set_xlabel(fmap.names[0], fontsize=8)
    if len(fmap.names) > 1:
        ax.set_yticks(*ticks(fmap.ys), fontsize=7)
        ax.set_ylabel(fmap.names[1], fontsize=8)
    else:
        ax.set_yticks([])
    for runs, style in ((fmap.ok, dict(marker="o", color="k", markersize=3, linestyle="none")),
                        (fmap.failed, dict(marker="x", color="red", markersize=7, mew=2, linestyle="none"))):
        xs = [_grid_position(r[fmap.names[0]], fmap.xs) for r in runs]
        ys = [_grid_position(r[fmap.names[1]], fmap.ys) for r in runs] if len(fmap.names) > 1 else [0.0] * len(runs)
        ax.plot(xs, ys, **style)
    ax.set_title(f"P(success), {series_label(fmap.task_index, fmap.task)}", fontsize=9)
    bar = fig.colorbar(im, ax=ax)
    bar.ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def series_label(i: int, task: dict) -> str:
    return f"task {i}: {task_label(task)}"
