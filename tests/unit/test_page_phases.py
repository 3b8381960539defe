"""DNCS-HTTP3's page figures: httpstat's phases from a qb-load request line, and the page's HTML
phases from Navigation Timing (pure computations; docs/browser.md)."""

import pytest

from quicbench.clients.browser.page_metrics import page_metrics
from quicbench.clients.httpstat import phases

MS = 1_000_000


def rec(proto, **t_ms):
    """A qb-load request line with its times given in ms from 0."""
    base = 1_700_000_000_000 * MS
    out = {"i": 1, "path": "/realistic/index.html", "bytes": 84_200, "status": 200, "proto": proto, "conn_id": 1,
           "conn_reused": False}
    out.update({f"{k}_ns": None if v is None else base + int(v * MS) for k, v in t_ms.items()})
    return out


def test_httpstat_phases_over_tcp():
    # request at 0, TCP connected at 1.0, TLS done at 3.0, first byte at 4.5, last byte at 7.0:
    # httpstat's TCP connection 1.0, TLS handshake 2.0, server processing 1.5, content transfer 2.5
    r = rec("h2", start=0.0, connect_start=0.2, connect_done=1.2, tls_done=3.2, first_byte=4.7, last_byte=7.2)
    p = phases(r)
    assert p["httpstat_connect_ms"] == pytest.approx(1.0)
    assert p["httpstat_tls_ms"] == pytest.approx(2.0)
    assert p["httpstat_server_ms"] == pytest.approx(1.5)
    assert p["httpstat_transfer_ms"] == pytest.approx(2.5)
    assert p["httpstat_total_ms"] == pytest.approx(7.2)      # from the request's start, the dial included
    assert p["httpstat_protocol"] == "h2"


def test_httpstat_phases_over_quic_have_no_tls_phase():
    # QUIC: qb-load reports connect done = TLS done (one handshake); all of it is "connect"
    r = rec("h3", start=0.0, connect_start=0.1, connect_done=2.1, tls_done=2.1, first_byte=3.0, last_byte=5.0)
    p = phases(r)
    assert p["httpstat_connect_ms"] == pytest.approx(2.0) and p["httpstat_tls_ms"] is None
    assert p["httpstat_server_ms"] == pytest.approx(0.9) and p["httpstat_transfer_ms"] == pytest.approx(2.0)
    assert p["httpstat_protocol"] == "h3"


def test_httpstat_phases_with_missing_times_are_empty_not_invented():
    p = phases(rec("h1", start=0.0, first_byte=1.0, last_byte=2.0))      # a reused connection: no handshake times
    assert p["httpstat_connect_ms"] is None and p["httpstat_tls_ms"] is None
    assert p["httpstat_server_ms"] is None                               # no "request sent" to measure from
    assert p["httpstat_transfer_ms"] == pytest.approx(1.0) and p["httpstat_total_ms"] == pytest.approx(2.0)


def test_page_html_phases_from_navigation_timing():
    # DevTools' Timing of the page's HTML: initial connection 10, SSL 12 of it, waiting 5.5, content download 7
    nav = {"startTime": 0, "connectStart": 2.0, "secureConnectionStart": 4.0, "connectEnd": 16.0,
           "requestStart": 16.5, "responseStart": 22.0, "responseEnd": 29.0, "domContentLoadedEventStart": 50.0,
           "loadEventStart": 80.0, "nextHopProtocol": "h2"}
    m = page_metrics(nav, {}, [])
    assert m["page_ttfb_ms"] == 5.5 and m["page_html_download_ms"] == 7.0
    assert m["page_connect_ms"] == 2.0 and m["page_tls_ms"] == 12.0 and m["page_handshake_ms"] == 14.0
    assert m["page_load_ms"] == 80.0
