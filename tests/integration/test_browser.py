"""Real page loads in Debian's Chromium (the `browser` client) through a lab, every request verified.

The gallery page is Go-Quick's index10.html of 10 x 100KB. Its objects are replaced by
decodable PNGs of exactly 100KB (content_page.noise_png): Chromium stops downloading an <img>
body it cannot decode, and Go-Quick's pages showed real images (see docs/browser.md).
"""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import root_only, fetch
from quicbench.clients.browser.driver import CHROMIUM, BrowserClient, chromium_flags
from quicbench.clients.browser.page_metrics import interpret, norm_proto
from quicbench.content.objects import ContentSet, generate
from quicbench.content.page import noise_png
from quicbench.model.plan import Workload

needs_browser = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} missing: apt-get install chromium")

GALLERY = Workload(kind="page", size="100KB", count=10)
PAGE_PATHS = {"/100KB/index10.html", *(f"/100KB/obj-{i}.bin" for i in range(1, 11))}


def png_gallery(wd: Path, size: int, count: int, seed: int = 3) -> ContentSet:
    """generate()'s layout and index pages, each object a decodable PNG of exactly `size` bytes."""
    src = generate({size: count}, seed=seed, cache=wd / "cache")
    root = wd / "png-content"
    shutil.copytree(src.root, root)
    data = noise_png(f"test/{seed}/{size}", size)
    digest = hashlib.sha256(data).hexdigest()
    manifest = json.loads((root / "manifest.json").read_text())
    for f in manifest["files"]:
        if "/obj-" in f["path"]:
            (root / f["path"]).unlink()
            (root / f["path"]).write_bytes(data)
            os.chmod(root / f["path"], 0o644)
            f["sha256"] = digest
    (root / "manifest.json").write_text(json.dumps(manifest))
    return ContentSet(root=root, manifest=manifest)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from quicbench.clients import Target
    from quicbench.lab import LabSpec, make_lab
    from quicbench.servers import CaddyServer
    from quicbench.tls import make_tls
    wd = tmp_path_factory.mktemp("browser")
    content = png_gallery(wd, 100_000, 10)
    with make_lab(LabSpec(name="t-browser")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, wd / "caddy", content, tls) as server:
            yield lab, server, Target(lab=lab, hostname=tls.hostname, address=lab.address("server"),
                                      port=443, tls=tls, content=content), wd


def _browser_processes(marker: str = "qb-browser-profile-") -> list[str]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker.encode() in (d / "cmdline").read_bytes():
                out.append(d.name)
        except OSError:
            continue
    return out


