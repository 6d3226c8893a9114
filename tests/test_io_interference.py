"""The background I/O writer of apps/io_accelerators/interference.py (small, seconds)."""

import pytest

from apps.io_accelerators.interference import BackgroundIO, InterferenceSpec, run_interference, schedule

SMALL = dict(file_mb=2, block_kb=64, fsync_mb=1, burst_lo=0.05, burst_hi=0.1, pause_lo=0.05, pause_hi=0.1)


def test_schedule_is_deterministic_and_within_bounds():
    spec = InterferenceSpec(**SMALL, seed=3)
    a, b = schedule(spec, 20), schedule(spec, 20)
    assert a == b
    assert schedule(InterferenceSpec(**SMALL, seed=4), 20) != a
    for burst, pause in a:
        assert 0.05 <= burst <= 0.1 and 0.05 <= pause <= 0.1


def test_run_interference_writes_bursts_and_pauses(tmp_path):
    spec = InterferenceSpec(**SMALL)
    path = tmp_path / "scratch.bin"
    st = run_interference(path, spec, max_seconds=0.6)
    # the file keeps its size (blocks overwrite it in place)
    assert path.stat().st_size == 2 * 1024 * 1024
    assert st["bytes"] > 0 and st["bytes"] % (64 * 1024) == 0
    # bursts alternate with pauses: at least two bursts in 0.6 s, and neither always busy nor idle
    assert st["bursts"] >= 2
    assert 0.0 < st["busy_s"] < st["wall_s"]
    # the bursts started follow the seeded schedule: their cumulative duration fits in the wall time
    sched = schedule(spec, st["bursts"] - 1)
    assert sum(b + p for b, p in sched) <= st["wall_s"] + 0.05


def test_background_io_context_runs_a_process_and_cleans_up(tmp_path):
    spec = InterferenceSpec(**SMALL)
    with BackgroundIO(tmp_path, spec) as bg:
        assert bg.path.exists()
        import time
        time.sleep(0.3)
    assert "error" not in bg.stats
    assert bg.stats["bytes"] > 0 and bg.stats["spec"]["file_mb"] == 2
    assert not bg.path.exists()


@pytest.mark.parametrize("bad", [dict(file_mb=0), dict(block_kb=4096, file_mb=1), dict(burst_lo=2.0, burst_hi=1.0),
                                 dict(pause_lo=-1.0), dict(file_mb=1.5)])
def test_spec_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        InterferenceSpec(**bad)


def test_background_io_rejects_a_non_spec(tmp_path):
    with pytest.raises(TypeError):
        BackgroundIO(tmp_path, {"file_mb": 2})
