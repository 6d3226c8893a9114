"""Selection tables (gptask export-table): grids, routes, fallbacks, the lookup rule, the C header
compiled and used by the PDGEQRF driver, and the 16-core model's entries against measured times."""

import csv
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.cli.main import main
from gptask.insight.export import to_c_header, to_csv, to_json
from gptask.insight.grid import GridError, grid_points, parse_grid
from gptask.insight.selection import LOOKUP_FALLBACK, LOOKUP_INSIDE, LOOKUP_OUTSIDE, selection_table
from gptask.insight.model_result import result_from_model

ROOT = Path(__file__).resolve().parents[1]
XEON16 = ROOT / "models" / "pdgeqrf_xeon16.json"
TWO_CORE = ROOT / "models" / "pdgeqrf_2core.json"
RUNS = ROOT / "apps" / "scalapack_qr" / "data" / "xeon16" / "runs.csv"
#: the 8 x 8 grid of the issue's target over the 16-core model: step 500, the 8 measured sizes on it,
#: and a row and a column (m or n = 500) outside the tuned range 1000..4000
GRID16 = "m=500:4000:8,n=500:4000:8"


def _xeon16_problem():
    from apps.scalapack_qr import problem

    return problem(cores=16, log_sizes=True, m_max=4000)


def _two_core_problem():
    from apps.scalapack_qr import problem

    return problem(cores=2, log_sizes=True, m_max=2000)


@pytest.fixture(scope="module")
def xeon16():
    return gt.load_model(XEON16, problem=_xeon16_problem())


@pytest.fixture(scope="module")
def table16(xeon16):
    return selection_table(xeon16, GRID16)


# --- grids ------------------------------------------------------------------------------------

def test_grid_text_is_read_per_task_dimension():
    space = gt.Space([gt.Integer("m", 128, 8000), gt.Real("x", 0.0, 1.0), gt.Categorical("kind", ["a", "b"])])
    axes = parse_grid("m=1000:8000:8,x=0:1:3,kind=b|a", space)
    assert axes == {"m": [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000], "x": [0.0, 0.5, 1.0], "kind": ["b", "a"]}
    assert parse_grid("kind=a,x=0.25,m=128:4096:6:log", space)["m"] == [128, 256, 512, 1024, 2048, 4096]
    assert parse_grid("m=1000:1003:7,x=1,kind=a", space)["m"] == [1000, 1001, 1002, 1003]  # rounded, no repeats
    assert len(grid_points(axes)) == 8 * 3 * 2 and grid_points(axes)[1] == {"m": 1000, "x": 0.0, "kind": "a"}


@pytest.mark.parametrize("text,message", [
    ("", "--grid is empty"),
    ("m=1000:8000", r"expected lo:hi:count"),
    ("m=1000:8000:0,n=1", r"count must be an integer >= 1, got 0"),
    ("m=8000:1000:8,n=1", r"`lo <= hi` must hold, got lo=8000, hi=1000"),
    ("m=1000:8000:x,n=1", r"count must be an integer >= 1, got 'x'"),
    ("m=a:8000:8,n=1", r"'a' is not a number"),
    ("m=1000:8000:8", r"missing \['n'\]"),
    ("m=1000:8000:8,n=1,k=3", r"'k' is not a task dimension of this model; its task dimensions are \['m', 'n'\]"),
    ("m=1,m=2,n=1", r"'m' given twice"),
    ("m 1000,n=1", r"expected name=lo:hi:count"),
    ("m=0:10:3:log,n=1", r"a log scale needs lo > 0"),
    ("m=1:2:3:lin,n=1", r"expected lo:hi:count or lo:hi:count:log"),
])
def test_bad_grids_are_named(text, message):
    space = gt.Space([gt.Integer("m", 128, 8000), gt.Integer("n", 128, 8000)])
    with pytest.raises(GridError, match=message):
        parse_grid(text, space)


# --- the 16-core model over 8 x 8 sizes --------------------------------------------------------

def test_routes_of_the_16_core_grid(xeon16, table16):
    assert len(table16.entries) == 64 and table16.counts() == {"tuned": 8, "predicted": 41, "fallback": 15}
    tuned = {(t["m"], t["n"]) for t in xeon16.tasks}
    for e in table16.entries:
        size = (e.task["m"], e.task["n"])
        outside = min(size) < 1000  # the tuned tasks span 1000..4000 in both
        assert e.source == ("fallback" if outside else "tuned" if size in tuned else "predicted")
        assert (e.value is None) == outside and (e.lower is None) == outside  # nothing extrapolated
        if not outside:
            assert e.lower < e.value < e.upper and e.value_std > 0
        assert _xeon16_problem().is_feasible(e.task, e.params)


