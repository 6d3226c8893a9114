"""Existing measurements in: validated rows (:mod:`gptask.sources.rows`), imported into a history as finished
trials (:mod:`.store`: ``gt.import_runs``), and a fitted model without a run (:mod:`.fit`:
``gt.fit``; :func:`from_model` pairs a saved model with its data again, without a refit)."""

from .fit import fit, from_model
from ..rows import DataError, Row, Run, group_runs, read_rows
from .store import ImportReport, import_runs

__all__ = ["fit", "from_model", "import_runs", "ImportReport", "read_rows", "group_runs", "Row", "Run", "DataError"]
