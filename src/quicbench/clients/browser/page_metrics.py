"""What a page load's records mean: protocols, expected resources, page metrics, errors (pure)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from quicbench.model.workload_kinds import MAX_MISSED_SHARE

if TYPE_CHECKING:
    from quicbench.clients.base import Target

# Chromium's names of the application protocols -> quicbench's
_PROTO = {"h3": "h3", "http/1.1": "h1", "http/1.0": "h1", "h2": "h2", "spdy/3.1": "h2", "quic": "h3"}


def norm_proto(p: str | None) -> str | None:
    """'h3', 'h3-29', 'http/1.1', 'h2' ... -> 'h3' / 'h1' / 'h2'; None when unknown."""
    if not p:
        return None
    p = p.lower()
    if p.startswith("h3") or p.startswith("http/3") or p.startswith("quic"):
        return "h3"
    if p in ("http/2", "http/2.0", "h2c"):
        return "h2"
    return _PROTO.get(p)


def expected_resources(target: "Target", workload) -> dict[str, int] | None:
    """URL path -> body size of every resource the page must fetch (None when unknown)."""
    if getattr(workload, "har", None) is not None:
        return None                  # a replayed page: its misses are counted instead (replay_facts)
    files = {"/" + f["path"]: f["size"] for f in target.content.manifest.get("files", [])}
    if workload.page == "realistic":
        want = {p: s for p, s in files.items() if p.startswith("/realistic/")}
        return want or None
    label = workload.page_path.rsplit("/", 2)[1]
    want = {workload.page_path: files.get(workload.page_path)}
    want.update({f"/{label}/obj-{i}.bin": workload.size_bytes for i in range(1, workload.count + 1)})
    return want


def mark_replay_misses(requests: list[dict], recorded: set[tuple[str, str, int, str]]) -> None:
    """Mark the requests of a replayed page that the archive cannot answer: no recorded entry of
    the same method, host, port and path (the replay server answers any query of a recorded path,
    the closest one). The server's own word (X-Qb-Replay: miss) is not always seen: a 404 for a
    cross-origin image is blocked by the browser (ERR_BLOCKED_BY_ORB) before its headers reach
    DevTools. A miss is counted (replay_facts), not a failed request; its error is kept as
    replay_error."""
    for r in requests:
        parts = urlsplit(r.get("url") or "")
        try:
            port = parts.port or 443
        except ValueError:
            port = 443
        key = ((r.get("method") or "GET").upper(), (parts.hostname or "").lower(), port, parts.path or "/")
        missed = r.get("replay") == "miss" or (key not in recorded and ("GET",) + key[1:] not in recorded)
        if missed:
            r["replay"] = "miss"
            if r.get("error"):
                r["replay_error"], r["error"] = r["error"], None


def replay_facts(requests: list[dict], recorded: int) -> tuple[dict[str, Any], str | None]:
    """A replayed page's row columns (recorded requests, misses, origins) and its error when the
    replay missed more than MAX_MISSED_SHARE of the recorded requests (the misses listed)."""
    misses = [r["url"] for r in requests if r.get("replay") == "miss"]
    extra: dict[str, Any] = {"replay_requests": recorded, "replay_missed": len(misses),
                             "replay_misses": misses or None}
    if len(misses) > MAX_MISSED_SHARE * recorded:
        return extra, (f"replay missed {len(misses)} of the archive's {recorded} recorded requests (more than "
                       f"{MAX_MISSED_SHARE:.0%}; not the recorded page): {', '.join(misses[:5])}"
                       + (", ..." if len(misses) > 5 else ""))
    return extra, None


def interpret(page: dict, protocol: str, expected: dict[str, int | None] | None, recorded: int | None = None
              ) -> tuple[list[dict], dict[str, Any], str | None]:
    """page.json -> (per-request records, page metrics for the row, error or None). recorded: the
    entries of a replayed page's archive (its misses are counted and judged)."""
    requests = page.get("requests") or []
    extra: dict[str, Any] = dict(page.get("metrics") or {})
    extra["har_entries"] = page.get("har_entries")
    problems: list[str] = []
    if recorded is not None:
        facts, why = replay_facts(requests, recorded)
        extra.update(facts)
        if why:
            problems.append(why)
    mismatches = [f"{r.get('url') if recorded is not None else r['path']}: "
                  f"{r.get('proto') or r.get('raw_protocol') or 'none'}" for r in requests
                  if r.get("proto") is not None and r["proto"] != protocol]
    if mismatches:
        extra["protocol_mismatches"] = json.dumps(mismatches)
        problems.append(f"protocol mismatch: requested {protocol}, {len(mismatches)} of {len(requests)} request(s) "
                        f"used another protocol ({', '.join(mismatches[:5])}"
                        + (", ..." if len(mismatches) > 5 else "") + ")")
    if page.get("error"):
        hint = ""
        if protocol == "h3":
            hint = (" (h3 was requested: the QUIC handshake with the server failed, is UDP "
                    f"{page.get('port', 443)} blocked or QUIC unsupported?)")
        problems.insert(0, f"page load over {protocol} failed: {page['error']}{hint}")
    # a failed navigation is reported above: list the other failed requests only
    failed = [r for r in requests if r.get("error") and not (page.get("error") and r["error"] in page["error"])]
    if failed:
        problems.append(f"{len(failed)} of {len(requests)} page request(s) failed, first: "
                        f"{failed[0]['path']}: {failed[0]['error']}")
    no_proto = [r for r in requests if r.get("proto") is None and not r.get("error")]
    if no_proto:
        problems.append(f"{len(no_proto)} request(s) without a protocol, first: {no_proto[0]['path']}")
    if expected is not None and not page.get("error"):
        seen = {r["path"] for r in requests}
        missing = sorted(set(expected) - seen)
        if missing:
            problems.append(f"expected {len(expected)} requests, the browser did not fetch {len(missing)} "
                            f"(first: {missing[0]})")
        extra_paths = sorted(seen - set(expected))
        if extra_paths:
            problems.append(f"unexpected request(s): {', '.join(extra_paths[:3])}")
        short = [f"{r['path']}: {r.get('bytes')} of {expected[r['path']]} bytes" for r in requests
                 if not r.get("error") and expected.get(r["path"]) is not None
                 and r.get("bytes") != expected[r["path"]]]
        if short:
            images = [r for r in requests if r.get("type") == "Image" and not r.get("error")
                      and expected.get(r["path"]) is not None and (r.get("bytes") or 0) < expected[r["path"]]]
            why = (" (Chromium stops downloading an <img> it cannot decode: the page's images must be valid "
                   "images, see docs/browser.md)") if images else ""
            problems.append(f"{len(short)} body size mismatch(es), first: {short[0]}{why}")
    error = "; ".join(problems) if problems else None
    return requests, extra, error


