"""Jain's index and the window of the background flows' counters (pure)."""

import pytest

from quicbench.probe.udp import Record
from quicbench.run.background import Reading, jain_index, window_metrics


def test_jain_index_is_one_when_equal_and_one_over_n_when_one_takes_all():
    assert jain_index([5.0, 5.0, 5.0]) == pytest.approx(1.0)
    assert jain_index([9.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain_index([3.0, 1.0]) == pytest.approx(16 / 20)
    assert jain_index([]) is None and jain_index([0.0, 0.0]) is None


def test_window_rates_shares_and_probe_delays():
    s = 1_000_000_000
    before = Reading(10 * s, {"fg": 0, "bg1": 1000, "bg2": 0})
    after = Reading(12 * s, {"fg": 2_500_000, "bg1": 1000 + 5_000_000, "bg2": 2_500_000})
    probe = [Record(i, 10 * s + i * 10_000_000, 10 * s + i * 10_000_000 + (20 + i) * 1_000_000, True)
             for i in range(150)]
    probe.append(Record(999, 11 * s, 11 * s + 500_000_000, False))          # corrupted: not counted
    m = window_metrics(before, after, [("bg1", "tcp:bbr"), ("bg2", "h3")], probe)
    # 2 s window: fg 10 Mbit/s, bg1 20, bg2 10
    assert m["fg_wire_mbps"] == pytest.approx(10) and m["bg_mbps"] == pytest.approx(30)
    assert m["bg_class_mbps"] == "h3=10.000,tcp:bbr=20.000" and m["bg_flows"] == 2
    assert m["fg_share_pct"] == pytest.approx(25)
    assert m["jain_index"] == pytest.approx(40 ** 2 / (3 * (100 + 400 + 100)))
    # probe packets sent in [10 s, 12 s]: 0..149 all within (the last at 11.49 s); delays 20..169 ms
    assert m["load_owd_samples"] == 150
    assert m["load_owd_ms_p50"] == pytest.approx(94.5) and m["load_owd_ms_p99"] == pytest.approx(167.51)


def test_probe_alone_gives_delays_without_flow_columns():
    m = window_metrics(Reading(0, {}), Reading(10, {}), [], [Record(0, 5, 5 + 3_000_000, True)])
    assert m == {"load_owd_samples": 1, "load_owd_ms_p50": 3.0, "load_owd_ms_p99": 3.0}
