"""The history storage: one contract every backend passes, then what is specific to SQLite files
(refusing what is not a history, read-only and missing paths, schema versions and the v1 upgrade,
several processes on one file)."""

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from gptask.data.storage import (SCHEMA_VERSION, HistoryMismatch, NotAHistory, Owner, SchemaTooNew, SQLiteStorage,
                            TrialHeld, TrialNotPending, UnknownTrial, open_storage)
from gptask.data.storage.base import MAX_ATTEMPTS
from gptask.data.storage.export import to_csv, to_json
from gptask.data.trials import Proposal, Status, Trial, params_key

SIG = {"name": "p", "task_space": [{"type": "real", "name": "t", "lo": 0, "hi": 1, "log": False}]}
TASKS = [{"t": 0.1}, {"t": 0.9}]
DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]


def prop(i, x, source="initial"):
    return Proposal(i, TASKS[i], {"x": x}, source)


def dead_owner() -> Owner:
    """The identity of a real process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stat = Path(f"/proc/{proc.pid}/stat").read_text()
    start = int(stat[stat.rindex(")") + 2:].split()[19])
    me = Owner.this_process("tune")
    proc.kill()
    proc.wait()
    return Owner("tune", "dead", me.host, proc.pid, me.boot, start)


@pytest.fixture(params=["file", "memory", "postgres"])
def storage(request, tmp_path):
    where = {"file": lambda: tmp_path / "h.sqlite", "memory": lambda: None,
             "postgres": lambda: request.getfixturevalue("pg_server").new_url()}[request.param]()
    s = open_storage(where, SIG)
    s.set_tasks(TASKS)
    yield s
    s.close()


# ---- the contract ---------------------------------------------------------------------------------


def test_claims_respect_the_budget_and_never_duplicate(storage):
    me = Owner.this_process("tune")
    got = storage.add_trials([prop(0, 0.1), prop(0, 0.2), prop(0, 0.1), prop(0, 0.3), prop(1, 0.1)], me, budget=2)
    assert [t is not None for t in got] == [True, True, False, False, True]
    assert all(t.status is Status.PENDING and t.owner == me.to_text() for t in got if t)
    assert [t.id for t in storage.trials(status=Status.PENDING)] == [got[0].id, got[1].id, got[4].id]
    # a finished configuration stays taken; without a budget another one is accepted
    storage.finish(got[0].id, Status.COMPLETE, 2.0)
    assert storage.add_trials([prop(0, 0.1), prop(0, 0.4)], me) [0] is None
    assert len(storage.trials(task_index=0)) == 3
    with pytest.raises(ValueError, match="outside 0..1"):
        storage.add_trials([prop(0, 0.5).__class__(5, {}, {"x": 0.5})], me)


def test_tell_contract(storage):
    me = Owner.this_process("tune")
    a, b = storage.add_trials([prop(0, 0.1), prop(1, 0.2)], me)
    done = storage.finish(a.id, Status.COMPLETE, 1e308, samples=[1e308], extra={"noise": "k=1"}, duration=0.5)
    assert done.value == 1e308 and done.extra == {"noise": "k=1"} and done.finished >= done.created
    with pytest.raises(TrialNotPending, match="already told: it is complete with value 1e"):
        storage.finish(a.id, Status.FAILED, reason="again")
    with pytest.raises(UnknownTrial, match="trial 999 is not in history"):
        storage.finish(999, Status.COMPLETE, 1.0)
    with pytest.raises(HistoryMismatch, match="another history"):
        storage.finish(b.id, Status.COMPLETE, 1.0, expected=a)
    with pytest.raises(ValueError, match="finite value"):
        storage.finish(b.id, Status.COMPLETE, float("nan"))
    with pytest.raises(ValueError, match="finished status"):
        storage.finish(b.id, Status.PENDING)
    failed = storage.finish(b.id, Status.FAILED, 7.0, reason="timeout after 3 s", expected=b)
    assert failed.value is None and failed.reason == "timeout after 3 s"
    assert [t.status for t in storage.trials()] == [Status.COMPLETE, Status.FAILED]


def test_writing_a_trial_per_task_reads_the_task_list_once_per_call(history_location, monkeypatch):
    """import_trials and add_trials over many tasks decoded the whole task list again for every trial
    written (n^2 JSON decodes: importing one run for each of 3,000 tasks took 72 s); the task list is
    now read once per call. Counted, not timed: the decodes of task rows per call stay linear in n."""
    from gptask.data.storage import postgres, sqlite

    decoded = []

    def counting(text, what, where):
        decoded.append(what)
        return base_stored_json(text, what, where)

    base_stored_json = sqlite.stored_json
    for module in (sqlite, postgres):
        monkeypatch.setattr(module, "stored_json", counting)
    n = 200
    tasks = [{"t": 0.2 + 0.5 * k / n} for k in range(n)]
    with open_storage(history_location, SIG) as s:
        s.set_tasks(tasks)
        me = Owner.this_process("tune")
        decoded.clear()
        done = s.import_trials([Trial(0, i, t, {"x": 0.5}, Status.COMPLETE, 1.0 + i, source="imported")
                                for i, t in enumerate(tasks)])
        assert [t.task for t in done] == tasks and [t.value for t in done] == [1.0 + i for i in range(n)]
        assert sum(w.startswith("task ") for w in decoded) <= 3 * n
        decoded.clear()
        claimed = s.add_trials([Proposal(i, t, {"x": 0.25}, "initial") for i, t in enumerate(tasks)], me)
        assert [t.task_index for t in claimed] == list(range(n)) and all(t.task == tasks[t.task_index] for t in claimed)
        assert sum(w.startswith("task ") for w in decoded) <= 3 * n


def test_imported_trials_are_written_finished_once_and_count_in_the_budget(storage):
    me = Owner.this_process("tune")
    pending, = storage.add_trials([prop(0, 0.1)], me)
    done = [Trial(0, 0, TASKS[0], {"x": 0.2}, Status.COMPLETE, 1.5, (1.5, 1.7), source="imported",
                  extra={"lines": [3, 9]}),
            Trial(0, 0, TASKS[0], {"x": 0.1}, Status.COMPLETE, 9.0, source="imported"),  # already claimed
            Trial(0, 1, TASKS[1], {"x": 0.3}, Status.FAILED, None, reason="crashed", source="imported"),
            Trial(0, 1, TASKS[1], {"x": 0.4}, Status.CENSORED, 4.0, source="imported")]
    got = storage.import_trials(done)
    assert got[1] is None and all(t is not None for t in (got[0], got[2], got[3]))
    assert [t.id for t in (got[0], got[2], got[3])] == [pending.id + 1, pending.id + 2, pending.id + 3]
    assert got[0].samples == (1.5, 1.7) and got[0].extra == {"lines": [3, 9]} and got[0].owner is None
    assert [t.status for t in storage.trials()] == [Status.PENDING, Status.COMPLETE, Status.FAILED, Status.CENSORED]
    assert storage.import_trials(done[:1]) == [None]  # a second import adds nothing
    assert storage.add_trials([prop(0, 0.5)], me, budget=2) == [None]  # the budget counts imported trials
    with pytest.raises(TrialNotPending):
        storage.finish(got[0].id, Status.COMPLETE, 1.0)
    for bad, why in [(Trial(0, 0, TASKS[0], {"x": 0.6}, Status.PENDING), "must be finished"),
                     (Trial(0, 0, TASKS[0], {"x": 0.6}, Status.COMPLETE, None), "needs a finite value"),
                     (Trial(0, 5, {}, {"x": 0.6}, Status.COMPLETE, 1.0), "outside 0..1")]:
        with pytest.raises(ValueError, match=why):
            storage.import_trials([bad])
    with pytest.raises(TypeError, match="takes Trials"):
        storage.import_trials([prop(0, 0.7)])
    assert len(storage.trials()) == 4


@pytest.mark.parametrize("value", [1e308, -1e308, 5e-324, 1e-300, 0.0, -0.5, 123456789.123456789])
def test_values_are_stored_exactly_as_given(storage, value):
    t, = storage.add_trials([prop(0, 0.5)], Owner.this_process("tune"))
    storage.finish(t.id, Status.COMPLETE, value)
    assert storage.trials()[0].value == value


def test_a_trial_whose_holders_keep_dying_is_failed_with_its_reason_not_run_forever(storage):
    """An evaluation that kills the process running it (a segfault, the OOM killer) would be handed
    out on every resume: after MAX_ATTEMPTS hand-outs whose holder died, it is recorded as failed."""
    crasher, = storage.add_trials([prop(0, 0.3)], dead_owner())
    for attempt in range(2, MAX_ATTEMPTS + 1):  # each resume takes it over and dies running it
        back = storage.reclaim(dead_owner())
        assert [(t.id, t.attempts) for t in back] == [(crasher.id, attempt)]
    assert storage.trials()[0].status is Status.PENDING
    assert storage.reclaim(Owner.this_process("tune")) == []
    t, = storage.trials()
    assert t.id == crasher.id and t.status is Status.FAILED and t.finished is not None
    assert f"handed out {MAX_ATTEMPTS} times" in t.reason and "tune pid" in t.reason and "not run again" in t.reason
    # proposing its configuration again hands out nothing: it is a finished (failed) trial now
    assert storage.add_trials([prop(0, 0.3)], Owner.this_process("tune")) == [None]


def test_a_released_trial_is_handed_out_again_whatever_its_attempts(storage):
    t, = storage.add_trials([prop(0, 0.4)], Owner.detached("ask"))
    for _ in range(MAX_ATTEMPTS + 1):  # released by hand each time (a cancelled batch job): no crash
        storage.release(ids=[t.id])
        back, = storage.reclaim(Owner.detached("ask"))
    assert back.id == t.id and back.attempts == MAX_ATTEMPTS + 2 and back.status is Status.PENDING


def test_release_refuses_a_trial_a_live_process_runs_but_not_a_detached_one(storage):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stat = Path(f"/proc/{holder.pid}/stat").read_text()
        me = Owner.this_process("tune")
        live = Owner("tune", "other", me.host, holder.pid, me.boot, int(stat[stat.rindex(")") + 2:].split()[19]))
        run, = storage.add_trials([prop(0, 0.5)], live)
        asked, = storage.add_trials([prop(1, 0.5)], Owner.detached("ask"))
        with pytest.raises(TrialHeld, match=f"trial {run.id} is being run by tune pid {holder.pid}"):
            storage.release(ids=[run.id])
        assert storage.trials()[0].owner == live.to_text()  # nothing was released
        assert storage.release(ids=[asked.id]) == [asked.id]  # what `gptask release` is for
        holder.kill()
        holder.wait()
        assert storage.release(ids=[run.id]) == [run.id]  # its holder is gone: nothing runs it
    finally:
        holder.kill()
        holder.wait()


def test_release_refuses_a_tuner_on_another_host_until_its_lease_expires(storage):
    remote = Owner("tune", "remote", "node-that-is-not-this-one", 4242, None, None)
    held, = storage.add_trials([prop(0, 0.6)], remote)  # no lease: cannot be checked, counts as alive
    with pytest.raises(TrialHeld, match="tune pid 4242 on node-that-is-not-this-one, on another host"):
        storage.release(ids=[held.id])
    leased, = storage.add_trials([prop(0, 0.7)], remote, lease=1e-3)
    time.sleep(0.01)  # its lease expired: nothing holds it any more
    assert storage.release(ids=[leased.id]) == [leased.id]


OPENER = """
import sys, time
from gptask.data.storage import SQLiteStorage
path, start = sys.argv[1], float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
SQLiteStorage(path, {sig!r}).close()
"""


def test_processes_creating_one_history_at_once_all_open_it(tmp_path):
    """Workers started together on a new shared history: SQLite answered some of them SQLITE_BUSY at
    once (reported as a lock held for 60 s), and one that gave up deleted the half-made file under
    the others (a disk I/O error); a tune command failed so in a random-order suite run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_ in range(10):
        path = tmp_path / f"h{round_}.sqlite"
        start = time.time() + 1.0
        procs = [subprocess.Popen([sys.executable, "-c", OPENER.format(sig=SIG), str(path), str(start)],
                                  stderr=subprocess.PIPE, text=True, env=env) for _ in range(8)]
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert all(p.returncode == 0 for p in procs), [e[-400:] for e in errors if e]
        with SQLiteStorage(path, SIG) as s:
            assert s.trials() == []


