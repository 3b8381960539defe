"""The paced UDP probe's packet format and statistics (pure functions, no network)."""

import math

import pytest

from quicbench.probe.udp import Record, loss_bursts, make_packet, parse_packet, quantile, stats


def rec(seq, owd_ms=10.0, intact=True, send_ms=None):
    send = int((seq if send_ms is None else send_ms) * 1e6)
    return Record(seq, send, send + int(owd_ms * 1e6), intact)


def test_packet_round_trip_and_corruption_detected():
    pkt = make_packet(42, 123456789, 200)
    assert len(pkt) == 200
    assert parse_packet(pkt) == (42, 123456789, True)
    flipped = bytearray(pkt)
    flipped[150] ^= 0x10                   # one bit in the payload, as netem corrupt does
    assert parse_packet(bytes(flipped)) == (42, 123456789, False)
    assert parse_packet(b"not a probe packet at all......") is None


def test_quantile_interpolates_like_numpy():
    xs = [1.0, 2.0, 3.0, 4.0]
    assert quantile(xs, 0.5) == 2.5
    assert quantile(xs, 0.0) == 1.0 and quantile(xs, 1.0) == 4.0
    assert quantile(xs, 0.9) == pytest.approx(3.7)
    assert math.isnan(quantile([], 0.5))


def test_clean_path():
    s = stats([rec(i) for i in range(100)], 100)
    assert s["lost"] == 0 and s["duplicates"] == 0 and s["reordered"] == 0 and s["corrupted"] == 0
    assert s["owd_ms"]["p50"] == pytest.approx(10.0) and s["owd_ms"]["std"] == pytest.approx(0.0)


def test_loss_duplicates_and_bursts():
    recs = [rec(i) for i in range(100) if i not in (10, 11, 12, 50)] + [rec(70)]
    s = stats(recs, 100)
    assert s["lost"] == 4 and s["loss_frac"] == pytest.approx(0.04)
    assert s["duplicates"] == 1 and s["dup_frac"] == pytest.approx(0.01)
    assert s["loss_bursts"] == 2 and s["loss_burst_mean"] == pytest.approx(2.0)
    # a late duplicate is not a reordering: only first arrivals count
    assert s["reordered"] == 0
    assert loss_bursts({0, 1, 4}, 7) == [2, 2]


def test_reordering_rfc4737():
    # 0 1 3 2 4 6 5 7: 2 and 5 arrive after a higher sequence number
    order = [0, 1, 3, 2, 4, 6, 5, 7]
    s = stats([rec(i) for i in order], 8)
    assert s["reordered"] == 2 and s["reorder_frac"] == pytest.approx(2 / 8)
    # one very late packet is one reordering, not many
    s = stats([rec(i) for i in [1, 2, 3, 4, 5, 0]], 6)
    assert s["reordered"] == 1


def test_corrupted_datagrams_are_received_but_have_no_delay_sample():
    recs = [rec(0), rec(1, intact=False), rec(2, owd_ms=20)]
    s = stats(recs, 3)
    assert s["corrupted"] == 1 and s["lost"] == 0
    assert s["owd_ms"]["mean"] == pytest.approx(15.0)


def test_delay_quantiles_and_skew():
    recs = [rec(i, owd_ms=float(i)) for i in range(1, 101)]
    s = stats(recs, 100)
    assert s["owd_ms"]["p50"] == pytest.approx(50.5)
    assert s["owd_ms"]["p99"] == pytest.approx(99.01)
    assert abs(s["owd_ms"]["skew"]) < 1e-9        # symmetric
    tail = [rec(i, owd_ms=1.0) for i in range(95)] + [rec(95 + i, owd_ms=50.0) for i in range(5)]
    assert stats(tail, 100)["owd_ms"]["skew"] > 3  # a long right tail


def test_receive_rate_counts_ip_bytes():
    # 100 datagrams of 72 payload bytes (100 IP bytes) arriving 1 ms apart: 800 kbit/s of IP
    recs = [Record(i, 0, int(i * 1e6)) for i in range(101)]
    assert stats(recs, 101, size=72)["rx_ip_mbps"] == pytest.approx(0.8)


def test_nothing_received():
    s = stats([], 10)
    assert s["lost"] == 10 and s["loss_frac"] == 1.0 and math.isnan(s["owd_ms"]["p50"])
