"""Output files of a run (plots, model files, summaries), checked before any tuning starts, so a
typo in a path costs nothing instead of an hour of runs."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["check_output_path"]


def check_output_path(path: str | os.PathLike, what: str, suffixes: Iterable[str] | None = None) -> Path:
    """``path`` as a Path if a file can be written there, else ValueError naming ``what`` and why:
    the directory is missing or not writable, the path is a directory, or its suffix is not one
    of ``suffixes`` (without dots, e.g. ``{"png", "pdf"}``)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{what} {p} is a directory; give a file name")
    parent = p.absolute().parent
    if not parent.is_dir():
        raise ValueError(f"{what} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{what} {p} is not writable")
    if suffixes is not None:
        allowed = sorted({s.lower().lstrip(".") for s in suffixes})
        if p.suffix.lower().lstrip(".") not in allowed:
            raise ValueError(f"{what} {p} must end in one of {', '.join('.' + s for s in allowed)}, got "
                             f"{p.suffix or 'no suffix'}")
    return p
