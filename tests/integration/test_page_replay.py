"""A generated multi-origin page, recorded from the lab by Chromium (`quicbench page record`), and
that recording replayed from its own origins over h1, h2 and h3 (the `replay` server, qb-replay),
every request matched and its protocol checked.

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
from quicbench.model.har import read_archive
from quicbench.content.pagegen import generate_page
from quicbench.model.plan import Workload

needs_browser = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} missing: apt-get install chromium")


def _record(lab, url, hosts, address, spki, out, home):
    """`quicbench page record` in the client node, every origin resolved to the server."""
    resolve = [a for h, _ in hosts for a in ("--resolve", f"{h}={address}")]
    return subprocess.run(lab.cmd("client", [sys.executable, "-m", "quicbench.cli.main", "page", "record", url,
                                             "--out", str(out), "--spki", spki, "--wait", "0.5", *resolve]),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(home)})


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """The generated page served and recorded, then the recording served (with a page whose
    archive lost an image): (lab, target, work dir, generated HAR, recorded HAR, record's result)."""
    from quicbench.clients import Target
    from quicbench.content.objects import generate
    from quicbench.lab import LabSpec, make_lab
    from quicbench.servers import SERVERS
    from quicbench.tls import make_tls
    wd = tmp_path_factory.mktemp("replay")
    har = wd / "p10-s7.har"
    har.write_text(json.dumps(generate_page("p10", 7, scale=0.1)))
    short = generate_page("p10", 8, scale=0.1)
    lost = next(e for e in short["log"]["entries"] if e["_quicbench"]["kind"] == "img")
    short["log"]["entries"].remove(lost)
    (wd / "p10-s8-short.har").write_text(json.dumps(short))
    (wd / "lost").write_text(lost["request"]["url"])
    recorded = wd / "recorded.har"
    generated = read_archive(har)
    with make_lab(LabSpec(name="t-replay")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        content = generate({}, seed=1, cache=wd / "cache", archives=(str(har),))
        with SERVERS["replay"](lab, wd / "serve-generated", content, tls):
            rec = _record(lab, generated.page_url, generated.hosts, lab.address("server"), tls.spki_sha256_b64,
                          recorded, wd)
        assert rec.returncode == 0, rec.stderr
        content = generate({}, seed=1, cache=wd / "cache", archives=(str(recorded), str(wd / "p10-s8-short.har")))
        with SERVERS["replay"](lab, wd / "serve-recorded", content, tls):
            yield (lab, Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443, tls=tls,
                               content=content), wd, har, recorded)


@pytest.mark.parallel_safe
@pytest.mark.integration
@root_only
@needs_browser
def test_chromium_records_the_page_with_every_body(replayed):
    """Chromium's HAR of the served page has every request with its body, and is replayable."""
    lab, target, wd, har, recorded = replayed
    generated, rec = read_archive(har), read_archive(recorded)
    assert {e.url for e in rec.entries} == {e.url for e in generated.entries}
    bodies = {e.url: e.body for e in generated.entries}
    assert all(e.body == bodies[e.url] for e in rec.entries)


@pytest.mark.parallel_safe
@pytest.mark.parametrize("proto", ["h1", "h2", "h3"])
@pytest.mark.integration
@root_only
@needs_browser
def test_recorded_page_replays_over_each_protocol(replayed, proto):
    lab, target, wd, har, recorded = replayed
    archive = read_archive(recorded)
    res = fetch(BrowserClient(), target, proto, Workload(kind="page", har=str(recorded)), wd / proto, timeout_s=30)
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


@pytest.mark.parallel_safe
@pytest.mark.integration
@root_only
@needs_browser
def test_a_load_that_misses_the_archive_fails(replayed):
    """More than 1 % of the recorded requests missed: the load is failed, the misses listed."""
    lab, target, wd, har, recorded = replayed
    res = fetch(BrowserClient(), target, "h2", Workload(kind="page", har=str(wd / "p10-s8-short.har")), wd / "miss",
                timeout_s=30)
    lost = (wd / "lost").read_text()
    assert res.error is not None and "replay missed 1 of the archive's 21 recorded requests" in res.error
    assert lost in res.error
    assert res.extra["replay_missed"] == 1 and res.extra["replay_misses"] == [lost]
    assert [r["replay"] for r in res.requests if r["url"] == lost] == ["miss"]
