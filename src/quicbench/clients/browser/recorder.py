"""The page-load child: one Chromium load driven by Playwright inside the client node.

Run as ``python -c CHILD --args-json '{...}'`` by ``BrowserClient.fetch``; it writes page.json
and page.har into the trial directory and exits. See docs/browser.md.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from quicbench.clients.browser.child import ChildPage, child_main, read_timing, settle, timed_load
from quicbench.clients.browser.driver import chromium_flags
from quicbench.clients.browser.page_metrics import norm_proto, page_metrics


class PlaywrightPage(ChildPage):
    """A Playwright page as the child skeleton drives it."""

    def __init__(self, page) -> None:
        from playwright.sync_api import Error as PlaywrightError
        self.page = page
        self.Error = PlaywrightError

    def goto(self, url: str, timeout_s: float) -> None:
        self.page.goto(url, wait_until="load", timeout=timeout_s * 1000)

    def evaluate(self, js: str) -> Any:
        return self.page.evaluate(js)

    def wait_for_timeout(self, ms: float) -> None:
        self.page.wait_for_timeout(ms)

    def error_line(self, e: BaseException) -> str:
        return str(e).splitlines()[0].removeprefix("Page.goto: ")


MAX_DATA_EVENTS = 100_000     # per request: a 1 GB body in 10 KB chunks
MAX_GAPS = 4096               # as qb-load keeps them
GAP_MIN_NS = 1_000_000


def body_gaps(first_byte_ns: int | None, data_ns: list[int | None]) -> dict[str, Any]:
    """qb-load's stall_ns and gaps_ns from the times Chromium delivered a body's data (DevTools'
    Network.dataReceived): the longest gap between the first byte and a delivery or between two
    deliveries, and every gap of 1 ms or more; {} without a first byte or a delivery. Chromium
    reports data as its network service hands it on, in chunks: short gaps merge and a gap can
    differ from the wire's by a chunk's wait, so, as qb-load's, gaps are judged against half the
    base RTT."""
    at = sorted(t for t in data_ns if t is not None and first_byte_ns is not None and t >= first_byte_ns)
    if first_byte_ns is None or not at:
        return {}
    points = [first_byte_ns, *at]
    gaps = [(a, b) for a, b in zip(points, points[1:]) if b > a]
    long = [[a, b] for a, b in gaps if b - a >= GAP_MIN_NS]
    out: dict[str, Any] = {"stall_ns": max((b - a for a, b in gaps), default=0), "gaps_ns": long[:MAX_GAPS]}
    if len(long) > MAX_GAPS:
        out["gaps_truncated"] = True
    return out


class _Recorder:
    """Collects the DevTools protocol's Network events of one page."""

    def __init__(self) -> None:
        self.reqs: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.ignored: list[str] = []

    def _get(self, rid: str) -> dict[str, Any]:
        if rid not in self.reqs:
            self.reqs[rid] = {"data_bytes": 0}
            self.order.append(rid)
        return self.reqs[rid]

    def will_be_sent(self, p: dict) -> None:
        url = p.get("request", {}).get("url", "")
        if not url.startswith(("http://", "https://")):
            return
        if p.get("type") == "Other" and urlsplit(url).path == "/favicon.ico":
            self.ignored.append(url)     # the browser's own favicon probe, not part of the page
            return
        r = self._get(p["requestId"])
        if "url" in r and p.get("redirectResponse"):
            r["redirected"] = True
        r.update(url=url, method=p["request"].get("method"), type=p.get("type"), sent=p.get("timestamp"),
                 wall=p.get("wallTime"))

    def response(self, p: dict) -> None:
        if p["requestId"] in self.reqs:
            self.reqs[p["requestId"]]["response"] = p.get("response", {})

    def data(self, p: dict) -> None:
        if p["requestId"] in self.reqs:
            r = self.reqs[p["requestId"]]
            r["data_bytes"] += p.get("dataLength", 0)
            if p.get("timestamp") is not None and len(r.setdefault("data_at", [])) < MAX_DATA_EVENTS:
                r["data_at"].append(p["timestamp"])

    def finished(self, p: dict) -> None:
        if p["requestId"] in self.reqs:
            self.reqs[p["requestId"]].update(finished=p.get("timestamp"), encoded=p.get("encodedDataLength"))

    def failed(self, p: dict) -> None:
        if p["requestId"] in self.reqs:
            self.reqs[p["requestId"]].update(
                failed=p.get("timestamp"),
                error=p.get("errorText") or ("canceled" if p.get("canceled") else "failed")
                + (f" ({p['blockedReason']})" if p.get("blockedReason") else ""))

    def pending(self) -> int:
        return sum(1 for r in self.reqs.values() if "url" in r and "finished" not in r and "failed" not in r)

    def records(self, protocol_of: dict[str, str]) -> list[dict[str, Any]]:
        """Per-request records with Unix-ns times (keys as the load client's requests.jsonl)."""
        base = next((r for r in (self.reqs[i] for i in self.order) if r.get("wall") and r.get("sent")), None)
        offset = (base["wall"] - base["sent"]) if base else 0.0    # CDP monotonic seconds -> Unix seconds

        def ns(t: float | None) -> int | None:
            return None if t is None else int(round((t + offset) * 1e9))

        out = []
        for rid in self.order:
            r = self.reqs[rid]
            if "url" not in r:
                continue
            resp = r.get("response") or {}
            timing = resp.get("timing") or {}
            t0 = timing.get("requestTime")

            def at(key: str) -> int | None:
                v = timing.get(key)
                return ns(t0 + v / 1000) if t0 is not None and v is not None and v >= 0 else None

            raw = resp.get("protocol") or protocol_of.get(r["url"])
            proto = norm_proto(raw)
            quic = proto == "h3"
            reused = bool(resp.get("connectionReused")) or at("connectStart") is None
            status = resp.get("status")
            error = r.get("error")
            # a replayed page: the replay server says whether it served a recorded response (whose
            # status is the recorded one, 404 included) or missed the archive
            replay = next((str(v) for k, v in (resp.get("headers") or {}).items() if k.lower() == "x-qb-replay"),
                          None)
            if error is None and status is not None and status >= 400 and replay is None:
                error = f"HTTP {status}"
            if error is None and "finished" not in r:
                error = "unfinished"
            first = at("receiveHeadersStart") or at("receiveHeadersEnd")
            last = ns(r.get("finished"))
            stall = body_gaps(first, [ns(t) for t in r.get("data_at", ())]) if error is None and last else {}
            ssl_start, ssl_end = at("sslStart"), at("sslEnd")
            parts = urlsplit(r["url"])
            out.append({
                "path": parts.path, "url": r["url"], "type": r.get("type"), "method": r.get("method"),
                "origin": f"{parts.scheme}://{parts.netloc}", "replay": replay,
                "start_ns": ns(r.get("sent")),
                "connect_start_ns": None if reused else at("connectStart"),
                # TCP: connect done when TLS starts. QUIC's transport and TLS handshakes are one:
                # connect_done = tls_done = handshake complete, as the load client records them
                "connect_done_ns": None if reused else (at("connectEnd") if quic or ssl_start is None else ssl_start),
                "tls_done_ns": None if reused else (at("connectEnd") if quic or ssl_end is None else ssl_end),
                "send_ns": at("sendStart"),
                "first_byte_ns": first,
                "last_byte_ns": last,
                **stall,
                "bytes": r["data_bytes"] if not error else 0,
                "wire_bytes": r.get("encoded"),
                "status": status, "proto": proto, "raw_protocol": raw, "quic": quic,
                "conn_id": f"{resp['connectionId']}" if resp.get("connectionId") not in (None, 0) else None,
                "conn_reused": bool(resp.get("connectionReused")),
                "remote": f"{resp.get('remoteIPAddress')}:{resp.get('remotePort')}" if resp.get("remoteIPAddress")
                else None,
                "error": error,
            })
        return out


