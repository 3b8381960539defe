import pytest

from quicbench.run.metrics import goodput_mbps, summarize_requests

MS = 1_000_000


def req(i, start, first, last, nbytes=1000, proto="h2", conn=1, reused=True, error=None, cs=None, cd=None, td=None):
    return {"i": i, "start_ns": start, "first_byte_ns": first, "last_byte_ns": last, "bytes": nbytes,
            "proto": proto, "conn_id": conn, "conn_reused": reused, "error": error,
            "connect_start_ns": cs, "connect_done_ns": cd, "tls_done_ns": td}


def test_goodput():
    assert goodput_mbps(1_000_000, 0, 1_000_000_000) == pytest.approx(8.0)
    assert goodput_mbps(10, 5, 5) is None


def test_summarize_requests():
    reqs = [req(1, 0, 30 * MS, 80 * MS, 500_000, reused=False, cs=0, cd=10 * MS, td=25 * MS),
            req(2, 5 * MS, 40 * MS, 100 * MS, 500_000)]
    m = summarize_requests(reqs)
    assert m["bytes"] == 1_000_000
    assert m["total_time_s"] == pytest.approx(0.1)
    assert m["goodput_mbps"] == pytest.approx(80.0)
    assert m["ttfb_ms"] == pytest.approx(30.0)
    assert m["connect_ms"] == pytest.approx(10.0) and m["tls_ms"] == pytest.approx(15.0)
    assert m["connections"] == 1 and m["protocols"] == "h2:2"


def test_failed_request_means_no_goodput():
    reqs = [req(1, 0, 30 * MS, 80 * MS), req(2, 0, None, None, 0, proto=None, error="timeout")]
    m = summarize_requests(reqs)
    assert m["requests_ok"] == 1 and m["goodput_mbps"] is None
    assert m["protocols"] == "h2:1,none:1"




def _req(conn, first, last, *gaps):
    """A request on connection conn, in flight from first to last (ms), with gaps (ms pairs)."""
    ms = 1_000_000
    return {"conn_id": conn, "first_byte_ns": first * ms, "last_byte_ns": last * ms,
            "stall_ns": max((b - a for a, b in gaps), default=0) * ms, "gaps_ns": [[a * ms, b * ms] for a, b in gaps]}


def test_streams_standing_still_together_are_head_of_line_blocked():
    from quicbench.run.metrics import stall_metrics
    # one connection, three streams; one lost segment holds all three from 30 to 60 ms (h2 over TCP)
    together = [_req(1, 0, 100, (30, 60)), _req(1, 0, 110, (28, 61)), _req(1, 5, 120, (30, 62))]
    m = stall_metrics(together)
    assert m["all_streams_idle_ms"] == 30 and m["body_stall_ms_p50"] == 32 and m["body_stall_ms_max"] == 33
    # QUIC: the same loss holds one stream; the others go on
    alone = [_req(1, 0, 100, (30, 60)), _req(1, 0, 110), _req(1, 5, 120)]
    assert stall_metrics(alone)["all_streams_idle_ms"] == 0
    # a server serving streams one after another: each waits while another gets data, never all
    serial = [_req(1, 0, 40, (0, 0)), _req(1, 0, 80, (0, 40)), _req(1, 0, 120, (0, 80))]
    assert stall_metrics(serial)["all_streams_idle_ms"] == 0
    # gaps shorter than stall_min_ms are packet spacing, not a stall
    assert stall_metrics(together, stall_min_ms=40)["all_streams_idle_ms"] == 0


def test_blocking_needs_two_streams_in_flight_on_one_connection():
    from quicbench.run.metrics import stall_metrics
    # two connections (h1): both standing still is not one holding the other
    assert stall_metrics([_req(1, 0, 100, (30, 60)), _req(2, 0, 100, (30, 60))])["all_streams_idle_ms"] == 0
    # one stream left in flight: its gap is its own
    assert stall_metrics([_req(1, 0, 50), _req(1, 0, 100, (60, 90))])["all_streams_idle_ms"] == 0
    # blocked only while both are in flight: the second ends at 45
    assert stall_metrics([_req(1, 0, 100, (30, 60)), _req(1, 0, 45, (30, 45))])["all_streams_idle_ms"] == 15
    # summed over connections
    two = [_req(1, 0, 100, (30, 60)), _req(1, 0, 100, (30, 60)), _req(2, 0, 100, (10, 20)), _req(2, 0, 100, (10, 20))]
    assert stall_metrics(two)["all_streams_idle_ms"] == 40
    # a client that does not report gaps (a browser, a command client): empty
    assert stall_metrics([{"conn_id": 1}]) == {"body_stall_ms_p50": None, "body_stall_ms_max": None,
                                              "all_streams_idle_ms": None}


def test_session_metrics_count_first_requests_of_connections():
    from quicbench.run.metrics import session_metrics
    reqs = [{"resumed": True, "early_data": True}, {"resumed": True, "early_data": False},
            {"resumed": None, "early_data": None}, {"resumed": False, "early_data": False}]
    m = session_metrics(reqs)
    assert round(m["resumed_pct"], 6) == round(200 / 3, 6) and round(m["early_data_pct"], 6) == round(100 / 3, 6)
    # TCP: resumption reported, early data never (Go's TLS has no client 0-RTT)
    assert session_metrics([{"resumed": True}, {"resumed": True}]) == {"resumed_pct": 100.0, "early_data_pct": None}
    assert session_metrics([{}]) == {"resumed_pct": None, "early_data_pct": None}


def test_completion_spread_is_p90_minus_p10_of_the_objects_last_bytes():
    from quicbench.run.metrics import completion_spread_ms
    # ten objects finishing at 100, 110, ..., 190 ms: p10 = 109, p90 = 181 (linear interpolation)
    reqs = [req(i, 0, 5 * MS, (100 + 10 * i) * MS) for i in range(10)]
    assert completion_spread_ms(reqs) == pytest.approx(72.0)
    assert summarize_requests(reqs)["completion_spread_ms"] == pytest.approx(72.0)
    # a failed request and one without a last byte do not count; neither does the start time
    worse = reqs + [req(10, 0, None, None, 0, error="timeout"), req(11, 50 * MS, 60 * MS, 900 * MS, error="reset")]
    assert completion_spread_ms(worse) == pytest.approx(72.0)
    # every object at once: no spread; one object: nothing to spread
    assert completion_spread_ms([req(i, 0, MS, 50 * MS) for i in range(4)]) == 0.0
    assert completion_spread_ms(reqs[:1]) is None and completion_spread_ms([]) is None


def test_completion_spread_of_a_page_leaves_out_its_document():
    from quicbench.run.metrics import completion_spread_ms
    # the browser's records: the document ends long before the images it links to
    doc = {**req(0, 0, 20 * MS, 30 * MS), "type": "Document"}
    images = [{**req(i, 40 * MS, 60 * MS, (200 + 20 * i) * MS), "type": "Image"} for i in range(1, 6)]
    # images end at 220..300 ms: p10 = 228, p90 = 292
    assert completion_spread_ms([doc, *images]) == pytest.approx(64.0)
