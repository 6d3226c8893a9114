"""Where a finished joint convolution run's model ranks each GPU's best configurations (issue 45): per
GPU, the best fraction found, the Spearman correlation of the final model's means with the recorded
times, the ranks of the GPU's 10 best configurations under its own mean (of 4,362), how many measured
runs reached 0.5 of the optimum, and how many runs of the whole run fell in the region
(block_size_y 1, tile_size_y 4, no shared memory) that holds MI250X's best.

    PYTHONPATH=. python bench/archive/final_model_ranks.py SEED
"""
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from suite_families import family
from gptask.sources.replay import read_recording
fam=family('convolution')
recs={g['gpu'][-6:]:read_recording(p) for g,(p,_) in zip(fam.tasks, fam.kernel_tuner)}
dom=fam.problem.domain(fam.tasks[0]); P=dom.params(np.arange(len(dom)))
T={g:np.array([ (lambda v: v if isinstance(v,float) else np.inf)(r.results.get(r.key(p))) for p in P]) for g,r in recs.items()}
F={g:t.min()/t for g,t in T.items()}

import gptask as gt
from scipy.stats import spearmanr
logging.getLogger("gptask").setLevel(logging.ERROR)
seed=int(sys.argv[1])
res=gt.tune(fam.problem, tasks=fam.tasks, budget=40, seed=seed, progress=False)
m=res.model
X=dom.encode(np.arange(len(dom)))
gs=list(F)
for i,g in enumerate(gs):
    mean,var=m.predict(i,X)
    tr=[t for t in res.history if t.task_index==i]
    rows=dom.rows_of(fam.problem.param_space.encode([t.params for t in tr]))
    fin=np.isfinite(T[g])
    rho=spearmanr(mean[fin],T[g][fin])[0]
    top=np.argsort(-F[g])[:10]
    ranks=[int(np.sum(mean<mean[k])+1) for k in top]
    meas=F[g][rows]
    # nearest measured config to opt (Hamming)
    opt=top[0]; keys=list(P[0])
    d=min(sum(P[r][n]!=P[opt][n] for n in keys) for r in rows)
    print(g, 'frac %.3f'%meas.max(), 'spearman %.2f'%rho, 'top10 ranks under mean', ranks, 'n>=.5 measured', int((meas>=.5).sum()), 'hamming opt-nearest', d)
# which region measured overall: count configs with by=1,ty=4,shmem=0 measured on any GPU
allrows=dom.rows_of(fam.problem.param_space.encode([t.params for t in res.history]))
reg=[r for r in allrows if P[r]['block_size_y']==1 and P[r]['tile_size_y']==4 and P[r]['use_shmem']==0]
print('measured in by=1,ty=4,shmem=0 region:', len(reg), [(round(F['MI250X'][r],2)) for r in reg])

