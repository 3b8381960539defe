"""Real page loads and a video in Debian's Firefox ESR (the `firefox` and `firefox-video`
clients, puppeteer-core over WebDriver BiDi) through a lab, every request's protocol verified.

The gallery is Go-Quick's index10.html of 10 x 100KB, each object a decodable PNG (as in
test_browser.py). See docs/browser.md, "Firefox".
"""

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import fetch, root_only
from test_browser import GALLERY, PAGE_PATHS, png_gallery
from quicbench.clients.browser.firefox import FirefoxClient, FirefoxVideoClient
from quicbench.clients.browser.page_metrics import norm_proto
from quicbench.registry import driver_stack

needs_firefox = pytest.mark.skipif(not FirefoxClient.available()[0],
                                   reason=f"{FirefoxClient.available()[1]} (make setup installs it)")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from quicbench.clients import Target
    from quicbench.lab import LabSpec, make_lab
    from quicbench.servers import CaddyServer
    from quicbench.tls import make_tls
    wd = tmp_path_factory.mktemp("firefox")
    content = png_gallery(wd, 100_000, 10)
    with make_lab(LabSpec(name="t-firefox")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, wd / "caddy", content, tls) as server:
            yield lab, server, Target(lab=lab, hostname=tls.hostname, address=lab.address("server"),
                                      port=443, tls=tls, content=content), wd


def _load_processes(profile: str = "/tmp/qb-browser-profile-") -> set[int]:
    """Processes of a browser load (its TMPDIR is in its profile): of the one whose profile is
    given, else of any (other worktrees' tests run browsers at the same time)."""
    out = set()
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and f"TMPDIR={profile}".encode() in (d / "environ").read_bytes():
                out.add(int(d.name))
        except OSError:
            continue
    return out


def _profile_of(trial: Path) -> str:
    """The load's profile, from Firefox's command line in page.json."""
    argv = json.loads((trial / "page.json").read_text())["argv"]
    return str(Path(argv[argv.index("--profile") + 1]).parent)


@pytest.mark.parametrize("proto", ["h1", "h2", "h3"])
@pytest.mark.integration
@root_only
@needs_firefox
def test_gallery_page_over_each_protocol(served, proto):
    lab, server, target, wd = served
    res = fetch(FirefoxClient(), target, proto, GALLERY, wd / proto, timeout_s=30)
    assert res.error is None, res.error
    # Firefox's one web vital: LCP (no layout-shift or longtask entries: no CLS, no TBT)
    assert res.extra["lcp_ms"] >= res.extra["first_contentful_paint_ms"] > 0
    assert "cls" not in res.extra and "total_blocking_time_ms" not in res.extra
    reqs = res.requests
    assert {r["path"] for r in reqs} == PAGE_PATHS and len(reqs) == 11
    # every request, page included, over the protocol asked, read twice: BiDi and Resource Timing
    assert {r["proto"] for r in reqs} == {proto}
    assert {norm_proto(r["rt_protocol"]) for r in reqs} == {proto}
    assert all(r["status"] == 200 for r in reqs)
    assert all(r["bytes"] == 100_000 for r in reqs if r["path"].endswith(".bin"))
    # over h1 the first byte of a request that opened its connection is unknown (Firefox's artefact)
    assert all(r["start_ns"] <= r["first_byte_ns"] <= r["last_byte_ns"] for r in reqs
               if not (proto == "h1" and not r["conn_reused"]))
    assert all(r["first_byte_ns"] is None and r["first_byte_unknown"] for r in reqs
               if proto == "h1" and not r["conn_reused"])
    assert all(r["wire_bytes"] > r["bytes"] for r in reqs)           # headers and body as received
    page = next(r for r in reqs if r["path"].endswith(".html"))
    assert page["conn_id"] and page["connect_start_ns"] <= page["connect_done_ns"] <= page["tls_done_ns"]
    x = res.extra
    assert x["page_requests"] == 11 and x["page_protocol"] == proto
    # h1: Firefox opens up to 6 connections per host, and a backup connection when a handshake is
    # slow (a busy machine): at most one per request
    assert x["page_connections"] == 1 if proto != "h1" else 1 <= x["page_connections"] <= 11, x["page_connections"]
    assert x["page_weight_bytes"] >= 1_000_000 and x["page_body_bytes"] == 1_000_000 + page["bytes"]
    if proto == "h1":
        assert x["page_ttfb_ms"] is None and x["page_response_start_ms"] is None
        assert 0 < x["dom_content_loaded_ms"] <= x["load_event_ms"]
    else:
        assert 0 < x["page_ttfb_ms"] <= x["page_response_start_ms"] <= x["dom_content_loaded_ms"] <= x["load_event_ms"]
    assert x["page_load_ms"] == x["load_event_ms"] and x["page_handshake_ms"] > 0
    assert x["first_contentful_paint_ms"] > 0
    if proto != "h3":
        assert x["page_connect_ms"] > 0 and x["page_tls_ms"] > 0
    assert "protocol_mismatches" not in x
    # DNCS's httpstat phases, as for Chromium: one more fetch of the page's HTML after the load
    assert x["httpstat_protocol"] == proto and x["httpstat_connect_ms"] > 0 and x["httpstat_server_ms"] > 0
    # the HAR built from the BiDi events: the page and its ten images, with their protocol
    har = json.loads((wd / proto / "page.har").read_text())
    entries = har["log"]["entries"]
    assert len(entries) == 11 == x["har_entries"] and har["log"]["browser"]["name"] == "Firefox"
    assert {urlsplit(e["request"]["url"]).path for e in entries} == PAGE_PATHS
    assert {e["response"]["httpVersion"] for e in entries} == {{"h1": "HTTP/1.1", "h2": "HTTP/2", "h3": "HTTP/3"}[proto]}
    assert all(e["response"]["status"] == 200 and e["timings"]["wait"] >= 0 for e in entries)
    # the browser tree's CPU over the load; the preferences and Firefox's version kept
    assert res.cpu_s > 0 and res.process_cpu_s >= res.cpu_s
    pj = json.loads((wd / proto / "page.json").read_text())
    assert pj["browser_version"].startswith("firefox/") and pj["prefs"]["network.http.http3.enable"] == (proto == "h3")
    assert len((wd / proto / "requests.jsonl").read_text().splitlines()) == 11
    # a clean exit: no process of the load left, no profile kept (other loads may run meanwhile)
    profile = _profile_of(wd / proto)
    assert profile.startswith("/tmp/qb-browser-profile-")
    assert _load_processes(profile + "/tmp") == set() and not Path(profile).exists()


