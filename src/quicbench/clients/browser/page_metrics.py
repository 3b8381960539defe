"""What a page load's records mean: protocols, expected resources, page metrics, errors (pure)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

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
    files = {"/" + f["path"]: f["size"] for f in target.content.manifest.get("files", [])}
    if workload.page == "realistic":
        want = {p: s for p, s in files.items() if p.startswith("/realistic/")}
        return want or None
    label = workload.page_path.rsplit("/", 2)[1]
    want = {workload.page_path: files.get(workload.page_path)}
    want.update({f"/{label}/obj-{i}.bin": workload.size_bytes for i in range(1, workload.count + 1)})
    return want


def interpret(page: dict, protocol: str, expected: dict[str, int | None] | None
              ) -> tuple[list[dict], dict[str, Any], str | None]:
    """page.json -> (per-request records, page metrics for the row, error or None)."""
    requests = page.get("requests") or []
    extra: dict[str, Any] = dict(page.get("metrics") or {})
    extra["har_entries"] = page.get("har_entries")
    problems: list[str] = []
    mismatches = [f"{r['path']}: {r.get('proto') or r.get('raw_protocol') or 'none'}" for r in requests
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


def page_metrics(nav: dict | None, paint: dict, records: list[dict]) -> dict[str, Any]:
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
    return m
