"""`firefox` and `firefox-video`: page loads and video playback in Debian's Firefox ESR (its own
QUIC stack, neqo), driven by puppeteer-core over WebDriver BiDi, inside the client node.

The same shape as the Chromium clients (driver.py, video.py): one child process per trial in the
client namespace, a fresh profile (removed after, also when quicbench is killed), the whole
browser tree in the namespace, the child's CPU measured by the parent. The child
(firefox_child.py) starts ``node firefox/bridge.mjs``, which launches ``/usr/bin/firefox-esr``
through puppeteer-core and streams every BiDi network event back; the child records them, reads
Navigation, Paint and Resource Timing, builds the HAR and writes page.json / video.json. What
page.json holds and how it is judged is the Chromium path's (page_metrics.interpret,
video.interpret_video): the same metrics, files and failures. See docs/browser.md, "Firefox".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from quicbench.clients.base import FetchRequest, Target
from quicbench.clients.browser.driver import BrowserClient
from quicbench.clients.browser.video import VideoClient, interpret_video, player_url
from quicbench.errors import QuicbenchError
from quicbench.paths import REPO_ROOT

FIREFOX = os.environ.get("QUICBENCH_FIREFOX", "/usr/bin/firefox-esr")
FIREFOX_HINT = "apt-get install firefox-esr (Debian's package; quicbench never uses a downloaded browser)"
CERTUTIL_HINT = "apt-get install libnss3-tools (certutil puts the lab's CA into each load's profile)"
BRIDGE_DIR = REPO_ROOT / "firefox"       # package.json + package-lock.json (puppeteer-core) + bridge.mjs
BRIDGE_HINT = "make firefox (npm ci in firefox/: puppeteer-core, pinned)"
CHILD = "import sys; from quicbench.clients.browser.firefox_child import main; sys.exit(main())"
VIDEO_CHILD = "import sys; from quicbench.clients.browser.firefox_child import video_main; sys.exit(video_main())"

# Preferences of every load, besides puppeteer-core's own (which already turn off updates of
# extensions and search, safe browsing lookups, the data-reporting and health-report services,
# first-run pages and speculative connections, and point remote settings at a dummy host).
# What they do: no request leaves for anything but the page, no state from before, the cache
# off, the timers at full precision, no favicon request (Chromium's is dropped by the recorder).
BASE_PREFS: dict[str, Any] = {
    # no DNS over HTTPS, no DNS HTTPS records, no DNS or link prefetching, no predictor
    "network.trr.mode": 5, "network.dns.native_https_query": False, "network.dns.echconfig.enabled": False,
    "network.dns.disablePrefetch": True, "network.prefetch-next": False, "network.predictor.enabled": False,
    "network.http.speculative-parallel-limit": 0, "browser.urlbar.speculativeConnect.enabled": False,
    "browser.places.speculativeConnect.enabled": False,
    # no captive-portal or connectivity probes, no push, no telemetry, no studies, no updates
    "network.captive-portal-service.enabled": False, "network.connectivity-service.enabled": False,
    "dom.push.connection.enabled": False, "dom.push.enabled": False,
    "toolkit.telemetry.enabled": False, "toolkit.telemetry.unified": False, "toolkit.telemetry.server": "",
    "toolkit.telemetry.archive.enabled": False, "datareporting.usage.uploadEnabled": False,
    "app.normandy.enabled": False, "app.shield.optoutstudies.enabled": False,
    "messaging-system.rsexperimentloader.enabled": False, "browser.discovery.enabled": False,
    "app.update.enabled": False, "app.update.auto": False, "browser.region.update.enabled": False,
    "browser.region.network.url": "", "extensions.blocklist.enabled": False, "extensions.getAddons.cache.enabled": False,
    "browser.safebrowsing.provider.mozilla.updateURL": "", "browser.safebrowsing.provider.google4.updateURL": "",
    "browser.safebrowsing.provider.google.updateURL": "", "services.sync.enabled": False,
    "browser.newtabpage.activity-stream.feeds.section.topstories": False,
    "browser.newtabpage.activity-stream.telemetry": False, "browser.ping-centre.telemetry": False,
    # certificates: no OCSP, no CRLite or intermediate preloading from remote settings, no
    # enterprise roots; the lab's CA is in the profile's NSS database (certutil)
    "security.OCSP.enabled": 0, "security.remote_settings.crlite_filters.enabled": False,
    "security.remote_settings.intermediates.enabled": False, "security.enterprise_roots.enabled": False,
    # a cold load: no disk or memory cache, no favicon
    "browser.cache.disk.enable": False, "browser.cache.memory.enable": False, "browser.chrome.site_icons": False,
    # Performance and Resource Timing at full precision (Firefox rounds them to 1 ms by default)
    "privacy.reduceTimerPrecision": False,
    # the video player starts without a gesture
    "media.autoplay.default": 0, "media.autoplay.blocking_policy": 0,
}


def firefox_prefs(protocol: str, host: str, port: int) -> dict[str, Any]:
    """The preferences of one load: the base set and the protocol's.

    h3: Firefox learns HTTP/3 from Alt-Svc; a cold first load has none, so the testing mapping
    `host;h3=:port` tells it the origin speaks h3 before the first request (Chromium:
    --origin-to-force-quic-on). Firefox turns HTTP/3 off when a root it did not ship is
    installed (our lab CA is one) unless disable_when_third_party_roots_found is false.
    h2: HTTP/3 off. h1: HTTP/3 and HTTP/2 off."""
    if protocol not in ("h1", "h2", "h3"):
        raise ValueError(f"unknown protocol {protocol!r}: accepted h1, h2, h3")
    prefs = dict(BASE_PREFS)
    prefs["network.http.http3.enable"] = protocol == "h3"
    prefs["network.http.http2.enabled"] = protocol != "h1"
    if protocol == "h3":
        prefs["network.http.http3.alt-svc-mapping-for-testing"] = f"{host};h3=:{port}"
        prefs["network.http.http3.disable_when_third_party_roots_found"] = False
    return prefs


def _bridge_ready() -> str | None:
    """None when node and the pinned puppeteer-core are installed, else what is missing."""
    if shutil.which("node") is None:
        return "missing 'node' (Node.js runs the Firefox bridge): apt-get install nodejs"
    if not (BRIDGE_DIR / "node_modules" / "puppeteer-core" / "package.json").is_file():
        return f"missing puppeteer-core in {BRIDGE_DIR}: {BRIDGE_HINT}"
    return None


class FirefoxClient(BrowserClient):
    """Page loads (kind = "page") in Firefox ESR: plan `browser = "firefox"`."""
    name = "firefox"
    provisions = ("firefox",)
    protocols = frozenset({"h1", "h2", "h3"})
    connection_policies = ("shared",)
    quic_stack = "neqo"            # Firefox's own QUIC, built into libxul

    @classmethod
    def workload_problem(cls, workload) -> str | None:
        # Firefox resolves names through the child's own /etc/hosts, which names the lab host only
        if getattr(workload, "har", None) is not None:
            return (f"har: replayed page archives load in Chromium only; accepted: browser = \"chromium\" "
                    f"(got browser = \"firefox\" for {workload.har})")
        return None

    @staticmethod
    def executable() -> str:
        if not (os.path.isfile(FIREFOX) and os.access(FIREFOX, os.X_OK)):
            raise QuicbenchError(f"missing browser '{FIREFOX}': {FIREFOX_HINT}")
        if shutil.which("certutil") is None:
            raise QuicbenchError(f"missing 'certutil': {CERTUTIL_HINT}")
        why = _bridge_ready()
        if why:
            raise QuicbenchError(why)
        return FIREFOX

    @classmethod
    def version(cls) -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            v = subprocess.run([cls.executable(), "--version"], capture_output=True, text=True, timeout=20,
                               env=dict(os.environ, MOZ_HEADLESS="1")).stdout.strip()
            out["firefox"] = v.removeprefix("Mozilla Firefox ").strip() or "unknown"
        except Exception as e:  # noqa: BLE001 - a version string must never stop a run
            out["firefox"] = f"unknown ({e})"
        # neqo is vendored into libxul without a version string: the stack is named, not versioned
        out["quic"] = "neqo (built in)"
        out["puppeteer-core"] = puppeteer_version() or "unknown"
        return out

    def child_args(self, target: Target, protocol: str, workload, trial_dir: Path, timeout_s: float,
                   profile: Path) -> dict[str, Any]:
        port = "" if target.port == 443 else f":{target.port}"
        return {
            "url": f"https://{target.hostname}{port}{workload.page_path}", **firefox_target(target, protocol),
            "trial_dir": str(trial_dir), "profile": str(profile), "timeout_s": timeout_s,
            "executable": self.executable(), "settle": os.environ.get("QUICBENCH_BROWSER_SETTLE", "1") != "0",
        }

    child_script = CHILD
    load_label = "firefox load"

    def summary_facts(self, page: dict[str, Any]) -> dict[str, Any]:
        return {"firefox": page.get("browser_version"), "prefs": page.get("prefs")}

    def page_error(self, error: str | None, page: dict[str, Any]) -> str | None:
        return with_disagreements(error, page)


def with_disagreements(error: str | None, out: dict[str, Any]) -> str | None:
    """The trial's error, with the requests whose two protocol readings (BiDi's response
    protocol, Resource Timing's nextHopProtocol) differ: such a request's protocol is not known."""
    bad = out.get("protocol_disagreements") or []
    if not bad:
        return error
    why = f"protocol readings disagree for {len(bad)} request(s) ({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})"
    return f"{error}; {why}" if error else why


def firefox_target(target: Target, protocol: str) -> dict[str, Any]:
    """What the child needs of the target: protocol, origin, server address and the lab's CA."""
    return {"protocol": protocol, "host": target.hostname, "port": target.port, "address": target.address,
            "ca": str(target.tls.ca_cert)}