@pytest.mark.parametrize("proto", ["h1", "h2", "h3"])
@pytest.mark.integration
@root_only
@needs_browser
def test_gallery_page_over_each_protocol(served, proto):
    lab, server, target, wd = served
    # other programs on the host may run browsers of their own: judge only what this load leaves
    procs_before, profiles_before = set(_browser_processes()), set(Path("/tmp").glob("qb-browser-profile-*"))
    res = fetch(BrowserClient(), target, proto, GALLERY, wd / proto, timeout_s=30)
    assert res.error is None, res.error
    assert res.returncode == 0
    reqs = res.requests
    assert {r["path"] for r in reqs} == PAGE_PATHS and len(reqs) == 11
    assert {r["proto"] for r in reqs} == {proto}                      # every request, not just the page
    assert all(r["status"] == 200 for r in reqs)
    assert all(r["bytes"] == 100_000 for r in reqs if r["path"].endswith(".bin"))
    assert all(r["start_ns"] <= r["first_byte_ns"] <= r["last_byte_ns"] for r in reqs)
    conns = {r["conn_id"] for r in reqs}
    assert len(conns) == 1 if proto != "h1" else 1 <= len(conns) <= 6
    x = res.extra
    assert x["page_requests"] == 11 and x["page_protocol"] == proto
    assert x["page_weight_bytes"] >= 1_000_000 and x["page_body_bytes"] == 1_000_000 + reqs[0]["bytes"]
    assert 0 < x["page_ttfb_ms"] <= x["page_response_start_ms"] <= x["dom_content_loaded_ms"] <= x["load_event_ms"]
    assert x["page_load_ms"] == x["load_event_ms"] and x["page_handshake_ms"] > 0
    if proto != "h3":
        assert x["page_connect_ms"] > 0 and x["page_tls_ms"] > 0
        assert abs(x["page_connect_ms"] + x["page_tls_ms"] - x["page_handshake_ms"]) < 0.01
    assert "protocol_mismatches" not in x
    # DNCS's httpstat phases: one more fetch of the page's HTML, on a new connection, after the load
    assert x["httpstat_protocol"] == proto and x["httpstat_connect_ms"] > 0 and x["httpstat_server_ms"] > 0
    assert (x["httpstat_tls_ms"] is None) == (proto == "h3") and x["httpstat_transfer_ms"] >= 0
    assert x["httpstat_total_ms"] >= x["httpstat_connect_ms"] + (x["httpstat_tls_ms"] or 0) \
        + x["httpstat_server_ms"] + x["httpstat_transfer_ms"] - 0.01
    stat = [json.loads(line) for line in (wd / proto / "httpstat.jsonl").read_text().splitlines()]
    assert len(stat) == 1 and stat[0]["path"] == "/100KB/index10.html" and stat[0]["proto"] == proto
    assert x["page_html_download_ms"] >= 0
    # Playwright's HAR of the load parses and lists the page and its ten images
    har = json.loads((wd / proto / "page.har").read_text())
    entries = har["log"]["entries"]
    assert len(entries) == 11 == x["har_entries"]
    assert {urlsplit(e["request"]["url"]).path for e in entries} == PAGE_PATHS
    assert all(e["response"]["status"] == 200 for e in entries)
    # the per-request records for summarize_requests, and a clean exit: no browser left, no profile kept
    lines = (wd / proto / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 11
    assert set(_browser_processes()) - procs_before == set()
    assert set(Path("/tmp").glob("qb-browser-profile-*")) - profiles_before == set()


@pytest.mark.integration
@root_only
@needs_browser
def test_trial_row_of_a_page_load(served):
    from quicbench.model.conditions import Condition
    from quicbench.model.plan import TrialSpec
    from quicbench.run.trial import run_trial
    lab, server, target, wd = served
    from quicbench.model.plan import TrialOptions
    spec = TrialSpec(0, Condition(name="none"), GALLERY, "h3", "caddy", 1)
    row = run_trial(spec, target, BrowserClient(), server.pid, wd / "trial", 30,
                    TrialOptions(qlog=True, keylog=True))
    assert row["status"] == "ok", row["error"]
    assert row["client"] == "browser" and row["workload"] == "page:10x100KB"
    assert row["protocols"] == "h3:11" and row["requests"] == 11 and row["requests_ok"] == 11
    assert row["goodput_mbps"] > 0 and row["ttfb_ms"] > 0 and row["tls_ms"] is not None
    for k in ("page_ttfb_ms", "dom_content_loaded_ms", "load_event_ms", "page_load_ms", "page_weight_bytes",
              "page_requests", "page_connect_ms", "first_contentful_paint_ms"):
        assert row[k] is not None, k
    # QUIC: one handshake, all of it "connect" (as the load client records it); no separate TLS time
    assert row["page_connect_ms"] == row["page_handshake_ms"] > 0 and row["page_tls_ms"] is None
    assert row["connect_ms"] > 0 and row["tls_ms"] == 0
    assert row["client_cpu_s"] > 0 and row["server_cpu_s"] > 0
    assert row["client_cpu_wait_s"] >= 0 and row["server_cpu_wait_s"] >= 0
    # stalls from the browser's data deliveries, and the images' completion spread (the document
    # excluded): ten images in flight on one QUIC connection
    reqs = [json.loads(l) for l in (wd / "trial" / "requests.jsonl").read_text().splitlines()]
    assert all(r["stall_ns"] >= 0 and all(a < b for a, b in r["gaps_ns"]) for r in reqs)
    assert 0 <= row["body_stall_ms_p50"] <= row["body_stall_ms_max"]
    assert row["body_stall_ms_max"] == max(r["stall_ns"] for r in reqs) / 1e6
    assert row["all_streams_idle_ms"] is not None and row["all_streams_idle_ms"] >= 0
    ends = sorted(r["last_byte_ns"] for r in reqs if r["type"] != "Document")
    assert len(ends) == 10 and 0 <= row["completion_spread_ms"] <= (ends[-1] - ends[0]) / 1e6
    json.dumps(row)                                                   # storable as one JSON line
    # --qlog keeps Chromium's net-log (it writes no qlog), --keylog its TLS secrets
    assert "QUIC_SESSION" in (wd / "trial" / "netlog.json").read_text()
    assert "CLIENT_TRAFFIC_SECRET_0" in (wd / "trial" / "keys.log").read_text()


@pytest.mark.integration
@root_only
@needs_browser
def test_forced_h3_with_quic_blocked_fails_loudly(served):
    lab, server, target, wd = served
    table = "table inet qbtest_noquic {\n chain input {\n  type filter hook input priority 0;\n" \
            f"  udp dport {target.port} drop;\n }}\n}}\n"
    subprocess.run(lab.cmd("server", ["nft", "-f", "-"]), input=table, text=True, check=True)
    try:
        res = fetch(BrowserClient(), target, "h3", GALLERY, wd / "h3-blocked", timeout_s=15)
        assert res.error, "a forced h3 load without QUIC must fail, never report another protocol"
        assert "h3" in res.error
        assert "failed" in res.error or "mismatch" in res.error
        assert not any(r.get("proto") in ("h1", "h2") and not r.get("error") for r in res.requests) \
            or "protocol mismatch" in res.error
        # h2 still works on the same server: the failure is QUIC's, not the lab's
        ok = fetch(BrowserClient(), target, "h2", GALLERY, wd / "h2-while-blocked", timeout_s=15)
        assert ok.error is None, ok.error
    finally:
        subprocess.run(lab.cmd("server", ["nft", "delete", "table", "inet", "qbtest_noquic"]), check=True)


@pytest.mark.integration
@root_only
@needs_browser
def test_realistic_page_loads_125_requests(tmp_path):
    from quicbench.clients import Target
    from quicbench.lab import LabSpec, make_lab
    from quicbench.servers import CaddyServer
    from quicbench.tls import make_tls
    from quicbench.model.conditions import Condition
    content = generate({100_000: 1}, seed=5, cache=tmp_path / "cache", realistic_page=True)
    # 5 ms each way: the phases DNCS read with httpstat must each take the round trips they need
    rtt_ms, cond = 10.0, Condition(name="d5", delay_ms=5)
    with make_lab(LabSpec(name="t-browser2", link="linkem", condition=cond)) as lab:
        lab.set_condition(cond)
        tls = make_tls(tmp_path / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, tmp_path / "caddy", content, tls):
            target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443, tls=tls,
                            content=content)
            res = {p: fetch(BrowserClient(), target, p, Workload(kind="page", page="realistic"), tmp_path / p,
                            timeout_s=60) for p in ("h2", "h3")}
    for proto, r in res.items():
        assert r.error is None, r.error
        assert len(r.requests) == 125 and {q["proto"] for q in r.requests} == {proto}
        assert 9_500_000 < r.extra["page_body_bytes"] < 10_500_000
        assert r.extra["har_entries"] == 125
        x = r.extra
        print(f"\n{proto}: load {x['page_load_ms']:.0f} ms, TTFB {x['page_ttfb_ms']:.1f} ms; httpstat connect "
              f"{x['httpstat_connect_ms']} TLS {x['httpstat_tls_ms']} server {x['httpstat_server_ms']} transfer "
              f"{x['httpstat_transfer_ms']} ms")
        # a handshake, a request and its answer each cross the link at least once each way
        assert x["httpstat_connect_ms"] >= rtt_ms and x["httpstat_server_ms"] >= rtt_ms
        assert x["page_ttfb_ms"] >= rtt_ms
        if proto == "h2":
            assert x["httpstat_tls_ms"] >= rtt_ms                    # TLS 1.3: one round trip after TCP's
        else:
            assert x["httpstat_tls_ms"] is None                      # QUIC: in the one handshake
        # the 84,200-byte HTML is more than a new connection's first flight (10 packets): the rest
        # comes at least one round trip after the first byte
        assert x["httpstat_transfer_ms"] >= rtt_ms


