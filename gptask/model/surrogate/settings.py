"""Constants of the tuner's surrogate (:mod:`gptask.model.surrogate`), in one place."""

from __future__ import annotations

__all__ = ["VALUE_LIMIT", "DRIFT_WINDOW", "DRIFT_E2"]

#: the largest |value| the model takes as a measurement. Anything beyond (the 1e308 a user returns
#: as a "penalty") is shown to the model like a failed run; the trial keeps its value as given.
#: At 1e150 the squares in a task's mean and variance stay finite in float64, and log(1e150) = 345.
VALUE_LIMIT = 1e150

#: model updates (:mod:`gptask.model.surrogate.updates`): a full refit is due when the mean squared
#: one-step-ahead standardised error of the last DRIFT_WINDOW measured points appended since the
#: last full fit exceeds DRIFT_E2 (a calibrated model gives 1; 4 is a 2-sigma miss on average)
DRIFT_WINDOW, DRIFT_E2 = 3, 4.0