def puppeteer_version() -> str | None:
    import json
    try:
        return json.loads((BRIDGE_DIR / "node_modules" / "puppeteer-core" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


# FFmpeg's libavcodec, which Firefox loads for H.264 and AAC (it ships VP9 and AV1 decoders)
LIBAVCODEC = re.compile(r"libavcodec\.so\.(\d+)")


def libavcodec() -> str | None:
    """The system libavcodec Firefox would load for H.264, or None."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = sorted(set(LIBAVCODEC.findall(out)), key=int)
    return f"libavcodec.so.{found[-1]}" if found else None


class FirefoxVideoClient(VideoClient):
    """Video playback (kind = "video") in Firefox ESR: plan `browser = "firefox"`."""
    name = "firefox-video"
    provisions = ("firefox", "video")
    quic_stack = "neqo"
    executable = staticmethod(FirefoxClient.executable)

    @classmethod
    def playable_codecs(cls) -> tuple[tuple[str, ...], str]:
        """The ladder codecs (model.video.CODECS) this host's Firefox plays in MSE, and the fix
        for the others: H.264 and AAC need FFmpeg's libavcodec (Firefox ships VP9 and AV1)."""
        return (("h264",) if libavcodec() else ()), ("apt-get install ffmpeg (Firefox decodes H.264 and AAC with "
                                                       "FFmpeg's libavcodec)")

    @classmethod
    def version(cls) -> dict[str, str]:
        from quicbench.content.video import player_versions
        out = {**FirefoxClient.version(), **player_versions()}
        out["libavcodec"] = libavcodec() or "missing"
        return out

    playback_script = VIDEO_CHILD
    playback_label = "firefox video playback"
    playback_files = ("video.json", "requests.jsonl", "video_metrics.json", "p1203.json", "page.har")
    summary_facts = FirefoxClient.summary_facts

    def playback_args(self, req: FetchRequest, profile: Path) -> dict[str, Any]:
        workload = req.workload
        return {"url": player_url(req.target, workload), **firefox_target(req.target, req.protocol),
                "trial_dir": str(req.trial_dir), "profile": str(profile), "timeout_s": req.timeout_s,
                "executable": self.executable(), "codec": workload.codec,
                "play_s": workload.video_spec().duration_s if workload.mode == "vod" else workload.duration_s,
                "vod": workload.mode == "vod", "settle": os.environ.get("QUICBENCH_BROWSER_SETTLE", "1") != "0"}

    def interpret_playback(self, out: dict, protocol: str, vinfo: dict,
                           workload) -> tuple[list[dict], dict[str, Any], str | None]:
        requests, extra, error = interpret_video(out, protocol, vinfo, workload)
        return requests, extra, with_disagreements(error, out)
