"""The lowest-seed table of bench/calibration.py JSON files (issue 45): per family and size, the raw and the
calibrated coverage (mean, lowest seed, highest seed), the median factor and the calibration CPU.

    python bench/calibrated_table.py bench/results/calibrated_judged.json bench/results/calibrated_suite.json
"""
import json, sys
import numpy as np
for path in sys.argv[1:]:
    runs = json.load(open(path))["runs"]
    cells = {}
    for k, v in runs.items():
        f, n, s = k.split("|")
        if "gptask_cal" in v and "error" not in v["gptask_cal"]:
            cells.setdefault((f, int(n)), []).append(v)
    print(f"\n{path}\n")
    print("| family | points/task | seeds | raw latent | calibrated latent: mean (lowest seed, highest) | calibrated noisy: mean (lowest seed, highest) | factor median | calibration CPU s (max) |")
    print("|---|---|---|---|---|---|---|---|")
    ok = low_ok = 0
    for (f, n), vs in sorted(cells.items(), key=lambda x: (not x[0][0].startswith("gen:"), x[0][0], x[0][1])):
        r = np.array([v["gptask"]["cover_latent"] for v in vs]); l = np.array([v["gptask_cal"]["cover_latent"] for v in vs])
        no = np.array([v["gptask_cal"]["cover_noisy"] for v in vs]); fa = np.array([v["gptask_cal"]["factor"] for v in vs])
        cpu = np.array([v["gptask_cal"]["calibration_cpu_s"] for v in vs])
        inside = 0.85 <= l.mean() <= 0.99 and 0.85 <= no.mean() <= 0.99
        ok += inside; low_ok += min(l.min(), no.min()) >= 0.85
        b = lambda s, c: s if c else f"**{s}**"
        print(f"| {f} | {n} | {len(vs)} | {r.mean():.2f} ({r.min():.2f}) | {b(f'{l.mean():.2f} ({l.min():.2f}, {l.max():.2f})', 0.85 <= l.mean() <= 0.99)} | "
              f"{b(f'{no.mean():.2f} ({no.min():.2f}, {no.max():.2f})', 0.85 <= no.mean() <= 0.99)} | {np.median(fa):.1f} | {np.max(cpu):.1f} |")
    print(f"\nMean coverage in 85-99 % (latent and noisy) on {ok} of {len(cells)} family-sizes; lowest seed >= 0.85 on {low_ok}.")
