"""``gptask ask``, ``tell`` and ``release``: a campaign driven from the shell, one trial at a time."""

from __future__ import annotations
import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any
from .arguments import failure_model_arg, format_assignments, parse_assignments
from .problems import load_problem

__all__ = ['cmd_ask', 'cmd_tell', 'cmd_release']


def _tuner_for_ask(args: argparse.Namespace):
    """A Tuner on ``args.history`` whose settings default to what the history holds; for a problem
    with fidelity (or a history laid out with auxiliary tasks) the tuner of its fidelity levels
    (:func:`~gptask.tuning.fidelity.fidelity_tuner`), as ``gt.tune`` runs it."""
    from ..data.run_header import RunHeader, read_fidelity_layout
    from ..data.storage import Owner, is_url, open_history
    from ..tuning import Tuner
    from ..tuning.fidelity import fidelity_tuner

    problem = load_problem(args.problem, parse_assignments(args.problem_options))
    stored: dict[str, Any] = {}
    layout = None
    if is_url(args.history) or Path(args.history).exists():
        with contextlib.suppress(FileNotFoundError), open_history(args.history, read_only=True) as h:
            header = RunHeader.read(h)
            layout = read_fidelity_layout(h)
            stored = {**header.settings, "seed": header.seed, "tasks": h.tasks()}
    base, aux = _stored_base_tasks(problem, stored.get("tasks"), layout)
    if args.aux_task:
        aux = [parse_assignments(t) for t in args.aux_task]
    tasks: Any = [parse_assignments(t) for t in args.task] if args.task else (
        args.tasks if args.tasks is not None else base or 5)
    budget = args.budget if args.budget is not None else stored.get("budget", 20)
    n_initial = args.n_initial if args.n_initial is not None else stored.get("n_initial")
    seed = args.seed if args.seed is not None else (stored.get("seed") or 0)
    target = args.target if args.target is not None else stored.get("target")
    failure_model = (failure_model_arg(args.failure_model) if args.failure_model is not None
                     else stored.get("failure_model", True))
    cost_budget = args.cost_budget if args.cost_budget is not None else stored.get("cost_budget")
    # an ask runs nothing: the machine is the one that tells (gptask tell --machine); a cost budget the history
    # records (the first ask's --cost-budget, or a gt.tune or gptask tune run given one) holds for the runs asked too
    options = dict(target=target, owner=Owner.detached("gptask ask"), lease=args.lease, provenance=None,
                   failure_model=failure_model, cost_budget=cost_budget)
    if problem.fidelity is not None or aux:
        return fidelity_tuner(problem, tasks, aux or None, budget, n_initial, seed, args.history, **options)
    return Tuner(problem, tasks, budget, n_initial, seed, args.history, **options)


def _stored_base_tasks(problem: Any, rows: list[dict] | None,
                       layout: dict[str, int] | None) -> tuple[list[dict] | None, list[dict]]:
    """The tuned and auxiliary base tasks of a history's task ``rows`` (None, []: no rows): with a
    fidelity ``layout`` (:func:`~gptask.data.run_header.read_fidelity_layout`) its first level's rows
    without the fidelity values, else the rows themselves and no auxiliary task."""
    if not rows:
        return None, []
    if layout is None:
        return rows, []
    drop = set(problem.fidelity.names) if problem.fidelity is not None else set()
    bare = [{k: v for k, v in row.items() if k not in drop} for row in rows]
    n_tuned, n_aux = layout["n_tuned"], layout["n_aux"]
    return bare[:n_tuned], bare[n_tuned:n_tuned + n_aux]


def cmd_ask(args: argparse.Namespace) -> int:
    tuner = _tuner_for_ask(args)
    try:
        trials = tuner.ask(args.n)
        if not trials:
            pending = tuner.pending
            if tuner.cost_spent_up():
                left = f", the {len(pending)} pending trial(s) first" if pending else ""
                print(f"gptask: nothing to ask: the cost budget is spent ({tuner.cost_spent():.4g} s of "
                      f"{tuner.cost_budget:.4g} s; a larger --cost-budget asks more{left})", file=sys.stderr)
            elif not pending and tuner.done:
                print("gptask: nothing to ask: every task is done", file=sys.stderr)
            else:
                print(f"gptask: nothing to ask now: {len(pending)} trial(s) pending (ids {[t.id for t in pending]})",
                      file=sys.stderr)
    finally:
        tuner.close(release=False)  # the shell holds the trials until it tells them
    if args.json:
        print(json.dumps([{"id": t.id, "task_index": t.task_index, "task": dict(t.task), "params": dict(t.params)}
                          for t in trials]))
    else:
        for t in trials:
            print(f"{t.id}\t{format_assignments(t.task)}\t{format_assignments(t.params)}")
    return 0


