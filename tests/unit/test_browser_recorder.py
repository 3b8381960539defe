"""The browser's per-request records from DevTools Network events (pure logic: hand-made events in
the shape Chromium sends them; a real page load is tests/integration/test_browser.py)."""

import pytest

from quicbench.clients.browser.recorder import _Recorder, body_gaps
from quicbench.run.metrics import summarize_requests

MS = 1_000_000


def test_body_gaps_from_deliveries():
    # first byte at 10 ms, deliveries at 11, 12, 40 (a 28 ms stall), 40.5, 41 ms
    g = body_gaps(10 * MS, [11 * MS, 12 * MS, 40 * MS, 40 * MS + MS // 2, 41 * MS])
    assert g["stall_ns"] == 28 * MS
    # gaps of 1 ms or more (40.5 -> 41 ms is shorter)
    assert g["gaps_ns"] == [[10 * MS, 11 * MS], [11 * MS, 12 * MS], [12 * MS, 40 * MS]]
    # out of order and before the first byte: sorted, earlier ones ignored
    assert body_gaps(10 * MS, [41 * MS, 5 * MS, 12 * MS])["stall_ns"] == 29 * MS
    assert body_gaps(None, [11 * MS]) == {} and body_gaps(10 * MS, []) == {}


def _load(rec, rid, url, sent, first_ms, deliveries_s, finished, conn="7"):
    """The events of one request: timestamps in DevTools' monotonic seconds."""
    rec.will_be_sent({"requestId": rid, "request": {"url": url, "method": "GET"}, "type": "Image",
                      "timestamp": sent, "wallTime": 1_700_000_000.0 + sent})
    rec.response({"requestId": rid, "response": {
        "status": 200, "protocol": "h2", "connectionId": conn, "connectionReused": True,
        "timing": {"requestTime": sent, "receiveHeadersEnd": first_ms}}})
    for t in deliveries_s:
        rec.data({"requestId": rid, "dataLength": 1000, "timestamp": t})
    rec.finished({"requestId": rid, "timestamp": finished, "encodedDataLength": len(deliveries_s) * 1000})


def test_records_carry_stalls_and_the_trial_sees_streams_idle_together():
    rec = _Recorder()
    # two images on one h2 connection, both delivering every 5 ms, both silent from 1.030 to 1.090 s
    # (a lost segment held both); first bytes 5 ms after sending at 1.000 s
    for rid in ("a", "b"):
        times = [1.005 + 0.005 * k for k in range(6)] + [1.090 + 0.005 * k for k in range(4)]
        _load(rec, rid, f"https://x.test/{rid}.png", 1.000, 5.0, times, 1.106)
    recs = rec.records({})
    assert len(recs) == 2
    for r in recs:
        assert r["stall_ns"] == pytest.approx(60 * MS, abs=1000)
        assert r["first_byte_ns"] <= r["gaps_ns"][0][0] and r["bytes"] == 10_000
    m = summarize_requests(recs, stall_min_ms=10.0)
    assert m["body_stall_ms_p50"] == pytest.approx(60.0, abs=0.01)
    assert m["all_streams_idle_ms"] == pytest.approx(60.0, abs=0.01)
    # a failed request gets no stall fields
    rec.will_be_sent({"requestId": "c", "request": {"url": "https://x.test/c.png"}, "timestamp": 1.0})
    rec.data({"requestId": "c", "dataLength": 10, "timestamp": 1.01})
    rec.failed({"requestId": "c", "timestamp": 1.02, "errorText": "net::ERR_ABORTED"})
    c = [r for r in rec.records({}) if r["path"] == "/c.png"][0]
    assert c["error"] and "stall_ns" not in c