def test_dead_and_released_holders_give_their_trials_back(storage):
    me, ghost = Owner.this_process("tune"), dead_owner()
    live, = storage.add_trials([prop(0, 0.1)], me)
    orphan, = storage.add_trials([prop(0, 0.2)], ghost)
    # another live holder does not take my trial, but the dead one's trial is handed over once
    other = Owner.this_process("tune")
    back = storage.reclaim(other)
    assert [t.id for t in back] == [orphan.id] and back[0].attempts == 2 and back[0].owner == other.to_text()
    assert storage.reclaim(me) == []
    # asking for the orphan's configuration again hands over the existing trial, not a new one
    storage.release(other)
    again = storage.add_trials([prop(0, 0.2)], me)
    assert again[0].id == orphan.id and again[0].attempts == 3
    # my trial is run by a live process (this one): giving it back by id would run it twice
    with pytest.raises(TrialHeld, match=r"being run by tune pid \d+ .* alive: releasing it would run"):
        storage.release(ids=[live.id])
    assert storage.release(ids=[live.id], force=True) == [live.id]
    assert [t.id for t in storage.reclaim(other, limit=5, task_indices=[0])] == [live.id]
    storage.finish(live.id, Status.COMPLETE, 1.0)
    with pytest.raises(TrialNotPending):
        storage.release(ids=[live.id])