CLS_GAP_MS = 1000          # a layout-shift session window ends after a 1 s gap ...
CLS_WINDOW_MS = 5000       # ... or 5 s after it began (web.dev's CLS definition)
LONG_TASK_BLOCKING_MS = 50  # the part of a long task beyond 50 ms blocks input (TBT)


def cumulative_layout_shift(shifts: list[list[float]]) -> float:
    """CLS: the largest sum of layout-shift scores in a session window ([start ms, score] each,
    shifts after recent input already left out)."""
    best = cur = 0.0
    first = last = None
    for t, v in sorted(shifts):
        if first is None or t - last > CLS_GAP_MS or t - first > CLS_WINDOW_MS:
            first, cur = t, 0.0
        cur += v
        last = t
        best = max(best, cur)
    return round(best, 5)


def total_blocking_time(longtasks: list[list[float]], fcp_ms: float | None, end_ms: float | None) -> float | None:
    """TBT: the sum over long tasks between first contentful paint and end_ms (the load window's
    end, where Lighthouse uses time to interactive) of their time beyond 50 ms; a task that
    straddles FCP counts from FCP. None without FCP."""
    if fcp_ms is None:
        return None
    total = 0.0
    for start, dur in longtasks:
        s, e = max(start, fcp_ms), start + dur
        if end_ms is not None:
            e = min(e, end_ms)
        if e - s > LONG_TASK_BLOCKING_MS:
            total += e - s - LONG_TASK_BLOCKING_MS
    return round(total, 3)


