"""``gptask machine``: this machine's record, for ``gptask tell --machine FILE`` from another node.

Batch users ask on a login node and run on compute nodes; the trial's machine is the compute node's.
``gptask machine --out node.json`` on the compute node (in the job script) writes its record, and
``gptask tell H ID VALUE --machine node.json`` stores it with the result (:mod:`gptask.data.provenance`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["register", "tell_record"]


def _cmd_machine(args: argparse.Namespace) -> int:
    from ..core.output_files import check_outputs
    from ..data.provenance import this_machine

    check_outputs({"--out": args.out})
    text = json.dumps(this_machine(), indent=1, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
        print(args.out)
    else:
        print(text)
    return 0


def register(sub: Any) -> None:
    """Add ``gptask machine`` to the command line's subparsers."""
    m = sub.add_parser("machine", help="print this machine's record (CPU, cores, memory, GPUs, Python packages) as JSON")
    m.add_argument("--out", default=None, help="write it to this file (for gptask tell --machine FILE)")
    m.set_defaults(func=_cmd_machine)


def tell_record(spec: str, label_ok: bool = False) -> dict[str, Any] | None:
    """The machine record ``gptask tell --machine SPEC`` stores: ``auto`` (this process's), ``none``
    (no record), or a JSON file written by ``gptask machine --out``; with ``label_ok`` (``gptask
    fit --machine``) any other text is a label naming the machine. Raises ValueError naming the
    file when it is not a machine record."""
    from ..data.provenance import ProvenanceError, check_record, this_machine

    if spec == "auto":
        return this_machine()
    if spec == "none":
        return None
    path = Path(spec)
    if not path.is_file():
        if label_ok and path.suffix.lower() != ".json":
            return check_record(spec, "--machine")
        raise ValueError(f"--machine {spec!r}: give auto, none, or a JSON file written by `gptask machine --out`; "
                         f"no such file")
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--machine {path}: not a JSON machine record ({exc})") from None
    try:
        return check_record(raw, str(path))
    except ProvenanceError as exc:
        raise ValueError(str(exc)) from None
