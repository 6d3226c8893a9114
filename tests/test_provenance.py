"""Machine records (gptask.data.provenance): every told trial records the machine it ran on, stored once
per distinct record; gptask show, the exports and imports carry it; a history refuses trials of a
second machine unless asked; histories written before the machine tables read as before."""

import csv
import io
import json
import logging
import os
import shutil
import socket
import sqlite3
import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.cli.main import main
from gptask.transfer.model_io import load_model, read_provenance
from gptask.data.provenance import (MachineMismatch, ProvenanceError, check_record, flatten, problem_record,
                               same_machine, this_machine, unflatten)
from gptask.data.storage import SQLiteStorage
from gptask.data.storage.export import to_csv, to_json

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import counting_problem  # noqa: E402

DATA = Path(__file__).parent / "data"
NODE = {"label": "node", "cpu": "Intel(R) Xeon(R) Gold 6248", "cores": 40, "accelerators": ["NVIDIA A100 (40960 MiB)"]}
LAPTOP = {"label": "laptop", "cpu": "Apple M2", "cores": 8}


def _tune(history, budget=4, **kw):
    return gt.tune(counting_problem(), tasks=2, budget=budget, n_initial=2, seed=0, history=history,
                   progress=False, **kw)


def _table_rows(path, table):
    with sqlite3.connect(path) as db:
        return db.execute(f"SELECT * FROM {table}").fetchall()


def _tables(path):
    with sqlite3.connect(path) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


# ---- this machine's record ----------------------------------------------------------------------------
def test_this_machine_agrees_with_the_operating_system():
    me = this_machine()
    assert me["host"] == socket.gethostname() and me["cores"] == os.cpu_count()
    assert me["usable_cores"] == len(os.sched_getaffinity(0))
    # memory: /proc/meminfo's MemTotal against the page count (another source), within 5 %
    pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert abs(me["memory_gib"] - pages) < 0.05 * pages
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert me["cpu"] and me["cpu"] in cpuinfo
    import numpy
    import scipy

    assert me["packages"]["numpy"] == numpy.__version__ and me["packages"]["scipy"] == scipy.__version__
    assert check_record(me) == me  # a plain JSON record
    me["cpu"] = "changed"
    assert this_machine()["cpu"] != "changed"  # a copy


def test_the_problem_hook_adds_the_application_versions_once():
    calls = []

    def versions():
        calls.append(1)
        return {"scalapack": "2.2.1", "mpich": "4.0.2"}

    p = counting_problem()
    p.provenance = versions
    a, b = problem_record(p), problem_record(p)
    assert a == b and a["application"] == {"mpich": "4.0.2", "scalapack": "2.2.1"} and len(calls) == 1
    # versions are part of the machine's identity: a rebuilt ScaLAPACK is not the same machine
    assert not same_machine(a, {**a, "application": {"mpich": "4.0.2", "scalapack": "2.3.0"}})

    def broken():
        raise OSError("mpichversion: not found")

    p.provenance, p.__dict__["_provenance_record"] = broken, None
    with pytest.raises(ProvenanceError, match="problem 'counting': its provenance hook raised OSError: mpichversion"):
        gt.Tuner(counting_problem().__class__(p.task_space, p.param_space, p.objective, name="counting",
                                              provenance=broken), 1, budget=2)
    p2 = gt.Problem(p.task_space, p.param_space, p.objective, name="counting", provenance=lambda: ["4.0.2"])
    with pytest.raises(ProvenanceError, match="must return a dict"):
        problem_record(p2)
    with pytest.raises(TypeError, match="provenance must be a function"):
        gt.Problem(p.task_space, p.param_space, p.objective, provenance={"mpich": "4"})


def test_identity_ignores_host_memory_and_packages():
    a = {**NODE, "host": "node12", "memory_gib": 187.5, "packages": {"numpy": "1.26.4"}}
    b = {**NODE, "host": "node31", "memory_gib": 187.4, "packages": {"numpy": "1.26.5"},
         "accelerators": ["NVIDIA A100 (40000 MiB)"]}
    assert same_machine(a, b)  # two nodes of one partition
    assert not same_machine(a, {**a, "cores": 20}) and not same_machine(a, LAPTOP)
    # a record without application versions (gptask tell knows no problem) matches one with them
    assert same_machine({**a, "application": {"mpich": "4"}}, b)


