"""After a campaign: which parameters matter, a report a person reads, a table the application ships.

Reads results and model files, never tunes (shared design, "insight/"):

* :mod:`.sensitivity`: Sobol indices of every parameter on the fitted model's mean (SALib)
"""

from .sensitivity import Indices, SensitivityReport, sensitivity

__all__ = ["Indices", "SensitivityReport", "sensitivity"]