@pytest.mark.integration
@root_only
@needs_firefox
def test_trial_row_with_qlog_and_keylog(served):
    from quicbench.model.conditions import Condition
    from quicbench.model.plan import TrialOptions, TrialSpec
    from quicbench.run.trial import run_trial
    lab, server, target, wd = served
    spec = TrialSpec(0, Condition(name="none"), GALLERY, "h3", "caddy", 1, client="firefox")
    row = run_trial(spec, target, FirefoxClient(), server.pid, wd / "trial", 30, TrialOptions(qlog=True, keylog=True))
    assert row["status"] == "ok", row["error"]
    assert row["client"] == "firefox"
    # what rows name as the client's stack (the session sets client_stack from it)
    assert re.match(r"firefox \d+\.\d+.*, quic neqo .*, puppeteer-core \d", driver_stack(FirefoxClient))
    assert row["protocols"] == "h3:11" and row["requests_ok"] == 11 and row["connections"] == 1
    assert row["page_connect_ms"] == row["page_handshake_ms"] > 0 and row["page_tls_ms"] is None
    assert row["client_cpu_s"] > 0 and row["goodput_mbps"] > 0
    # qlog = true: neqo's own qlog of the connection; keylog = true: NSS's key log
    qlogs = list((wd / "trial" / "qlog").iterdir())
    assert qlogs and any("transport:packet_received" in q.read_text(errors="replace") or
                         "packet_received" in q.read_text(errors="replace") for q in qlogs)
    assert "CLIENT_TRAFFIC_SECRET_0" in (wd / "trial" / "keys.log").read_text()


@pytest.mark.integration
@root_only
@needs_firefox
def test_h3_with_quic_blocked_is_never_reported_as_h3(served):
    """Alt-Svc lets Firefox fall back to TCP when QUIC fails: the load then used h2, and the
    trial fails with the mismatch (or the failed load) instead of passing for h3."""
    lab, server, target, wd = served
    table = "table inet qbtest_ff_noquic {\n chain input {\n  type filter hook input priority 0;\n" \
            f"  udp dport {target.port} drop;\n }}\n}}\n"
    subprocess.run(lab.cmd("server", ["nft", "-f", "-"]), input=table, text=True, check=True)
    try:
        res = fetch(FirefoxClient(), target, "h3", GALLERY, wd / "h3-blocked", timeout_s=20)
        assert res.error and ("protocol mismatch: requested h3" in res.error or "page load over h3 failed" in res.error)
        assert not any(r.get("proto") == "h3" for r in res.requests)
    finally:
        subprocess.run(lab.cmd("server", ["nft", "delete", "table", "inet", "qbtest_ff_noquic"]), check=True)


