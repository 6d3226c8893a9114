import json
import sqlite3

import pytest

from gptask.history import History, HistoryMismatch


SIG = {"name": "p", "task_space": [{"type": "real", "name": "t", "lo": 0, "hi": 1, "log": False}]}


def test_rows_are_committed_immediately_and_reopen(tmp_path):
    path = tmp_path / "h.sqlite"
    h = History(path, SIG)
    h.set_tasks([{"t": 0.1}, {"t": 0.9}])
    h.add_evaluation(0, {"x": 0.5}, 1.5, "complete", samples=[1.5, 2.0], source="initial")
    h.add_evaluation(1, {"x": 0.2}, None, "failed", reason="timeout after 3 s")
    # another connection sees both rows without any close/commit call
    rows = sqlite3.connect(path).execute("SELECT task_index, value, status, reason FROM evaluations").fetchall()
    assert rows == [(0, 1.5, "complete", ""), (1, None, "failed", "timeout after 3 s")]
    h2 = History(path, SIG)
    recs = h2.records()
    assert [r["task"] for r in recs] == [{"t": 0.1}, {"t": 0.9}]
    assert recs[0]["samples"] == [1.5, 2.0] and recs[1]["reason"] == "timeout after 3 s"


def test_other_problem_is_refused(tmp_path):
    path = tmp_path / "h.sqlite"
    History(path, SIG)
    with pytest.raises(HistoryMismatch, match="different problem"):
        History(path, {**SIG, "name": "other"})


def test_task_set_mismatch_refused(tmp_path):
    h = History(tmp_path / "h.sqlite", SIG)
    h.set_tasks([{"t": 0.1}])
    with pytest.raises(HistoryMismatch):
        h.set_tasks([{"t": 0.2}])


def test_not_a_database(tmp_path):
    p = tmp_path / "junk.sqlite"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="not a gptask history"):
        History(p, SIG)
    with pytest.raises(ValueError, match="no history file"):
        History.read_signature(tmp_path / "missing.sqlite")


def test_export_csv_and_json(tmp_path):
    h = History(tmp_path / "h.sqlite", SIG)
    h.set_tasks([{"t": 0.5}])
    h.add_evaluation(0, {"x": 0.25, "alg": "ring"}, 2.0, "complete")
    h.add_model(1, {"W": [[1.0]]}, -3.5)
    csv_text = h.to_csv().splitlines()
    assert csv_text[0].startswith("id,task_index,task.t,param.alg,param.x,value,status")
    assert csv_text[1].split(",")[2:5] == ["0.5", "ring", "0.25"]
    data = json.loads(h.to_json())
    assert data["signature"] == SIG and data["models"][0]["log_likelihood"] == -3.5
    assert h.last_model()["params"] == {"W": [[1.0]]}