def _told_values(text: str, spec: Any, where: str) -> dict[str, float]:
    """The outputs a ``gptask tell`` VALUE gives for a problem with named outputs ``spec`` (an
    :class:`gptask.problem.objectives.Outputs`): ``time=0.5,memory=2e8`` (:func:`parse_assignments`) or a
    JSON object; every output, finite numbers. ValueError naming what is wrong otherwise (a bare
    number among them: it would store a result without the other outputs)."""
    how = (f"the problem of {where} has the outputs {', '.join(spec.names)}: give every one, as "
           f"{','.join(f'{n}=NUMBER' for n in spec.names)} or a JSON object; report a failed run with --failed REASON")
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            returned: Any = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(f"VALUE {text!r} is not valid JSON ({exc.msg}); {how}") from None
    elif "=" in stripped:
        returned = parse_assignments(stripped, "VALUE")
    else:
        raise ValueError(f"VALUE {text!r} is not a value of every output; {how}")
    values, why = spec.parse(returned)
    if values is None:
        raise ValueError(f"VALUE {text!r}: {why.replace('objective returned', 'got', 1)}; {how}")
    return values


def cmd_tell(args: argparse.Namespace) -> int:
    from ..evaluation.evaluate import Outcome
    from ..problem.objectives import Outputs
    from ..data.storage import open_history

    if args.failed is not None and args.value is not None:
        raise ValueError("give a VALUE or --failed REASON, not both")
    if args.failed is None and args.value is None:
        raise ValueError("give the VALUE the run measured, or --failed REASON")
    if args.duration is not None and not args.duration >= 0:
        raise ValueError(f"--duration must be >= 0 seconds, got {args.duration}")
    from .machines import tell_record
    from ..data.provenance import check_history

    machine = tell_record(args.machine)
    with open_history(args.history) as h:
        named = h.signature.get("outputs")
        if args.failed is not None:
            outcome = Outcome.of(None, args.failed or "reported as failed")
        elif named:  # several outputs: every one of them, never one number alone
            spec = Outputs.from_json(named)
            values = _told_values(args.value, spec, f"history {args.history}")
            outcome = Outcome.of(values, outputs=spec)
        else:
            try:
                number = float(args.value)
            except ValueError:
                raise ValueError(f"VALUE must be a number, got {args.value!r}; report a failed run with "
                                 "--failed REASON") from None
            outcome = Outcome.of(number)
        check_history(h.machines(), machine, args.mix_machines, f"history {args.history}", "--mix-machines")
        extra, note = _cost_and_role(h, args.id, outcome.values, args.duration)
        t = h.finish(args.id, outcome.status, outcome.value, outcome.samples, outcome.reason,
                     {**outcome.extra, **extra}, args.duration, machine=machine, values=outcome.values)
    if note:
        print(f"gptask: note: trial {t.id} {note}", file=sys.stderr)
    shown = (f"values {format_assignments(outcome.values)}" if outcome.values else f"value {t.value!r}") if t.value is not None \
        else f"reason {t.reason!r}"
    print(f"trial {t.id}: {t.status.value}, {shown}")
    return 0


def _cost_and_role(history: Any, trial_id: int, values: dict[str, float],
                   duration: float | None) -> tuple[dict[str, Any], str | None]:
    """What the tuner stores in a told run's ``extra`` that a tell can work out without the problem
    (:meth:`gptask.tuning.tuner.Tuner._with_cost`), and a note when the run's cost stays unknown:
    in a history that counts cost, its ``cost`` in seconds from the ``"cost"`` output or the
    ``duration`` told, as the history's ``cost_from`` says (a ``run_cost`` prices the run where it
    is read: nothing stored); in a run with fidelity levels or auxiliary tasks, its role. ValueError
    for a ``"cost"`` output that is not a cost."""
    from ..data.run_header import RunHeader, read_cost_from, read_fidelity_layout
    from ..data.trials import Status
    from ..problem.fidelity import COST_OUTPUT, check_cost, role_of

    extra: dict[str, Any] = {}
    layout = read_fidelity_layout(history)
    if layout is not None:
        mine = next((t for t in history.trials(status=Status.PENDING) if t.id == trial_id), None)
        if mine is not None:  # else finish says what is wrong with the id
            extra["fidelity"] = role_of(mine.task_index, layout["n_tuned"], layout["n_aux"])
    cost_from = read_cost_from(history)  # None: a run that counts no cost, or one of an earlier version
    settings = RunHeader.read(history).settings
    if cost_from is None and "cost_budget" not in settings and "fidelity" not in history.signature:
        return extra, None
    if cost_from == "cost output" and COST_OUTPUT in values:
        extra["cost"] = check_cost(values[COST_OUTPUT], f"the {COST_OUTPUT!r} output")
    elif cost_from in ("cost output", "wall time") and duration is not None:
        extra["cost"] = float(duration)  # the wall time told (with a 'cost' output: a failed run's, as the tuner's)
    told = duration is not None or COST_OUTPUT in values  # what the tuner counts where cost_from is not stored
    if "cost" in extra or cost_from == "run_cost" or (cost_from is None and told):
        return extra, None
    return extra, ("is recorded without a cost: the cost budget and the fidelity schedule count it only with "
                   "--duration SECONDS (its wall time)" + (" unless the problem prices runs (run_cost)"
                                                         if cost_from is None else ""))


def cmd_release(args: argparse.Namespace) -> int:
    from ..data.storage import open_history

    with open_history(args.history) as h:
        released = h.release(ids=args.ids, force=args.force)
    print(f"released trial(s) {released}: the next ask proposes them again")
    return 0