@pytest.mark.parametrize("record, message", [
    ({"cpu": "x", "gpu": "y"}, "unknown keys \\['gpu'\\]"),
    ({"cores": 4}, "does not say which machine"),
    ({"cpu": "x", "cores": 0}, "cores must be a positive integer, got 0"),
    ({"cpu": "x", "accelerators": "A100"}, "accelerators must be a list"),
    ({"cpu": "x", "memory_gib": float("nan")}, "not plain JSON"),
    (["x"], "must be a dict"),
    ("  ", "must not be empty"),
])
def test_bad_records_are_refused(record, message):
    with pytest.raises(ProvenanceError, match=message):
        check_record(record)


# ---- histories ----------------------------------------------------------------------------------------
def test_every_told_trial_records_its_machine_once_per_history(tmp_path):
    h = tmp_path / "h.sqlite"
    r = _tune(h)
    _tune(h, budget=6)  # a second run on the same machine resumes: no second record
    rows = _table_rows(h, "machines")
    assert len(rows) == 1 and json.loads(rows[0][2]) == json.loads(json.dumps(this_machine(), sort_keys=True))
    with SQLiteStorage(h, create=False) as s:
        trials = s.trials()
        assert len(trials) == 12 and {t.machine for t in trials} == {rows[0][0]}
        assert s.machines() == {rows[0][0]: this_machine()}
    assert r.machines == {rows[0][0]: this_machine()} and {t.machine for t in r.history} == {rows[0][0]}
    assert len(_table_rows(h, "trial_machines")) == 12  # one small row per trial


def test_a_second_machine_is_refused_unless_asked(tmp_path, caplog, capsys):
    h = tmp_path / "h.sqlite"
    _tune(h, provenance=NODE)
    before = _table_rows(h, "trials")
    with pytest.raises(MachineMismatch, match=r"holds trials measured on node: Intel.*this process runs on "
                                              r"laptop.*pass mix_machines=True"):
        _tune(h, budget=6, provenance=LAPTOP)
    assert _table_rows(h, "trials") == before  # nothing asked, nothing written
    # another node of the same partition is the same machine
    _tune(h, budget=5, provenance={**NODE, "host": "node31"})
    with caplog.at_level(logging.WARNING, logger="gptask.data.provenance"):
        r = _tune(h, budget=6, provenance=LAPTOP, mix_machines=True)
    assert "adding trials of laptop: Apple M2 (8 cores) next to those of 1 other machine(s), as asked" in caplog.text
    machines = {json.dumps(v, sort_keys=True): k for k, v in r.machines.items()}
    laptop = machines[json.dumps(check_record(LAPTOP), sort_keys=True)]
    assert sorted(t.task_index for t in r.history if t.machine == laptop) == [0, 1]  # budget 5 -> 6
    assert len(r.machines) == 3  # node, node31, laptop: three records, two machines
    # gptask show lists them and flags the mix
    assert main(["show", str(h)]) == 0
    out = capsys.readouterr().out
    assert "trial(s) on laptop: Apple M2 (8 cores)" in out
    assert "warning: the trials come from 2 different machines (mixed on request)" in out