# Registered before the page's own scripts (an init script): Largest Contentful Paint, layout
# shifts and long tasks as the page reports them (PerformanceObserver, buffered).
VITALS_INIT_JS = """(() => {
  if (window.__qbVitals) return;
  const v = window.__qbVitals = {lcp: null, shifts: [], longtasks: [], observers: []};
  const watch = (type, fn) => { try { const o = new PerformanceObserver(l => l.getEntries().forEach(fn));
      o.observe({type, buffered: true}); v.observers.push([o, fn]); } catch (e) {} };
  watch('largest-contentful-paint', e => { v.lcp = e.startTime; });
  watch('layout-shift', e => { if (!e.hadRecentInput) v.shifts.push([e.startTime, e.value]); });
  watch('longtask', e => { v.longtasks.push([e.startTime, e.duration]); });
})();"""

_TIMING_JS = """() => {
  const v = window.__qbVitals || null;
  if (v) v.observers.forEach(([o, fn]) => o.takeRecords().forEach(fn));
  const vitals = v ? {lcp: v.lcp, shifts: v.shifts, longtasks: v.longtasks} : null;
  const nav = performance.getEntriesByType('navigation').map(e => e.toJSON())[0] || null;
  const paint = Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]));
  const res = performance.getEntriesByType('resource').map(e => ({name: e.name,
      nextHopProtocol: e.nextHopProtocol, transferSize: e.transferSize, encodedBodySize: e.encodedBodySize,
      startTime: e.startTime, responseEnd: e.responseEnd}));
  return {nav, paint, res, vitals, timeOrigin: performance.timeOrigin};
}"""


def record_network(ctx, page, rec: "_Recorder"):
    """Feed every DevTools Network event of the page to the recorder, with the cache off."""
    cdp = ctx.new_cdp_session(page)
    for ev, fn in (("Network.requestWillBeSent", rec.will_be_sent), ("Network.responseReceived", rec.response),
                   ("Network.dataReceived", rec.data), ("Network.loadingFinished", rec.finished),
                   ("Network.loadingFailed", rec.failed)):
        cdp.on(ev, fn)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    return cdp


