"""Trial metrics from per-request records (pure functions, unit-tested)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any, Iterable


def _ms(a: int | None, b: int | None) -> float | None:
    if a is None or b is None:
        return None
    return (b - a) / 1e6


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def goodput_mbps(payload_bytes: int, start_ns: int, end_ns: int) -> float | None:
    """Payload bits over the time from the first request to the last byte, in Mbit/s (10^6)."""
    if end_ns <= start_ns:
        return None
    return payload_bytes * 8 / ((end_ns - start_ns) / 1e9) / 1e6


def summarize_requests(reqs: list[dict[str, Any]], stall_min_ms: float = 1.0) -> dict[str, Any]:
    """Aggregate the load client's per-request lines into a trial's metrics (``stall_min_ms``:
    see ``stall_metrics``)."""
    if not reqs:
        return {"requests": 0, "requests_ok": 0, "bytes": 0}
    ok = [r for r in reqs if not r.get("error")]
    starts = [r["start_ns"] for r in reqs if r.get("start_ns") is not None]
    ends = [r["last_byte_ns"] for r in reqs if r.get("last_byte_ns") is not None]
    start, end = (min(starts), max(ends)) if starts and ends else (None, None)
    timed = start is not None and end is not None
    payload = sum(r.get("bytes") or 0 for r in ok)
    first = min(reqs, key=lambda r: r.get("start_ns") if r.get("start_ns") is not None else float("inf"))
    new_conns = [r for r in reqs if not r.get("conn_reused") and r.get("connect_start_ns") is not None]
    protos = Counter(r.get("proto") or "none" for r in reqs)
    return {
        "requests": len(reqs),
        "requests_ok": len(ok),
        "bytes": payload,
        "start_ns": start,
        "end_ns": end,
        "total_time_s": (end - start) / 1e9 if timed else None,
        "goodput_mbps": goodput_mbps(payload, start, end) if timed and len(ok) == len(reqs) else None,
        "connections": len({r.get("conn_id") for r in reqs if r.get("conn_id") is not None}),
        "protocols": ",".join(f"{p}:{n}" for p, n in sorted(protos.items())),
        "ttfb_ms": _ms(first.get("start_ns"), first.get("first_byte_ns")),
        "connect_ms": _median(_ms(r.get("connect_start_ns"), r.get("connect_done_ns")) for r in new_conns),
        "tls_ms": _median(_ms(r.get("connect_done_ns"), r.get("tls_done_ns")) for r in new_conns),
        "handshake_ms": _median(_ms(r.get("connect_start_ns"), r.get("tls_done_ns")) for r in new_conns),
        "request_ms_p50": _median(_ms(r.get("start_ns"), r.get("last_byte_ns")) for r in reqs),
        "transfer_ms_p50": _median(_ms(r.get("first_byte_ns"), r.get("last_byte_ns")) for r in reqs),
        **session_metrics(reqs),
        **stall_metrics(ok, stall_min_ms),
        "completion_spread_ms": completion_spread_ms(ok),
    }


def _pct(flags: list[bool]) -> float | None:
    return 100 * sum(flags) / len(flags) if flags else None


def session_metrics(reqs: list[dict[str, Any]]) -> dict[str, Any]:
    """Session resumption and 0-RTT, from the first request of each connection (qb-load's
    ``resumed`` and ``early_data``; absent unless the workload asked for resumption)."""
    return {"resumed_pct": _pct([bool(r["resumed"]) for r in reqs if r.get("resumed") is not None]),
            "early_data_pct": _pct([bool(r["early_data"]) for r in reqs if r.get("early_data") is not None])}


def stall_metrics(reqs: list[dict[str, Any]], stall_min_ms: float = 1.0) -> dict[str, Any]:
    """Stalls and head-of-line blocking from qb-load's per-request ``stall_ns`` (the longest gap
    between two deliveries of the body) and ``gaps_ns`` (every gap of 1 ms or more).

    ``all_streams_idle_ms``: the time during which every request in flight on a connection (at
    least two, each between its first and last byte) stood in a gap of at least
    ``stall_min_ms``, summed over connections. One lost TCP segment holds every h2 stream
    until it is retransmitted (head-of-line blocking), so all streams stand still together;
    QUIC hands each stream its data as it comes, so a loss holds only the streams it carried;
    a server that serves streams one after another leaves the others waiting but never all of
    them. But a sender that waits for acknowledgements (a small congestion window) idles every
    stream too: the figure is head-of-line blocking *and* sender idleness, comparable between
    protocols under one condition, not a pure HOL measure (that needs the transport's own
    reassembly times: TCP from a capture, QUIC from qlog). The run passes half the condition's
    base RTT as ``stall_min_ms`` (at least 1 ms): a retransmission takes at least a round trip,
    and shorter gaps are packet spacing."""
    stalled = [r for r in reqs if r.get("stall_ns") is not None]
    if not stalled:
        return {"body_stall_ms_p50": None, "body_stall_ms_max": None, "all_streams_idle_ms": None}
    by_conn: dict[Any, list[dict[str, Any]]] = {}
    for r in stalled:
        if r.get("conn_id") is not None and r.get("first_byte_ns") is not None and r.get("last_byte_ns") is not None:
            by_conn.setdefault(r["conn_id"], []).append(r)
    min_ns = stall_min_ms * 1e6
    blocked_ns = 0
    for conn in by_conn.values():
        # +1/-1 for a request entering/leaving flight and a gap opening/closing; at a timestamp
        # every event applies before the next interval is judged
        events: list[tuple[int, int, int]] = []
        for r in conn:
            events += [(r["first_byte_ns"], 1, 0), (r["last_byte_ns"], -1, 0)]
            events += [e for g0, g1 in r.get("gaps_ns") or () if g1 - g0 >= min_ns for e in ((g0, 0, 1), (g1, 0, -1))]
        events.sort()
        active = gapped = 0
        for i, (t, da, dg) in enumerate(events):
            active, gapped = active + da, gapped + dg
            if i + 1 < len(events) and active >= 2 and gapped == active:
                blocked_ns += events[i + 1][0] - t
    return {"body_stall_ms_p50": _median(r["stall_ns"] / 1e6 for r in stalled),
            "body_stall_ms_max": max(r["stall_ns"] for r in stalled) / 1e6,
            "all_streams_idle_ms": blocked_ns / 1e6 if by_conn else None}


def completion_spread_ms(reqs: list[dict[str, Any]]) -> float | None:
    """p90 − p10 of the completion (last-byte) times of a trial's successful requests, ms, from
    the first of them (a page's subresources: its document, which they all wait for, excluded);
    None with fewer than two. When a loss holds every stream of a connection (TCP) the objects
    finish later together; when it holds only the streams it hit (QUIC) the others can finish
    early and the spread widens: a shape, read beside the trial's total time."""
    ends = [r["last_byte_ns"] for r in reqs if not r.get("error") and r.get("last_byte_ns") is not None
            and r.get("type") != "Document"]
    if len(ends) < 2:
        return None
    first = min(ends)
    rel = sorted(e - first for e in ends)
    return (_quantile(rel, 0.9) - _quantile(rel, 0.1)) / 1e6


def _quantile(xs: list[int], q: float) -> float:
    """Linear interpolation between the closest ranks of sorted xs (numpy's default)."""
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])