def test_tuned_entries_follow_the_one_recommendation_rule(xeon16, table16):
    """A tuned size's entry is the evaluated configuration of least posterior mean (the rule of
    gptask.results.recommend without confirmation runs), found here by brute force over the model's data."""
    Xs, _ = xeon16.model.data()
    for i, task in enumerate(xeon16.tasks):
        mean, _ = xeon16.model.predict(i, Xs[i])
        best = xeon16.param_space.decode(Xs[i][[int(np.argmin(mean))]])[0]
        entry = next(e for e in table16.entries if e.task == task)
        assert entry.params == best
        assert entry.params == gt.TuningResult.recommend(result_from_model(xeon16), i, progress=False).params


def test_predicted_entries_are_run_free_predictions(xeon16, table16):
    for e in [e for e in table16.entries if e.source == "predicted"][:3]:
        pred = gt.predict_optimum(xeon16, e.task)
        assert e.params == pred.params and e.value == pytest.approx(pred.value)


def test_fallbacks_take_the_nearest_allowed_tuned_recommendation(xeon16, table16):
    problem = _xeon16_problem()
    recs = {(e.task["m"], e.task["n"]): e.params for e in table16.entries if e.source == "tuned"}
    for e in [e for e in table16.entries if e.fallback]:
        assert "outside the model's task range" in e.note and "below the tuned 1000..4000" in e.note
        # brute force: tuned sizes by distance in log size (the task space's scale), first allowed one
        q = np.log([e.task["m"], e.task["n"]])
        order = sorted(recs, key=lambda s: float(np.sum((np.log(s) - q) ** 2)))
        allowed = [s for s in order if problem.is_feasible(e.task, recs[s])]
        assert e.params == recs[allowed[0]]


def _measured(path):
    out = {}
    with open(path) as fh:
        for r in csv.DictReader(fh):
            key = (int(r["m"]), int(r["n"]), *(int(r[k]) for k in ("mb", "nb", "nproc", "p", "nth")))
            out.setdefault(key, []).append(float(r["time"]))
    return out


def test_measured_times_lie_within_the_stated_error(table16):
    """The issue's target. Every entry whose configuration was measured at its size lies within the
    model's stated error, the entry's central 95 % interval for one launch:

    * the shared data runs.csv (the 8 tuned sizes, the node the model was trained on): each entry's
      value as the model took it (the fastest of its launches, ``gt.fit``'s aggregate "min"), and
      11 of the 13 single launches (the other two: the slower of two launches of one configuration,
      2.05x the faster at m=n=1000, 1.40x at 3000 x 1500; the data's README: the slowest of 8
      launches is 1.13-1.69x the fastest);
    * launches on another node of the same kind (xeon16_device/picks_c.csv: the model's run-free
      picks for new sizes, 10 or 20 launches each): all 70, at 5 predicted entries."""
    measured = _measured(RUNS)
    tuned, launches, inside = 0, 0, 0
    for e in table16.entries:
        key = (e.task["m"], e.task["n"], *(e.params[k] for k in ("mb", "nb", "nproc", "p", "nth")))
        if key in measured and e.value is not None:
            assert e.lower <= min(measured[key]) <= e.upper, (e.task, e.params, measured[key], e.lower, e.upper)
            tuned += 1
            launches += len(measured[key])
            inside += sum(e.lower <= t <= e.upper for t in measured[key])
    assert tuned == 8 and (launches, inside) == (13, 11)
    device = _measured(RUNS.parents[1] / "xeon16_device" / "picks_c.csv")
    checked = 0
    for e in table16.entries:
        key = (e.task["m"], e.task["n"], *(e.params[k] for k in ("mb", "nb", "nproc", "p", "nth")))
        if e.source == "predicted" and key in device:
            assert all(e.lower <= t <= e.upper for t in device[key]), (e.task, device[key], e.lower, e.upper)
            checked += len(device[key])
    assert checked == 70


# --- lookup, writers, the C header --------------------------------------------------------------

@pytest.fixture(scope="module")
def table2():
    model = gt.load_model(TWO_CORE, problem=_two_core_problem())
    return selection_table(model, "m=200:1200:6,n=400:1200:5")


