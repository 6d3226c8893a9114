"""Output files of a run (plots, model files, summaries), checked before any tuning starts, so a
typo in a path costs nothing instead of an hour of runs, and an output never replaces an input of
the same command (the history, the data, a recording), any history, or a model file (except where
the output is a model file itself: ``--save-model``). Every command with an output path checks all of
them with :func:`check_outputs` before it reads, runs or writes anything."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["MODEL_FORMAT", "check_output_path", "check_outputs", "is_model_file", "refuse_overwriting_a_history",
           "same_file", "is_history", "is_history_head", "SQLITE_HEADER"]


#: the first 16 bytes of every SQLite database (a gptask history is one)
SQLITE_HEADER = b"SQLite format 3\0"
#: the format tag of a gptask model file (gptask.transfer.model_io writes it as ``"format": "gptask.model"``)
MODEL_FORMAT = "gptask.model"
_MODEL_TAG = b'"format": "' + MODEL_FORMAT.encode() + b'"'
#: bytes read at a time when looking for the model tag in an existing file
_SCAN_CHUNK = 1 << 20


def _head(path: str | os.PathLike, n: int) -> bytes:
    """The first ``n`` bytes of ``path`` (b"" when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def is_history(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an SQLite database (a gptask history, or another one): its first bytes
    are SQLite's. False for a missing or unreadable file."""
    return is_history_head(_head(path, len(SQLITE_HEADER)))


def is_history_head(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file (at least 16 of them), are an SQLite database's."""
    return head[:len(SQLITE_HEADER)] == SQLITE_HEADER


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether the paths ``a`` and ``b`` name one file: the same inode when both exist (links
    included), else the same absolute path once symbolic links are resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def refuse_overwriting_a_history(path: str | os.PathLike, what: str) -> None:
    """ValueError when ``path`` exists and is an SQLite database (a gptask history, or another one):
    no output of gptask replaces one."""
    p = Path(path)
    if is_history(p):
        raise ValueError(f"{what} {p} is a gptask history (an SQLite database): gptask does not write over one; "
                         "give another file name")


def is_model_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an existing gptask model file: a JSON object holding the key ``format``
    with :data:`MODEL_FORMAT` as save_model writes it (read in chunks; a file that does not start
    with ``{`` is not read further)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_SCAN_CHUNK)
            if not data.lstrip().startswith(b"{"):
                return False
            while _MODEL_TAG not in data:
                chunk = fh.read(_SCAN_CHUNK)
                if not chunk:
                    return False
                data = data[-len(_MODEL_TAG):] + chunk
            return True
    except OSError:
        return False


def check_output_path(path: str | os.PathLike, what: str, suffixes: Iterable[str] | None = None,
                      inputs: Mapping[str, str | os.PathLike | None] | None = None, model_ok: bool = False) -> Path:
    """``path`` as a Path if a file can be written there, else ValueError naming ``what`` and why:
    the directory is missing or not writable, the path is a directory, its suffix is not one of
    ``suffixes`` (without dots, e.g. ``{"png", "pdf"}``), it is one of ``inputs`` (what each is ->
    its path, e.g. ``{"the history": "runs.sqlite"}``: by inode or resolved path, so a link to an
    input counts), it is an existing SQLite database (a history) or, unless ``model_ok`` (the output
    is a model file itself), an existing gptask model file."""
    p = Path(path)
    for name, source in (inputs or {}).items():
        if source is not None and same_file(p, source):
            raise ValueError(f"{what} {p} is {name} ({source}): writing it would destroy it; give another file name")
    refuse_overwriting_a_history(p, what)
    if not model_ok and is_model_file(p):
        raise ValueError(f"{what} {p} is a gptask model file: only --save-model writes over one; give another file name")
    if str(path).endswith(("/", os.sep)) and not p.is_dir():
        raise ValueError(f"{what} {path} names a directory (it ends in {os.sep}); give a file name")
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


def check_outputs(outputs: Mapping[str, str | os.PathLike | None],
                  inputs: Mapping[str, str | os.PathLike | None] | None = None,
                  suffixes: Mapping[str, Iterable[str]] | None = None, models: Iterable[str] = ()) -> dict[str, Path]:
    """The one check of a command's outputs, before it reads, runs or writes anything: each of
    ``outputs`` (option -> path, None when not given) by :func:`check_output_path` against every one
    of ``inputs`` (what each is -> its path), with its ``suffixes`` (option -> allowed suffixes) and
    ``model_ok`` for the options in ``models`` (those that write a model file); and no two outputs
    one file. Returns option -> Path of the outputs given; raises ValueError naming the option."""
    models = set(models)
    checked: dict[str, Path] = {}
    for what, path in outputs.items():
        if path is None:
            continue
        p = check_output_path(path, what, (suffixes or {}).get(what), inputs, model_ok=what in models)
        for other, q in checked.items():
            if same_file(p, q):
                raise ValueError(f"{what} {p} is also the file of {other}: give each output its own file name")
        checked[what] = p
    return checked
