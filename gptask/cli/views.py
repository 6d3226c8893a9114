"""``gptask show``, ``plot`` and ``export``: what a history holds, for people and for other tools."""

from __future__ import annotations
import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results.rebuild import result_from_history
from .arguments import format_assignments, format_table

__all__ = ['best_table', 'machine_lines', 'front_text', 'recommendation_table', 'cmd_show', 'cmd_plot', 'cmd_export']


def best_table(history) -> list[dict[str, Any]]:
    """One row per task from a history (a Storage): task values, best parameters, best value, the
    default configuration's value and the gain over it (when the history records a default), counts."""
    from ..results.baseline import default_values, gain, stored_defaults
    from ..data.run_header import read_fidelity_layout
    from ..data.trials import SOURCE_BROUGHT, Status
    from ..problem.fidelity import role_of

    recs = [t for t in history.trials() if t.status.finished]
    layout = read_fidelity_layout(history)  # a run with fidelity levels or auxiliary tasks
    n_own = 0 if layout is None else layout["n_levels"] * (layout["n_tuned"] + layout["n_aux"])
    defaults = stored_defaults(history)
    dvalues = default_values(recs, defaults) if any(d is not None for d in defaults) else None
    rows = []
    for i, task in enumerate(history.tasks()):
        mine = [r for r in recs if r["task_index"] == i]
        ok = [r for r in mine if r["status"] == Status.COMPLETE]
        row: dict[str, Any] = {"task": i, **task}
        if ok:
            b = min(ok, key=lambda r: r["value"])
            row.update(b["params"])
            row["best"] = b["value"]
        else:
            row["best"] = None
        if dvalues is not None:
            row["default"] = dvalues[i]
            row["gain"] = gain(dvalues[i], row["best"])
        row["evals"] = len(mine)
        row["failed"] = sum(r["status"] == Status.FAILED for r in mine)
        roles = {r["extra"].get("fidelity") for r in mine} - {None}
        if roles:  # a run with fidelity levels or auxiliary tasks (docs/fidelity.md): which runs count
            row["role"] = ", ".join(sorted(roles))
        elif layout is not None and i < n_own:  # in the stored layout, its data all brought (a source of this machine)
            row["role"] = role_of(i, layout["n_tuned"], layout["n_aux"])
        elif mine and all(r.source == SOURCE_BROUGHT for r in mine):  # a source's task of such a run: data only
            row["role"] = "source"
        if any("cost" in r["extra"] for r in mine):
            row["cost_s"] = sum(float(r["extra"].get("cost") or 0.0) for r in mine)
        rows.append(row)
    return rows


def machine_lines(machines: Mapping[int, dict], trials: Sequence[Any]) -> list[str]:
    """What ``gptask show`` says of the machines a history's trials ran on: one line per machine
    record (its trials, its description, Python and packages), and a warning line when the trials
    come from more than one machine."""
    from ..data.provenance import history_rows, machine_groups

    if not machines:
        return ["machine: not recorded (trials told before gptask recorded machines, or with provenance=None)"]
    out = [f"{label}: {text}" for label, text in history_rows(machines, trials)]
    kinds = machine_groups(machines)
    if len(kinds) > 1:
        out.append(f"warning: the trials come from {len(kinds)} different machines (mixed on request)")
    return out


def front_text(result: Any) -> str:
    """Each task's Pareto front (``result.pareto(i)``) as lines of text: its configurations with
    their observed outputs, best primary objective first."""
    from ..core.labels import task_label

    lines = []
    for i, task in enumerate(result.tasks):
        front = result.pareto(i)
        lines.append(f"front of task {i} ({task_label(task)}): {len(front)} configuration(s)"
                     + (" meeting the limits" if result.problem.outputs.limits else ""))
        if front:
            rows = [{**p.params, **p.values, "evaluations": p.evaluations} for p in front]
            lines.append(format_table(rows))
    return "\n".join(lines)


def recommendation_table(result: Any) -> list[dict[str, Any]]:
    """One row per task with a complete evaluation: its recommendation by the one rule of
    :mod:`gptask.results.recommend` (``result.recommend(i)``, which reads the confirmation runs already
    made), as :func:`gptask.results.recommend.recommendation_row` writes it."""
    from ..results.recommend import recommendation_table as table

    return table(result, progress=False)