def start_screencast(cdp, frames: list) -> None:
    """Collect the page's screencast frames (Unix seconds, base64 JPEG) for Speed Index: small
    JPEGs (half the viewport), each acknowledged so that the next one comes."""
    from playwright.sync_api import Error as PlaywrightError

    def on_frame(p: dict) -> None:
        frames.append((p.get("metadata", {}).get("timestamp") or time.time(), p["data"]))
        try:
            cdp.send("Page.screencastFrameAck", {"sessionId": p["sessionId"]})
        except PlaywrightError:
            pass
    cdp.on("Page.screencastFrame", on_frame)
    cdp.send("Page.startScreencast", {"format": "jpeg", "quality": 50, "maxWidth": 683, "maxHeight": 384})


# Profile preferences of every load: no speculative preconnect or prefetch (Chromium otherwise
# opens connections to the page's origin before the navigation request, which would hide the
# connect and TLS times and hand HTTP/1.1 spare connections), no password or translate prompts.
PREFS = {"net": {"network_prediction_options": 2},
         "credentials_enable_service": False, "translate": {"enabled": False}}


def _write_prefs(profile: Path) -> None:
    (profile / "Default").mkdir(parents=True, exist_ok=True)
    (profile / "Default" / "Preferences").write_text(json.dumps(PREFS))


def run_load(a: dict[str, Any]) -> dict[str, Any]:
    """Load the page once in a fresh Chromium and return page.json's content (never raises for a load)."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    trial_dir = Path(a["trial_dir"])
    har = trial_dir / "page.har"
    flags = chromium_flags(a["protocol"], a["host"], a["port"], a["address"], a["spki"],
                           [tuple(o) for o in a.get("origins") or ()])
    flags += a.get("extra_flags") or []
    if a.get("netlog"):
        flags += [f"--log-net-log={a['netlog']}", "--net-log-capture-mode=Default"]
    if a.get("keylog"):
        flags += [f"--ssl-key-log-file={a['keylog']}"]
    out: dict[str, Any] = {"url": a["url"], "protocol": a["protocol"], "port": a["port"], "flags": flags,
                           "error": None}
    _write_prefs(Path(a["profile"]))
    rec = _Recorder()
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            a["profile"], executable_path=a["executable"], headless=True, args=flags,
            record_har_path=str(har), record_har_content="omit", service_workers="block",
            viewport={"width": 1366, "height": 768}, timeout=60_000)
        try:
            out["browser_version"] = ctx.browser.version if ctx.browser else None
            pw_page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page = PlaywrightPage(pw_page)
            cdp = record_network(ctx, pw_page, rec)
            ctx.add_init_script(VITALS_INIT_JS)
            settle(page, a, out)
            frames: list = []
            if a.get("screencast"):
                start_screencast(cdp, frames)
            timed_load(page, a, out, rec.pending)
            timing = read_timing(page, _TIMING_JS, out)
            out["navigation"] = timing.get("nav")
            out["paint"] = timing.get("paint") or {}
            out["resources"] = timing.get("res") or []
            protocol_of = {r["name"]: r["nextHopProtocol"] for r in out["resources"] if r.get("nextHopProtocol")}
            if timing.get("nav") and timing["nav"].get("nextHopProtocol"):
                protocol_of[timing["nav"]["name"]] = timing["nav"]["nextHopProtocol"]
            out["requests"] = rec.records(protocol_of)
            out["ignored_requests"] = rec.ignored
            if a.get("screencast"):
                try:
                    cdp.send("Page.stopScreencast")
                except PlaywrightError:
                    pass
            out["vitals"] = timing.get("vitals")
            out["time_origin_ms"] = timing.get("timeOrigin")
            out["metrics"] = page_metrics(out["navigation"], out["paint"], out["requests"], out["vitals"])
        finally:
            ctx.close()                          # writes the HAR
    if a.get("screencast") and out.get("time_origin_ms") and out.get("metrics") is not None:
        # after the browser has gone: decoding the frames costs CPU outside the load
        from quicbench.clients.browser.visual import visual_metrics
        try:
            out["metrics"].update(visual_metrics(frames, out["time_origin_ms"]))
        except Exception as e:  # noqa: BLE001 - a frame that does not decode: no Speed Index, said why
            out["visual_error"] = f"{type(e).__name__}: {e}"
    try:
        out["har_entries"] = len(json.loads(har.read_text())["log"]["entries"])
    except (OSError, ValueError, KeyError) as e:
        out["har_entries"] = None
        out["har_error"] = str(e)
    return out


def main(argv: list[str] | None = None) -> int:
    return child_main(argv, "one page load in Chromium (run by the browser client driver)", run_load, "page.json",
                      ("url", "protocol", "port"), {"requests": [], "metrics": {}}, indent=1)


if __name__ == "__main__":
    sys.exit(main())
