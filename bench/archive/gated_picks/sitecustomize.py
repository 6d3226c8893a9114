"""Cross-task picks gated by an empirical rank correlation (issue 23 experiments).

The setting ``{"every": 2, "thr": -2, "top": 2, "self": 0.93}`` is what gptask now does by itself
(gptask/tuning/crosstask.py, bit for bit on the suite's runs); the hook replaces
``Tuner.search_among``, and with it gptask's own picks, so that on a gptask of a71ce01 or later it
runs exactly the variant its options describe. The other options are the variants measured before
(BENCHMARKS.md, issue 23).

Put this folder first on PYTHONPATH (bench/suite.py starts worker processes, which import it too)
and set GPTASK_GATED_PICKS to a JSON object, e.g.

    GPTASK_GATED_PICKS='{"every": 2, "thr": 0.5, "top": 2}' \\
    PYTHONPATH=bench/archive/gated_picks:. python bench/suite.py run --families convolution \\
        --methods mla --seeds 0-15 --tag g05 --out F

On every ``every``-th searched run of a task i with a listed or enumerated domain, the search
chooses by EI among the ``top`` best configurations of each other task j whose model, conditioned
on j's data only (``LCM.subset([j])``, the joint fit's hyperparameters), ranks task i's measured
values with a Spearman correlation of at least ``thr`` (with ``"topq": 1``, instead: the share of
task i's best quarter of runs that j's model also ranks in its best quarter; with ``"pool": 1``,
the mean of every estimate made for the pair so far in the run; with ``"start": k``, only from the
task's k-th searched run on); the whole domain otherwise.
"""

import json
import os

if os.environ.get("GPTASK_GATED_PICKS"):
    import numpy as np
    from scipy.stats import spearmanr

    import gptask.tuning.tuner as tuner_module
    from gptask.surrogate.data import usable

    CFG = json.loads(os.environ["GPTASK_GATED_PICKS"])

    def search_among(self, i):
        domain = self.problem.domain(self.tasks[i])
        model = self.model
        if domain is None or model is None:
            return None
        mine = self.trials_of(i)
        searched = sum(t.source == "search" for t in mine)
        if searched % CFG["every"] or searched < CFG.get("start", 0):
            return None
        picked = self.__dict__.setdefault("_picked_at", set())
        if CFG.get("stall"):  # only after a searched run that did not improve, and never twice in a row
            done = [t for t in mine if t.status.finished]
            last = max((k for k, t in enumerate(done) if t.source == "search"), default=None)
            if last is None or (i, searched - 1) in picked:
                return None
            before = [t.value for t in done[:last] if usable(t)]
            if usable(done[last]) and (not before or done[last].value < min(before)):
                return None
        X, y = model.data()
        if len(y[i]) < 4:
            return None
        if "self" in CFG:  # only where the task's own leave-one-out predictions rank its runs poorly
            observed, loo_mean, _ = model.loo()
            own = spearmanr(loo_mean[i], observed[i])[0]
            if CFG.get("log"):  # record (task, searched runs, own correlation) to study the gate
                with open(CFG["log"], "a") as fh:
                    fh.write(f"{self.problem.name} {i} {searched} {own:.4f}\n")
            if np.isfinite(own) and own >= CFG["self"]:
                return None
        rows = []
        for j in range(self.n_tasks):
            if j == i:
                continue
            predicted = model.subset([j]).predict(0, X[i])[0]
            rho = spearmanr(predicted, y[i])[0]
            if CFG.get("topq"):
                q = max(2, len(y[i]) // 4)
                both = set(np.argsort(y[i], kind="stable")[:q].tolist()) & set(
                    np.argsort(predicted, kind="stable")[:q].tolist())
                rho = len(both) / q
            if CFG.get("pool"):
                seen = self.__dict__.setdefault("_gate_estimates", {}).setdefault((i, j), [])
                if np.isfinite(rho):
                    seen.append(rho)
                rho = float(np.mean(seen)) if seen else rho
            if not np.isfinite(rho) or rho < CFG["thr"]:
                continue
            rows += [t.params for t in sorted((t for t in self.trials_of(j) if usable(t)),
                                              key=lambda t: t.value)[: CFG["top"]]]
        if not rows:
            return None
        picked.add((i, searched))
        return domain.encode(domain.rows_of(self.problem.param_space.encode(rows)))

    tuner_module.Tuner.search_among = search_among
