"""Coverage of the raw and the calibrated predictive (LCM.calibration_factor) on bench/model_calibration.py's
generated families (tuning seeds only).

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python bench/calibrated_coverage.py 5,12,20,30 1000 1011
"""
import sys, json, time, types
import numpy as np
sys.path.insert(0, __import__("os").path.dirname(__file__))
from model_calibration import draw_family, fit, score
rows=[]
for n in [int(v) for v in sys.argv[1].split(",")]:
    for s in range(int(sys.argv[2]), int(sys.argv[3]) + 1):
        fam = draw_family(s, n); model, mu, sd = fit(fam, s)
        t0=time.process_time(); fl, f = model.calibration_factors(); t=time.process_time()-t0
        base = score(fam, model, mu, sd)
        # the intervals users see: LCM.predict_calibrated (latent and noisy factors of their own)
        cal = score(fam, types.SimpleNamespace(predict=model.predict_calibrated), mu, sd)
        r={"n":n,"seed":s,"f":round(f,3),"f_latent":round(fl,3),"base":(base["cov_latent"],base["cov_noisy"]),"cal":(cal["cov_latent"],cal["cov_noisy"]),"t":round(t,2)}
        rows.append(r); print(json.dumps(r), flush=True)
for n in sorted({r["n"] for r in rows}):
    rs=[r for r in rows if r["n"]==n]
    for k in ("base","cal"):
        c=np.array([r[k] for r in rs]); print(n,k,"latent %.3f (%.3f) noisy %.3f (%.3f)"%(c[:,0].mean(),c[:,0].min(),c[:,1].mean(),c[:,1].min()))