def test_gptask_tell_records_the_compute_node_and_refuses_another(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    h = tmp_path / "h.sqlite"
    node = tmp_path / "node.json"
    node.write_text(json.dumps(NODE))
    assert main(["machine", "--out", str(tmp_path / "me.json")]) == 0
    assert json.loads((tmp_path / "me.json").read_text()) == this_machine()
    capsys.readouterr()
    assert main(["ask", str(h), "--problem", "problems_for_tests:counting_problem", "--tasks", "2", "--budget",
                 "4", "-n", "3", "--json"]) == 0
    ids = [a["id"] for a in json.loads(capsys.readouterr().out)]
    assert main(["tell", str(h), str(ids[0]), "1.5", "--machine", str(node)]) == 0
    assert main(["tell", str(h), str(ids[1]), "1.7"]) == 2  # --machine auto: this machine, not the node
    assert "pass --mix-machines" in capsys.readouterr().err
    assert main(["tell", str(h), str(ids[1]), "1.7", "--machine", "none"]) == 0
    (tmp_path / "bad.json").write_text(json.dumps({"cores": 4}))
    assert main(["tell", str(h), str(ids[2]), "1.9", "--machine", str(tmp_path / "bad.json")]) == 2
    assert "bad.json does not say which machine" in capsys.readouterr().err
    with SQLiteStorage(h, create=False) as s:
        by_id = {t.id: t for t in s.trials()}
        assert s.machines()[by_id[ids[0]].machine] == check_record(NODE)
        assert by_id[ids[1]].machine is None and by_id[ids[2]].status.value == "pending"


# ---- exports and imports -------------------------------------------------------------------------------
def test_export_then_import_keeps_each_trials_machine(tmp_path):
    h = tmp_path / "h.sqlite"
    _tune(h, provenance=NODE)
    _tune(h, budget=6, provenance=LAPTOP, mix_machines=True)
    with SQLiteStorage(h, create=False) as s:
        text, doc = to_csv(s), json.loads(to_json(s))
        want = {t.params["x"]: s.machines()[t.machine] for t in s.trials()}
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["machine.label"] for r in rows} == {"node", "laptop"}
    assert json.loads(rows[0]["machine.accelerators"]) == NODE["accelerators"]
    assert {k: v for k, v in doc["machines"].items()} == {str(t["machine"]): want[t["params"]["x"]]
                                                          for t in doc["trials"]}
    (tmp_path / "h.csv").write_text(text)
    # into a fresh history: refused as a mix unless asked, then every trial keeps its record
    with pytest.raises(MachineMismatch, match="pass mix_machines=True"):
        gt.import_runs(counting_problem(), tmp_path / "h.csv", tmp_path / "new.sqlite", value="value",
                       status="status")
    report = gt.import_runs(counting_problem(), tmp_path / "h.csv", tmp_path / "new.sqlite", value="value",
                            status="status", mix_machines=True)
    assert len(report.trials) == 12
    with SQLiteStorage(tmp_path / "new.sqlite", create=False) as s:
        got = {t.params["x"]: s.machines()[t.machine] for t in s.trials()}
    assert got == want


def test_import_with_machine_columns_and_bad_cells(tmp_path):
    rows = [{"t": 0.5, "x": 0.1 * i, "k": 4, "time": 1.0 + i, "machine.label": "node", "machine.cores": "16",
             "machine.application": '{"mpich": "4.0.2"}'} for i in range(4)]
    h = tmp_path / "h.sqlite"
    report = gt.import_runs(counting_problem(), rows, h, value="time")
    assert len(report.trials) == 4
    with SQLiteStorage(h, create=False) as s:
        assert list(s.machines().values()) == [{"label": "node", "cores": 16, "application": {"mpich": "4.0.2"}}]
    # a default machine for rows without columns; one of another machine is refused, history unchanged
    plain = [{"t": 0.5, "x": 0.9, "k": 2, "time": 3.0}]
    with pytest.raises(MachineMismatch, match="this process runs on laptop"):
        gt.import_runs(counting_problem(), plain, h, value="time", machine="laptop")
    assert len(_table_rows(h, "trials")) == 4
    gt.import_runs(counting_problem(), plain, h, value="time", machine={"label": "node", "cores": 16})
    with SQLiteStorage(h, create=False) as s:
        assert len(s.machines()) == 2 and len({t.machine for t in s.trials()}) == 2  # same machine, 2 records
    # repeats of one configuration on two machines are not repeats
    twice = [{"t": 0.5, "x": 0.3, "k": 4, "time": 1.0, "machine.label": "a"},
             {"t": 0.5, "x": 0.3, "k": 4, "time": 2.0, "machine.label": "b"}]
    with pytest.raises(ValueError, match="measured on different machines"):
        gt.import_runs(counting_problem(), twice, None, value="time", mix_machines=True)
    bad = [{"t": 0.5, "x": 0.3, "k": 4, "time": 1.0, "machine.cores": "many", "machine.label": "a"},
           {"t": 0.5, "x": 0.4, "k": 4, "time": 1.0, "machine.gpu": "A100"}]
    with pytest.raises(ValueError) as err:
        gt.import_runs(counting_problem(), bad, None, value="time")
    assert "column machine.cores holds 'many', not a number" in str(err.value)
    assert "column machine.gpu is not a machine key" in str(err.value)


