"""The models: pure numerics (:mod:`.numerics`), the tuner's surrogates (:mod:`.surrogate`), output
transforms, and the acquisition functions and Pareto geometry that score their posterior."""