def test_a_detached_holder_keeps_its_trial_until_the_lease_ends(storage):
    shell = Owner.detached("ask")
    forever, = storage.add_trials([prop(0, 0.1)], shell)
    leased, = storage.add_trials([prop(0, 0.2)], shell, lease=0.2)
    me = Owner.this_process("tune")
    assert storage.reclaim(me) == []
    time.sleep(0.3)
    assert [t.id for t in storage.reclaim(me)] == [leased.id]
    assert storage.trials(status=Status.PENDING)[0].id == forever.id


def test_tasks_meta_models_and_export(storage):
    storage.set_tasks(TASKS)  # the same list again is fine
    with pytest.raises(HistoryMismatch):
        storage.set_tasks([{"t": 0.2}])
    storage.set_tasks(TASKS + [{"t": 0.5}])
    storage.close_task(1, "every feasible configuration was run")
    assert storage.closed_tasks() == {1: "every feasible configuration was run"}
    storage.set_meta("seed", 3)
    assert storage.get_meta("seed") == 3 and storage.get_meta("nothing") is None
    storage.add_model(1, {"W": [[1.0]]}, -3.5, data_key="abc")
    assert storage.last_model() == {"iteration": 1, "log_likelihood": -3.5, "params": {"W": [[1.0]]}, "data_key": "abc"}
    t, = storage.add_trials([Proposal(0, TASKS[0], {"x": 0.25, "alg": "ring"})], Owner.this_process("tune"))
    storage.finish(t.id, Status.COMPLETE, 2.0, extra={"n": 1})
    lines = to_csv(storage).splitlines()
    assert lines[0].startswith("id,task_index,task.t,param.alg,param.x,value,status,reason")
    assert lines[1].split(",")[2:7] == ["0.1", "ring", "0.25", "2.0", "complete"]
    data = json.loads(to_json(storage))
    assert data["signature"] == SIG and data["trials"][0]["extra"] == {"n": 1} and data["closed_tasks"] == {"1": data[
        "closed_tasks"]["1"]}


