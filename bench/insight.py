"""Benchmarks of gptask.insight (issue 26): sensitivity, selection tables, the HTML report.

    python bench/insight.py sensitivity        # analytic checks at 200 evaluations; time of an 8 x 20 history
    python bench/insight.py table              # the 16-core PDGEQRF model over 8 x 8 sizes vs measured times
    python bench/insight.py report H.sqlite    # time to write the report, and to render it in headless Chromium

Each prints a Markdown block for BENCHMARKS.md (machine, date, command, figures).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gptask as gt  # noqa: E402
from gptask.insight import sensitivity  # noqa: E402


def header(command: str) -> str:
    return (f"- machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
            f"{os.getloadavg()[0]:.1f} at the start\n- date: {dt.date.today()}\n- command: `{command}`\n")


def _one_task(params):
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space(params), lambda t, p: 0.0)


def _fit(problem, X, y, names):
    rows = [{"t": 0.5, **dict(zip(names, x)), "value": float(v)} for x, v in zip(X, y)]
    return gt.fit(problem, rows, progress=False, output_transform="none")


def analytic_checks() -> list[str]:
    from scipy.stats import qmc

    pi = np.pi
    out = []
    # Ishigami, a = 7, b = 0.1
    v1, v2, v13 = 0.5 * (1 + 0.1 * pi ** 4 / 5) ** 2, 49 / 8, 8 * 0.01 * pi ** 8 / 225
    v = v1 + v2 + v13
    s1, st = np.array([v1, v2, 0]) / v, np.array([v1 + v13, v2, v13]) / v
    X = qmc.scale(qmc.LatinHypercube(3, seed=1).random(200), [-pi] * 3, [pi] * 3)
    y = np.sin(X[:, 0]) + 7 * np.sin(X[:, 1]) ** 2 + 0.1 * X[:, 2] ** 4 * np.sin(X[:, 0])
    rep = sensitivity(_fit(_one_task([gt.Real(f"x{k}", -pi, pi) for k in range(3)]), X, y, ["x0", "x1", "x2"]),
                      base=4096, scale="user")
    out.append(f"| Ishigami (3 parameters) | 200 | {np.max(np.abs(rep.mean.first - s1)):.3f} | "
               f"{np.max(np.abs(rep.mean.total - st)):.3f} |")
    a = np.array([0.0, 1.0, 4.5, 9.0, 99.0, 99.0])
    vi = 1 / (3 * (1 + a) ** 2)
    v = np.prod(1 + vi) - 1
    s1, st = vi / v, np.array([vi[i] * np.prod(np.delete(1 + vi, i)) for i in range(6)]) / v
    X = qmc.LatinHypercube(6, seed=1).random(200)
    y = np.prod((np.abs(4 * X - 2) + a) / (1 + a), axis=1)
    names = [f"x{k}" for k in range(6)]
    rep = sensitivity(_fit(_one_task([gt.Real(n, 0.0, 1.0) for n in names]), X, y, names), base=4096, scale="user")
    out.append(f"| Sobol G, a = (0, 1, 4.5, 9, 99, 99) | 200 | {np.max(np.abs(rep.mean.first - s1)):.3f} | "
               f"{np.max(np.abs(rep.mean.total - st)):.3f} |")
    return out


def _synthetic():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_report import synthetic_problem

    return synthetic_problem()


def cmd_sensitivity(args: argparse.Namespace) -> None:
    from gptask.results.rebuild import result_from_history
    from gptask.data.storage import SQLiteStorage

    print("### Sensitivity (gt.sensitivity)\n")
    print(header("python bench/insight.py sensitivity"))
    print("| function | evaluations the model saw | largest error of S1 | largest error of ST |\n|---|---|---|---|")
    for line in analytic_checks():
        print(line)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.sqlite"
        gt.tune(_synthetic(), tasks=8, budget=20, n_initial=10, seed=0, history=path, progress=False)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            with SQLiteStorage(path, read_only=True) as h:
                result = result_from_history(h)
            rep = sensitivity(result)
            times.append(time.perf_counter() - t0)
        print(f"\n8-task x 20-run history (3 parameters, N = 1024: {rep.evaluations} model evaluations per task), "
              f"reading the history and the indices of every task: {min(times):.2f} s (best of 3; "
              f"{', '.join(f'{t:.2f}' for t in times)} s).")
    from apps.scalapack_qr import problem

    model = gt.load_model(ROOT / "models" / "pdgeqrf_xeon16.json", problem=problem(cores=16, log_sizes=True, m_max=4000))
    t0 = time.perf_counter()
    rep = sensitivity(model)
    took = time.perf_counter() - t0
    print(f"\n16-core PDGEQRF model (8 tasks, 558 points, 5 parameters, N = 1024): {took:.2f} s; mean ST "
          + ", ".join(f"{n} {rep.mean.total[rep.names.index(n)]:.3f}" for n in rep.ranking())
          + f"; fixable: {', '.join(rep.fixable()) or 'none'}; the constraints forbid "
          f"{100 * min(rep.infeasible_fraction):.0f}-{100 * max(rep.infeasible_fraction):.0f} % of the box.")


def _measured(path: Path) -> dict:
    out: dict = {}
    with open(path) as fh:
        for r in csv.DictReader(fh):
            key = (int(r["m"]), int(r["n"]), *(int(r[k]) for k in ("mb", "nb", "nproc", "p", "nth")))
            out.setdefault(key, []).append(float(r["time"]))
    return out


def cmd_table(args: argparse.Namespace) -> None:
    from apps.scalapack_qr import problem
    from gptask.insight.selection import selection_table

    grid = "m=500:4000:8,n=500:4000:8"
    print("### Selection table (gptask export-table)\n")
    print(header(f"python bench/insight.py table  (gptask export-table models/pdgeqrf_xeon16.json --grid {grid} "
                 "--problem apps.scalapack_qr:problem --problem-options cores=16,log_sizes=true,m_max=4000)"))
    model = gt.load_model(ROOT / "models" / "pdgeqrf_xeon16.json", problem=problem(cores=16, log_sizes=True, m_max=4000))
    t0 = time.perf_counter()
    table = selection_table(model, grid)
    took = time.perf_counter() - t0
    c = table.counts()
    print(f"64 grid points in {took:.1f} s: {c['tuned']} tuned sizes, {c['predicted']} predicted run-free, "
          f"{c['fallback']} fallbacks (m or n = 500, below the tuned 1000..4000).\n")
    data = ROOT / "apps" / "scalapack_qr" / "data"
    print("| entry | source of the measurement | predicted (s) | 95 % interval (s) | measured (s) | inside |\n"
          "|---|---|---|---|---|---|")
    for label, path in (("runs.csv (training node)", data / "xeon16" / "runs.csv"),
                        ("xeon16_device/picks_c.csv (another node)", data / "xeon16_device" / "picks_c.csv")):
        meas = _measured(path)
        for e in table.entries:
            key = (e.task["m"], e.task["n"], *(e.params[k] for k in ("mb", "nb", "nproc", "p", "nth")))
            if key in meas and e.value is not None:
                t = np.array(meas[key])
                inside = int(np.sum((t >= e.lower) & (t <= e.upper)))
                shown = ", ".join(f"{v:.4g}" for v in t) if len(t) <= 3 else \
                    f"median {np.median(t):.4g} ({len(t)} launches, {t.min():.4g}-{t.max():.4g})"
                print(f"| {e.task['m']} x {e.task['n']} ({e.source}) | {label} | {e.value:.4g} | "
                      f"{e.lower:.4g}-{e.upper:.4g} | {shown} | {inside}/{len(t)} |")


PROBE = ("<script>window.addEventListener('load', function () { var ok = 0;"
         "for (var i = 0; i < document.images.length; i++) { if (document.images[i].naturalWidth > 0) ok++; }"
         "document.body.setAttribute('data-loaded-ms', Math.round(performance.now()));"
         "document.body.setAttribute('data-images-ok', ok); });</script>")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]


def cmd_report(args: argparse.Namespace) -> None:
    import re

    from gptask.insight.report import write_report

    print("### Campaign report (gptask report)\n")
    print(header(f"python bench/insight.py report {args.history}"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.html"
        t0 = time.perf_counter()
        write_report(args.history, out)
        took = time.perf_counter() - t0
        text = out.read_text()
        n_img = len(re.findall(r"<img ", text))
        print(f"written in {took:.1f} s: {len(text) / 1e6:.2f} MB, {n_img} figures.")
        chromium = shutil.which("chromium")
        if chromium is None:
            print("chromium is not installed: no render time.")
            return
        probed = Path(tmp) / "probed.html"
        probed.write_text(text.replace("</body>", PROBE + "</body>"))
        walls, loads, console = [], [], []
        for k in range(3):
            t0 = time.perf_counter()
            run = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp}/profile{k}", "--dump-dom", probed.as_uri()],
                                 capture_output=True, text=True, timeout=120)
            walls.append(time.perf_counter() - t0)
            loads.append(int(re.search(r'data-loaded-ms="(\d+)"', run.stdout).group(1)))
            console += [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
            assert f'data-images-ok="{n_img}"' in run.stdout
        print(f"headless Chromium: page loaded (every figure decoded) {min(loads)} ms after navigation "
              f"(runs: {', '.join(map(str, loads))} ms); the whole browser process, start to exit: "
              f"{min(walls):.1f} s (best of 3); console messages: {len(console)}.")
        if args.screenshot:
            subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp}/shot", "--window-size=1200,3600",
                            f"--screenshot={args.screenshot}", out.as_uri()], capture_output=True, timeout=120)
            print(f"screenshot: {args.screenshot}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("sensitivity").set_defaults(func=cmd_sensitivity)
    sub.add_parser("table").set_defaults(func=cmd_table)
    r = sub.add_parser("report")
    r.add_argument("history")
    r.add_argument("--screenshot", default=None)
    r.set_defaults(func=cmd_report)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
