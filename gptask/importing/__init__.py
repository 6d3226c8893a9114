"""Existing measurements in: validated rows (:mod:`.rows`), imported into a history as finished
trials (:mod:`.store`: ``gt.import_runs``), and a fitted model without a run (:mod:`.fit`:
``gt.fit``)."""

from .fit import fit
from .rows import DataError, Row, Run, group_runs, read_rows
from .store import ImportReport, import_runs

__all__ = ["fit", "import_runs", "ImportReport", "read_rows", "group_runs", "Row", "Run", "DataError"]