# ---- a model-based state machine over the contract ------------------------------------------------


class StorageMachine(RuleBasedStateMachine):
    """Random sequences of claims, tells, releases and reclaims against a plain-Python model."""

    GHOST = None
    LOCATION = staticmethod(lambda: None)  # where each run's history lives (None: in memory)

    @initialize()
    def start(self):
        if StorageMachine.GHOST is None:
            StorageMachine.GHOST = dead_owner()
        self.s = open_storage(self.LOCATION(), SIG)
        self.s.set_tasks(TASKS)
        self.me, self.peer = Owner.this_process("tune"), Owner.this_process("tune")
        self.model = {}  # id -> dict(task, key, status, holder: "me" | "peer" | "ghost" | None)
        self.max_budget = {0: 0, 1: 0}
        self.views = {limit: ([], 0) for limit in (500, 1)}  # incremental readers: (trials, last id read)

    def _holder(self, name):
        return {"me": self.me, "peer": self.peer, "ghost": StorageMachine.GHOST}[name]

    @rule(task=st.integers(0, 1), xs=st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.4, 0.5]), max_size=4),
          budget=st.integers(1, 5), who=st.sampled_from(["me", "peer", "ghost"]))
    def add(self, task, xs, budget, who):
        self.max_budget[task] = max(self.max_budget[task], budget)
        got = self.s.add_trials([prop(task, x) for x in xs], self._holder(who), budget=budget)
        for x, t in zip(xs, got):
            key = params_key({"x": x})
            same = [i for i, m in self.model.items() if m["task"] == task and m["key"] == key]
            if same:
                m = self.model[same[0]]
                free = m["status"] == "pending" and m["holder"] in (None, "ghost")
                assert (t is not None) == free and (t is None or t.id == same[0])
                if t is not None:
                    m["holder"] = who
                    m["attempts"] += 1
                continue
            n = sum(1 for m in self.model.values() if m["task"] == task)
            assert (t is not None) == (n < budget)
            if t is not None:
                self.model[t.id] = {"task": task, "key": key, "status": "pending", "holder": who, "attempts": 1}

    @precondition(lambda self: any(m["status"] == "pending" for m in self.model.values()))
    @rule(data=st.data(), status=st.sampled_from([Status.COMPLETE, Status.FAILED, Status.CENSORED]))
    def tell(self, data, status):
        i = data.draw(st.sampled_from(sorted(k for k, m in self.model.items() if m["status"] == "pending")))
        self.s.finish(i, status, 1.0)
        self.model[i]["status"] = status.value

    @precondition(lambda self: any(m["status"] != "pending" for m in self.model.values()))
    @rule(data=st.data())
    def tell_twice(self, data):
        i = data.draw(st.sampled_from(sorted(k for k, m in self.model.items() if m["status"] != "pending")))
        with pytest.raises(TrialNotPending):
            self.s.finish(i, Status.COMPLETE, 2.0)

    @rule(who=st.sampled_from(["me", "peer"]))
    def release(self, who):
        released = self.s.release(self._holder(who))
        expect = sorted(i for i, m in self.model.items() if m["status"] == "pending" and m["holder"] == who)
        assert released == expect
        for i in expect:
            self.model[i]["holder"] = None

    @rule(who=st.sampled_from(["me", "peer"]), limit=st.none() | st.integers(1, 3))
    def reclaim(self, who, limit):
        got = [t.id for t in self.s.reclaim(self._holder(who), limit=limit)]
        expect = []
        for i in sorted(self.model):  # oldest first; a dead holder's trial handed out MAX_ATTEMPTS times fails
            m = self.model[i]
            if limit is not None and len(expect) >= limit:
                break
            if m["status"] != "pending" or m["holder"] not in (None, "ghost"):
                continue
            if m["holder"] == "ghost" and m["attempts"] >= MAX_ATTEMPTS:
                m["status"] = "failed"
                continue
            expect.append(i)
        assert got == expect
        for i in got:
            self.model[i]["holder"] = who
            self.model[i]["attempts"] += 1

    @invariant()
    def agrees_with_the_model(self):
        trials = self.s.trials()
        assert {t.id: t.status.value for t in trials} == {i: m["status"] for i, m in self.model.items()}
        assert {t.id: t.attempts for t in trials} == {i: m["attempts"] for i, m in self.model.items()}
        keys = [(t.task_index, params_key(t.params)) for t in trials]
        assert len(keys) == len(set(keys))
        for task in (0, 1):
            assert sum(1 for t in trials if t.task_index == task) <= self.max_budget[task]

    @invariant()
    def incremental_reads_see_the_full_read(self):
        # a tuner re-reads only the newer trials and those it saw unfinished (Tuner.refresh); with
        # one id allowed by name it reads on from the oldest unfinished one instead
        import gptask.data.storage.sqlite as sqlite_storage

        full = [(t.id, t.status, t.value, t.owner, t.attempts) for t in self.s.trials()]
        for limit, (view, upto) in list(self.views.items()):
            saved, sqlite_storage.TRIALS_AFTER_MAX_IDS = sqlite_storage.TRIALS_AFTER_MAX_IDS, limit
            try:
                fresh = self.s.trials_after(upto, [t.id for t in view if not t.status.finished])
            finally:
                sqlite_storage.TRIALS_AFTER_MAX_IDS = saved
            merged = {t.id: t for t in view} | {t.id: t for t in fresh}
            view = [merged[i] for i in sorted(merged)]
            assert [(t.id, t.status, t.value, t.owner, t.attempts) for t in view] == full
            self.views[limit] = (view, max((t.id for t in view), default=0))

    def teardown(self):
        self.s.close()


