"""The one read of an input file of measurements: its first bytes say its kind, a history (an SQLite
database, opened by the storage, never read here beyond its first bytes), a model file
(``save_model``), else content (a CSV file, a Kernel Tuner / T4 recording, gzipped or not), read
whole once. :func:`gptask.sources.measurements.read_measurements` (sources, ``gt.import_runs``),
:func:`gptask.sources.rows.read_rows` and :func:`gptask.sources.replay.read_recording`
(``gptask replay``) read a path with :func:`read_input` and give its bytes to the parser of its kind."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .output_files import is_history_head

__all__ = ["InputFile", "read_input", "is_model_head", "MODEL_FILE_MARK", "MODEL_FILE_HEAD", "HISTORY", "MODEL",
           "CONTENT"]

#: what the first bytes of a model file (``save_model``) hold, and how many of them are looked at
MODEL_FILE_MARK, MODEL_FILE_HEAD = b'"gptask.model"', 512
#: the kinds of an input file
HISTORY, MODEL, CONTENT = "history", "model", "content"


def is_model_head(head: bytes) -> bool:
    """Whether ``head``, a file's first :data:`MODEL_FILE_HEAD` bytes, are a model file's."""
    return MODEL_FILE_MARK in head[:MODEL_FILE_HEAD]


@dataclass(frozen=True)
class InputFile:
    """A file read once. name: its path as given (for messages and for opening a history); kind:
    :data:`HISTORY`, :data:`MODEL` or :data:`CONTENT`; raw: its bytes (a history's first
    :data:`MODEL_FILE_HEAD` bytes only)."""

    name: str
    kind: str
    raw: bytes


def read_input(path: str | os.PathLike) -> InputFile:
    """``path`` read once (module docstring); FileNotFoundError (or another OSError) as ``open``
    raises it when the file cannot be read."""
    name = str(Path(path))
    with open(path, "rb") as fh:
        head = fh.read(MODEL_FILE_HEAD)
        if is_model_head(head):
            return InputFile(name, MODEL, head + fh.read())
        if is_history_head(head):
            return InputFile(name, HISTORY, head)
        return InputFile(name, CONTENT, head + fh.read())