@pytest.mark.integration
@root_only
@needs_firefox
def test_killed_quicbench_leaves_no_firefox(served, tmp_path):
    """SIGKILL of the process that runs the load: the child sees its parent die and takes the
    bridge, Firefox and the profile with it."""
    from quicbench.clients.browser.child import descendants
    lab, server, target, wd = served
    script = tmp_path / "load.py"
    script.write_text(
        "import sys, pickle\nsys.path[:0] = [%r, %r]\n" % (str(Path(__file__).parent), str(Path(__file__).parents[1]))
        + "from conftest import fetch\nfrom quicbench.clients.browser.firefox import FirefoxClient\n"
        + "target, trial = pickle.load(open(sys.argv[1], 'rb'))\n"
        + "fetch(FirefoxClient(), target, 'h2', __import__('test_browser').GALLERY, trial, 60)\n")
    import pickle
    args = tmp_path / "args.pickle"
    args.write_bytes(pickle.dumps((target, tmp_path / "trial")))
    proc = subprocess.Popen([sys.executable, str(script), str(args)])
    profile = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and profile is None:     # Firefox started by this load
        for pid in descendants(proc.pid):
            try:
                argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--profile" in argv and b"firefox" in argv[0]:
                profile = str(Path(argv[argv.index(b"--profile") + 1].decode()).parent)
        time.sleep(0.1)
    assert profile and profile.startswith("/tmp/qb-browser-profile-"), "Firefox never started"
    assert _load_processes(profile + "/tmp")
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (_load_processes(profile + "/tmp") or Path(profile).exists()):
        time.sleep(0.2)
    assert _load_processes(profile + "/tmp") == set()
    assert not Path(profile).exists()


@pytest.mark.integration
@root_only
@needs_firefox
@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg: apt-get install ffmpeg")
def test_hls_vod_over_h3(tmp_path, cache):
    """Firefox plays the lab's H.264 ladder in MSE (hls.js), every segment over h3, the QoE
    columns computed as for Chromium."""
    from quicbench.clients import Target
    from quicbench.content.objects import generate
    from quicbench.lab import LabSpec, make_lab
    from quicbench.model.conditions import Condition
    from quicbench.model.plan import TrialOptions, TrialSpec, Workload
    from quicbench.run.trial import run_trial
    from quicbench.servers import CaddyServer
    from quicbench.tls import make_tls
    vod = Workload(kind="video", player="hls", mode="vod", duration_s=8, segment_s=2)
    # the session's cache: test_video plays the same ladder (one encode)
    content = generate({}, seed=1, cache=cache, videos=[vod.video_spec()])
    rate = Condition(name="r10", rate_mbit=10, delay_ms=5)
    with make_lab(LabSpec(name="t-ff-video", condition=rate)) as lab:
        lab.set_condition(rate)
        tls = make_tls(tmp_path / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, tmp_path / "caddy", content, tls) as server:
            target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443, tls=tls,
                            content=content)
            spec = TrialSpec(0, rate, vod, "h3", "caddy", 1, client="firefox-video")
            row = run_trial(spec, target, FirefoxVideoClient(), server.pid, tmp_path / "trial", 60, TrialOptions())
    assert row["status"] == "ok", row["error"]
    assert row["client"] == "firefox-video"
    assert all(p.startswith(("h3:", "none:")) for p in row["protocols"].split(","))
    segments = json.loads((tmp_path / "trial" / "video_metrics.json").read_text())["segments"]
    assert [s for s in segments if s["type"] == "video" and s["ok"]]
    assert all(s["proto"] == "h3" for s in segments if s["ok"])
    assert 0 < row["startup_s"] < 10 and row["stall_unended"] is False
    assert 800 <= row["mean_bitrate_kbps"] <= 3000 and row["qoe_lin"] is not None
    assert row["frames_decoded"] > 0 and row["renderer_cpu_pct"] > 0
