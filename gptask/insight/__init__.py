"""After a campaign: which parameters matter, a report a person reads, a table the application ships.

Reads results, histories and model files; never tunes (shared design, "insight/"). One job per module:

* :mod:`.sensitivity`: Sobol indices of every parameter on the fitted model's mean (SALib)
* :mod:`.grid`: task grids from text (``m=1000:4000:8,n=...``)
* :mod:`.sources`: a tuning result rebuilt from a model file's data (for the one recommendation rule)
* :mod:`.selection`: the configuration to run at every grid point (tuned, predicted or fallback)
* :mod:`.export`: selection tables as JSON, CSV and a C header with a lookup function
* :mod:`.report_data`, :mod:`.figures`, :mod:`.html`, :mod:`.sections`, :mod:`.report`: the HTML
  campaign report (data read once; figures; HTML pieces; one function per section; the page)
* :mod:`.commands`: the ``gptask sensitivity``, ``report`` and ``export-table`` subcommands

The heavy parts (matplotlib, SALib) are imported where they are used.
"""

from .sensitivity import Indices, SensitivityReport, sensitivity

__all__ = ["Indices", "SensitivityReport", "sensitivity", "selection_table", "write_report"]


def __getattr__(name: str):
    if name == "selection_table":
        from .selection import selection_table

        return selection_table
    if name == "write_report":
        from .report import write_report

        return write_report
    raise AttributeError(f"module 'gptask.insight' has no attribute {name!r}")
