"""Consensus candidates added to the joint search's cross-task picks (issue 23 experiment).

Put this folder first on PYTHONPATH (bench/suite.py's worker processes import it too) and set
GPTASK_CONSENSUS_PICKS to a JSON object, e.g.

    GPTASK_CONSENSUS_PICKS='{"cons": 2}' PYTHONPATH=bench/archive/consensus_picks:. \\
        python bench/suite.py run --families convolution --methods mla --seeds 0-15 --tag cons2 --out F

Whenever gptask offers task i cross-task picks (gptask/tuning/crosstask.py), the ``cons``
configurations of least mean predicted model value over the other tasks (with ``"consall": 1``,
over every task, i included) that task i has not run are offered too: the run-free consensus rule
of gptask/transfer/tla1.py inside the joint search. Results: BENCHMARKS.md, issue 23.
"""

import json
import os

if os.environ.get("GPTASK_CONSENSUS_PICKS"):
    import numpy as np

    import gptask.tuning.tuner as tuner_module

    CFG = json.loads(os.environ["GPTASK_CONSENSUS_PICKS"])
    OFFER = tuner_module.Tuner.search_among

    def search_among(self, i):
        offered = OFFER(self, i)
        if offered is None or not CFG.get("cons"):
            return offered
        domain, model = self.problem.domain(self.tasks[i]), self.model
        every = domain.encode(np.arange(len(domain)))
        tasks = [j for j in range(self.n_tasks) if CFG.get("consall") or j != i]
        score = np.mean([model.predict(j, every)[0] for j in tasks], axis=0)
        mine = self.trials_of(i)
        skip = set(domain.rows_of(self.problem.param_space.encode([t.params for t in mine])).tolist()) if mine else set()
        skip |= set(domain.rows_of(offered).tolist())
        extra = [int(r) for r in np.argsort(score, kind="stable") if int(r) not in skip][: CFG["cons"]]
        return np.vstack([offered, domain.encode(np.array(extra, dtype=np.int64))]) if extra else offered

    tuner_module.Tuner.search_among = search_among
