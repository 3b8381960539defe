"""`browser`: real page loads in Debian's Chromium, driven by Playwright, inside the client node.

One page load = one child process, run in the lab's client namespace:

    ip netns exec qb-<lab>-client python -m quicbench.clients.browser.driver --args-json '{...}'

The child launches ``/usr/bin/chromium`` (never a downloaded browser) through Playwright with a
fresh profile (cold cache, no connection or QUIC session carried from one load to the next),
loads the page once, listens to the DevTools protocol's Network events for every request,
reads Navigation, Paint and Resource Timing, writes ``page.json`` and Playwright's
``page.har`` into the trial directory and exits. The parent (``BrowserClient.fetch``) runs it
with a hard deadline, measures its CPU with ``os.wait4``, and turns page.json into per-request
records (for ``summarize_requests``), page metrics (``ClientResult.extra``) and an error when
anything went wrong: a failed load, a failed request, a request over another protocol than
the one asked for (Chromium can mark QUIC broken and fall back to TCP), or a body of the wrong
size. See docs/browser.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from quicbench.clients.base import Client, ClientResult, Target, run_measured

CHROMIUM = os.environ.get("QUICBENCH_CHROMIUM", "/usr/bin/chromium")
INSTALL_HINT = "apt-get install chromium (Debian's package; quicbench never uses a downloaded browser)"
PLAYWRIGHT_HINT = "pip install playwright (the Python package only: never 'playwright install')"
# the child's command (python -m would import this module twice: once via quicbench.clients)
CHILD = "import sys; from quicbench.clients.browser.driver import main; sys.exit(main())"

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


def chromium_flags(protocol: str, host: str, port: int, address: str, spki_sha256_b64: str) -> list[str]:
    """The command line flags of one load (besides those Playwright adds)."""
    flags = [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
        "--disable-client-side-phishing-detection", "--metrics-recording-only", "--disable-breakpad",
        "--disable-dev-shm-usage", "--password-store=basic",
        # the lab hostname goes to the server; every other name fails at once (no DNS on the wire)
        f"--host-resolver-rules=MAP {host} {address}, MAP * ~NOTFOUND",
        # trust the lab's server key for this browser instance only (nothing system-wide)
        f"--ignore-certificate-errors-spki-list={spki_sha256_b64}",
    ]
    if protocol == "h3":
        # no Alt-Svc discovery on a cold first load: force QUIC for the lab origin
        flags += ["--enable-quic", f"--origin-to-force-quic-on={host}:{port}"]
    elif protocol == "h2":
        flags += ["--disable-quic"]
    elif protocol == "h1":
        flags += ["--disable-quic", "--disable-http2"]
    else:
        raise ValueError(f"unknown protocol {protocol!r}: accepted h1, h2, h3")
    return flags


class BrowserClient(Client):
    name = "browser"
    protocols = frozenset({"h1", "h2", "h3"})

    @staticmethod
    def executable() -> str:
        from quicbench.errors import QuicbenchError
        if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
            raise QuicbenchError(f"missing browser '{CHROMIUM}': {INSTALL_HINT}")
        try:
            import playwright  # noqa: F401
        except ImportError:
            raise QuicbenchError(f"missing Python package 'playwright': {PLAYWRIGHT_HINT}") from None
        return CHROMIUM

    @classmethod
    def version(cls) -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            exe = cls.executable()
            v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
            out["chromium"] = v
        except Exception as e:  # noqa: BLE001 - a version string must never stop a run
            out["chromium"] = f"unknown ({e})"
        try:
            from importlib.metadata import version
            out["playwright"] = version("playwright")
        except Exception:  # noqa: BLE001
            out["playwright"] = "unknown"
        return out

    # -- one load ---------------------------------------------------------------------
    def child_args(self, target: Target, protocol: str, workload, trial_dir: Path, timeout_s: float,
                   profile: Path) -> dict[str, Any]:
        port = "" if target.port == 443 else f":{target.port}"
        return {
            "url": f"https://{target.hostname}{port}{workload.page_path}",
            "protocol": protocol, "host": target.hostname, "port": target.port, "address": target.address,
            "spki": target.tls.spki_sha256_b64, "trial_dir": str(trial_dir), "profile": str(profile),
            "timeout_s": timeout_s, "executable": self.executable(),
            # QUICBENCH_BROWSER_NETLOG=1 keeps Chromium's net-log of each load (netlog.json), for debugging
            "netlog": str(trial_dir / "netlog.json") if os.environ.get("QUICBENCH_BROWSER_NETLOG") == "1" else None,
            "settle": os.environ.get("QUICBENCH_BROWSER_SETTLE", "1") != "0",
            # QUICBENCH_CHROMIUM_FLAGS adds flags (space-separated) to every load, e.g. for experiments;
            # they are recorded with the others in page.json and summary.json
            "extra_flags": os.environ.get("QUICBENCH_CHROMIUM_FLAGS", "").split(),
        }

    def fetch(self, target: Target, protocol: str, workload, trial_dir: Path, timeout_s: float,
              options=None) -> ClientResult:
        trial_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("page.json", "page.har", "requests.jsonl"):
            (trial_dir / stale).unlink(missing_ok=True)
        profile = Path(tempfile.mkdtemp(prefix="qb-browser-profile-"))
        os.chmod(profile, 0o700)
        try:
            try:
                args = self.child_args(target, protocol, workload, trial_dir, timeout_s, profile)
                if options is not None and options.qlog and protocol == "h3":
                    args["netlog"] = str(trial_dir / "netlog.json")   # Chromium writes no qlog: its net-log
                if options is not None and options.keylog:
                    args["keylog"] = str(trial_dir / "keys.log")
            except Exception as e:  # noqa: BLE001 - missing browser or Playwright: a failed trial
                return ClientResult(requests=[], summary={}, cpu_s=None, wall_s=0.0, returncode=-1,
                                    error=str(e))
            argv = target.lab.cmd("client", [sys.executable, "-c", CHILD, "--args-json", json.dumps(args)])
            # the browser's home is the fresh profile: no NSS database, cache or config is shared
            env = dict(os.environ, HOME=str(profile), XDG_CONFIG_HOME=str(profile / ".config"),
                       XDG_CACHE_HOME=str(profile / ".cache"), XDG_DATA_HOME=str(profile / ".local"))
            with open(trial_dir / "client.log", "wb") as log:
                # hard stop a little after the child's own deadline (launch + load + close)
                returncode, cpu, wall, killed = run_measured(
                    argv, timeout_s + 30, on_deadline=lambda p: _kill_load(p.pid, profile),
                    stdout=log, stderr=log, env=env, start_new_session=True)
            _kill_load(None, profile)          # nothing of this load may outlive it
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        page = _read_json(trial_dir / "page.json")
        if not page:
            tail = (trial_dir / "client.log").read_text(errors="replace").strip().splitlines()[-3:]
            why = "killed after the deadline" if killed else f"exit code {returncode}"
            return ClientResult(requests=[], summary={}, cpu_s=cpu, wall_s=wall, returncode=returncode or -1,
                                error=f"browser load failed ({why})" + (f": {' | '.join(tail)}" if tail else ""))
        expected = expected_resources(target, workload)
        requests, extra, error = interpret(page, protocol, expected)
        with open(trial_dir / "requests.jsonl", "w") as f:
            for r in requests:
                f.write(json.dumps(r) + "\n")
        summary = {k: page[k] for k in ("cpu_user_s", "cpu_sys_s", "cpu_wait_s") if page.get(k) is not None}
        summary.update({"url": page.get("url"), "chromium": page.get("browser_version"),
                        "flags": page.get("flags"), "har_entries": page.get("har_entries")})
        (trial_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        return ClientResult(requests=requests, summary=summary, cpu_s=cpu, wall_s=wall,
                            returncode=returncode, error=error, extra=extra)


def expected_resources(target: Target, workload) -> dict[str, int] | None:
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
        extra["protocol_mismatches"] = mismatches
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


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


def _kill_load(pid: int | None, profile: Path) -> None:
    """Kill the child's process group and any browser process of this load (found by its profile)."""
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    marker = f"--user-data-dir={profile}".encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker in (d / "cmdline").read_bytes():
                os.kill(int(d.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


# ---------------------------------------------------------------------------------------------
# The child: runs inside the client namespace, drives Chromium for one load.
# ---------------------------------------------------------------------------------------------

def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def tree_cpu() -> tuple[float, float, float]:
    """User CPU, system CPU and run-queue wait seconds of this process and every live descendant
    (driver, browser).

    CPU is the scheduler's nanosecond run time (cpu.process_sched_seconds), split into user and
    system in the proportion of the processes' clock-tick counters; wait is the time they were
    runnable but waited for a CPU.
    """
    from quicbench.cpu import process_sched_seconds
    tick = os.sysconf("SC_CLK_TCK")
    user = sys_ = total = wait = 0.0
    for pid in [os.getpid(), *_descendants(os.getpid())]:
        try:
            f = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user += int(f[11]) / tick
        sys_ += int(f[12]) / tick
        run, waited = process_sched_seconds(pid) or (0.0, 0.0)
        total, wait = total + run, wait + waited
    ticks = user + sys_
    if ticks > 0 and total > 0:
        return total * user / ticks, total * sys_ / ticks, wait
    return user, sys_, wait


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
            self.reqs[p["requestId"]]["data_bytes"] += p.get("dataLength", 0)

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
            if error is None and status is not None and status >= 400:
                error = f"HTTP {status}"
            if error is None and "finished" not in r:
                error = "unfinished"
            first = at("receiveHeadersStart") or at("receiveHeadersEnd")
            ssl_start, ssl_end = at("sslStart"), at("sslEnd")
            out.append({
                "path": urlsplit(r["url"]).path, "url": r["url"], "type": r.get("type"),
                "start_ns": ns(r.get("sent")),
                "connect_start_ns": None if reused else at("connectStart"),
                # TCP: connect done when TLS starts. QUIC's transport and TLS handshakes are one:
                # connect_done = tls_done = handshake complete, as the load client records them
                "connect_done_ns": None if reused else (at("connectEnd") if quic or ssl_start is None else ssl_start),
                "tls_done_ns": None if reused else (at("connectEnd") if quic or ssl_end is None else ssl_end),
                "send_ns": at("sendStart"),
                "first_byte_ns": first,
                "last_byte_ns": ns(r.get("finished")),
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


_TIMING_JS = """() => {
  const nav = performance.getEntriesByType('navigation').map(e => e.toJSON())[0] || null;
  const paint = Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]));
  const res = performance.getEntriesByType('resource').map(e => ({name: e.name,
      nextHopProtocol: e.nextHopProtocol, transferSize: e.transferSize, encodedBodySize: e.encodedBodySize,
      startTime: e.startTime, responseEnd: e.responseEnd}));
  return {nav, paint, res, timeOrigin: performance.timeOrigin};
}"""


def _page_metrics(nav: dict | None, paint: dict, records: list[dict]) -> dict[str, Any]:
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


SETTLE_IDLE = 0.05      # the browser is settled when it uses less than 5 % of a core ...
SETTLE_WINDOW = 0.2     # ... over this many seconds
SETTLE_MAX = 5.0        # give up waiting after this long (the load still runs)


def _settle(page) -> float:
    """Wait until the freshly started browser is idle, so that its start-up work (processes,
    profile, component set-up) does not compete with the measured load for the CPU."""
    t0 = time.monotonic()
    last = sum(tree_cpu()[:2])
    while time.monotonic() - t0 < SETTLE_MAX:
        page.wait_for_timeout(SETTLE_WINDOW * 1000)
        now = sum(tree_cpu()[:2])
        if now - last < SETTLE_IDLE * SETTLE_WINDOW:
            break
        last = now
    return round(time.monotonic() - t0, 3)


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
    flags = chromium_flags(a["protocol"], a["host"], a["port"], a["address"], a["spki"])
    flags += a.get("extra_flags") or []
    if a.get("netlog"):
        flags += [f"--log-net-log={a['netlog']}", "--net-log-capture-mode=Default"]
    if a.get("keylog"):
        flags += [f"--ssl-key-log-file={a['keylog']}"]
    out: dict[str, Any] = {"url": a["url"], "protocol": a["protocol"], "port": a["port"], "flags": flags,
                           "error": None}
    _write_prefs(Path(a["profile"]))
    rec = _Recorder()
    timeout_ms = a["timeout_s"] * 1000
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            a["profile"], executable_path=a["executable"], headless=True, args=flags,
            record_har_path=str(har), record_har_content="omit", service_workers="block",
            viewport={"width": 1366, "height": 768}, timeout=60_000)
        try:
            out["browser_version"] = ctx.browser.version if ctx.browser else None
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            cdp = ctx.new_cdp_session(page)
            for ev, fn in (("Network.requestWillBeSent", rec.will_be_sent), ("Network.responseReceived", rec.response),
                           ("Network.dataReceived", rec.data), ("Network.loadingFinished", rec.finished),
                           ("Network.loadingFailed", rec.failed)):
                cdp.on(ev, fn)
            cdp.send("Network.enable")
            cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
            if a.get("settle", True):
                out["settle_s"] = _settle(page)
            cpu0 = tree_cpu()
            t0 = time.time()
            try:
                page.goto(a["url"], wait_until="load", timeout=timeout_ms)
            except PlaywrightError as e:
                out["error"] = str(e).splitlines()[0].removeprefix("Page.goto: ")
            # CDP events can trail the load event by a few ms: wait until every request has ended
            deadline = time.time() + 5
            while rec.pending() and time.time() < deadline:
                page.wait_for_timeout(25)
            out["load_wall_s"] = time.time() - t0
            cpu1 = tree_cpu()
            out["cpu_user_s"], out["cpu_sys_s"] = max(0.0, cpu1[0] - cpu0[0]), max(0.0, cpu1[1] - cpu0[1])
            out["cpu_wait_s"] = max(0.0, cpu1[2] - cpu0[2])
            timing: dict[str, Any] = {}
            if out["error"] is None:
                try:
                    timing = page.evaluate(_TIMING_JS)
                except PlaywrightError as e:
                    out["timing_error"] = str(e).splitlines()[0]
            out["navigation"] = timing.get("nav")
            out["paint"] = timing.get("paint") or {}
            out["resources"] = timing.get("res") or []
            protocol_of = {r["name"]: r["nextHopProtocol"] for r in out["resources"] if r.get("nextHopProtocol")}
            if timing.get("nav") and timing["nav"].get("nextHopProtocol"):
                protocol_of[timing["nav"]["name"]] = timing["nav"]["nextHopProtocol"]
            out["requests"] = rec.records(protocol_of)
            out["ignored_requests"] = rec.ignored
            out["metrics"] = _page_metrics(out["navigation"], out["paint"], out["requests"])
        finally:
            ctx.close()                          # writes the HAR
    try:
        out["har_entries"] = len(json.loads(har.read_text())["log"]["entries"])
    except (OSError, ValueError, KeyError) as e:
        out["har_entries"] = None
        out["har_error"] = str(e)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m quicbench.clients.browser.driver",
                                 description="one page load in Chromium (run by the browser client driver)")
    ap.add_argument("--args-json", required=True)
    ns = ap.parse_args(argv)
    a = json.loads(ns.args_json)
    trial_dir = Path(a["trial_dir"])
    try:
        out = run_load(a)
    except Exception as e:  # noqa: BLE001 - report a crash of the browser or driver in page.json
        out = {"url": a.get("url"), "protocol": a.get("protocol"), "port": a.get("port"),
               "error": f"browser failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
               "requests": [], "metrics": {}}
        print(out["error"], file=sys.stderr)
    tmp = trial_dir / "page.json.tmp"
    tmp.write_text(json.dumps(out, indent=1))
    os.replace(tmp, trial_dir / "page.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