def _brute_lookup(table, q):
    coords = lambda t: np.log([t["m"], t["n"]]) / np.log([1200 / 200, 1200 / 400])  # log sizes over the grid's span
    d = [float(np.sum((coords(e.task) - coords(q)) ** 2)) for e in table.entries]
    e = table.entries[int(np.argmin(d))]
    inside = 200 <= q["m"] <= 1200 and 400 <= q["n"] <= 1200
    return e, (LOOKUP_OUTSIDE if not inside else LOOKUP_FALLBACK if e.fallback else LOOKUP_INSIDE)


QUERIES = [(500, 500), (450, 990), (100, 3000), (1200, 400), (250, 1100), (700, 700), (5000, 450), (1, 1)]


def test_lookup_is_the_nearest_grid_point_in_log_size(table2):
    for m, n in QUERIES:
        got, status = table2.lookup({"m": m, "n": n})
        want, want_status = _brute_lookup(table2, {"m": m, "n": n})
        assert got.task == want.task and status == want_status


def test_json_and_csv_writers_round_trip(table2, tmp_path):
    doc = json.loads(to_json(table2, "M.json"))
    assert doc["format"] == "gptask.selection_table" and doc["unit"] == "s" and doc["source"] == "M.json"
    assert doc["entries"] == json.loads(json.dumps(table2.rows()))
    assert doc["tuned_range"] == {"m": [300, 1000], "n": [500, 1000]}
    rows = list(csv.DictReader(to_csv(table2).splitlines()))
    assert len(rows) == 30 and rows[0]["source"] == "fallback" and rows[0]["value"] == ""
    assert all(float(r["value"]) > 0 for r in rows if r["source"] != "fallback")


def test_c_header_lookup_agrees_with_python(table2, tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc) installed")
    (tmp_path / "table.h").write_text(to_c_header(table2, "pdgeqrf_2core.json"))
    (tmp_path / "probe.c").write_text(
        '#include <stdio.h>\n#include "table.h"\n'
        "int main(void) { double m, n; int s;\n"
        "  while (scanf(\"%lf %lf\", &m, &n) == 2) { double t[2] = {m, n};\n"
        "    const gptask_table_entry *e = gptask_table_lookup(t, &s);\n"
        "    printf(\"%g %g %d %d %d %d %d %d\\n\", e->task[0], e->task[1], e->mb, e->nb, e->nproc, e->p, e->nth, s); }\n"
        "  return 0; }\n")
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", "probe", "probe.c", "-lm"], cwd=tmp_path,
                   check=True, capture_output=True, timeout=120)
    out = subprocess.run(["./probe"], cwd=tmp_path, input="\n".join(f"{m} {n}" for m, n in QUERIES), text=True,
                         capture_output=True, check=True, timeout=60).stdout.split("\n")
    for (m, n), line in zip(QUERIES, out):
        e, status = table2.lookup({"m": m, "n": n})
        p = e.params
        assert line.split() == [f"{e.task['m']:g}", f"{e.task['n']:g}", *map(str, (p["mb"], p["nb"], p["nproc"],
                                                                               p["p"], p["nth"], status))]


