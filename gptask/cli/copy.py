"""``gptask copy SRC DST``: a whole history from a SQLite file to PostgreSQL or back (gptask.data.storage.copy)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def _cmd_copy(args: argparse.Namespace) -> int:
    from ..data.storage import is_url, redact
    from ..data.storage.copy import copy_history

    counts = copy_history(args.src, args.dst)
    shown = [redact(p) if is_url(p) else p for p in (args.src, args.dst)]
    print(f"copied {shown[0]} to {shown[1]}: " + ", ".join(f"{n} {table}" for table, n in counts.items()))
    return 0


def register(sub: Any) -> None:
    """Add the ``copy`` command to the command line's subparsers."""
    c = sub.add_parser("copy", help="copy a whole history between a SQLite file and a PostgreSQL database")
    c.add_argument("src", help="the history to copy (a SQLite file or postgresql://user@host:port/db?schema=NAME)")
    c.add_argument("dst", help="where to copy it (created; must be new or empty)")
    c.set_defaults(func=_cmd_copy)
