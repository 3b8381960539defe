"""The Firefox child: one page load or playback in Firefox ESR inside the client node.

Run as ``python -c CHILD --args-json '{...}'`` by firefox.py's clients, in the lab's client
namespace. It

* makes the profile: an NSS database with the lab's CA (certutil), nothing else from before;
* gives itself a mount namespace where /etc/hosts maps the lab hostname to the server and
  /etc/resolv.conf names no reachable server, so every other name fails at once (Chromium:
  --host-resolver-rules "MAP * ~NOTFOUND");
* starts ``node firefox/bridge.mjs`` (puppeteer-core), which launches Firefox with the load's
  preferences and streams every WebDriver BiDi network event back;
* waits until the new browser is idle, loads the page (or plays the video), reads Navigation,
  Paint and Resource Timing, and writes page.json / video.json with per-request records in the
  Chromium child's format (recorder.py), and page.har built from the BiDi events.

Every process of the load (node, Firefox and its content, socket, decoder processes) descends
from this child and carries TMPDIR=<profile>/tmp: the parent's kill finds them by it
(driver.browser_pids), also after a SIGKILL of quicbench (child._die_with_parent).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from quicbench.clients.browser.child import (ChildPage, child_main, plays_h264, read_timing, settle, timed_load,
                                             timed_playback)
from quicbench.clients.browser.firefox import BRIDGE_DIR, firefox_prefs
from quicbench.clients.browser.page_metrics import norm_proto, page_metrics

VIEWPORT = {"width": 1366, "height": 768}
LAUNCH_TIMEOUT_S = 60.0
# Resource Timing keeps 250 entries unless told otherwise: a video makes more requests
RT_BUFFER_JS = "performance.setResourceTimingBufferSize(100000)"

_TIMING_JS = """() => {
  const nav = performance.getEntriesByType('navigation').map(e => e.toJSON())[0] || null;
  const paint = Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]));
  const res = performance.getEntriesByType('resource').map(e => ({name: e.name,
      nextHopProtocol: e.nextHopProtocol, transferSize: e.transferSize, encodedBodySize: e.encodedBodySize,
      decodedBodySize: e.decodedBodySize, responseStatus: e.responseStatus, startTime: e.startTime,
      responseEnd: e.responseEnd}));
  // Largest Contentful Paint, Firefox's one web vital (it has no layout-shift or longtask entries):
  // a buffered observer's records, taken at once
  let lcp = null;
  try {
    const o = new PerformanceObserver(() => {});
    o.observe({type: 'largest-contentful-paint', buffered: true});
    const r = o.takeRecords();
    o.disconnect();
    if (r.length) lcp = r[r.length - 1].startTime;
  } catch (e) {}
  return {nav, paint, res, vitals: {lcp}, timeOrigin: performance.timeOrigin};
}"""

# BiDi's request destination -> the resource type Chromium's DevTools would name
_TYPES = {"document": "Document", "image": "Image", "script": "Script", "style": "Stylesheet", "font": "Font",
          "video": "Media", "audio": "Media", "track": "Media", "": "Fetch"}
_HAR_VERSION = {"h3": "HTTP/3", "h2": "HTTP/2", "h1": "HTTP/1.1"}


class BridgeError(Exception):
    """The bridge or the browser said no (a failed navigation, a script error, a timeout)."""


class Bridge:
    """``node firefox/bridge.mjs``: a command a line on its stdin; replies and BiDi network events
    a line on its stdout (read by a thread that hands events to on_event as they come)."""

    def __init__(self, on_event, env: dict[str, str]) -> None:
        self.on_event = on_event
        self.proc = subprocess.Popen(["node", str(BRIDGE_DIR / "bridge.mjs")], cwd=BRIDGE_DIR, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._replies: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._ended = False
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                print(f"bridge: {line.rstrip()}", file=sys.stderr)
                continue
            if "event" in msg:
                self.on_event(msg["event"], msg.get("params") or {})
                continue
            with self._cond:
                self._replies[msg.get("id")] = msg
                self._cond.notify_all()
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def call(self, op: str, timeout_s: float, **args: Any) -> Any:
        with self._cond:
            self._next += 1
            rid = self._next
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"id": rid, "op": op, **args}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise BridgeError(f"the Firefox bridge has exited (code {self.proc.poll()})") from None
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while rid not in self._replies:
                left = deadline - time.monotonic()
                if self._ended:
                    raise BridgeError(f"the Firefox bridge has exited (code {self.proc.poll()}) during {op}")
                if left <= 0:
                    raise BridgeError(f"no answer from the Firefox bridge to {op} within {timeout_s:.0f} s")
                self._cond.wait(left)
            msg = self._replies.pop(rid)
        if not msg.get("ok"):
            raise BridgeError(msg.get("error") or f"{op} failed")
        return msg.get("value")

    def close(self) -> None:
        try:
            self.call("close", 30)
        except BridgeError as e:
            print(f"closing Firefox: {e}", file=sys.stderr)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class BidiPage(ChildPage):
    """The page as the child skeleton (child.py) drives it, through the bridge."""
    Error = BridgeError

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    def evaluate(self, js: str, timeout_s: float = 30.0) -> Any:
        text = self.bridge.call("evaluate", timeout_s, js=f"JSON.stringify(({js})())")
        return None if text is None else json.loads(text)

    def wait_for_timeout(self, ms: float) -> None:
        time.sleep(ms / 1000)

    def goto(self, url: str, timeout_s: float) -> None:
        self.bridge.call("goto", timeout_s + 5, url=url, timeout_ms=int(timeout_s * 1000))


class BidiRecorder:
    """Collects WebDriver BiDi network events of one load (the reader thread feeds it)."""

    def __init__(self) -> None:
        self.reqs: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.ignored: list[str] = []
        self.lock = threading.Lock()

    def on_event(self, name: str, p: dict) -> None:
        req = p.get("request") or {}
        rid, url = req.get("request"), req.get("url", "")
        if not rid or not url.startswith(("http://", "https://")):
            return
        with self.lock:
            if name == "network.beforeRequestSent":
                if urlsplit(url).path == "/favicon.ico":
                    self.ignored.append(url)     # the browser's own favicon probe, not part of the page
                    return
                if rid not in self.reqs:
                    self.reqs[rid] = {}
                    self.order.append(rid)
                r = self.reqs[rid]
                if "url" in r and p.get("redirectCount", 0) > r.get("redirect_count", 0):
                    r["redirected"] = True
                r.update(url=url, method=req.get("method"), headers=req.get("headers") or [],
                         destination=req.get("destination"), initiator=req.get("initiatorType"),
                         sent=p.get("timestamp"), redirect_count=p.get("redirectCount", 0),
                         navigation=p.get("navigation"))
                return
            r = self.reqs.get(rid)
            if r is None:
                return
            r["timings"] = req.get("timings") or r.get("timings")
            r["request_headers_size"] = req.get("headersSize")
            if name == "network.responseStarted":
                r["response"] = p.get("response") or {}
            elif name == "network.responseCompleted":
                resp = p.get("response") or {}
                if resp.get("fromCache"):
                    # Firefox's image cache answered a second use of an image: no request went out
                    self.order.remove(rid)
                    del self.reqs[rid]
                    self.ignored.append(f"{url} (from cache)")
                    return
                r.update(response=resp, finished=p.get("timestamp"))
            elif name == "network.fetchError":
                r.update(error=p.get("errorText") or "failed", failed=p.get("timestamp"))

    def pending(self) -> int:
        with self.lock:
            return sum(1 for r in self.reqs.values() if "url" in r and "finished" not in r and "failed" not in r)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(json.dumps(self.reqs[i])) for i in self.order if "url" in self.reqs[i]]


def _ns(timings: dict, key: str) -> int | None:
    """A BiDi fetch timing (ms; Firefox gives Unix ms with timeOrigin 0) as Unix ns; None when 0."""
    v = timings.get(key)
    if not v or v <= 0:
        return None
    return int(round(((timings.get("timeOrigin") or 0) + v) * 1e6))


def records(reqs: list[dict[str, Any]], resources: list[dict]) -> list[dict[str, Any]]:
    """Per-request records in the Chromium child's format (requests.jsonl), from the BiDi events,
    with the Resource Timing entry of the same URL (the k-th request of a URL gets its k-th
    entry): protocol and times from BiDi, the body size and a second protocol reading from
    Resource Timing. Firefox names no connection: a request that opened one gets a new conn_id,
    a request on an open connection none."""
    by_url: dict[str, list[dict]] = {}
    for e in sorted(resources, key=lambda e: e.get("startTime") or 0):
        by_url.setdefault(e["name"], []).append(e)
    out, conns = [], 0
    for r in reqs:
        t = r.get("timings") or {}
        resp = r.get("response") or {}
        rt = (by_url.get(r["url"]) or [None]).pop(0) if by_url.get(r["url"]) else None
        raw = resp.get("protocol") or None
        rt_raw = (rt or {}).get("nextHopProtocol") or None
        proto = norm_proto(raw) or norm_proto(rt_raw)
        quic = proto == "h3"
        status = resp.get("status") if resp else None
        error = r.get("error")
        if error is None and status is not None and status >= 400:
            error = f"HTTP {status}"
        if error is None and "finished" not in r:
            error = "unfinished"
        new_conn = _ns(t, "connectEnd") is not None
        if new_conn:
            conns += 1
        tls_start, tls_end = _ns(t, "tlsStart"), _ns(t, "tlsEnd")
        # Firefox stamps an HTTP/1.1 request's responseStart just after its requestStart when the
        # request opened its TLS connection (a capture shows the first byte a round trip later):
        # that first byte is unknown (docs/browser.md, Firefox, "Known artefacts")
        first_byte_unknown = new_conn and proto == "h1"
        body = rt.get("decodedBodySize") if rt and rt.get("decodedBodySize") is not None else resp.get("bodySize")
        out.append({
            "path": urlsplit(r["url"]).path, "url": r["url"],
            "type": _TYPES.get(r.get("destination") or "", (r.get("destination") or "Other").title()),
            "start_ns": _ns(t, "requestTime") or (int(r["sent"] * 1e6) if r.get("sent") else None),
            "connect_start_ns": _ns(t, "connectStart") if new_conn else None,
            # TCP: connect done when TLS starts. QUIC's transport and TLS handshakes are one:
            # connect_done = tls_done = handshake complete, as the Chromium child records them
            "connect_done_ns": (_ns(t, "connectEnd") if quic or tls_start is None else tls_start) if new_conn else None,
            "tls_done_ns": (_ns(t, "connectEnd") if quic or tls_end is None else tls_end) if new_conn else None,
            "send_ns": _ns(t, "requestStart"),
            "first_byte_ns": None if first_byte_unknown else _ns(t, "responseStart"),
            "last_byte_ns": _ns(t, "responseEnd") if "finished" in r else None,
            "bytes": body if not error and body is not None else 0,
            "wire_bytes": resp.get("bytesReceived"),
            "status": status, "proto": proto, "raw_protocol": raw, "rt_protocol": rt_raw, "quic": quic,
            "conn_id": f"c{conns}" if new_conn else None,
            "conn_reused": not new_conn,
            "remote": None,
            "error": error,
            **({"first_byte_unknown": True} if first_byte_unknown else {}),
        })
    return out


def firefox_page_metrics(nav: dict | None, paint: dict, recs: list[dict], vitals: dict | None = None
                         ) -> dict[str, Any]:
    """page_metrics, without the figures Firefox's Navigation Timing gets wrong: over HTTP/1.1
    the page's responseStart and responseEnd sit at its requestStart (the request opens its
    connection; see records), so neither TTFB nor the response start is known. Of the web
    vitals, Firefox reports Largest Contentful Paint only."""
    m = page_metrics(nav, paint, recs, vitals)
    if m.get("page_protocol") == "h1":
        m["page_ttfb_ms"] = m["page_response_start_ms"] = None
    return m


def protocol_disagreements(requests: list[dict]) -> list[str]:
    """Requests whose BiDi protocol and Resource Timing nextHopProtocol name different protocols."""
    return [f"{r['path']}: BiDi {r.get('raw_protocol')}, Resource Timing {r.get('rt_protocol')}" for r in requests
            if r.get("raw_protocol") and r.get("rt_protocol")
            and norm_proto(r["raw_protocol"]) != norm_proto(r["rt_protocol"])]


def _headers(h: list[dict]) -> list[dict[str, str]]:
    return [{"name": x.get("name", ""), "value": (x.get("value") or {}).get("value", "")} for x in h or []]


def _iso(ms: float | None) -> str:
    return datetime.fromtimestamp((ms or 0) / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def build_har(reqs: list[dict[str, Any]], recs: list[dict[str, Any]], url: str, browser: str | None,
              nav: dict | None, time_origin_ms: float | None) -> dict[str, Any]:
    """A HAR 1.2 log of the load from the BiDi events (bodies omitted, as the Chromium HAR):
    one page, one entry per request with its headers, sizes and the timings Firefox reported."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        qb = version("quicbench")
    except PackageNotFoundError:
        qb = "unknown"
    entries = []
    for r, rec in zip(reqs, recs):
        t = r.get("timings") or {}
        resp = r.get("response") or {}

        def span(a: str, b: str) -> float:
            x, y = t.get(a) or 0, t.get(b) or 0
            return round(y - x, 3) if x > 0 and y >= x else -1

        start = t.get("requestTime") or r.get("sent")
        first = next((t[k] for k in ("dnsStart", "connectStart", "requestStart") if (t.get(k) or 0) > 0), None)
        timings = {"blocked": round(first - start, 3) if first and start else -1,
                   "dns": span("dnsStart", "dnsEnd"), "connect": span("connectStart", "connectEnd"),
                   "ssl": span("tlsStart", "tlsEnd"), "send": 0,
                   "wait": span("requestStart", "responseStart"), "receive": span("responseStart", "responseEnd")}
        total = sum(v for k, v in timings.items() if k != "ssl" and v > 0)
        version_text = _HAR_VERSION.get(rec.get("proto") or "", resp.get("protocol") or "")
        entries.append({
            "pageref": "page_1", "startedDateTime": _iso(start), "time": round(total, 3),
            "request": {"method": r.get("method") or "GET", "url": r["url"], "httpVersion": version_text,
                        "cookies": [], "headers": _headers(r.get("headers")), "queryString": [],
                        "headersSize": r.get("request_headers_size") or -1, "bodySize": 0},
            "response": {"status": resp.get("status") or 0, "statusText": resp.get("statusText") or "",
                         "httpVersion": version_text, "cookies": [], "headers": _headers(resp.get("headers")),
                         "content": {"size": rec.get("bytes") or 0, "mimeType": resp.get("mimeType") or ""},
                         "redirectURL": "", "headersSize": resp.get("headersSize") or -1,
                         "bodySize": resp.get("bodySize") if resp.get("bodySize") is not None else -1},
            "cache": {}, "timings": timings,
            **({"_error": rec["error"]} if rec.get("error") else {}),
        })
    first_start = min(((r.get("timings") or {}).get("requestTime") or r.get("sent") or 0 for r in reqs), default=0)
    page_timings = {"onContentLoad": (nav or {}).get("domContentLoadedEventStart", -1),
                    "onLoad": (nav or {}).get("loadEventStart", -1)}
    return {"log": {"version": "1.2", "creator": {"name": "quicbench", "version": qb},
                    "browser": {"name": "Firefox", "version": browser or ""},
                    "pages": [{"startedDateTime": _iso(time_origin_ms or first_start), "id": "page_1",
                               "title": url, "pageTimings": page_timings}],
                    "entries": entries}}