@pytest.mark.mpi
def test_the_pdgeqrf_driver_runs_the_table_s_configuration(table2, tmp_path):
    from apps.scalapack_qr import build as qr_build
    from apps.scalapack_qr.launcher import Launcher

    try:
        header = tmp_path / "pdgeqrf_table.h"
        header.write_text(to_c_header(table2, "pdgeqrf_2core.json"))
        exe = qr_build.build_driver_with_table(header, tmp_path / "pdgeqrf_driver_table")
    except qr_build.MissingDependency as exc:
        pytest.skip(str(exc))
    looked = json.loads(subprocess.run([str(exe), "--lookup", "450", "990"], capture_output=True, text=True,
                                       check=True, timeout=60).stdout)
    e, status = table2.lookup({"m": 450, "n": 990})
    assert looked == {"m": 450, "n": 990, "mb": e.params["mb"], "nb": e.params["nb"], "nproc": e.params["nproc"],
                      "p": e.params["p"], "q": e.params["nproc"] // e.params["p"], "nth": e.params["nth"],
                      "status": "inside", "predicted": pytest.approx(e.value, rel=1e-5)}
    out = Launcher().run(exe, ["--from-table", "450", "990", "1", "--check"], nproc=looked["nproc"],
                         nth=looked["nth"], timeout=120)
    assert (out["mb"], out["nb"], out["p"], out["q"]) == (looked["mb"], looked["nb"], looked["p"], looked["q"])
    assert out["from_table"] == "inside" and out["residual"] < 10.0 and out["time"] > 0
    # the plain driver refuses the table options, and keeps its usual arguments
    plain = qr_build.build_driver()
    r = subprocess.run([str(plain), "--lookup", "450", "990"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "built without a selection table" in r.stderr


# --- the command line -------------------------------------------------------------------------

def test_export_table_command_writes_each_format(tmp_path, capsys):
    opts = ["--problem", "apps.scalapack_qr:problem", "--problem-options", "cores=2,log_sizes=true,m_max=2000", "-q"]
    for fmt, name in (("json", "t.json"), ("csv", "t.csv"), ("c-header", "t.h")):
        assert main(["export-table", str(TWO_CORE), "--grid", "m=300:1000:3,n=500:1000:2", "--format", fmt,
                     "--out", str(tmp_path / name), *opts]) == 0
    assert "6 grid points: 1 tuned tasks, 5 predicted, 0 fallbacks" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "t.json").read_text())["entries"]) == 6
    assert (tmp_path / "t.csv").read_text().startswith("m,n,mb,nb,nproc,p,nth,value")
    assert "static inline const gptask_table_entry *gptask_table_lookup" in (tmp_path / "t.h").read_text()


def test_export_table_bad_input_is_named(tmp_path, capsys):
    def error(*args):
        assert main(["export-table", *map(str, args)]) == 2
        return capsys.readouterr().err

    assert "'k' is not a task dimension" in error(TWO_CORE, "--grid", "m=300:1000:3,k=5")
    assert "--grid must give every task dimension; missing ['n']" in error(TWO_CORE, "--grid", "m=300")
    assert "no such file" in error(tmp_path / "none.json", "--grid", "m=300,n=500")
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    assert "is not a gptask model file (format tag 'something else'" in error(tmp_path / "other.json", "--grid",
                                                                               "m=300,n=500")
    doc = json.loads(TWO_CORE.read_text())
    del doc["lcm"]  # a model file without its model
    (tmp_path / "nolcm.json").write_text(json.dumps(doc))
    assert "nolcm.json: corrupted model file" in error(tmp_path / "nolcm.json", "--grid", "m=300,n=500")
    gt.import_runs(_two_core_problem(), [{"m": 500, "n": 500, "mb": 8, "nb": 8, "nproc": 2, "p": 1, "nth": 1,
                                          "value": 1.0}], tmp_path / "h.sqlite")
    assert "is a history; export-table reads a model file" in error(tmp_path / "h.sqlite", "--grid", "m=300,n=500")
    assert "fallback='default' needs the problem's default" in error(TWO_CORE, "--grid", "m=300,n=500",
                                                                       "--fallback", "default")


def test_a_model_of_one_tuned_task_gives_a_table_of_its_recommendation_and_fallbacks(tmp_path, capsys):
    """One tuned task (it used to be refused: 'needs at least 2 tuned tasks'): its grid point is the tuned
    entry (the result's recommendation, gptask.results.recommend), every other point is outside the tuned
    range and falls back to that recommendation; nothing is predicted run-free."""
    prob = gt.Problem(gt.Space([gt.Integer("n", 1, 9)]), gt.Space([gt.Real("x", 0.0, 1.0)]),
                      lambda t, p: (p["x"] - 0.1 * t["n"]) ** 2 + 1.0)
    res = gt.tune(prob, [{"n": 5}], budget=6, seed=0, progress=False)
    path = res.save_model(tmp_path / "one.json")
    table = selection_table(gt.load_model(path, problem=prob), "n=1:9:3")
    rec = res.recommend(0, progress=False).params
    assert [(e.task["n"], e.source) for e in table.entries] == [(1, "fallback"), (5, "tuned"), (9, "fallback")]
    assert all(e.params == rec for e in table.entries)
    assert "the recommendation of the nearest tuned task n=5" in table.entries[0].note
    assert main(["export-table", str(path), "--grid", "n=1:9:3", "--format", "csv", "--out", str(tmp_path / "t.csv"),
                 "-q"]) == 0
    assert "3 grid points: 1 tuned tasks, 0 predicted, 2 fallbacks" in capsys.readouterr().out
