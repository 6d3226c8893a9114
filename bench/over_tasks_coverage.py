"""Coverage of the GP over tasks (new-task prediction, gptask.transfer.predict) on a known family, raw and
with its leave-one-task-out factor (predict.over_tasks_factor), issue 45 item 3: W(t, x) = sin(a t + b x)
+ c cos(2 a t x) over one task coordinate t, 30 configurations x, T tuned tasks at random t, 41 new tasks.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python bench/over_tasks_coverage.py
"""
import numpy as np
from gptask.transfer.predict import _over_tasks, over_tasks_factor, _fit_over_tasks
x = np.linspace(0, 1, 30)
def fam(t, k):
    rng = np.random.default_rng(k); a, b, c = rng.uniform(3, 9), rng.uniform(0, 6), rng.uniform(0.2, 1)
    return np.sin(a * t[:, None] + b * x[None, :]) + c * np.cos(2 * a * t[:, None] * x[None, :])
for k in range(6):
    for T in (5, 7, 10):
        tt = np.sort(np.random.default_rng(100 + k).random(T))
        W = fam(tt, k); tx = tt[:, None]
        theta = _fit_over_tasks(tx, W)
        f = over_tasks_factor(tx, W)
        new = np.linspace(0, 1, 41)
        raw = cal = 0; n = 0
        for t in new:
            m, sd = _over_tasks(tx, W, np.array([t]), theta=theta)
            e = np.abs(fam(np.array([t]), k)[0] - m)
            raw += np.sum(e <= 1.96 * sd); cal += np.sum(e <= 1.96 * sd * np.sqrt(f)); n += e.size
        print(k, T, round(f, 2), round(raw / n, 3), round(cal / n, 3), flush=True)
