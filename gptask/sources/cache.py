"""Work done once on sources, kept by content: their measurements read and checked, and the model
fitted on them (issue 46).

``gt.predict_optimum(None, task, sources=..., problem=..., cache=DIR)`` keeps in the folder ``DIR``:

* **each source's measurements** (``measurements-<key>.json``): what
  :func:`gptask.sources.measurements.read_measurements` made of it (the rows read, validated and
  grouped into runs, each with its machine record). ``key`` is the sha256 of the source's content
  (a file's bytes, a list of dicts as canonical JSON; with the ``gt.Source`` columns and machine)
  and of the problem's signature: a changed row, another problem or another value column is
  another key, so the source is read again. Histories and results are not kept (a history can
  change under the same name; reading one is a query, not a parse of every row).
* **the fitted model** (``model-<key>.json``, a model file of :func:`gptask.transfer.model_io.save_model`)
  keyed by the sha256 of the rows the model is fitted on (after the summary), the fit's options and
  the combined problem's signature: a second call with the same sources loads it instead of fitting.
* **the fit of a ``gt.tune(..., sources=..., cache=DIR)`` result's model** (``fit-<key>.json``: the
  hyperparameters, their data key and the output transform, and the failure classifier's fitted
  settings with their data key when the runs hold a failure), keyed by the run's trials when the
  fit was made (:meth:`SourceCache.keep_fit`): the result's model is fitted when first read
  (:class:`gptask.results.result.LazyModelResult`), after the run's history is closed, so it is kept
  here, and a run resumed on the same data with the same cache (or a second run) puts it in its
  history before it starts (:meth:`SourceCache.restore_fit`): its model reuses it instead of fitting.

JSON only (nothing is unpickled); a cached file that does not read back (cut short, edited) is
ignored with a warning and written again. The keys include :data:`CACHE_FORMAT`, so a change of what
is stored makes old files unused rather than misread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..data.run_header import write_failure_fit, write_use_log
from ..data.trials import Status
from .measurements import Measurement, Source

__all__ = ["SourceCache", "CACHE_FORMAT", "content_key"]

log = logging.getLogger(__name__)

#: the version of what the cache stores (part of every key)
CACHE_FORMAT = 1


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True).encode()


def content_key(*parts: Any) -> str:
    """The sha256 (hex) of ``parts`` as canonical JSON, with :data:`CACHE_FORMAT`; bytes parts are
    hashed as they are."""
    h = hashlib.sha256(str(CACHE_FORMAT).encode())
    for part in parts:
        h.update(b"\0")
        h.update(part if isinstance(part, bytes) else _canonical(part))
    return h.hexdigest()


def _source_content(item: Any) -> tuple[Any, ...] | None:
    """What identifies a source's content (its bytes or rows, and how ``gt.Source`` reads them);
    None for a history or result (not cached)."""
    src = item if isinstance(item, Source) else Source(item)
    data = src.data
    how = [src.value, src.status, src.machine]
    if isinstance(data, (str, os.PathLike)) and not str(data).startswith(("postgresql:", "postgres:")):
        path = Path(data)
        if not path.is_file():
            return None
        with open(path, "rb") as fh:
            head = fh.read(16)
        if head.startswith(b"SQLite format 3"):
            return None  # a history: not cached
        return ("file", path.name, hashlib.sha256(path.read_bytes()).hexdigest(), how)
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)) and all(isinstance(r, Mapping) for r in data):
        return ("rows", content_key(list(data)), how)
    return None


def _to_json(m: Measurement) -> list:
    return [m.task, m.params, m.status.value, m.value, list(m.samples), m.machine]


def _from_json(row: Sequence[Any]) -> Measurement:
    task, params, status, value, samples, machine = row
    return Measurement(dict(task), dict(params), Status(status), None if value is None else float(value),
                       tuple(float(s) for s in samples), dict(machine))


class SourceCache:
    """The cache folder of :mod:`gptask.sources.cache` (created when missing). ``reads`` and
    ``fits`` count the measurements read and the models fitted through it (hits count nothing)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise ValueError(f"cache must be a folder, got the file {self.directory}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.reads = self.fits = 0

    def measurements(self, problem: Any, item: Any, read: Any) -> list[Measurement]:
        """The measurements of source ``item`` for ``problem``: from the cache when its content was
        read before, else ``read()`` (then kept)."""
        content = _source_content(item)
        if content is None:
            self.reads += 1
            return read()
        path = self.directory / f"measurements-{content_key(problem.signature(), content)}.json"
        if path.is_file():
            try:
                return [_from_json(r) for r in json.loads(path.read_text())["measurements"]]
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("cache: %s does not read back (%s); reading the source again", path, exc)
        self.reads += 1
        found = read()
        _write(path, {"measurements": [_to_json(m) for m in found]})
        return found

    def model_path(self, problem: Any, rows: Sequence[Mapping[str, Any]], options: Mapping[str, Any]) -> Path:
        """Where the model fitted on ``rows`` (the fit's input) with ``options`` for ``problem`` is kept."""
        return self.directory / f"model-{content_key(problem.signature(), list(rows), dict(options))}.json"


    def fit_path(self, problem: Any, trials: Sequence[Any], options: Mapping[str, Any]) -> Path:
        """Where the fit of a tuned run's model on ``trials`` (the run's trials, gptask.data.trials.Trial,
        sources' and own) with ``options`` (the model's) for ``problem`` (the combined one) is kept."""
        rows = [[t.task_index, t.task, t.params, t.status.value, t.value] for t in trials]
        return self.directory / f"fit-{content_key(problem.signature(), rows, dict(options))}.json"

    def keep_fit(self, path: Path, record: Mapping[str, Any]) -> None:
        """Keep the fit ``record`` ({"iteration", "params", "log_likelihood", "data_key", "use_log"}, and
        "failure": the failure model's settings when it was fitted) at ``path`` (from :meth:`fit_path`)."""
        self.fits += 1
        _write(path, {"fit": dict(record)})

    def restore_fit(self, path: Path, storage: Any) -> bool:
        """Put the fit kept at ``path`` in ``storage`` (a history) when it holds no model yet, so that
        its tuner reuses or warm-starts from it; returns whether it did."""
        if not path.is_file() or storage.last_model() is not None:
            return False
        try:
            fit = json.loads(path.read_text())["fit"]
            params = dict(fit["params"])
            iteration, ll, data_key = int(fit["iteration"]), float(fit["log_likelihood"]), str(fit["data_key"])
            use_log = fit["use_log"]
            failure = fit.get("failure")
            if failure is not None and not isinstance(failure, dict):
                raise TypeError(f"the failure model's settings must be an object, got {failure!r}")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("cache: %s does not read back (%s); the model is fitted again", path, exc)
            return False
        storage.add_model(iteration, params, ll, data_key)
        if use_log is not None:
            write_use_log(storage, bool(use_log))
        if failure is not None:
            write_failure_fit(storage, failure)
        return True


def _write(path: Path, doc: dict) -> None:
    """``doc`` as JSON at ``path``, written whole or not at all."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, allow_nan=False, separators=(",", ":")))
    os.replace(tmp, path)
