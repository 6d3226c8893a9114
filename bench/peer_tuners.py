"""Single-task peer tuners behind one ask/tell interface, for benchmarks over integer boxes.

Each peer tunes ONE task over the box of a :class:`gptask.Space` whose dimensions are
:class:`gptask.Integer` (optionally log scale): ``ask() -> params`` (a dict, inside the box,
possibly violating the problem's constraints: the caller maps it to a feasible point) and
``tell(params, value)`` with the value observed for exactly the dict ``ask`` returned. The caller
counts evaluations; none of these peers decides when to stop.

* :class:`RandomPeer`: uniform in the gptask encoding (log-uniform for log dimensions).
* :class:`SkoptPeer`: scikit-optimize's ``Optimizer`` set up exactly as ``gp_minimize`` sets it up
  (GP with Gaussian noise, gp_hedge, lbfgs acquisition optimiser, ``n_initial`` LHS points).
* :class:`OpenTunerPeer`: OpenTuner's ``TuningRunManager`` (its ask/tell API) with its default
  technique (the AUC bandit over differential evolution, greedy mutation, Nelder-Mead, ...), a
  private SQLite results database per task, ``LogIntegerParameter`` for log dimensions.
* :class:`BOHBPeer`: HpBandSter's BOHB configuration generator (the KDE model its master queries)
  driven at one budget. BOHB with ``min_budget == max_budget`` runs successive-halving brackets of
  a single stage, one configuration each, which ask this generator for a configuration and report
  its full-budget loss; driving the generator directly does the same without the Pyro name
  server, so that its runs can be interleaved with the other methods'. BOHB's defaults are kept
  (15 % best configurations in the good KDE, 64 samples, 1/3 random configurations, model from
  dimensions + 1 points).

OpenTuner and HpBandSter are imported lazily (they live in the bench environment made by
``bench/peers_setup.sh``, not in gptask's dependencies).
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import warnings
from typing import Any

import numpy as np

from gptask.space.dimensions import Integer, Space

__all__ = ["RandomPeer", "SkoptPeer", "OpenTunerPeer", "BOHBPeer", "PEERS"]


def _integer_dims(space: Space) -> list[Integer]:
    dims = list(space.dimensions)
    for d in dims:
        if not isinstance(d, Integer):
            raise TypeError(f"peer tuners here handle Integer dimensions only, got {d!r}")
    return dims


class RandomPeer:
    """Uniform random search in the space's encoding."""

    name = "random"

    def __init__(self, space: Space, seed: int, n_initial: int = 0) -> None:
        _integer_dims(space)
        self.space = space
        self.rng = np.random.default_rng(seed)

    def ask(self) -> dict:
        return self.space.decode(self.rng.random((1, self.space.n_columns)))[0]

    def tell(self, params: dict, value: float) -> None:
        pass


class SkoptPeer:
    """scikit-optimize ``gp_minimize``'s optimiser, as ask/tell."""

    name = "gp_minimize"

    def __init__(self, space: Space, seed: int, n_initial: int = 10) -> None:
        from skopt import Optimizer
        from skopt.space import Integer as SkInteger
        from skopt.space import Space as SkSpace
        from skopt.utils import cook_estimator

        self.dims = _integer_dims(space)
        sk_dims = [SkInteger(d.lo, d.hi, prior="log-uniform" if d.log else "uniform", name=d.name) for d in self.dims]
        rng = np.random.RandomState(seed)
        est = cook_estimator("GP", space=SkSpace(sk_dims), random_state=rng.randint(0, np.iinfo(np.int32).max),
                             noise="gaussian")
        # the arguments gp_minimize passes on through base_minimize (skopt 0.10 defaults)
        self.opt = Optimizer(sk_dims, est, n_initial_points=n_initial, initial_point_generator="lhs", n_jobs=1,
                             acq_func="gp_hedge", acq_optimizer="lbfgs", random_state=rng,
                             acq_optimizer_kwargs={"n_points": 10000, "n_restarts_optimizer": 5, "n_jobs": 1},
                             acq_func_kwargs={"xi": 0.01, "kappa": 1.96})

    def ask(self) -> dict:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = self.opt.ask()
        return {d.name: int(v) for d, v in zip(self.dims, x)}

    def tell(self, params: dict, value: float) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.opt.tell([int(params[d.name]) for d in self.dims], float(value))


