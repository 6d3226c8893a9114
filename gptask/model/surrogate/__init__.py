"""The tuner's model of an objective over its tasks, apart from the trial bookkeeping of the tuner.

* :mod:`.data`: finished trials -> what the model sees (the value rule, imputation, the data key)
* :mod:`.updates`: block appends between full fits, and when a refit is due
* :mod:`.fantasy`: pending trials in the search model (kriging believer, noise-free)
* :mod:`.core`: :class:`Surrogate`, the life of the LCM (transform, fits, appends, search view)
* :mod:`.settings`: its constants
"""

from .core import ModelSettings, ModelStore, SearchView, Surrogate

__all__ = ["Surrogate", "ModelSettings", "ModelStore", "SearchView"]
