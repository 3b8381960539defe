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


def summarize_requests(reqs: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate the load client's per-request lines into a trial's metrics."""
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
        "request_ms_p50": _median(_ms(r.get("start_ns"), r.get("last_byte_ns")) for r in reqs),
        "transfer_ms_p50": _median(_ms(r.get("first_byte_ns"), r.get("last_byte_ns")) for r in reqs),
    }