def origin_stats(records: list[dict]) -> dict[str, Any]:
    """Requests, wire bytes and connections per origin and per protocol, and the connections
    that served more than one origin (HTTP/2 and HTTP/3 connection coalescing)."""
    by_origin: dict[str, dict[str, Any]] = {}
    by_proto: dict[str, dict[str, Any]] = {}
    conn_origins: dict[str, set[str]] = {}
    for r in records:
        origin = r.get("origin") or ""
        for table, key in ((by_origin, origin), (by_proto, r.get("proto") or "none")):
            t = table.setdefault(key, {"requests": 0, "bytes": 0, "conns": set()})
            t["requests"] += 1
            t["bytes"] += r.get("wire_bytes") or 0
            if r.get("conn_id"):
                t["conns"].add(r["conn_id"])
        if r.get("conn_id"):
            conn_origins.setdefault(r["conn_id"], set()).add(origin)

    def flat(t: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
        return {k: {"requests": v["requests"], "bytes": v["bytes"], "connections": len(v["conns"])}
                for k, v in sorted(t.items())}
    return {"origins": len(by_origin), "page_origin_stats": flat(by_origin),
            "page_protocol_stats": flat(by_proto),
            "page_coalesced_connections": sum(1 for o in conn_origins.values() if len(o) > 1)}


def page_metrics(nav: dict | None, paint: dict, records: list[dict], vitals: dict | None = None) -> dict[str, Any]:
    """The row's page-load metrics (ms from the navigation start, bytes, counts)."""
    m: dict[str, Any] = {}

    def d(a: str, b: str) -> float | None:
        if not nav or nav.get(a) is None or nav.get(b) is None or nav[b] <= 0 or nav[a] < 0:
            return None
        return round(nav[b] - nav[a], 3)

    if nav:
        m["page_ttfb_ms"] = d("requestStart", "responseStart")           # DevTools' "Waiting (TTFB)"
        m["page_response_start_ms"] = d("startTime", "responseStart")    # incl. connect and TLS
        m["dom_content_loaded_ms"] = d("startTime", "domContentLoadedEventStart")
        m["load_event_ms"] = d("startTime", "loadEventStart")
        m["page_load_ms"] = m["load_event_ms"]
        m["page_protocol"] = norm_proto(nav.get("nextHopProtocol"))
        m["page_html_download_ms"] = d("responseStart", "responseEnd")   # DevTools' "Content Download"
        ssl = nav.get("secureConnectionStart") or 0
        if nav.get("connectEnd", 0) > nav.get("connectStart", 0):       # else: no new connection
            m["page_handshake_ms"] = d("connectStart", "connectEnd")
            if m["page_protocol"] == "h3" or ssl <= 0:
                # QUIC: one handshake for transport and TLS (Chromium puts secureConnectionStart
                # at connectStart): all of it is "connect", as the load client records it
                m["page_connect_ms"], m["page_tls_ms"] = m["page_handshake_ms"], None
            else:
                m["page_connect_ms"] = round(ssl - nav["connectStart"], 3)
                m["page_tls_ms"] = round(nav["connectEnd"] - ssl, 3)
    m["first_contentful_paint_ms"] = round(paint["first-contentful-paint"], 3) \
        if paint.get("first-contentful-paint") is not None else None
    m["page_weight_bytes"] = sum(r.get("wire_bytes") or 0 for r in records)
    m["page_body_bytes"] = sum(r.get("bytes") or 0 for r in records)
    m["page_requests"] = len(records)
    m["page_connections"] = len({r["conn_id"] for r in records if r.get("conn_id")})
    m.update(origin_stats(records))
    if vitals:
        fcp = m["first_contentful_paint_ms"]
        m["lcp_ms"] = round(vitals["lcp"], 3) if vitals.get("lcp") is not None else None
        if vitals.get("shifts") is not None:           # a browser without the entry type has no CLS
            m["cls"] = cumulative_layout_shift(vitals["shifts"])
        if vitals.get("longtasks") is not None:
            end = (nav or {}).get("loadEventEnd") or None
            m["total_blocking_time_ms"] = total_blocking_time(vitals["longtasks"], fcp, end)
    return m
