import pytest

from quicbench.cpu import cpu_bound
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


def test_cpu_bound_threshold():
    assert cpu_bound(0.95, 1.0) and not cpu_bound(0.5, 1.0) and not cpu_bound(None, 1.0)


def test_cpu_bound_counts_run_queue_wait_unless_the_link_set_the_pace():
    # ran 55 % of a core and waited 50 % for one: it wanted more than a core
    assert cpu_bound(0.55, 1.0, 0.5) and cpu_bound(0.55, 1.0, 0.5, goodput_mbps=450, link_mbit=1000)
    # ... but the transfer reached the link's rate: the CPU kept up
    assert not cpu_bound(0.55, 1.0, 0.5, goodput_mbps=88, link_mbit=100)
    # running 90 % of a core is CPU-bound whatever the goodput
    assert cpu_bound(0.92, 1.0, 0.0, goodput_mbps=95, link_mbit=100)
    assert not cpu_bound(0.3, 1.0, 0.2) and not cpu_bound(0.5, 0.0, 0.5)
