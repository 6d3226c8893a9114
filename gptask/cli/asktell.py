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
    """A Tuner on ``args.history`` whose settings default to what the history holds."""
    from ..data.run_header import RunHeader
    from ..data.storage import Owner, is_url, open_history
    from ..tuning import Tuner

    problem = load_problem(args.problem, parse_assignments(args.problem_options))
    stored: dict[str, Any] = {}
    if is_url(args.history) or Path(args.history).exists():
        with contextlib.suppress(FileNotFoundError), open_history(args.history, read_only=True) as h:
            header = RunHeader.read(h)
            stored = {**header.settings, "seed": header.seed, "tasks": h.tasks()}
    tasks: Any = [parse_assignments(t) for t in args.task] if args.task else (
        args.tasks if args.tasks is not None else stored.get("tasks") or 5)
    budget = args.budget if args.budget is not None else stored.get("budget", 20)
    n_initial = args.n_initial if args.n_initial is not None else stored.get("n_initial")
    seed = args.seed if args.seed is not None else (stored.get("seed") or 0)
    target = args.target if args.target is not None else stored.get("target")
    failure_model = (failure_model_arg(args.failure_model) if args.failure_model is not None
                     else stored.get("failure_model", True))
    # an ask runs nothing: the machine is the one that tells (gptask tell --machine); a cost budget the history
    # records (a gt.tune or gptask tune run given one) holds for the runs asked too
    return Tuner(problem, tasks, budget, n_initial, seed, args.history, target=target,
                 owner=Owner.detached("gptask ask"), lease=args.lease, provenance=None,
                 failure_model=failure_model, cost_budget=stored.get("cost_budget"))


def cmd_ask(args: argparse.Namespace) -> int:
    tuner = _tuner_for_ask(args)
    try:
        trials = tuner.ask(args.n)
        if not trials:
            pending = tuner.pending
            if not pending and tuner.done:
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
        t = h.finish(args.id, outcome.status, outcome.value, outcome.samples, outcome.reason, outcome.extra,
                     args.duration, machine=machine, values=outcome.values)
    shown = (f"values {format_assignments(outcome.values)}" if outcome.values else f"value {t.value!r}") if t.value is not None \
        else f"reason {t.reason!r}"
    print(f"trial {t.id}: {t.status.value}, {shown}")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from ..data.storage import open_history

    with open_history(args.history) as h:
        released = h.release(ids=args.ids, force=args.force)
    print(f"released trial(s) {released}: the next ask proposes them again")
    return 0
