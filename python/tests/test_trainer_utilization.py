"""Utilization over a step's interval, from the counters engines and env workers publish."""

import pytest

from trajflow_py.trainer.files import write_json_atomically
from trajflow_py.trainer.utilization import UtilizationClock


def publish(folder, worker_id, uptime_ms, busy_ms):
    write_json_atomically(folder / f"{worker_id}.json", {"workerId": worker_id, "uptimeMs": uptime_ms, "busyMs": busy_ms, "writtenAt": 0})


def test_fractions_are_busy_time_over_the_time_between_each_workers_snapshots(tmp_path):
    engines, env = tmp_path / "engines", tmp_path / "env-workers"
    publish(engines, "e1", 1_000, 100)
    publish(engines, "e2", 5_000, 4_000)
    clock = UtilizationClock(tmp_path)
    since = clock.interval_start(10_000)
    publish(engines, "e1", 3_000, 1_100)  # +1000 busy
    publish(engines, "e2", 500, 300)  # restarted (uptime went down): 300 of its 500
    publish(env, "w1", 2_000, 500)  # new since the start: 500 of its 2000
    first = clock.interval_end(since, 10_500, 12_000)
    assert first.trainer_idle_fraction == pytest.approx(500 / 2_000)
    assert first.engine_busy_fraction == pytest.approx((1_000 + 300) / (2_000 + 500))
    assert first.env_busy_fraction == pytest.approx(500 / 2_000)
    # The next step's interval starts where this one ended; e2 and w1 published nothing newer.
    publish(engines, "e1", 4_000, 1_600)
    second = clock.interval_end(clock.interval_start(12_500), 12_500, 13_000)
    assert second.trainer_idle_fraction == pytest.approx(500 / 1_000)
    assert second.engine_busy_fraction == pytest.approx(500 / 1_000)
    assert second.env_busy_fraction is None


def test_no_env_worker_reports_nothing(tmp_path):
    clock = UtilizationClock(tmp_path)
    result = clock.interval_end(clock.interval_start(0), 0, 1_000)
    assert result.engine_busy_fraction is None
    assert result.env_busy_fraction is None


def test_a_step_shorter_than_the_snapshot_window_is_not_read_over_100_percent(tmp_path):
    # An always-busy engine publishing every 2 s: a 1.2 s step finds the snapshots of 2 s and 4 s,
    # 2 s of busy time, which over the step's 1.2 s read 167% ("engine busy 164.5%").
    engines = tmp_path / "engines"
    publish(engines, "e", 2_000, 2_000)
    clock = UtilizationClock(tmp_path)
    since = clock.interval_start(3_900)
    publish(engines, "e", 4_000, 4_000)
    assert clock.interval_end(since, 3_900, 5_100).engine_busy_fraction == 1
