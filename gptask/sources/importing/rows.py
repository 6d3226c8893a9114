"""The rules of rows (a CSV file, a list of dicts, a recording) at the path they had in the layout
of issue 41: they moved to :mod:`gptask.sources.rows`, beside the one reader of measurements
(:mod:`gptask.sources.measurements`) that parses rows with them, for ``gt.import_runs``
(:mod:`.store`) to read through that reader without an import cycle."""

from ..rows import *  # noqa: F401,F403
from ..rows import __all__  # noqa: F401
