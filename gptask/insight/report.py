"""``gptask report``: one self-contained HTML page about a campaign, for people.

:func:`write_report` reads a history (read only), builds every section of
:data:`gptask.insight.sections.SECTIONS` and writes one HTML file: figures are PNGs inside the file
(base64), the style sheet is inline, there is no script and nothing is fetched, so the page opens
offline on a cluster's login node, from a file and in an e-mail. A history that is empty or
half-finished gives a page that lists what is missing and shows what it can; a section that fails
says so on the page (and in the log) and the others are still written.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.progress import Progress
from .html import note_html, page_html
from .report_data import ReportData, load_report_data
from .sections import SECTIONS, ReportOptions

__all__ = ["write_report", "build_report", "ReportOptions"]

log = logging.getLogger(__name__)


def _with_problem(data: ReportData, problem: Any) -> None:
    """Give the rebuilt result the user's problem (constraints, features, default), after checking
    that it is the problem of the history."""
    if problem is None or data.result is None:
        return
    mine = problem.signature()
    for key in ("name", "task_space", "param_space"):
        if mine.get(key) != data.signature.get(key):
            raise ValueError(f"--problem does not match the history: its {key} is {mine.get(key)!r}, the history's "
                             f"{data.signature.get(key)!r}")
    if problem.default is None and data.result.problem.default is not None:
        problem = _keep_default(problem, data.result.problem.default)
    data.result.problem = problem


def _keep_default(problem: Any, default: Any) -> Any:
    import copy

    out = copy.copy(problem)
    out.default = default
    return out


def _asked_task(data: ReportData, task: Any) -> dict:
    """A task the reader asks about (a dict, or ``k=v,...`` text) with the task space's types; it may
    lie outside the task space (the page then says it is a fallback)."""
    from ..space.dimensions import Integer, Ordinal, Real, Space

    if not data.signature.get("task_space"):
        raise ValueError("--task: this history holds no task space yet")
    space = Space.from_json(data.signature["task_space"])
    if isinstance(task, str):
        items = {}
        for item in task.split(","):
            key, sep, value = item.partition("=")
            if not sep or key.strip() not in space.names:
                raise ValueError(f"--task: expected k=v,... over the task dimensions {space.names}, got {task!r}")
            dim = space[key.strip()]
            try:
                items[key.strip()] = dim.from_text(value.strip())
            except ValueError:  # outside the task space: the page marks it a fallback
                numeric = isinstance(dim, (Real, Integer)) or isinstance(dim, Ordinal) and dim.numeric
                # a machine or other text-valued dimension takes a text it has not seen (a new machine)
                items[key.strip()] = _number(value.strip(), task, dim) if numeric else value.strip()
        task = items
    missing = [n for n in space.names if n not in task]
    if missing:
        raise ValueError(f"--task {task}: missing {missing} (task dimensions: {space.names})")
    return dict(task)


def _number(text: str, task: str, dim: Any) -> float | int:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"--task {task!r}: the task dimension {dim.name!r} ({type(dim).__name__}) expects a number, "
                         f"got {text!r}") from None
    return int(v) if v.is_integer() else v


def _check_options(data: ReportData, opts: ReportOptions) -> None:
    """ValueError, before any section is made, for a grid or a sensitivity base the sections would
    refuse, or work beyond the caps (opts.max_grid_points, opts.max_evaluations)."""
    from ..space.dimensions import Space
    from .grid import parse_grid
    from .sensitivity import check_base, check_work

    base = check_base(opts.sensitivity_base)
    if opts.grid is not None:
        if data.result is not None:
            space = data.result.problem.task_space
        elif data.signature.get("task_space"):
            space = Space.from_json(data.signature["task_space"])
        else:
            raise ValueError("--grid: this history holds no task space yet")
        parse_grid(opts.grid, space, opts.max_grid_points)
    if data.has_model and len(data.result.problem.param_space) >= 2:
        check_work(data.result, base=base, max_evaluations=opts.max_evaluations)


def build_report(data: ReportData, options: ReportOptions | None = None, progress: bool = False) -> str:
    """The HTML text of the report of ``data``; progress: a bar or a line per section."""
    opts = options or ReportOptions()
    parts = []
    reporter = Progress(progress, len(SECTIONS), 0, desc="report")
    try:
        for section in SECTIONS:
            t0 = time.perf_counter()
            try:
                body = section.build(data, opts)
            except Exception as exc:  # noqa: BLE001 - one section's failure must not lose the page
                log.exception("report: the section %r failed", section.title)
                body = note_html(f"This section could not be made: {type(exc).__name__}: {exc}", "error")
            reporter.step(f"report: section {section.title!r} in {time.perf_counter() - t0:.1f} s")
            parts.append((section.anchor, section.title, body))
    finally:
        reporter.close()
    created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = (f"History {data.where_short}: {len(data.tasks)} task(s), {len(data.finished)} finished evaluation(s). "
                f"Written by gptask report on {created}.")
    return page_html(f"Campaign report: {data.name}", subtitle, parts)


def write_report(history: str | os.PathLike, out: str | os.PathLike, problem: Any = None,
                 options: ReportOptions | None = None, progress: bool = False) -> Path:
    """Write the report of the history file ``history`` to ``out`` (HTML); returns ``out``.

    problem: the history's :class:`gptask.Problem`, to give the report its constraints, features
    and default (checked against the history's signature); None: the problem rebuilt from the
    history. options: :class:`ReportOptions`. progress: a bar (a terminal) or a log line per section.
    Raises ValueError for a missing or foreign file, a bad grid or sensitivity base, or work beyond
    the caps of ``options`` (before anything is written); the
    file is written whole or not at all (a temporary file renamed).
    """
    data = load_report_data(history)
    _with_problem(data, problem)
    opts = options or ReportOptions(problem_given=problem is not None)
    if opts.tasks:
        opts = replace(opts, tasks=tuple(_asked_task(data, t) for t in opts.tasks))
    _check_options(data, opts)
    text = build_report(data, opts, progress=progress)
    out = Path(out)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=out.parent if str(out.parent) else ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would create it (mkstemp makes it private)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