def cmd_show(args: argparse.Namespace) -> int:
    from ..core.labels import task_label
    from ..data.run_header import RunHeader
    from ..results.recommend import COLUMNS_NOTE, DEFAULT_AGGREGATE, RULE, VALUE_COLUMNS, nothing_to_recommend
    from ..sources.selection import SourceSelection
    from ..data.storage import open_history
    from ..data.storage.owner import Owner
    from ..data.trials import Status
    from ..evaluation.failed_runs import reasons_by_task

    with open_history(args.history, read_only=True) as h:
        trials = h.trials()
        pending = [t for t in trials if t.status is Status.PENDING]
        result = result_from_history(h)
        header = RunHeader.read(h)
        unit = header.unit
        extra = f"  confirmation runs: {len(result.confirmations)}" if result.confirmations else ""
        print(f"problem: {h.signature.get('name')}  tasks: {len(h.tasks())}  "
              f"evaluations: {len(trials) - len(pending)}  pending: {len(pending)}{extra}"
              + (f"  unit: {unit}" if unit else ""))
        for line in machine_lines(h.machines(), trials):
            print(line)
        selection = header.source_selection
        if selection is not None:
            print("sources judged by this machine's initial designs (select_sources=True):")
            for line in SourceSelection.from_json(selection["selection"]).lines():
                print(f"  {line}")
        print("raw best (the single best launch per task; gain: over the default as measured while tuning):")
        print(format_table(best_table(h), unit, ("best", "default")))
        for i, reason in sorted(h.closed_tasks().items()):
            print(f"task {i}: {reason}")
        failures = reasons_by_task(trials)
        if failures:
            print("failed evaluations by reason:")
            for i, counts in failures.items():
                why = "; ".join(f"{reason} ({n})" for reason, n in counts.most_common())
                print(f"  task {i} ({task_label(h.tasks()[i])}): {sum(counts.values())} failed: {why}")
    spec = result.problem.outputs
    if spec is not None:
        print(f"outputs: {', '.join(f'{n} ({spec.direction(n)})' if n in spec.objectives else n for n in spec.names)}"
              + (f"; limits: {', '.join(map(str, spec.limits))}" if spec.limits else ""))
        if len(spec.objectives) > 1:
            print(front_text(result))
    if result.model is None and not result.confirmations:
        print("recommended: none yet (no model was fitted)")
    else:
        print(f"recommended ({RULE.format(aggregate=DEFAULT_AGGREGATE)}"
              + ("; on the front of several objectives: equal weights on the objectives scaled over the front"
                 if spec is not None and len(spec.objectives) > 1 else "")
              + ("; only configurations meeting every limit" if spec is not None and spec.limits else "") + "):")
        print(format_table(recommendation_table(result), unit, VALUE_COLUMNS))
        print(COLUMNS_NOTE.format(aggregate=DEFAULT_AGGREGATE))
        for i, task in enumerate(result.tasks):
            why = nothing_to_recommend(result, i)
            if why is not None and result.records(i):
                print(f"task {i} ({task_label(task)}): {why}: nothing to recommend")
    for t in pending:
        holder = "released" if t.owner is None else Owner.from_text(t.owner).describe()
        print(f"pending trial {t.id}: task {t.task_index} {format_assignments(t.params)} ({holder}, "
              f"attempt {t.attempts})")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from ..results.baseline import default_values, stored_defaults
    from ..data.run_header import stored_unit
    from ..core.output_files import check_outputs
    from ..results.plots import plot_convergence, plot_formats
    from ..data.storage import is_url, open_history

    out = args.out or str(Path("history" if is_url(args.history) else args.history).with_suffix(
        ".front.png" if args.front else ".png"))
    check_outputs({"--out": out}, {"the history": args.history}, {"--out": plot_formats()})
    with open_history(args.history, read_only=True) as h:
        if args.front:
            from ..results.plots_front import plot_fronts

            plot_fronts(result_from_history(h), out, title=f"{h.signature.get('name')}: front per task")
            print(out)
            return 0
        records = [t for t in h.trials() if t.status.finished]
        plot_convergence(records, out, title=f"{h.signature.get('name')}: best so far per task", tasks=h.tasks(),
                         defaults=default_values(records, stored_defaults(h)), unit=stored_unit(h))
    print(out)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..core.output_files import check_outputs
    from ..data.storage import open_history
    from ..data.storage.export import to_csv, to_json

    check_outputs({"--out": args.out}, {"the history": args.history})
    with open_history(args.history, read_only=True) as h:
        text = to_csv(h) if args.format == "csv" else to_json(h)
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0
