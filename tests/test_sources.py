"""Several sources (gptask.sources.multisource): other machines' measurements of the same problem join the model
as tasks of a "machine" category; only this machine's tasks take runs; bad sources are refused."""

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.sources.multisource import MACHINE_DIM, SourceError, combined_problem, machine_labels, target_tasks
from gptask.data.storage import SQLiteStorage

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import counting_problem, failing_problem  # noqa: E402


def _grid(t, label, cores=None):
    """Every x in 0, 0.1, ..., 1 and k in 2, 4, 6 of the counting problem at task t (its optimum:
    x = t, k = 4), measured on machine ``label``."""
    out = []
    for x, k in itertools.product([i / 10 for i in range(11)], (2, 4, 6)):
        row = {"t": t, "x": x, "k": k, "value": 1.0 + (x - t) ** 2 + 0.05 * (k - 4) ** 2, "machine.label": label}
        if cores:
            row["machine.cores"] = cores
        out.append(row)
    return out


@pytest.fixture(scope="module")
def laptop_history(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "laptop.sqlite"
    gt.tune(counting_problem(), tasks=[{"t": 0.2}, {"t": 0.8}], budget=6, n_initial=3, seed=0, history=path,
            progress=False, provenance="laptop")
    return path


def test_sources_with_an_executor_run_this_machine_s_tasks_asynchronously(laptop_history, tmp_path):
    """executor= and max_in_flight= with sources (they were refused: 'does not take ['executor', 'max_in_flight']
    yet', so no campaign with sources could run its steps in a Slurm allocation): this machine's task runs its
    budget on the executor, two trials in flight, the source's measurements imported once; the same tasks and
    counts as the serial run (reference)."""
    from concurrent.futures import ThreadPoolExecutor

    log = tmp_path / "calls.txt"
    args = dict(sources=[laptop_history], provenance="node", n_initial=3, seed=1, progress=False)
    serial = gt.tune(counting_problem(), [{"t": 0.5}], 5, history=tmp_path / "serial.sqlite", **args)
    with ThreadPoolExecutor(2) as pool:
        r = gt.tune(counting_problem(str(log), sleep=0.05), [{"t": 0.5}], 5, history=tmp_path / "async.sqlite",
                    executor=pool, max_in_flight=2, **args)
    assert r.tasks == serial.tasks and target_tasks(r) == target_tasks(serial) == [2]
    calls = log.read_text().splitlines()
    assert len(calls) == 5 and all(line.split()[0] == "0.5" for line in calls)
    assert len({line for line in calls}) == 5  # nothing run twice
    assert sum(t.task_index < 2 for t in r.history) == sum(t.task_index < 2 for t in serial.history) == 12
    assert r.model.n_tasks == 3


def test_tune_with_a_source_runs_only_this_machine_s_tasks_and_resumes(laptop_history, tmp_path):
    log = tmp_path / "calls.txt"
    h = tmp_path / "combined.sqlite"
    args = dict(sources=[laptop_history], provenance="node", history=h, n_initial=3, seed=1, progress=False)
    r = gt.tune(counting_problem(str(log)), [{"t": 0.5}], 5, **args)
    assert r.tasks == [{"t": 0.2, MACHINE_DIM: "laptop"}, {"t": 0.8, MACHINE_DIM: "laptop"},
                       {"t": 0.5, MACHINE_DIM: "node"}]
    assert target_tasks(r) == [2] and r.model.n_tasks == 3  # one model over the sources' and this machine's tasks
    calls = log.read_text().splitlines()
    assert len(calls) == 5 and all(line.split()[0] == "0.5" for line in calls)  # the objective saw no machine key
    with SQLiteStorage(laptop_history, create=False) as s:
        source = {(t.task_index, tuple(sorted(t.params.items()))): t.value for t in s.trials()}
    mine = [t for t in r.history if t.task_index == 2]
    theirs = [t for t in r.history if t.task_index < 2]
    assert len(mine) == 5 and len(theirs) == 12
    assert {(t.task_index, tuple(sorted(t.params.items()))): t.value for t in theirs} == source  # imported as measured
    assert {r.machines[t.machine]["label"] for t in theirs} == {"laptop"}
    assert {r.machines[t.machine]["label"] for t in mine} == {"node"}
    # the same call again: nothing imported twice, nothing run
    again = gt.tune(counting_problem(str(log)), [{"t": 0.5}], 5, **args)
    assert len(again.history) == 17 and len(log.read_text().splitlines()) == 5
    # the plain problem's history is not the combined one's
    with pytest.raises(ValueError, match="different problem|another problem"):
        gt.tune(counting_problem(), [{"t": 0.5}], 5, history=h, progress=False)


def test_a_resume_with_other_sources_says_in_words_what_differs(laptop_history, tmp_path):
    # issue 40: a resume with sources= reordered or reduced gave HistoryMismatch with a raw signature dump
    h = tmp_path / "combined.sqlite"
    other = _grid(0.3, "desk")
    args = dict(provenance="node", history=h, n_initial=2, seed=1, progress=False)
    gt.tune(counting_problem(), [{"t": 0.5}], 2, sources=[laptop_history, other], **args)
    cases = {"removed \\['desk'\\]": [laptop_history], "added \\['lab'\\]": [laptop_history, other, _grid(0.4, "lab")],
             "the same machines in another order": [other, laptop_history]}
    for what, sources in cases.items():
        with pytest.raises(SourceError, match=f"tuned with the machines \\['laptop', 'desk', 'node'\\].*: {what}\\. "
                                              "Resume it with the same sources in the same order") as err:
            gt.tune(counting_problem(), [{"t": 0.5}], 2, sources=sources, **args)
        assert "signature" not in str(err.value)
    assert len(gt.tune(counting_problem(), [{"t": 0.5}], 2, sources=[laptop_history, other], **args).history) > 0


def test_predict_optimum_from_two_machines_finds_the_known_optimum():
    problem = counting_problem()
    sources = [_grid(0.2, "a") + _grid(0.8, "a"), _grid(0.3, "b") + _grid(0.7, "b")]
    for machine in ("a", "b"):
        p = gt.predict_optimum(None, {"t": 0.5}, sources=sources, problem=problem, machine=machine, restarts=1)
        assert p.task == {"t": 0.5, MACHINE_DIM: machine}
        assert p.params["k"] == 4 and abs(p.params["x"] - 0.5) < 0.15, p.params  # the optimum: x = t, k = 4
        assert abs(p.value - 1.0) < 0.05
    # a result of this machine plus a source; a new machine (no run) is a category of its own
    r = gt.fit(problem, _grid(0.4, "c"), mix_machines=True, progress=False, restarts=1)
    p = gt.predict_optimum(r, {"t": 0.4}, sources=sources[:1], machine="c", restarts=1)
    assert abs(p.params["x"] - 0.4) < 0.1 and p.params["k"] == 4
    new = gt.predict_optimum(None, {"t": 0.5}, sources=sources, problem=problem, machine="new-node", restarts=1)
    assert new.task[MACHINE_DIM] == "new-node" and problem.param_space.validate(new.params) == new.params


def test_machine_labels_group_records_of_one_machine():
    node = {"cpu": "Xeon Gold 6248", "cores": 40, "host": "node12"}
    labels = machine_labels([node, {**node, "host": "node31"}, {**node, "cores": 20}, {"label": "laptop"},
                             {"cpu": "EPYC", "accelerators": ["NVIDIA A100 (40960 MiB)"]}])
    assert labels == ["Xeon Gold 6248", "Xeon Gold 6248", "Xeon Gold 6248 #2", "laptop", "NVIDIA A100"]


def test_bad_sources_are_refused_with_their_reason(laptop_history, tmp_path):
    problem = counting_problem()
    other = tmp_path / "other.sqlite"
    gt.tune(failing_problem(), tasks=1, budget=3, history=other, progress=False, provenance="laptop")
    unrecorded = tmp_path / "unrecorded.sqlite"
    gt.tune(problem, tasks=[{"t": 0.3}], budget=3, history=unrecorded, progress=False, provenance=None)
    model = gt.tune(problem, tasks=2, budget=4, progress=False, provenance=None).save_model(tmp_path / "m.json")
    run = dict(provenance="node", progress=False)
    with pytest.raises(SourceError, match=r"source #0 \(.*other.sqlite\) is of another problem than 'counting': "):
        gt.tune(problem, 1, 4, sources=[other], **run)
    with pytest.raises(SourceError, match="3 of its 3 finished trials carry no machine record"):
        gt.tune(problem, 1, 4, sources=[laptop_history, unrecorded], **run)
    other_model = gt.tune(failing_problem(), tasks=1, budget=3, progress=False).save_model(tmp_path / "o.json")
    with pytest.raises(SourceError, match=r"source #0 \(.*o.json\): .* was saved for another problem"):
        gt.tune(problem, 1, 4, sources=[other_model], **run)
    with pytest.raises(SourceError, match="the model file records no machine"):  # fitted with provenance=None
        gt.tune(problem, 1, 4, sources=[model], **run)
    with pytest.raises(SourceError, match="no machine.\\* columns"):
        gt.predict_optimum(None, {"t": 0.5}, sources=[[{"t": 0.5, "x": 0.5, "k": 4, "value": 1.0}]],
                           problem=problem)
    with pytest.raises(SourceError, match="must be a list"):
        gt.tune(problem, 1, 4, sources=laptop_history, **run)
    with pytest.raises(SourceError, match=r"does not take \['pruner'\] yet"):
        gt.tune(problem, 1, 4, sources=[laptop_history], pruner=object(), **run)
    with pytest.raises(TypeError, match="executor must be a concurrent.futures.Executor"):
        gt.tune(problem, 1, 4, sources=[laptop_history], executor=object(), **run)
    with pytest.raises(SourceError, match="needs this machine's record"):
        gt.tune(problem, 1, 4, sources=[laptop_history], provenance=None, progress=False)
    two = gt.Problem(problem.task_space, problem.param_space, lambda t, p: {"time": 1.0, "memory": 2.0},
                     name="counting", objectives=["time", "memory"])
    with pytest.raises(SourceError, match="is of another problem"):  # outputs are part of the signature
        gt.tune(two, 1, 4, sources=[laptop_history], **run)
    with pytest.raises(SourceError, match=r"has named outputs \['time', 'memory'\]"):
        combined_problem(two, ["laptop", "node"])
    # the explicit mapping: the user names the machine of the unrecorded trials
    r = gt.tune(problem, [{"t": 0.5}], 3, sources=[gt.Source(unrecorded, machine="old-node")], n_initial=3, **run)
    assert [t[MACHINE_DIM] for t in r.tasks] == ["old-node", "node"]


def test_a_source_of_this_machine_and_task_counts_in_its_budget(tmp_path):
    earlier = tmp_path / "earlier.sqlite"
    gt.tune(counting_problem(), tasks=[{"t": 0.5}], budget=3, history=earlier, progress=False,
            provenance={"label": "node", "host": "node12"})
    log = tmp_path / "calls.txt"
    # another node of the same partition: the same machine, so the same task of the model
    r = gt.tune(counting_problem(str(log)), [{"t": 0.5}, {"t": 0.9}], 5, sources=[earlier], n_initial=3,
                provenance={"label": "node", "host": "node31"}, progress=False)
    assert r.tasks == [{"t": 0.5, MACHINE_DIM: "node"}, {"t": 0.9, MACHINE_DIM: "node"}]
    assert target_tasks(r) == [0, 1] and sorted(t.task_index for t in r.history).count(0) == 5
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    assert calls.count("0.5") == 2 and calls.count("0.9") == 5  # 3 of task 0's 5 came from the source


def test_a_listed_problem_proposes_from_its_own_list_and_the_sources_keep_theirs():
    """A problem with candidates (a recorded or partly measured space): this machine's task is
    tuned over its own list only, a source's task lists what that source measured (so a source
    measured on configurations this machine cannot run still informs the model), and the known
    optimum of the target is found among its own candidates."""
    calls = []

    def objective(task, p):
        calls.append((dict(task), dict(p)))
        return 1.0 + (p["x"] / 20 - task["t"]) ** 2 + 0.05 * (p["k"] - 4) ** 2

    own = [{"x": x, "k": k} for x, k in itertools.product(range(0, 21, 2), (2, 4, 6))]
    listed = gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Integer("x", 0, 20), gt.Integer("k", 1, 8)]),
                        objective, name="listed", candidates=lambda task: own)
    # the source ran odd x only, none of them on this machine's list
    odd = [{"x": x, "k": k} for x, k in itertools.product(range(1, 21, 2), (2, 4, 6))]
    theirs = [{"t": t, **p, "value": objective({"t": t}, p), "machine.label": "old"} for t in (0.3, 0.7) for p in odd]
    calls.clear()
    r = gt.tune(listed, [{"t": 0.5}], 10, sources=[theirs], provenance="new", n_initial=3, seed=0, progress=False)
    assert target_tasks(r) == [2] and r.model.n_tasks == 3
    assert len(calls) == 10 and all(p in own and task == {"t": 0.5} for task, p in calls)
    assert r.problem.candidate_list(r.tasks[0]) == odd and r.problem.candidate_list(r.tasks[2]) == own
    assert r.best(2)[0] == {"x": 10, "k": 4}  # the known optimum, x / 20 = t, k = 4