# ---------------------------------------------------------------------------------------------
# The profile and the names
# ---------------------------------------------------------------------------------------------

def make_profile(profile: Path, ca: str) -> Path:
    """Firefox's profile directory inside the load's profile, with an NSS database that trusts
    the lab's CA for servers (nothing is installed system-wide)."""
    ff = profile / "firefox"
    ff.mkdir(exist_ok=True)
    for argv in (["certutil", "-N", "--empty-password", "-d", f"sql:{ff}"],
                 ["certutil", "-A", "-n", "quicbench lab CA", "-t", "C,,", "-i", ca, "-d", f"sql:{ff}"]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {(done.stderr or done.stdout).strip()}")
    return ff


CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 0x4000, 1 << 18


def isolate_names(profile: Path, host: str, address: str) -> None:
    """In a mount namespace of this process's own (its children inherit it, nothing else sees
    it): /etc/hosts names only localhost and the lab host, /etc/resolv.conf a resolver on the
    client node's loopback, where none listens, so every other name fails at once and no DNS
    query leaves the node. Must run before any thread starts (unshare)."""
    hosts, resolv = profile / "hosts", profile / "resolv.conf"
    hosts.write_text(f"127.0.0.1 localhost\n::1 localhost\n{address} {host}\n")
    resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    for src, dst in ((hosts, "/etc/hosts"), (resolv, "/etc/resolv.conf")):
        if os.path.exists(dst):
            check(libc.mount(str(src).encode(), dst.encode(), None, MS_BIND, None), f"mount --bind {dst}")


def start(a: dict[str, Any], rec: BidiRecorder, out: dict[str, Any], preload: list[str]) -> Bridge:
    """Profile, names, bridge and Firefox for one trial; out gets the preferences and version."""
    profile = Path(a["profile"])
    ff = make_profile(profile, a["ca"])
    isolate_names(profile, a["host"], a["address"])
    prefs = firefox_prefs(a["protocol"], a["host"], a["port"])
    # no crash reporter (nor its pings): a crash is the trial's error
    env = dict(os.environ, MOZ_CRASHREPORTER_DISABLE="1")
    if a.get("keylog"):
        env["SSLKEYLOGFILE"] = a["keylog"]
    if a.get("netlog") and a["protocol"] == "h3":     # qlog = true: neqo's qlog, into TMPDIR
        prefs["network.http.http3.enable_qlog"] = True
    out["prefs"] = prefs
    bridge = Bridge(rec.on_event, env)
    try:
        info = bridge.call("launch", LAUNCH_TIMEOUT_S + 10, executable=a["executable"], profile=str(ff), prefs=prefs,
                           timeout_ms=int(LAUNCH_TIMEOUT_S * 1000), viewport=VIEWPORT, preload=preload)
    except BaseException:
        bridge.close()
        raise
    out["browser_version"] = info.get("version")
    out["user_agent"] = info.get("user_agent")
    out["argv"] = info.get("argv")
    return bridge


def keep_qlogs(a: dict[str, Any]) -> None:
    """Move the qlog files Firefox wrote into TMPDIR (qlog = true) to <trial>/qlog/."""
    if not (a.get("netlog") and a["protocol"] == "h3"):
        return
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    found = [p for p in tmp.rglob("*.qlog*") if p.is_file()] if tmp.is_dir() else []
    if found:
        dest = Path(a["trial_dir"]) / "qlog"
        dest.mkdir(exist_ok=True)
        for p in found:
            shutil.move(str(p), dest / p.name)


def run_load(a: dict[str, Any]) -> dict[str, Any]:
    """Load the page once in a fresh Firefox and return page.json's content."""
    trial_dir = Path(a["trial_dir"])
    out: dict[str, Any] = {"url": a["url"], "protocol": a["protocol"], "port": a["port"], "error": None,
                           "browser": "firefox"}
    rec = BidiRecorder()
    bridge = start(a, rec, out, [])
    try:
        page = BidiPage(bridge)
        settle(page, a, out)
        timed_load(page, a, out, rec.pending)
        timing = read_timing(page, _TIMING_JS, out)
        out["navigation"] = timing.get("nav")
        out["paint"] = timing.get("paint") or {}
        out["resources"] = timing.get("res") or []
        reqs = rec.snapshot()
        if os.environ.get("QUICBENCH_FIREFOX_EVENTS") == "1":    # the BiDi requests as received, for debugging
            out["bidi_requests"] = reqs
        # the navigation's own entry joins the resources': its protocol is read twice too
        nav_entry = [out["navigation"]] if out["navigation"] and out["navigation"].get("name") else []
        out["requests"] = records(reqs, out["resources"] + nav_entry)
        out["protocol_disagreements"] = protocol_disagreements(out["requests"])
        out["ignored_requests"] = rec.ignored
        out["metrics"] = firefox_page_metrics(out["navigation"], out["paint"], out["requests"], timing.get("vitals"))
        har = build_har(reqs, out["requests"], a["url"], out.get("browser_version"), out["navigation"],
                        timing.get("timeOrigin"))
        (trial_dir / "page.har").write_text(json.dumps(har, indent=1))
        out["har_entries"] = len(har["log"]["entries"])
    finally:
        bridge.close()
        keep_qlogs(a)
    return out


def run_video(a: dict[str, Any]) -> dict[str, Any]:
    """Play the video in a fresh Firefox (child.py's play loop) and return video.json's content."""
    trial_dir = Path(a["trial_dir"])
    out: dict[str, Any] = {"url": a["url"], "protocol": a["protocol"], "host": a["host"], "port": a["port"],
                           "error": None, "browser": "firefox"}
    rec = BidiRecorder()
    bridge = start(a, rec, out, [RT_BUFFER_JS])
    try:
        page = BidiPage(bridge)
        if not plays_h264(page, a, out, "Firefox",
                          "Firefox decodes H.264 with FFmpeg's libavcodec, apt-get install ffmpeg"):
            return out
        settle(page, a, out)
        timed_playback(page, a, out)
        resources: list[dict] = []
        try:
            out["qblog"] = page.evaluate("() => window.qbLog || null")
            resources = (page.evaluate(_TIMING_JS) or {}).get("res") or []
        except page.Error as e:
            out["qblog_error"] = page.error_line(e)
        reqs = rec.snapshot()
        out["requests"] = records(reqs, resources)
        out["protocol_disagreements"] = protocol_disagreements(out["requests"])
        har = build_har(reqs, out["requests"], a["url"], out.get("browser_version"), None, None)
        (trial_dir / "page.har").write_text(json.dumps(har))
    finally:
        bridge.close()
        keep_qlogs(a)
    return out


def main(argv: list[str] | None = None) -> int:
    return child_main(argv, "one page load in Firefox (run by the firefox client driver)", run_load, "page.json",
                      ("url", "protocol", "port"), {"requests": [], "metrics": {}}, indent=1)


def video_main(argv: list[str] | None = None) -> int:
    return child_main(argv, "one video playback in Firefox (run by the firefox-video client)", run_video,
                      "video.json", ("url", "protocol", "host"), {"requests": []})


if __name__ == "__main__":
    sys.exit(main())