# -- no lab needed ---------------------------------------------------------------------------

def test_flags_per_protocol():
    h3 = chromium_flags("h3", "www.quicbench.test", 443, "198.18.1.2", "SPKI=")
    h2 = chromium_flags("h2", "www.quicbench.test", 443, "198.18.1.2", "SPKI=")
    h1 = chromium_flags("h1", "www.quicbench.test", 443, "198.18.1.2", "SPKI=")
    assert "--enable-quic" in h3 and "--origin-to-force-quic-on=www.quicbench.test:443" in h3
    assert "--disable-quic" in h2 and "--disable-http2" not in h2
    assert "--disable-quic" in h1 and "--disable-http2" in h1
    for flags in (h1, h2, h3):
        assert "--ignore-certificate-errors-spki-list=SPKI=" in flags
        assert "--host-resolver-rules=MAP www.quicbench.test 198.18.1.2, MAP * ~NOTFOUND" in flags
        assert {"--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-sandbox", "--headless=new"} <= set(flags)
        assert not any(f.startswith("--ignore-certificate-errors") and "spki" not in f for f in flags)
    with pytest.raises(ValueError):
        chromium_flags("h4", "x", 443, "1.2.3.4", "s")


def test_protocol_names():
    assert [norm_proto(p) for p in ("h3", "h3-29", "h2", "http/1.1", "http/1.0", "", None, "data")] == \
        ["h3", "h3", "h2", "h1", "h1", None, None, None]