TestStorageMachine = StorageMachine.TestCase
TestStorageMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


class PostgresStorageMachine(StorageMachine):
    """The same state machine against a PostgreSQL history (a fresh schema per run)."""

    LOCATION = staticmethod(lambda: pytest.fail("the pg_server fixture did not run"))


@pytest.fixture
def _postgres_machine(pg_server):
    PostgresStorageMachine.LOCATION = staticmethod(pg_server.new_url)


TestPostgresStorageMachine = pytest.mark.usefixtures("_postgres_machine")(PostgresStorageMachine.TestCase)
TestPostgresStorageMachine.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)


# ---- SQLite files ---------------------------------------------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rows_are_committed_immediately_and_reopen(tmp_path):
    path = tmp_path / "h.sqlite"
    s = SQLiteStorage(path, SIG)
    s.set_tasks(TASKS)
    t, = s.add_trials([prop(0, 0.5)], Owner.this_process("tune"))
    # another connection sees the PENDING row without any close or commit call
    rows = sqlite3.connect(path).execute("SELECT task_index, status, value FROM trials").fetchall()
    assert rows == [(0, "pending", None)]
    s.finish(t.id, Status.COMPLETE, 1.5, samples=[1.5, 2.0])
    again = SQLiteStorage(path, SIG)
    assert again.trials()[0].samples == (1.5, 2.0) and again.trials()[0].task == TASKS[0]
    s.close(), again.close()
    s.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        s.trials()


def test_other_problem_is_refused(tmp_path):
    """The refusal names what differs (it printed both signatures cut at 300 characters, which could cut
    before the difference); a campaign with sources (a `machine` task dimension) says how to resume it."""
    SQLiteStorage(tmp_path / "h.sqlite", SIG).close()
    with pytest.raises(HistoryMismatch, match="different problem: name: the history's .*, this problem's 'other'"):
        SQLiteStorage(tmp_path / "h.sqlite", {**SIG, "name": "other"})
    with_machine = {**SIG, "task_space": list(SIG["task_space"]) + [
        {"name": "machine", "type": "categorical", "choices": ["node-a"]}]}
    SQLiteStorage(tmp_path / "m.sqlite", with_machine).close()
    with pytest.raises(HistoryMismatch, match=r"task dimension machine: the history's one of \['node-a'\], this "
                                              r"problem's \(none\) \(a campaign with sources: .* its sources\)"):
        SQLiteStorage(tmp_path / "m.sqlite", SIG)
    with pytest.raises(HistoryMismatch, match=r"different problem: fidelity: the history's \(none\), this problem's "
                                              r'\{"target": \{"iterations": 1000\}\}'):
        SQLiteStorage(tmp_path / "h.sqlite", {**SIG, "fidelity": {"target": {"iterations": 1000}}})


def test_files_that_are_not_histories_are_refused_untouched(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(NotAHistory, match="not an SQLite database"):
        SQLiteStorage(junk, SIG)
    other = tmp_path / "inventory.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE parts (name TEXT)")
    db.execute("INSERT INTO parts VALUES ('bolt')")
    db.commit()
    db.close()
    before = digest(other)
    for opener in (lambda: SQLiteStorage(other, SIG), lambda: SQLiteStorage(other), lambda: SQLiteStorage(other, read_only=True)):
        with pytest.raises(NotAHistory, match=r"not a gptask history \(tables: parts\)"):
            opener()
    assert digest(other) == before and not Path(str(other) + "-wal").exists()