def test_flatten_unflatten_round_trip():
    record = check_record({**NODE, "memory_gib": 187.5, "packages": {"numpy": "2.0"}, "application": {"mpi": 4}})
    assert unflatten(flatten(record)) == record
    assert unflatten({"machine.label": "", "t": 1}) is None


# ---- model files ---------------------------------------------------------------------------------------
def test_a_saved_model_records_where_its_data_came_from(tmp_path):
    h = tmp_path / "h.sqlite"
    _tune(h, provenance=NODE)
    r = _tune(h, budget=6, provenance=LAPTOP, mix_machines=True)
    path = r.save_model(tmp_path / "m.json")
    prov = read_provenance(path)
    assert sorted(m["label"] for m in prov["machines"].values()) == ["laptop", "node"]
    per_task = [{prov["machines"][k]["label"]: n for k, n in task.items()} for task in prov["tasks"]]
    assert per_task == [{"node": 4, "laptop": 2}, {"node": 4, "laptop": 2}]
    assert load_model(path).provenance == prov
    # a version-1 file (written before provenance) still loads, its data's machines unknown
    doc = json.loads(path.read_text())
    old = {k: v for k, v in doc.items() if k not in ("provenance", "checksum")}
    old["version"] = 1
    from gptask.transfer.model_io import _checksum  # the file format's own rule, to write an old file

    old["checksum"] = _checksum(old)
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert load_model(tmp_path / "old.json").provenance is None and read_provenance(tmp_path / "old.json") is None


# ---- histories written before the machine tables --------------------------------------------------------
def test_an_old_history_without_machine_tables_reads_as_before(tmp_path, capsys):
    h = tmp_path / "old.sqlite"
    shutil.copy(DATA / "v1_failing.sqlite", h)
    with SQLiteStorage(h, create=False) as s:
        trials = s.trials()
        assert s.machines() == {} and trials and all(t.machine is None for t in trials)
        text = to_csv(s)
    assert "machine." not in text.splitlines()[0]
    assert "machines" not in _tables(h)
    assert main(["show", str(h)]) == 0
    assert "machine: not recorded" in capsys.readouterr().out
    # a history of unknown machines takes this machine's trials without a mix error
    h2 = tmp_path / "none.sqlite"
    _tune(h2, provenance=None)
    assert "machines" not in _tables(h2)
    r = _tune(h2, budget=5)
    assert [t.machine is None for t in r.history].count(False) == 2 and len(r.machines) == 1


def test_gptask_fit_names_the_machine_of_rows_without_one(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    data = tmp_path / "runs.csv"
    data.write_text("t,x,k,value\n" + "".join(f"0.5,{i / 10},4,{1 + (i / 10 - 0.5) ** 2}\n" for i in range(8)))
    h = tmp_path / "h.sqlite"
    base = ["fit", "--problem", "problems_for_tests:counting_problem", str(data), "--history", str(h), "-q",
            "--restarts", "1"]
    assert main([*base, "--machine", "node16"]) == 0
    with SQLiteStorage(h, create=False) as s:
        assert list(s.machines().values()) == [{"label": "node16"}] and all(t.machine for t in s.trials())
    more = tmp_path / "more.csv"
    more.write_text("t,x,k,value\n0.5,0.95,4,1.2\n")
    capsys.readouterr()
    assert main([*base[:3], str(more), *base[4:], "--machine", "laptop"]) == 2
    assert "pass mix_machines=True (gptask fit --mix-machines)" in capsys.readouterr().err
    assert main([*base[:3], str(more), *base[4:], "--machine", "laptop", "--mix-machines"]) == 0
    with SQLiteStorage(h, create=False) as s:
        assert sorted(m["label"] for m in s.machines().values()) == ["laptop", "node16"]
    assert main([*base, "--machine", str(tmp_path / "node.json")]) == 2  # a .json that is not there
    assert "no such file" in capsys.readouterr().err