class OpenTunerPeer:
    """OpenTuner through ``opentuner.api.TuningRunManager`` (one tuning run per task)."""

    name = "OpenTuner"
    #: get_next_desired_result() returns None when its techniques only produced configurations
    #: already measured; ask again (the API example does) up to this many times.
    MAX_EMPTY_ASKS = 500

    def __init__(self, space: Space, seed: int, n_initial: int = 0, workdir: str | None = None) -> None:
        import opentuner
        import opentuner.tuningrunmain as otmain
        from opentuner.api import TuningRunManager
        from opentuner.measurement.interface import DefaultMeasurementInterface
        from opentuner.search.manipulator import ConfigurationManipulator, IntegerParameter, LogIntegerParameter

        otmain.init_logging = lambda: None  # OpenTuner would log INFO to stderr and write ./opentuner.log
        logging.getLogger("opentuner").setLevel(logging.ERROR)
        self.dims = _integer_dims(space)
        manipulator = ConfigurationManipulator()
        for d in self.dims:
            cls = LogIntegerParameter if d.log else IntegerParameter
            manipulator.add_parameter(cls(d.name, d.lo, d.hi))
        self._tmp = tempfile.TemporaryDirectory(prefix="opentuner-", dir=workdir)
        args = opentuner.default_argparser().parse_args([])
        args.database = "sqlite:///" + os.path.join(self._tmp.name, "results.db")
        args.quiet = True
        args.display_frequency = 10 ** 9
        # OpenTuner draws from the global `random` and numpy generators; seed them per task
        random.seed(seed)
        np.random.seed(seed % 2 ** 32)
        interface = DefaultMeasurementInterface(args=args, manipulator=manipulator, project_name="gptask-bench",
                                                program_name="task", program_version=str(seed))
        self.api = TuningRunManager(interface, args)
        self._pending: dict[tuple, list[Any]] = {}
        self._Result = __import__("opentuner.resultsdb.models", fromlist=["Result"]).Result

    def ask(self) -> dict:
        for _ in range(self.MAX_EMPTY_ASKS):
            dr = self.api.get_next_desired_result()
            if dr is not None:
                params = {d.name: int(dr.configuration.data[d.name]) for d in self.dims}
                self._pending.setdefault(tuple(sorted(params.items())), []).append(dr)
                return params
        raise RuntimeError(f"OpenTuner proposed no new configuration in {self.MAX_EMPTY_ASKS} asks")

    def tell(self, params: dict, value: float) -> None:
        dr = self._pending[tuple(sorted(params.items()))].pop(0)
        self.api.report_result(dr, self._Result(time=float(value)))

    def close(self) -> None:
        try:
            self.api.finish()
        except Exception:  # noqa: BLE001 - best effort at the end of a benchmark
            pass
        self._tmp.cleanup()


class _Job:
    """The two attributes of hpbandster's Job that the config generator reads."""

    def __init__(self, config: dict, budget: float, loss: float) -> None:
        self.kwargs = {"config": config, "budget": budget}
        self.result = {"loss": loss}
        self.exception = None
        self.id = None


class BOHBPeer:
    """HpBandSter's BOHB at a single budget (min_budget == max_budget), ask/tell."""

    name = "HpBandSter"
    BUDGET = 1.0

    def __init__(self, space: Space, seed: int, n_initial: int = 0) -> None:
        import ConfigSpace as CS
        from hpbandster.optimizers.config_generators.bohb import BOHB

        logging.getLogger("hpbandster").setLevel(logging.ERROR)
        self.dims = _integer_dims(space)
        cs = CS.ConfigurationSpace(seed=seed)
        for d in self.dims:
            cs.add(CS.UniformIntegerHyperparameter(d.name, lower=d.lo, upper=d.hi, log=d.log))
        self.cs = cs
        self.seed = seed
        self._calls = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.cg = BOHB(configspace=cs)

    def ask(self) -> dict:
        # BOHB draws its random fraction and KDE samples from numpy's global generator
        np.random.seed((self.seed * 1009 + self._calls) % 2 ** 32)
        self._calls += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config, _info = self.cg.get_config(self.BUDGET)
        return {d.name: int(config[d.name]) for d in self.dims}

    def tell(self, params: dict, value: float) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.cg.new_result(_Job(dict(params), self.BUDGET, float(value)))


PEERS = {cls.name: cls for cls in (SkoptPeer, RandomPeer, OpenTunerPeer, BOHBPeer)}