def test_missing_and_directory_paths_say_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="directory .*nope does not exist"):
        SQLiteStorage(tmp_path / "nope" / "h.sqlite", SIG)
    with pytest.raises(FileNotFoundError, match="no history file"):
        SQLiteStorage(tmp_path / "missing.sqlite")
    with pytest.raises(FileNotFoundError, match="no history file"):
        SQLiteStorage(tmp_path / "missing.sqlite", read_only=True)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        SQLiteStorage(tmp_path, SIG)


# Root ignores file permissions through these capabilities; a root process without them is held to the
# permission bits like any user, yet still owns (and so reads) the clone and its .venv wherever they lie.
# Switching to another user instead (setpriv --reuid=65534) fails when the clone sits under a directory only
# its owner may enter (a `mktemp -d` or root's own home): that user cannot import gptask there.
PERMISSION_OVERRIDES = "-dac_override,-dac_read_search,-fowner"


def run_unprivileged(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in this Python held to file permissions (as root: without the capabilities that bypass them)."""
    cmd = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: cannot drop the capabilities that bypass file permissions")
        cmd = ["setpriv", f"--bounding-set={PERMISSION_OVERRIDES}", "--inh-caps=-all", *cmd]
        if subprocess.run(cmd[:3] + ["true"], capture_output=True).returncode != 0:
            pytest.skip("running as root without CAP_SETPCAP: cannot drop the capabilities that bypass file permissions")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_read_only_files_and_directories_say_so_and_still_read(tmp_path, request):
    d = tmp_path / "ro"
    request.addfinalizer(lambda: [p.chmod(0o755 if p.is_dir() else 0o644) for p in (d, *d.iterdir())])
    d.mkdir()
    s = SQLiteStorage(d / "h.sqlite", SIG)
    s.set_tasks(TASKS)
    s.close()
    shutil.copy(DATA / "v1_failing.sqlite", d / "v1.sqlite")
    for p in (d, *d.iterdir()):
        p.chmod(0o555 if p.is_dir() else 0o444)
    code = f"""
import sys
from gptask.data.storage import SQLiteStorage
for path in ({str(d / 'h.sqlite')!r}, {str(d / 'v1.sqlite')!r}):
    try:
        SQLiteStorage(path, {SIG!r})
    except PermissionError as exc:
        print("refused:", exc)
    s = SQLiteStorage(path, read_only=True)
    print("read:", len(s.tasks()), len(s.trials()), s.schema_version)
try:
    SQLiteStorage({str(d / 'new.sqlite')!r}, {SIG!r})
except PermissionError as exc:
    print("refused:", exc)
"""
    r = run_unprivileged(code)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "is read-only" in out[0] and out[1] == f"read: 2 0 {SCHEMA_VERSION}"
    assert "refused:" in out[2] and out[3] == f"read: 2 16 {SCHEMA_VERSION}"  # the v1 file upgraded in memory only
    assert "directory" in out[4] and "not writable" in out[4]
    assert sqlite3.connect(f"file:{d / 'v1.sqlite'}?mode=ro", uri=True).execute(
        "SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)


def test_a_newer_schema_is_refused_naming_both_versions(tmp_path):
    path = tmp_path / "h.sqlite"
    SQLiteStorage(path, SIG).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(SchemaTooNew, match=f"schema {SCHEMA_VERSION + 1}; this gptask reads schema {SCHEMA_VERSION}"):
        SQLiteStorage(path, SIG)


@pytest.mark.parametrize("name", ["v1_failing.sqlite", "v1_penalty.sqlite"])
def test_v1_files_upgrade_to_v2_keeping_every_row(tmp_path, name):
    path = tmp_path / name
    shutil.copy(DATA / name, path)
    ref = sqlite3.connect(DATA / name)
    rows = ref.execute("SELECT id, task_index, params, value, status, reason, samples FROM evaluations ORDER BY id").fetchall()
    sig = json.loads(ref.execute("SELECT value FROM meta WHERE key = 'signature'").fetchone()[0])
    n_models = ref.execute("SELECT count(*) FROM models").fetchone()[0]
    ref.close()
    before = digest(path)
    ro = SQLiteStorage(path, read_only=True)
    assert len(ro.trials()) == len(rows)
    ro.close()
    assert digest(path) == before  # reading does not upgrade the file
    s = SQLiteStorage(path, sig)
    assert s.schema_version == SCHEMA_VERSION and s.get_meta("seed") is not None and len(s.models()) == n_models
    assert all(not t.values for t in s.trials())
    got = [(t.id, t.task_index, dict(t.params), t.value, t.status.value, t.reason, list(t.samples)) for t in s.trials()]
    assert got == [(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5], json.loads(r[6])) for r in rows]
    s.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] != 0
    assert "evaluations" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    SQLiteStorage(path, sig).close()  # opening again is a plain open of the current schema


def test_v1_censored_rows_become_censored_trials(tmp_path):
    path = tmp_path / "v1.sqlite"
    shutil.copy(DATA / "v1_failing.sqlite", path)
    db = sqlite3.connect(path)
    db.execute("UPDATE evaluations SET reason = 'censored: stopped at the deadline 2 s' WHERE id = 2")
    db.commit()
    db.close()
    s = SQLiteStorage(path)
    assert s.trials()[1].status is Status.CENSORED and s.trials()[2].status is Status.COMPLETE


def _v2_rows(path):
    db = sqlite3.connect(path)
    trials = db.execute("SELECT id, task_index, params, status, value, samples, reason FROM trials ORDER BY id").fetchall()
    conf = db.execute("SELECT id, task_index, params, status, value FROM confirmations ORDER BY id").fetchall()
    sig = json.loads(db.execute("SELECT value FROM meta WHERE key = 'signature'").fetchone()[0])
    db.close()
    return trials, conf, sig


def test_v2_files_read_in_memory_and_upgrade_in_place_keeping_every_row(tmp_path):
    """tests/data/v2_failing.sqlite was written by gptask at 59b0823 (tests/data/make_v2_history.py)."""
    path = tmp_path / "v2.sqlite"
    shutil.copy(DATA / "v2_failing.sqlite", path)
    trials, conf, sig = _v2_rows(path)
    assert len(trials) == 16 and len(conf) == 2 and any(r[3] == "failed" for r in trials)
    before = digest(path)
    with SQLiteStorage(path, read_only=True) as ro:
        assert len(ro.trials()) == 16 and ro.schema_version == SCHEMA_VERSION
    assert digest(path) == before  # reading does not upgrade the file
    s = SQLiteStorage(path, sig)
    assert s.schema_version == SCHEMA_VERSION and s.get_meta("upgraded_from") is None
    got = [(t.id, t.task_index, dict(t.params), t.status.value, t.value, list(t.samples), t.reason) for t in s.trials()]
    assert got == [(r[0], r[1], json.loads(r[2]), r[3], r[4], json.loads(r[5]), r[6]) for r in trials]
    assert [(c.id, c.task_index, dict(c.params), c.status.value, c.value) for c in s.confirmations()] == \
        [(r[0], r[1], json.loads(r[2]), r[3], r[4]) for r in conf]
    assert all(not t.values for t in s.trials() + s.confirmations())
    # the upgraded file takes trials with outputs
    t, = s.add_trials([Proposal(0, s.tasks()[0], {"x": 0.123})], Owner.this_process("tune"))
    done = s.finish(t.id, Status.COMPLETE, 2.0, [2.0], values={"time": 2.0, "memory": 5e8})
    assert dict(done.values) == {"time": 2.0, "memory": 5e8}
    s.add_confirmation(0, {"x": 0.123}, Status.COMPLETE, 2.1, [2.1], values={"time": 2.1, "memory": 5e8})
    s.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'upgraded_from'").fetchone() == ("2",)
    db.close()
    with SQLiteStorage(path, sig) as again:
        assert dict(again.trials()[-1].values) == {"time": 2.0, "memory": 5e8}
        assert dict(again.confirmations()[-1].values) == {"time": 2.1, "memory": 5e8}


def test_outputs_are_stored_with_finished_and_imported_trials_and_not_with_failed_ones(storage):
    me = Owner.this_process("tune")
    a, b = storage.add_trials([prop(0, 0.1), prop(0, 0.2)], me)
    done = storage.finish(a.id, Status.COMPLETE, 1.5, [1.5], values={"time": 1.5, "memory": 3.0})
    failed = storage.finish(b.id, Status.FAILED, None, reason="objective returned NaN for 'memory'",
                            values={"time": 1.0})
    assert dict(done.values) == {"time": 1.5, "memory": 3.0} and not failed.values
    imported, = storage.import_trials([Trial(0, 1, TASKS[1], {"x": 0.3}, Status.COMPLETE, 2.0, (2.0,),
                                             values={"time": 2.0, "memory": 1.0})])
    assert dict(imported.values) == {"time": 2.0, "memory": 1.0}
    assert [dict(t.values) for t in storage.trials()] == [{"time": 1.5, "memory": 3.0}, {}, {"time": 2.0, "memory": 1.0}]
    c, = storage.add_trials([prop(1, 0.4)], me)
    with pytest.raises(ValueError, match="output 'memory'.*finite"):
        storage.finish(c.id, Status.COMPLETE, 1.0, values={"time": 1.0, "memory": float("nan")})


CLAIMER = """
import json, sys, time
from pathlib import Path
from gptask.data.storage import SQLiteStorage, Owner
from gptask.data.trials import Proposal
path, start, order = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
s = SQLiteStorage(path, {sig!r})
me = Owner.this_process("tune")
while time.time() < start:
    time.sleep(0.001)
got = []
for x in order:
    t, = s.add_trials([Proposal(0, {{"t": 0.1}}, {{"x": x}})], me, budget=8)
    if t is not None:
        got.append(t.id)
print(json.dumps(got), flush=True)
sys.stdin.read()  # alive (holding its claims) until every claimer is done: a dead holder's claims are free
"""


def test_processes_racing_for_claims_keep_the_budget_and_never_share_a_configuration(tmp_path):
    path = tmp_path / "h.sqlite"
    s = SQLiteStorage(path, SIG)
    s.set_tasks(TASKS)
    s.close()
    xs = [round(0.05 * k, 2) for k in range(12)]
    start = time.time() + 2.0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER.format(sig=SIG), str(path), str(start),
                               json.dumps(xs[k:] + xs[:k])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env)
             for k in (0, 4, 8, 2)]
    ids = [json.loads(p.stdout.readline() or "null") for p in procs]
    for p in procs:
        p.communicate(timeout=120)
    assert all(p.returncode == 0 for p in procs)
    flat = [i for part in ids for i in part]
    assert len(flat) == len(set(flat)) == 8
    trials = SQLiteStorage(path).trials()
    assert len(trials) == 8 and len({t.params["x"] for t in trials}) == 8


HOLDER = """
import sys, time
from gptask.data.storage import SQLiteStorage, Owner
from gptask.data.trials import Proposal
s = SQLiteStorage(sys.argv[1])
s.add_trials([Proposal(0, {"t": 0.1}, {"x": 0.7})], Owner.this_process("tune"))
print("claimed", flush=True)
time.sleep(120)
"""


def test_a_killed_holders_trial_is_handed_over_and_a_live_ones_is_not(tmp_path):
    path = tmp_path / "h.sqlite"
    s = SQLiteStorage(path, SIG)
    s.set_tasks(TASKS)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline().strip() == "claimed"
    me = Owner.this_process("tune")
    assert s.reclaim(me) == [] and s.add_trials([prop(0, 0.7)], me) == [None]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    back = s.reclaim(me)
    assert len(back) == 1 and back[0].params == {"x": 0.7} and back[0].attempts == 2
    s.close()


def test_a_v1_file_of_another_problem_is_refused_before_any_upgrade(tmp_path):
    path = tmp_path / "v1.sqlite"
    shutil.copy(DATA / "v1_failing.sqlite", path)
    before = digest(path)
    with pytest.raises(HistoryMismatch, match="different problem"):
        SQLiteStorage(path, SIG)
    assert digest(path) == before


# ---- confirmation runs (TuningResult.recommend): kept apart from the trials ---------------------------


def test_confirmation_runs_are_not_trials(storage):
    from gptask.data.trials import CONFIRM_SOURCE

    me = Owner.this_process("tune")
    (t,) = storage.add_trials([prop(0, 0.5)], me, budget=1)
    storage.finish(t.id, Status.COMPLETE, 2.0)
    assert storage.confirmations() == []
    a = storage.add_confirmation(0, {"x": 0.5}, Status.COMPLETE, 2.5, (2.5,), duration=0.1)
    b = storage.add_confirmation(1, {"x": 0.2}, Status.FAILED, reason="crashed")
    assert (a.source, a.status, a.value, a.samples, a.task) == (CONFIRM_SOURCE, Status.COMPLETE, 2.5, (2.5,), TASKS[0])
    assert (b.status, b.value, b.reason) == (Status.FAILED, None, "crashed")
    assert storage.confirmations() == [a, b] and storage.confirmations(1) == [b]
    # the budget of task 0 (1 trial) is untouched, and the trials are the trials
    assert [x.id for x in storage.trials()] == [t.id]
    assert storage.add_trials([prop(0, 0.7)], me, budget=1) == [None]
    assert storage.add_trials([prop(0, 0.7)], me, budget=2)[0] is not None
    for bad, match in (({"status": Status.PENDING}, "complete or failed"), ({"value": float("nan")}, "finite"),
                       ({"task_index": 5}, "task index 5")):
        args = {"task_index": 0, "params": {"x": 0.5}, "status": Status.COMPLETE, "value": 1.0, **bad}
        with pytest.raises(ValueError, match=match):
            storage.add_confirmation(**args)


def test_confirmation_runs_survive_reopening_and_read_only_readers(tmp_path):
    path = tmp_path / "h.sqlite"
    with open_storage(path, SIG) as s:
        s.set_tasks(TASKS)
    with SQLiteStorage(path, read_only=True) as r:
        assert r.confirmations() == []  # a history from before the table existed
    with open_storage(path, SIG) as s:
        run = s.add_confirmation(1, {"x": 0.3}, Status.COMPLETE, 4.0)
    with SQLiteStorage(path, read_only=True) as r:
        assert r.confirmations() == [run]
        assert json.loads(to_json(r))["confirmations"] == [run.to_json()]
        with pytest.raises(PermissionError, match="read-only"):
            r.add_confirmation(1, {"x": 0.3}, Status.COMPLETE, 4.0)
