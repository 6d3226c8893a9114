"""``gptask replay``: tune a recorded campaign offline and print the fraction of the optimum reached.

    gptask replay data/hub_convolution/*.json.gz --restrict "block_size_x*block_size_y<=1024" \\
        --budget 20,40 --seeds 0-4 --plot replay.png

Every file is one machine's recording (a Kernel Tuner cache file, a T4 results file or a CSV; see
:mod:`gptask.sources.replay`); all are tuned together as the tasks of one problem (``--alone`` also tunes
each on its own). A user plans budgets and tuner settings this way before spending real runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["register"]


def _int_list(text: str, what: str) -> list[int]:
    out: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            if "-" in part:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                out += list(range(lo, hi + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise ValueError(f"{what} must be integers or ranges such as 20,40 or 0-4, got {text!r}") from None
    if not out or min(out) < (1 if what == "--budget" else 0):
        raise ValueError(f"{what} must list at least one {'positive ' if what == '--budget' else ''}integer, got {text!r}")
    return out


def _cmd_replay(args: argparse.Namespace) -> int:
    from ..core.output_files import check_outputs
    from ..results.plots import plot_formats
    from ..sources.replay import read_recording, read_restrictions, replay

    inputs: dict[str, Any] = {f"recording {k + 1}": p for k, p in enumerate(args.files)}
    inputs["the restrictions file"] = args.restrictions_file
    check_outputs({"--plot": args.plot, "--json": args.json}, inputs, {"--plot": plot_formats()})
    labels = args.label or [None] * len(args.files)
    if len(labels) != len(args.files):
        raise ValueError(f"--label must be given once per recording, in order: {len(args.files)} file(s), "
                         f"got {len(labels)} label(s)")
    budgets, seeds = _int_list(args.budget, "--budget"), _int_list(args.seeds, "--seeds")
    restrictions = list(args.restrict or [])
    if args.restrictions_file:
        restrictions += read_restrictions(args.restrictions_file)
    recordings = [read_recording(p, objective=args.objective, label=lb) for p, lb in zip(args.files, labels)]
    names = [r.label for r in recordings]
    for k, name in enumerate(names):
        if name in names[:k]:
            j = names.index(name)
            raise ValueError(f"recordings {j + 1} ({args.files[j]}) and {k + 1} ({args.files[k]}) share the machine "
                             f"label {name!r}; name each with --label, once per recording in order")
    options: dict[str, Any] = {}
    if args.n_initial is not None:
        options["n_initial"] = args.n_initial
    report = replay(recordings, restrictions, budgets=budgets, seeds=seeds, alone=args.alone, **options)
    print(report.text())
    if args.plot:
        print(f"plot: {report.plot(args.plot)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"labels": report.labels, "optima": report.optima,
                                               "summary": report.summary(),
                                               "runs": [r.__dict__ for r in report.runs]}, indent=1))
        print(f"runs: {args.json}")
    return 0


def register(sub: Any) -> None:
    """Add the ``replay`` subcommand to the subparsers ``sub`` of ``gptask``."""
    r = sub.add_parser("replay", help="tune recorded campaigns offline: fraction of the optimum against runs")
    r.add_argument("files", nargs="+", help="one recording per machine: Kernel Tuner cache (.json, .json.gz), "
                                            "T4 results (.json) or CSV")
    r.add_argument("--restrict", action="append", metavar="EXPR",
                   help="a restriction as the tuning script writes it, e.g. 'block_size_x*block_size_y<=1024' "
                        "(repeatable; parsed, never evaluated as code)")
    r.add_argument("--restrictions-file", default=None, help="a file of restrictions, one per line (# comments)")
    r.add_argument("--label", action="append", metavar="NAME",
                   help="the machine label of a recording, once per file in order (default: the file's device "
                        "name, else its name); needed when two recordings carry one label")
    r.add_argument("--objective", default=None, help="the measured quantity to minimise (default: the file's, "
                                                      "else time)")
    r.add_argument("--budget", default="20,40", help="runs per machine, one run of the tuner each (default 20,40)")
    r.add_argument("--seeds", default="0-4", help="seeds of the tuner, e.g. 0-9 or 0,3,7 (default 0-4)")
    r.add_argument("--n-initial", type=int, default=None, help="initial design per machine (default: half the budget)")
    r.add_argument("--alone", action="store_true", help="also tune each machine on its own, for comparison")
    r.add_argument("--plot", default=None, help="write the fraction of the optimum against runs here (PNG, ...)")
    r.add_argument("--json", default=None, help="write every run's curve here")
    r.set_defaults(func=_cmd_replay)
