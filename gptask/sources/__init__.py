"""Measurements made elsewhere: other machines (:mod:`.multisource`), their selection, CSV files
imported into a history (:mod:`.importing`) and recorded campaigns (:mod:`.replay`), all read by one
reader (:mod:`.measurements`), rows by the rules of :mod:`.rows`.

``gptask.sources`` was one module until issue 41; its names are re-exported here from
:mod:`.multisource`, so ``from gptask.sources import ...`` keeps working."""

from .multisource import (Source, SourceError, MACHINE_DIM, SOURCE_POINTS_AUTO, SOURCE_POINTS_MIN, machine_labels, combined_problem,
                          tune_with_sources, predict_optimum, target_tasks)

__all__ = ["Source", "SourceError", "MACHINE_DIM", "SOURCE_POINTS_AUTO", "SOURCE_POINTS_MIN", "machine_labels", "combined_problem", "tune_with_sources", "predict_optimum", "target_tasks"]
