"""Recorded campaigns as objectives (gptask.sources.replay), on the shipped convolution campaign and on
files written here in the Kernel Tuner, T4 and CSV formats."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.data.provenance import MachineMismatch
from gptask.data.storage import SQLiteStorage
from gptask.sources.rows import DataError
import gptask.sources.replay as replay
from gptask.sources.replay import read_recording, recording_rows, replay_problem

ROOT = Path(__file__).resolve().parents[1]
CONV = ROOT / "data" / "hub_convolution"
RESTRICTIONS = [
    "use_padding==0 or block_size_x % 32 != 0",
    "block_size_x*block_size_y<=1024",
    "use_padding==0 or use_shmem != 0",
    "use_shmem == 0 or (((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y+(filter_height-1))))"
    " < 12*1024",
]


@pytest.fixture(scope="module")
def conv():
    return [read_recording(CONV / f"{g}.json.gz") for g in ("A100", "MI250X")]


def test_shipped_campaign_checksums_match_its_readme():
    sums = dict(line.split()[::-1] for line in (CONV / "SHA256SUMS").read_text().splitlines())
    import hashlib

    for name, digest in sums.items():
        assert hashlib.sha256((CONV / name).read_bytes()).hexdigest() == digest, name


def test_kernel_tuner_cache_reads_every_configuration_and_failure(conv):
    a100, mi = conv
    raw = json.loads(gzip.open(CONV / "A100.json.gz").read())
    assert a100.label == raw["device_name"] == "NVIDIA A100-PCIE-40GB" and a100.objective == "time" and len(a100.results) == len(raw["cache"]) == 4362
    assert a100.n_failed == sum(isinstance(r["time"], str) for r in raw["cache"].values()) == 161
    key, rec = next(iter(raw["cache"].items()))
    assert a100.lookup({k: rec[k] for k in raw["tune_params_keys"]}) == rec["time"]
    best = min(r["time"] for r in raw["cache"].values() if not isinstance(r["time"], str))
    assert a100.best()[1] == best and mi.n_failed == 0


def test_the_kernels_text_restrictions_allow_exactly_the_recorded_configurations(conv):
    """Kernel Tuner recorded every configuration its restrictions allow: parsed and vectorised
    here, the same four texts must allow exactly those 4,362 of the 10,240 in the grid."""
    problem = replay_problem(conv, RESTRICTIONS, task_name="gpu", recorded_only=False)
    assert problem.param_space.grid_size() == 10240
    assert problem.constants == {"use_cmem": 1, "filter_height": 15, "filter_width": 15}
    domain = problem.domain({"gpu": conv[0].label})
    listed = {tuple(p.values()) for p in domain.params(range(len(domain)))}
    names = problem.param_space.names
    recorded = {tuple(c[n] for n in names) for c in conv[0].configurations()}
    assert listed == recorded


def test_replay_objective_returns_values_and_recorded_failures(conv):
    problem = replay_problem(conv, RESTRICTIONS, task_name="gpu")
    assert [type(d).__name__ for d in problem.param_space] == ["Ordinal"] * 7
    assert problem.param_space["block_size_y"].log and not problem.param_space["block_size_x"].log
    failed = next(c for c, v in zip(conv[0].configurations(), conv[0].results.values()) if isinstance(v, str))
    params = {n: failed[n] for n in problem.param_space.names}
    with pytest.raises(gt.EvaluationFailed, match="recorded failure: CompilationFailedConfig|RuntimeFailedConfig"):
        problem.objective({"gpu": conv[0].label}, params)
    assert problem.objective({"gpu": conv[1].label}, params) == conv[1].lookup(params)
    # the tuner proposes recorded configurations only, and a failed one is stored with its reason
    res = gt.tune(problem, tasks=[{"gpu": r.label} for r in conv], budget=12, seed=0, progress=False)
    assert all(conv[t.task_index].lookup(t.params) is not None for t in res.history)
    for t in res.history:
        if t.status is gt.Status.FAILED:
            assert "recorded failure" in t.reason


def _t4(path, rows):
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": rows}))
    return path


def test_t4_and_csv_recordings_read_the_same_campaign(tmp_path):
    configs = [{"bs": b, "alg": a} for b in (32, 64, 128) for a in ("x", "y")]
    rows = []
    for k, c in enumerate(configs):
        row = {"configuration": c, "times": {}, "correctness": 1, "objectives": ["time"],
               "invalidity": "compile" if k == 3 else "correct"}
        if k != 3:
            row["measurements"] = [{"name": "time", "value": 1.0 + k, "unit": "ms"}]
        rows.append(row)
    t4 = read_recording(_t4(tmp_path / "gpu1.json", rows))
    lines = ["bs,alg,time,status,reason"] + [f"{c['bs']},{c['alg']},{'' if k == 3 else 1.0 + k},"
                                              f"{'failed' if k == 3 else 'complete'},{'compile failure' if k == 3 else ''}"
                                              for k, c in enumerate(configs)]
    (tmp_path / "gpu2.csv").write_text("\n".join(lines) + "\n")
    csv_rec = read_recording(tmp_path / "gpu2.csv")
    assert t4.results == csv_rec.results and t4.results[(64, "y")] == "compile failure"
    assert t4.parameters == {"bs": [32, 64, 128], "alg": ["x", "y"]} and t4.best() == ({"bs": 32, "alg": "x"}, 1.0)
    problem = replay_problem([t4, csv_rec])
    assert [type(d).__name__ for d in problem.param_space] == ["Ordinal", "Categorical"]
    # as rows for gt.fit: the same values, failures as failed rows
    result = gt.fit(problem, recording_rows(t4, {"machine": "gpu1"}) + recording_rows(csv_rec, {"machine": "gpu2"}),
                    value="value", status="status")
    assert sorted(t.value for t in result.history if t.task_index == 0 and t.value is not None) == [1, 2, 3, 5, 6]
    assert sum(t.status is gt.Status.FAILED for t in result.history) == 2


def test_bad_recordings_are_refused_naming_the_file_and_entry(tmp_path, conv, monkeypatch):
    (tmp_path / "x.json").write_text(json.dumps({"something": 1}))
    with pytest.raises(ValueError, match="x.json: unknown JSON recording format"):
        read_recording(tmp_path / "x.json")
    (tmp_path / "broken.json").write_text("{ not json")
    with pytest.raises(ValueError, match="broken.json: not valid JSON"):
        read_recording(tmp_path / "broken.json")
    bad = {"device_name": "g", "tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "objective": "time",
           "cache": {"1": {"a": 1, "time": 2.0}, "2": {"a": 2, "time": [1]}}}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="bad.json: cache entry '2'"):
        read_recording(tmp_path / "bad.json")
    (tmp_path / "t.csv").write_text("bs,time\n32,1.0\n64,fast\n")
    with pytest.raises(ValueError, match="t.csv line 3: time='fast' is not a number"):
        read_recording(tmp_path / "t.csv")
    (tmp_path / "latin.csv").write_bytes(b"bs,time\n32,1.0\n\xe9,2\n")
    with pytest.raises(ValueError, match="latin.csv: not UTF-8"):
        read_recording(tmp_path / "latin.csv")
    other = replay.Recording("other", "o.csv", {"bs": [1, 2]}, "time", {(1,): 1.0, (2,): 2.0})
    with pytest.raises(ValueError, match="different parameters"):
        replay_problem([conv[0], other])
    with pytest.raises(ValueError, match="share a machine label"):
        replay_problem([conv[0], conv[0]])
    monkeypatch.setattr(replay, "MAX_RECORDING_BYTES", 1000)
    with pytest.raises(ValueError, match="more than"):
        read_recording(CONV / "A100.json.gz")  # 45 KB compressed, 580 KB inflated: refused before parsing


def test_constants_reach_the_restrictions_and_unknown_names_are_refused(conv):
    with pytest.raises(ValueError, match="unknown name 'filter_depth'"):
        replay_problem(conv, ["filter_depth < 3"])
    problem = replay_problem(conv, ["block_size_x * tile_size_x + filter_width <= 100"])
    dom = problem.domain({"machine": conv[0].label})
    assert all(p["block_size_x"] * p["tile_size_x"] + 15 <= 100 for p in dom.params(range(len(dom))))
    assert 0 < len(dom) < 4362 and np.isfinite(dom.encoded).all()


def test_replay_reports_the_fraction_of_each_machines_optimum(conv, tmp_path):
    report = replay.replay(conv, RESTRICTIONS, budgets=[6], seeds=[0, 1], alone=True, n_initial=3)
    assert report.labels == [r.label for r in conv] and report.optima == [r.best()[1] for r in conv]
    assert {(r.budget, r.seed, r.alone) for r in report.runs} == {(6, s, a) for s in (0, 1) for a in (False, True)}
    for run in report.runs:
        assert [len(f) for f in run.fractions] == [6, 6]
        for f in run.fractions:  # a running best: never decreasing, never above the optimum
            assert all(0.0 <= a <= b <= 1.0 for a, b in zip(f, f[1:]))
    # the fractions are the recorded values' optimum / running best, recomputed here from the lookups
    run = report.runs[0]
    assert run.final() == pytest.approx([max(f) for f in run.fractions])
    summary = report.summary()
    assert [(s["budget"], s["alone"]) for s in summary] == [(6, False), (6, True)]
    assert "fraction of the optimum" in report.text() and report.plot(tmp_path / "r.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="positive objective"):
        neg = replay.Recording("n", "n.csv", {"bs": [1, 2]}, "time", {(1,): -1.0, (2,): 2.0})
        replay.replay([neg], budgets=[2], seeds=[0])


def test_gptask_replay_command_prints_the_table_and_writes_the_plot(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "gptask", "replay", str(CONV / "A100.json.gz"),
                          str(CONV / "W6600.json.gz"), "--restrict", RESTRICTIONS[1], "--budget", "5",
                          "--seeds", "0-1", "--n-initial", "3", "--plot", str(tmp_path / "p.png"),
                          "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "fraction of the optimum" in out.stdout and (tmp_path / "p.png").exists()
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert len(runs) == 2 and all(len(r["fractions"]) == 2 for r in runs)
    bad = subprocess.run([sys.executable, "-m", "gptask", "replay", str(CONV / "A100.json.gz"), "--budget", "x"],
                         capture_output=True, text=True, timeout=120, env={**__import__("os").environ,
                                                                            "PYTHONPATH": str(ROOT)})
    assert bad.returncode == 2 and "--budget must be integers" in bad.stderr


def test_gt_fit_and_import_runs_take_recorded_campaign_files(conv, tmp_path):
    problem = replay_problem(conv, RESTRICTIONS)
    raw = json.loads(gzip.open(CONV / "A100.json.gz").read())
    failed = [k for k, v in raw["cache"].items() if not isinstance(v["time"], (int, float)) or v["time"] > 1e10]
    fine = [k for k in raw["cache"] if k not in set(failed)]
    keep = fine[::90] + failed[:5]  # a slice of one machine's campaign, written as a Kernel Tuner cache
    raw["cache"] = {k: raw["cache"][k] for k in keep}
    (tmp_path / "a100.json").write_text(json.dumps(raw))
    result = gt.fit(problem, tmp_path / "a100.json")
    assert result.tasks == [{"machine": conv[0].label}]
    assert len(result.history) == len(keep) and sum(t.status is gt.Status.FAILED for t in result.history) == 5
    times = {k: raw["cache"][k]["time"] for k in fine[::90]}
    assert result.best(0)[1] == min(times.values())
    assert {t.machine for t in result.history} == {1}  # the GPU that measured them, as the machine
    assert result.machines[1]["label"] == conv[0].label and result.machines[1]["accelerators"] == [conv[0].label]
    report = gt.import_runs(problem, CONV / "MI250X.json.gz", tmp_path / "h.sqlite")
    assert len(report.trials) == 4362
    # another GPU's campaign in the same history is a mix of machines: refused unless asked for
    with pytest.raises(MachineMismatch, match="mix_machines=True"):
        gt.import_runs(problem, tmp_path / "a100.json", tmp_path / "h.sqlite")
    mixed = gt.import_runs(problem, tmp_path / "a100.json", tmp_path / "h.sqlite", mix_machines=True)
    assert len(mixed.trials) == len(keep)
    labels = {m["label"] for m in SQLiteStorage(tmp_path / "h.sqlite").machines().values()}
    assert labels == {conv[0].label, conv[1].label}
    other = gt.Problem(gt.Space([gt.Integer("m", 1, 9)]), problem.param_space, lambda t, p: 1.0)
    with pytest.raises(DataError, match="one machine's recorded campaign"):
        gt.fit(other, CONV / "A100.json.gz")


# ---- issue 40: short recordings, damaged files, numbers that do not fit a float, mixed values -----------
def _kt(path, configs, device="gpu", values=None):
    """A Kernel Tuner cache file over parameters a, b holding ``configs``; time = 1 + (index % 7) / 10."""
    cache = {f"{a},{b}": {"a": a, "b": b, "time": 1.0 + (k % 7) / 10} for k, (a, b) in enumerate(configs)}
    values = values or {"a": sorted({a for a, _ in configs}, key=str), "b": sorted({b for _, b in configs})}
    path.write_text(json.dumps({"device_name": device, "tune_params_keys": ["a", "b"], "tune_params": values,
                                "objective": "time", "cache": cache}))
    return path


def _cli(argv, capsys):
    from gptask.cli.main import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_recording_shorter_than_the_budget_is_replayed_to_its_end(tmp_path, capsys):
    full = _kt(tmp_path / "full.json", [(a, b) for a in (1, 2, 4, 8) for b in (1, 2, 3)], "AMD Radeon PRO W6600")
    short = _kt(tmp_path / "short.json", [(1, 1), (2, 2), (4, 3)], "AMD Radeon PRO W7800",
                values={"a": [1, 2, 4, 8], "b": [1, 2, 3]})
    recs = [read_recording(full), read_recording(short)]
    report = replay.replay(recs, budgets=[6], seeds=[0, 1], alone=True, n_initial=2)
    for run in report.runs:  # the short machine ran all 3 of its configurations, then stopped
        assert [len(f) for f in run.fractions] == [6, 3]
        assert run.final()[1] == 1.0  # every configuration measured: its optimum found
    assert [s["runs_per_machine"] for s in report.summary()] == [{recs[0].label: 6, recs[1].label: 3}] * 2
    assert "AMD Radeon PRO W7800: 3 runs, all its recording allows (budget 6)" in report.text()
    longer = replay.ReplayReport(report.labels, report.optima, report.runs + [
        replay.ReplayRun(8, 0, False, [[1.0] * 8, [1.0] * 3])])
    assert "AMD Radeon PRO W7800: 3 runs, all its recording allows (budget 6, 8)" in longer.text()
    code, out, err = _cli(["replay", full, short, "--budget", "6", "--seeds", "0", "--n-initial", "2",
                           "--plot", tmp_path / "p.png", "--json", tmp_path / "r.json"], capsys)
    assert code == 0, err
    assert (tmp_path / "p.png").stat().st_size > 1000
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert [len(f) for f in runs[0]["fractions"]] == [6, 3]


def test_damaged_gzip_recordings_are_one_line_errors_naming_the_file(tmp_path, capsys):
    raw = gzip.compress(_kt(tmp_path / "g.json", [(1, 1), (2, 2), (4, 3)]).read_bytes())
    (tmp_path / "cut.json.gz").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "crc.json.gz").write_bytes(raw[:-8] + bytes(8))  # the trailer's CRC and size zeroed
    (tmp_path / "junk.json.gz").write_bytes(raw[:10] + b"\xff" * 40)
    for name, what in (("cut", "truncated"), ("crc", "CRC"), ("junk", "")):
        path = tmp_path / f"{name}.json.gz"
        with pytest.raises(ValueError, match=rf"{path}: damaged gzip file.*{what}"):
            read_recording(path)
        code, out, err = _cli(["replay", path, "--budget", "2", "--seeds", "0"], capsys)
        assert code == 2 and err.count("\n") == 1 and str(path) in err and "Traceback" not in err


def test_numbers_that_do_not_fit_a_float_are_refused_naming_the_file(tmp_path, capsys):
    path = _kt(tmp_path / "big.json", [(1, 1), (2, 2)], values={"a": [1, 2], "b": [1, 2]})
    for old, new in (('"a": [1, 2]', f'"a": [1, {10**400}]'), ('"a": [1, 2]', '"a": [1, 2e400]'),
                     ('"time": 1.0', f'"time": {10**400}'), ('"time": 1.0', '"time": 1e999')):
        bad = tmp_path / "bad.json"
        bad.write_text(path.read_text().replace(old, new, 1))
        with pytest.raises(ValueError, match=rf"{bad}: .* does not fit a float"):
            read_recording(bad)
        code, out, err = _cli(["replay", bad, "--budget", "2", "--seeds", "0"], capsys)
        assert code == 2 and err.count("\n") == 1 and str(bad) in err and "does not fit a float" in err
    for cells in ("1e400,1.0", "1,1e400", "nan,1.0"):
        csv_path = tmp_path / "big.csv"
        csv_path.write_text(f"a,time\n2,1.5\n# a comment\n{cells}\n")
        with pytest.raises(ValueError, match=rf"{csv_path} line 4: .*(does not fit a float|not a finite)"):
            read_recording(csv_path)
    # the text Infinity / NaN of a Kernel Tuner file still marks a failed measurement
    (tmp_path / "inf.json").write_text(path.read_text().replace('"time": 1.0', '"time": Infinity', 1))
    assert read_recording(tmp_path / "inf.json").results[(1, 1)] == "non-finite value inf"


def test_a_parameter_mixing_numbers_and_text_replays_as_a_categorical(tmp_path):
    configs = [(a, b) for a in (1, 2, 4, "auto") for b in (1, 2, 3)]
    rec = read_recording(_kt(tmp_path / "mixed.json", configs, values={"a": [1, 2, 4, "auto"], "b": [1, 2, 3]}))
    assert rec.parameters["a"] == [1, 2, 4, "auto"]
    problem = replay_problem([rec])
    assert problem.param_space["a"].choices == [1, 2, 4, "auto"]
    assert problem.objective({"machine": "gpu"}, {"a": "auto", "b": 2}) == rec.results[("auto", 2)]
    report = replay.replay([rec], budgets=[12], seeds=[0], n_initial=3)
    assert report.runs[0].final() == [1.0]  # all 12 configurations measured: the optimum is found
    result = gt.fit(problem, tmp_path / "mixed.json")  # and read back as rows of that problem
    assert len(result.history) == 12


def test_the_table_tells_machines_with_long_shared_names_apart():
    def text(labels):
        runs = [replay.ReplayRun(2, 0, False, [[0.5, 1.0]] * len(labels))]
        return replay.ReplayReport(labels, [1.0] * len(labels), runs).text().splitlines()[1]

    head = text(["AMD Radeon PRO W6600", "AMD Radeon PRO W7800", "NVIDIA A100-PCIE-40GB"])
    assert head.split()[-10:] == ["AMD", "Radeon", "PRO", "W6600", "AMD", "Radeon", "PRO", "W7800", "NVIDIA",
                                  "A100-PCIE-40GB"]
    long = ["NVIDIA GeForce RTX 4090 Laptop GPU (node 1)", "NVIDIA GeForce RTX 4090 Laptop GPU (node 2)"]
    cut = text(long).split("  ")[-2:]
    assert all(len(c.strip()) <= replay.LABEL_WIDTH for c in cut) and len(set(cut)) == 2
    assert [c.strip()[-8:] for c in cut] == ["(node 1)", "(node 2)"]
    same_ends = ["Partition gpu, node 01, NVIDIA H100", "Partition gpu, node 02, NVIDIA H100"]
    assert all(label in text(same_ends) for label in same_ends)  # cut alike: shown in full


def test_recording_format_messages_name_the_file_and_what_was_expected(tmp_path, capsys):
    good = json.loads(_kt(tmp_path / "g.json", [(1, 1), (2, 2)]).read_text())
    t4_row = {"configuration": {"a": 1}, "invalidity": "correct", "objectives": ["time"],
              "measurements": [{"name": "time", "value": 2.0, "unit": "ms"}]}
    cases = {
        "scalar_params.json": (json.dumps({**good, "tune_params": {"a": 5, "b": [1, 2]}}),
                               r"tune_params\['a'\] is 5; expected the list of its values"),
        "nested_value.json": (json.dumps({**good, "tune_params": {"a": [[1]], "b": [1, 2]}}),
                              r"tune_params\['a'\]: the parameter value \[1\] is neither a number nor a text"),
        "t4_measurements.json": (json.dumps({"results": [{**t4_row, "measurements": 5}]}),
                                 "results\\[0\\]: measurements is 5; expected a list"),
        "t4_objectives.json": (json.dumps({"results": [{**t4_row, "objectives": 5}]}),
                               "results\\[0\\]: objectives is 5; expected a list of measurement names"),
        "empty.csv": ("", "the file is empty; expected a Kernel Tuner cache file or a T4 results file"),
        "array.json": ("[1, 2, 3]", "a JSON list; expected a Kernel Tuner cache file or a T4 results file"),
        "unnamed.csv": ("# a,b\na,,time\n1,2,3.0\n", r"line 2: column 2 of the header \['a', '', 'time'\] has no name"),
        "repeated.csv": ("a,a,time\n1,2,3.0\n", r"line 1: repeated column names \['a'\]"),
        "fields.csv": ("a,time\n1,3.0\n\n2,4.0,5\n", "line 4: 3 fields where the header has 2"),
        "blank_param.csv": ("a,time\n,3.0\n", "line 2: column 'a' is empty"),
        "no_objective.csv": ("a,speed\n1,3.0\n", r"line 1: no objective column 'time or value' among"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ValueError, match=rf"^{path}.*{message}"):
            read_recording(path)
        code, out, err = _cli(["replay", path, "--budget", "2", "--seeds", "0"], capsys)
        assert code == 2 and err.count("\n") == 1 and str(path) in err, (name, err)
    # a T4 file naming its one objective as a text, not a list, reads that measurement
    (tmp_path / "t4.json").write_text(json.dumps({"results": [{**t4_row, "objectives": "time"}]}))
    assert read_recording(tmp_path / "t4.json").results == {(1,): 2.0}
    # a restrictions file that is not UTF-8
    (tmp_path / "r.txt").write_bytes(b"# caf\xe9\na <= 2\n")
    code, out, err = _cli(["replay", tmp_path / "g.json", "--restrictions-file", tmp_path / "r.txt"], capsys)
    assert code == 2 and err.count("\n") == 1 and f"{tmp_path / 'r.txt'}: not UTF-8 text" in err
    (tmp_path / "r.txt").write_text("# the kernel's limit\n\na <= 1\n")
    assert replay.read_restrictions(tmp_path / "r.txt") == ["a <= 1"]
