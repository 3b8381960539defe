"""A trial's link fidelity from two readings of linkem's cumulative counters (pure logic; the
histogram itself is tested in linkem's Rust tests, a starved linkem in
tests/integration/test_link_fidelity.py)."""

import pytest

from quicbench.link.fidelity import LinkReading, late_threshold_ms, link_late, link_window
from quicbench.model.conditions import Condition


def direction(buckets: dict[int, int], late_dropped=0, ring_drops=0, max_ns=0):
    """One direction of linkem's `lateness` reply: bucket upper bounds (ns) -> frames."""
    le = sorted(buckets)
    return {"le_ns": le, "counts": [buckets[k] for k in le], "released": sum(buckets.values()),
            "max_ns": max_ns, "late_dropped": late_dropped, "ring_drops": ring_drops}


def reply(up, down, run=1.0, wait=0.1):
    return {"t_s": 0.0, "cpu_run_s": run, "cpu_wait_s": wait, "up": up, "down": down}


def test_the_window_is_the_difference_of_two_readings():
    before = LinkReading({"router": reply(direction({20_480: 500}, max_ns=20_000), direction({}), 1.0, 0.1)})
    # during the trial: 980 frames 20 µs late, 15 at ~3 ms, 5 at ~9 ms (a new maximum, exact);
    # 4 arrivals dropped by the overload guard, 2 ring overflows
    after = LinkReading({"router": reply(direction({20_480: 1000, 3_145_728: 15}, late_dropped=4, max_ns=2_900_000),
                                         direction({20_480: 480, 9_437_184: 5}, ring_drops=2, max_ns=8_800_000),
                                         1.25, 0.13)})
    w = link_window(before, after)
    assert w.packets == 1000
    assert w.late_p50_ms == pytest.approx(0.02048)
    assert w.late_p99_ms == pytest.approx(3.145728)
    assert w.late_max_ms == pytest.approx(8.8)          # the largest since start, in the window
    assert w.late_drops == 6
    assert w.cpu_s == pytest.approx(0.25) and w.cpu_wait_s == pytest.approx(0.03)


def test_an_older_maximum_is_not_the_windows():
    before = LinkReading({"router": reply(direction({9_437_184: 1}, max_ns=9_000_000), direction({}))})
    after = LinkReading({"router": reply(direction({9_437_184: 1, 40_960: 10}, max_ns=9_000_000), direction({}))})
    assert link_window(before, after).late_max_ms == pytest.approx(0.04096)   # the window's highest bucket


def test_two_routers_add_up():
    r = {"router": reply(direction({10_240: 10}), direction({})), "router2": reply(direction({}), direction({}))}
    r2 = {"router": reply(direction({10_240: 20}), direction({}), 2.0, 0.2),
          "router2": reply(direction({}), direction({5_120_000: 10}, late_dropped=1), 1.5, 0.4)}
    w = link_window(LinkReading(r), LinkReading(r2))
    assert w.packets == 20 and w.late_drops == 1
    assert w.late_p50_ms == pytest.approx(0.01024) and w.late_p99_ms == pytest.approx(5.12)
    assert w.cpu_s == pytest.approx(1.5) and w.cpu_wait_s == pytest.approx(0.4)


def test_no_frames_no_lateness():
    r = LinkReading({"router": reply(direction({}), direction({}), run=None, wait=None)})
    w = link_window(r, r)
    assert w.packets == 0 and w.late_p99_ms is None and w.late_max_ms is None and w.cpu_s is None
    assert link_late(w, Condition()) is None
    assert link_window(LinkReading({}), LinkReading({})) is None


def test_the_threshold_follows_the_one_way_delay():
    assert late_threshold_ms(Condition()) == 0.5
    assert late_threshold_ms(Condition(delay_ms=300)) == pytest.approx(15.0)
    # the smaller direction, over both hops
    assert late_threshold_ms(Condition(hops=[{"up": {"delay_ms": 20}, "down": {"delay_ms": 100}},
                                             {"delay_ms": 20}])) == pytest.approx(2.0)
    w = link_window(LinkReading({"r": reply(direction({}), direction({}))}),
                    LinkReading({"r": reply(direction({1_048_576: 100}), direction({}))}))
    assert link_late(w, Condition(delay_ms=10))          # p99 1.05 ms > 0.5 ms
    assert not link_late(w, Condition(delay_ms=50))      # 2.5 ms allowed


def test_codel_drops_and_the_download_directions_sojourn():
    def d(codel, sojourn):
        le = sorted(sojourn)
        return {**direction({}), "codel_dropped": codel, "sojourn": {"le_ns": le, "counts": [sojourn[k] for k in le]}}
    before = LinkReading({"router": reply(d(1, {0: 50}), d(10, {4_194_304: 100}))})
    # during the trial: 3 + 7 CoDel drops; server -> client 90 packets left at ~4 ms and 10 at ~20 ms
    # (the up direction's acknowledgements, never queued, do not count)
    after = LinkReading({"router": reply(d(4, {0: 5000}), d(17, {4_194_304: 190, 20_971_520: 10}))})
    w = link_window(before, after)
    assert w.codel_drops == 10
    assert w.sojourn_p50_ms == pytest.approx(4.194304)
    assert w.sojourn_p99_ms == pytest.approx(20.97152)
    # an older linkem without the counters: nothing claimed
    old = LinkReading({"router": reply(direction({}), direction({}))})
    w = link_window(old, old)
    assert w.codel_drops is None and w.sojourn_p50_ms is None
