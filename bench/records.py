"""Raw benchmark results as JSON files that long runs can fill piece by piece (shared by the bench
scripts).

A result file is one JSON object ``{"format": ..., "runs": [run, ...], <section>: {...}}``: ``runs``
lists one record per invocation (command, UTC dates, machine, load averages) and every other key
holds nested dicts of results. :func:`merge` joins two such objects (runs concatenated, nested
dicts merged key by key, the second object winning on a leaf present in both), so a benchmark split
over several processes (one family, budget or method at a time) can be reassembled with
``--merge a.json b.json ...``; :func:`update_file` merges a partial result into a file on disk, so
a run that is killed keeps everything it finished.

No pickle: plain JSON, floats written by ``json`` (inf and nan as the non-standard ``Infinity`` /
``NaN`` tokens that ``json`` reads back).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from machine import describe_machine, load_average


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def start_run(script: str, argv: Sequence[str] | None) -> dict[str, Any]:
    """A run record for this invocation of ``bench/<script>``; :func:`finish_run` completes it."""
    args = list(sys.argv[1:] if argv is None else argv)
    started = _dt.datetime.now(_dt.timezone.utc)
    return {"id": f"{started:%Y%m%dT%H%M%S.%f}-{os.getpid()}",
            "command": f"PYTHONPATH=. python bench/{script} " + " ".join(shlex.quote(a) for a in args),
            "started": f"{started:%Y-%m-%d %H:%M}", "load_start": load_average(), "machine": describe_machine(),
            "cwd": os.getcwd()}


def finish_run(run: dict[str, Any]) -> dict[str, Any]:
    """``run`` with its end date and end load average (in place; returned for chaining)."""
    run["finished"] = _utc_now()
    run["load_end"] = load_average()
    return run


def merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """``a`` and ``b`` joined: ``runs`` lists concatenated (a run of ``b`` with the ``id`` of one in ``a``
    replaces it), nested dicts merged recursively, any other value of ``b`` replacing that of ``a``.
    Raises ValueError when the two files have different ``format`` tags."""
    fa, fb = a.get("format"), b.get("format")
    if fa is not None and fb is not None and fa != fb:
        raise ValueError(f"cannot merge result files of formats {fa!r} and {fb!r}")
    return _merge_dicts(a, b)


def _merge_dicts(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, vb in b.items():
        va = out.get(key)
        if key == "runs" and isinstance(va, list) and isinstance(vb, list):
            newer = {r.get("id"): r for r in vb}
            out[key] = [newer.pop(r.get("id"), r) for r in va] + list(newer.values())
        elif isinstance(va, Mapping) and isinstance(vb, Mapping):
            out[key] = _merge_dicts(va, vb)
        else:
            out[key] = vb
    return out


def read(path: str) -> dict[str, Any]:
    """The JSON object stored at ``path``."""
    with open(path) as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a result file holds one JSON object, got {type(data).__name__}")
    return data


def read_all(paths: Sequence[str]) -> dict[str, Any]:
    """The files at ``paths`` merged in order (later files win on conflicting leaves)."""
    out: dict[str, Any] = {}
    for p in paths:
        out = merge(out, read(p))
    return out


def update_file(path: str, partial: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``partial`` into the file at ``path`` (created if absent), written atomically; returns
    the merged content."""
    merged = merge(read(path), partial) if os.path.exists(path) else dict(partial)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(merged, fh, indent=1)
    os.replace(tmp, path)
    return merged


class Results:
    """The results of one invocation of a bench script: ``data`` (the content of ``path`` when it
    exists, merged with this run's record), kept merged into ``path`` (when given) by :meth:`add`."""

    def __init__(self, fmt: str, script: str, argv: Sequence[str] | None, path: str | None) -> None:
        self.format, self.path, self.run = fmt, path, start_run(script, argv)
        self.data: dict[str, Any] = {"format": fmt, "runs": [self.run]}
        if path and os.path.exists(path):
            self.data = merge(read(path), self.data)
        self.add({})

    def add(self, partial: Mapping[str, Any]) -> None:
        """Merge ``partial`` (e.g. ``{"cells": {...}}``) into the results and the file."""
        partial = {"format": self.format, "runs": [self.run], **partial}
        self.data = update_file(self.path, partial) if self.path else merge(self.data, partial)

    def finish(self) -> dict[str, Any]:
        """Record the end of the run; returns the data."""
        finish_run(self.run)
        self.add({})
        return self.data


def merged(paths: Sequence[str], into: str | None) -> dict[str, Any]:
    """The files at ``paths`` merged (see :func:`read_all`), also merged into the file ``into`` if given."""
    data = read_all(paths)
    return update_file(into, data) if into else data


def write_report(text: str, path: str | None) -> None:
    """Print a markdown report and write it to ``path`` if given."""
    print(text)
    if path:
        with open(path, "w") as fh:
            fh.write(text)