def _rec(path, proto, **kw):
    return {"path": path, "proto": proto, "raw_protocol": proto, "status": 200, "bytes": 10, "error": None,
            "type": "Image", **kw}


def test_a_request_over_another_protocol_fails_the_trial():
    page = {"requests": [_rec("/p/index2.html", "h3"), _rec("/p/obj-1.bin", "h3"), _rec("/p/obj-2.bin", "h2")],
            "metrics": {"page_requests": 3}}
    reqs, extra, err = interpret(page, "h3", None)
    assert err and "protocol mismatch: requested h3" in err and "/p/obj-2.bin: h2" in err
    assert json.loads(extra["protocol_mismatches"]) == ["/p/obj-2.bin: h2"]
    _, extra, err = interpret(page | {"requests": page["requests"][:2]}, "h3", None)
    assert err is None and "protocol_mismatches" not in extra


def test_failed_load_and_short_images_are_reported():
    page = {"error": "net::ERR_QUIC_PROTOCOL_ERROR at https://www.quicbench.test/x", "port": 443,
            "requests": [_rec("/x", None, error="net::ERR_QUIC_PROTOCOL_ERROR")]}
    _, _, err = interpret(page, "h3", {"/x": 10})
    assert err.startswith("page load over h3 failed: net::ERR_QUIC_PROTOCOL_ERROR") and "UDP 443" in err
    page = {"requests": [_rec("/g/index1.html", "h2", type="Document"), _rec("/g/obj-1.bin", "h2", bytes=4096)]}
    _, _, err = interpret(page, "h2", {"/g/index1.html": 10, "/g/obj-1.bin": 100_000})
    assert "body size mismatch" in err and "4096 of 100000" in err and "cannot decode" in err
    _, _, err = interpret({"requests": page["requests"][:1]}, "h2", {"/g/index1.html": 10, "/g/obj-1.bin": 100_000})
    assert "did not fetch 1" in err
