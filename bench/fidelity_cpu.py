"""The tuner's CPU of one multi-fidelity run (issue 44): ``run_method`` of bench/multifidelity.py
under ``time.process_time()``, with the gptask tree given (so two trees can be compared side by
side on the same seeds), one JSON line: cpu and wall seconds, runs, and a hash of the evaluations
(equal hashes: the same runs).

    git archive MAIN gptask bench | tar -x -C /tmp/main_src
    for s in 0 1; do for src in /tmp/main_src $PWD; do
      m=gptask_mf; [ $src = $PWD ] && m=gptask_mf_base  # this branch: main's schedule, to compare the same runs
      PYTHONHASHSEED=0 PYTHONPATH=$src OMP_NUM_THREADS=1 .venv/bin/python bench/fidelity_cpu.py $src $m currin $s
    done; done
"""

import json
import sys
import time

if __name__ == "__main__":
    src, method, fam_name, seed = sys.argv[1:5]
    sys.path.insert(0, src)
    sys.path.insert(0, src + "/bench")
    import gptask
    import multifidelity as mf
    import multifidelity_families as mff

    assert gptask.__file__.startswith(src), gptask.__file__
    fam = mff.family(fam_name)
    c0, w0 = time.process_time(), time.perf_counter()
    ev = mf.run_method(method, fam, 15, int(seed))
    print(json.dumps({"src": src, "method": method, "family": fam_name, "seed": int(seed),
                      "cpu": time.process_time() - c0, "wall": time.perf_counter() - w0, "runs": len(ev),
                      "hash": hash(json.dumps(ev))}))