def test_a_model_file_brings_the_data_it_was_fitted_on(laptop_history, tmp_path):
    """A saved model as a source: the configurations and values of its data (the laptop's trials,
    decoded from the model's encoding and mapped back from model units) with the laptop's machine
    record from the file's provenance; the same model as tuning with the history as source."""
    with SQLiteStorage(laptop_history, create=False) as s:
        trials = [t for t in s.trials() if t.status is gt.Status.COMPLETE]
    fitted = gt.fit(counting_problem(), [{**t.task, **t.params, "value": t.value, "machine.label": "laptop"}
                                         for t in trials], progress=False, restarts=1)
    path = fitted.save_model(tmp_path / "laptop.json")
    from gptask.sources.measurements import read_measurements as read_source

    got = read_source(counting_problem(), path)
    expected = np.array(sorted((t.task["t"], t.params["x"], t.params["k"], t.value) for t in trials))
    np.testing.assert_allclose(sorted((m.task["t"], m.params["x"], m.params["k"], m.value) for m in got), expected,
                               rtol=1e-9, atol=1e-11)
    assert {m.machine["label"] for m in got} == {"laptop"}
    r = gt.tune(counting_problem(), [{"t": 0.5}], 4, sources=[path], provenance="node", n_initial=2, seed=1,
                progress=False)
    assert r.tasks == [{"t": 0.2, MACHINE_DIM: "laptop"}, {"t": 0.8, MACHINE_DIM: "laptop"},
                       {"t": 0.5, MACHINE_DIM: "node"}] and target_tasks(r) == [2]
    # a model file of a machine with no record: the explicit mapping
    bare = gt.fit(counting_problem(), [{**t.task, **t.params, "value": t.value} for t in trials], progress=False,
                  restarts=1).save_model(tmp_path / "bare.json")
    assert {m.machine["label"] for m in read_source(counting_problem(), gt.Source(bare, machine="old"))} == {"old"}
    # one task measured on two machines: which machine a value came from is not in the model
    rows = [{**t.task, **t.params, "value": t.value, "machine.label": f"m{k % 2}"}
            for t0 in (0.2, 0.8) for k, t in enumerate(t for t in trials if t.task["t"] == t0)]
    mixed = gt.fit(counting_problem(), rows, mix_machines=True, progress=False, restarts=1).save_model(
        tmp_path / "mixed.json")
    with pytest.raises(SourceError, match=r"mixes measurements of machines \['m0', 'm1'\]"):
        read_source(counting_problem(), mixed)
