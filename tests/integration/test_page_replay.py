"""A generated multi-origin page replayed from its own origins over h1, h2 and h3 (the `replay`
server, qb-replay), and recorded from the lab by Chromium with `quicbench page record`.

Small on purpose (about 20 KB, 22 requests over 10 origins): the test is about names,
certificates, matching and protocols, not about weight.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import fetch, root_only
from quicbench.clients.browser.driver import CHROMIUM, BrowserClient
from quicbench.content.har import read_archive
from quicbench.content.pagegen import generate_page
from quicbench.model.plan import Workload

needs_browser = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} missing: apt-get install chromium")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    from quicbench.clients import Target
    from quicbench.content.objects import generate
    from quicbench.lab import LabSpec, make_lab
    from quicbench.servers import SERVERS
    from quicbench.tls import make_tls
    wd = tmp_path_factory.mktemp("replay")
    har = wd / "p10-s7.har"
    har.write_text(json.dumps(generate_page("p10", 7, scale=0.1)))
    # another page whose archive lost one image: its load must miss it
    short = generate_page("p10", 8, scale=0.1)
    lost = next(e for e in short["log"]["entries"] if e["_quicbench"]["kind"] == "img")
    short["log"]["entries"].remove(lost)
    (wd / "p10-s8-short.har").write_text(json.dumps(short))
    (wd / "lost").write_text(lost["request"]["url"])
    content = generate({}, seed=1, cache=wd / "cache", archives=(str(har), str(wd / "p10-s8-short.har")))
    with make_lab(LabSpec(name="t-replay")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        with SERVERS["replay"](lab, wd / "replay", content, tls) as server:
            yield lab, server, Target(lab=lab, hostname=tls.hostname, address=lab.address("server"),
                                      port=443, tls=tls, content=content), wd, har


@pytest.mark.parametrize("proto", ["h1", "h2", "h3"])
@pytest.mark.integration
@root_only
@needs_browser
def test_generated_page_replays_over_each_protocol(replayed, proto):
    lab, server, target, wd, har = replayed
    archive = read_archive(har)
    res = fetch(BrowserClient(), target, proto, Workload(kind="page", har=str(har)), wd / proto, timeout_s=30)
    assert res.error is None, res.error
    x = res.extra
    urls = {r["url"] for r in res.requests}
    assert urls == {e.url for e in archive.entries}                   # every recorded request, nothing else
    assert {r["proto"] for r in res.requests} == {proto}              # each one over the protocol asked for
    assert all(r["replay"] == "hit" and r["status"] == 200 for r in res.requests)
    assert x["replay_requests"] == 22 and x["replay_missed"] == 0 and x["origins"] == 10
    for r in res.requests:                                            # the recorded body, byte for byte
        assert r["bytes"] == len(next(e.body for e in archive.entries if e.url == r["url"]))
    per_origin = x["page_origin_stats"]
    assert len(per_origin) == 10 and all(v["connections"] >= 1 for v in per_origin.values())
    assert x["page_coalesced_connections"] == 0        # each origin its own certificate: nothing to coalesce
    assert x["lcp_ms"] is not None and x["lcp_ms"] >= x["first_contentful_paint_ms"] > 0
    assert x["cls"] is not None and x["total_blocking_time_ms"] is not None
    # Speed Index from the screencast: painted after the navigation began, complete by the end
    assert x["screencast_frames"] >= 1 and 0 < x["speed_index_ms"] <= x["visually_complete_ms"]


@pytest.mark.integration
@root_only
@needs_browser
def test_record_a_lab_served_page(replayed):
    """`quicbench page record` in the client node: Chromium's HAR of the replayed page has every
    request with its body, and is itself a replayable archive."""
    lab, server, target, wd, har = replayed
    archive = read_archive(har)
    out = wd / "recorded.har"
    resolve = [a for h, _ in archive.hosts for a in ("--resolve", f"{h}={target.address}")]
    cp = subprocess.run(lab.cmd("client", [sys.executable, "-m", "quicbench.cli.main", "page", "record",
                                           archive.page_url, "--out", str(out), "--spki", target.tls.spki_sha256_b64,
                                           "--wait", "0.5", *resolve]),
                        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(wd)})
    assert cp.returncode == 0, cp.stderr
    recorded = read_archive(out)
    assert {e.url for e in recorded.entries} == {e.url for e in archive.entries}
    bodies = {e.url: e.body for e in archive.entries}
    assert all(e.body == bodies[e.url] for e in recorded.entries)


@pytest.mark.integration
@root_only
@needs_browser
def test_a_load_that_misses_the_archive_fails(replayed):
    """More than 1 % of the recorded requests missed: the load is failed, the misses listed."""
    lab, server, target, wd, har = replayed
    res = fetch(BrowserClient(), target, "h2", Workload(kind="page", har=str(wd / "p10-s8-short.har")), wd / "miss",
                timeout_s=30)
    lost = (wd / "lost").read_text()
    assert res.error is not None and "replay missed 1 of the archive's 21 recorded requests" in res.error
    assert lost in res.error
    assert res.extra["replay_missed"] == 1 and res.extra["replay_misses"] == [lost]
    assert [r["replay"] for r in res.requests if r["url"] == lost] == ["miss"]
