"""Page archives: HAR parsing and validation, the replay layout, generated pages, replay facts."""

import base64
import copy
import json

import pytest

from quicbench.clients.browser.page_metrics import (cumulative_layout_shift, origin_stats, replay_facts,
                                                    total_blocking_time)
from quicbench.content.replay import write_replay
from quicbench.model.har import check_compatible, parse_har, read_archive
from quicbench.content.pagegen import SHAPES, generate_page
from quicbench.errors import QuicbenchError
from quicbench.model.plan import Workload, plan_from_dict


def entry(url, status=200, text="body", encoding=None, headers=(), method="GET", mime="text/plain"):
    content = {"size": len(text), "mimeType": mime, "text": text}
    if encoding:
        content["encoding"] = encoding
    return {"request": {"method": method, "url": url, "headers": []},
            "response": {"status": status, "headers": [{"name": n, "value": v} for n, v in headers],
                         "content": content}}


def har(*entries, version="1.2"):
    return {"log": {"version": version, "entries": list(entries)}}


def test_parse_maps_requests_to_origins_and_decodes_bodies():
    png = bytes(range(256))
    a = parse_har(har(entry("https://www.a.test/?q=1", headers=[("Content-Type", "text/html"), (":status", "200"),
                                                                  ("Content-Encoding", "br"), ("Alt-Svc", "h3"),
                                                                  ("Transfer-Encoding", "chunked"),
                                                                  ("Connection", "keep-alive, X-Hop"),
                                                                  ("X-Hop", "1"), ("Set-Cookie", "a=1")]),
                      entry("https://CDN.b.test:8443/i.png", text=base64.b64encode(png).decode(), encoding="base64")))
    assert a.page_url == "https://www.a.test/?q=1"
    assert a.origins == ["https://cdn.b.test:8443", "https://www.a.test"]
    assert a.hosts == [("cdn.b.test", 8443), ("www.a.test", 443)]
    first, img = a.entries
    assert (first.path, first.query, first.body) == ("/", "q=1", b"body")
    # hop-by-hop, pseudo, coding and Alt-Svc headers are dropped; the rest kept as recorded
    assert first.headers == (("Content-Type", "text/html"), ("Set-Cookie", "a=1"))
    assert img.body == png and img.host == "cdn.b.test" and img.port == 8443


@pytest.mark.parametrize("doc, why", [
    ({"log": {"entries": []}}, "HAR version None; accepted: 1.2"),
    ({"foo": 1}, "not a HAR file"),
    (har(), "HAR without entries"),
    (har(entry("http://www.a.test/")), "entry 0 (http://www.a.test/): plain http cannot be replayed"),
    (har(entry("https://10.0.0.1/")), "entry 0 (https://10.0.0.1/): origin 10.0.0.1 is an IP literal"),
    (har(entry("https://[::1]/")), "IP literal"),
    (har(entry("https://www.a.test/", status=0)), "entry 0 (https://www.a.test/): response status 0"),
    (har(entry("https://www.a.test/", text="!!", encoding="base64")), "not valid base64"),
    (har(entry("https://www.a.test/"), entry("https://www.a.test/", text="other")),
     "entry 1 (https://www.a.test/): duplicate of entry 0 with a different body"),
    (har(entry("https://www.a.test/"), entry("https://www.a.test/", status=500)), "different status"),
])
def test_bad_archives_name_the_entry_and_why(doc, why):
    with pytest.raises(QuicbenchError, match=None) as e:
        parse_har(doc, "x.har")
    assert why in str(e.value) and str(e.value).startswith("x.har: ")


def test_entries_without_bodies():
    e = entry("https://www.a.test/a.js")
    del e["response"]["content"]["text"]
    with pytest.raises(QuicbenchError, match=r"entry 0 \(https://www.a.test/a.js\): no response body"):
        parse_har(har(e))
    # a response that has no body needs none
    for status in (204, 304, 301):
        e2 = copy.deepcopy(e)
        e2["response"]["status"] = status
        assert parse_har(har(e2)).entries[0].body == b""


def test_identical_duplicates_are_one_request():
    a = parse_har(har(entry("https://www.a.test/"), entry("https://www.a.test/x"), entry("https://www.a.test/")))
    assert len(a.entries) == 2 and a.recorded == 3


def test_archives_served_together_must_agree(tmp_path):
    a = parse_har(har(entry("https://www.a.test/")), "a.har")
    b = parse_har(har(entry("https://www.a.test/", text="else")), "b.har")
    check_compatible([a, parse_har(har(entry("https://www.a.test/")), "c.har")])
    with pytest.raises(QuicbenchError, match="a.har: entry 0 .* is also in b.har|b.har: entry 0 .* also in a.har"):
        check_compatible([a, b])


def test_read_archive_errors(tmp_path):
    with pytest.raises(QuicbenchError, match="not found"):
        read_archive(tmp_path / "none.har")
    (tmp_path / "t.har").write_text("hello")
    with pytest.raises(QuicbenchError, match="not a HAR file"):
        read_archive(tmp_path / "t.har")


def test_replay_layout(tmp_path):
    a = parse_har(har(entry("https://www.a.test/"), entry("https://www.a.test/b", text="body")), "a.har")
    write_replay(a, tmp_path / "replay" / "k")
    idx = json.loads((tmp_path / "replay" / "k" / "index.json").read_text())
    assert idx["format"] == "quicbench-replay/1" and idx["page"] == "https://www.a.test/" and idx["recorded"] == 2
    assert [e["path"] for e in idx["entries"]] == ["/", "/b"]
    # one file per distinct body
    assert len(list((tmp_path / "replay" / "k" / "bodies").iterdir())) == 1
    assert (tmp_path / "replay" / "k" / idx["entries"][0]["body"]).read_bytes() == b"body"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_generated_pages_follow_their_shape_and_seed(shape):
    sh = SHAPES[shape]
    h = generate_page(shape, 3, scale=0.05)
    assert json.dumps(h) == json.dumps(generate_page(shape, 3, scale=0.05))     # deterministic
    assert json.dumps(h) != json.dumps(generate_page(shape, 4, scale=0.05))
    a = parse_har(h)
    kinds = [e["_quicbench"]["kind"] for e in h["log"]["entries"]]
    assert len(a.entries) == max(sh.requests, sh.html + sh.js + sh.css + sh.img + sh.font)
    assert (kinds.count("js"), kinds.count("css"), kinds.count("img"), kinds.count("font")) == \
        (sh.js, sh.css, sh.img, sh.font)
    assert kinds.count("html") + kinds.count("iframe") == sh.html
    assert len(a.origins) == 1 + sh.third_parties
    assert max(e["_quicbench"]["depth"] for e in h["log"]["entries"]) == sh.depth
    # every resource but the document is referenced by its parent's body
    bodies = {e.url: e.body for e in a.entries}
    for e in h["log"]["entries"][1:]:
        assert e["request"]["url"].encode() in bodies[e["_quicbench"]["parent"]]


def test_workload_har_in_a_plan(tmp_path):
    p = tmp_path / "p.har"
    p.write_text(json.dumps(generate_page("p10", 1, 0.05)))
    w = Workload(kind="page", har=str(p))
    assert w.label == "page:har:p" and w.page_path == "/"
    with pytest.raises(Exception, match="har: a page archive is loaded by kind"):
        Workload(kind="objects", har=str(p))
    (tmp_path / "bad.har").write_text(json.dumps(har(entry("http://x.test/"))))
    with pytest.raises(Exception, match="plain http"):
        Workload(kind="page", har=str(tmp_path / "bad.har"))
    plan = {"protocols": ["h1"], "workloads": [{"kind": "page", "har": str(p)}]}
    with pytest.raises(QuicbenchError, match="servers: page archives .* replay server only"):
        plan_from_dict(plan)
    ok = plan_from_dict({**plan, "servers": {"h1": "replay"}})
    assert ok.page_archives == [str(p)]


def test_replay_facts_fail_beyond_one_percent():
    reqs = [{"url": f"https://a.test/{i}", "replay": "hit"} for i in range(199)] + \
        [{"url": "https://a.test/miss", "replay": "miss"}]
    facts, why = replay_facts(reqs, 200)
    assert facts["replay_missed"] == 1 and why is None          # 0.5 %
    reqs.append({"url": "https://a.test/miss2", "replay": "miss"})
    reqs.append({"url": "https://a.test/miss3", "replay": "miss"})
    facts, why = replay_facts(reqs, 200)
    assert facts["replay_missed"] == 3 and "replay missed 3 of the archive's 200" in why and "miss2" in why
    assert facts["replay_misses"] == ["https://a.test/miss", "https://a.test/miss2", "https://a.test/miss3"]


def test_web_vitals_arithmetic():
    # two session windows: 0.1+0.05 within 1 s, then a gap, then 0.2
    assert cumulative_layout_shift([[100, 0.1], [900, 0.05], [3000, 0.2]]) == 0.2
    assert cumulative_layout_shift([[100, 0.1], [900, 0.15]]) == 0.25
    assert cumulative_layout_shift([]) == 0
    # a task before FCP does not count; one straddling it counts from FCP; 50 ms of each are free
    assert total_blocking_time([[0, 200], [450, 120], [1000, 80]], fcp_ms=500, end_ms=None) == 20 + 30
    assert total_blocking_time([[600, 300]], fcp_ms=500, end_ms=700) == 50
    assert total_blocking_time([[600, 300]], fcp_ms=None, end_ms=None) is None


def test_origin_stats_show_coalescing():
    recs = [{"origin": "https://a.test", "proto": "h2", "wire_bytes": 10, "conn_id": "1"},
            {"origin": "https://b.test", "proto": "h2", "wire_bytes": 5, "conn_id": "1"},
            {"origin": "https://c.test", "proto": "h2", "wire_bytes": 7, "conn_id": "2"}]
    s = origin_stats(recs)
    assert s["origins"] == 3 and s["page_coalesced_connections"] == 1
    assert s["page_protocol_stats"] == {"h2": {"requests": 3, "bytes": 22, "connections": 2}}
    assert s["page_origin_stats"]["https://a.test"] == {"requests": 1, "bytes": 10, "connections": 1}


def test_generated_pages_use_every_font():
    h = generate_page("p50", 1, scale=0.1)
    doc = parse_har(h).entries[0].body.decode()
    fonts = [e["request"]["url"].rsplit("/", 1)[1].split(".")[0] for e in h["log"]["entries"]
             if e["_quicbench"]["kind"] == "font"]
    assert fonts and all(f'class="{f}"' in doc for f in fonts)


def test_misses_are_marked_from_the_archive_too():
    from quicbench.clients.browser.page_metrics import mark_replay_misses
    recorded = {("GET", "www.a.test", 443, "/"), ("GET", "cdn.a.test", 443, "/i.png")}
    reqs = [{"url": "https://www.a.test/", "method": "GET", "replay": "hit"},
            {"url": "https://cdn.a.test/i.png?bust=9", "method": "GET", "replay": "hit"},   # any query of a path
            {"url": "https://cdn.a.test/j.png", "method": "GET", "error": "net::ERR_BLOCKED_BY_ORB"},
            {"url": "https://www.a.test/x", "method": "GET", "replay": "miss", "status": 404}]
    mark_replay_misses(reqs, recorded)
    assert [r.get("replay") for r in reqs] == ["hit", "hit", "miss", "miss"]
    assert reqs[2]["error"] is None and reqs[2]["replay_error"] == "net::ERR_BLOCKED_BY_ORB"


def test_replay_server_argv_names_every_origin_with_its_own_certificate(tmp_path):
    from cryptography import x509

    from quicbench.content.objects import ContentSet
    from quicbench.servers import SERVERS
    from quicbench.tls import make_tls, spki_sha256_b64

    class Lab:
        def address(self, node):
            return "198.18.1.2"
    a = parse_har(har(entry("https://www.a.test/"), entry("https://cdn.b.test:8443/x")), "a.har")
    write_replay(a, tmp_path / "content" / "replay" / "k")
    tls = make_tls(tmp_path / "tls")
    srv = SERVERS["replay"](Lab(), tmp_path / "run", ContentSet(root=tmp_path / "content", manifest={}), tls)
    argv = srv.argv()
    arg = lambda f: [argv[i + 1] for i, x in enumerate(argv) if x == f]   # noqa: E731
    assert argv[0].endswith("qb-replay") and arg("--listen") == ["198.18.1.2"] and arg("--port") == ["443"]
    assert arg("--root") == [str(tmp_path / "content")] and arg("--key") == [str(tls.key)]
    certs = {}
    for path in arg("--cert"):
        leaf = x509.load_pem_x509_certificates(open(path, "rb").read())[0]
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
        certs[tuple(sans)] = spki_sha256_b64(leaf)
    # one certificate per host, its name the only SAN, all with the server key Chromium trusts
    assert set(certs) == {("www.a.test",), ("cdn.b.test",), (tls.hostname,)}
    assert set(certs.values()) == {tls.spki_sha256_b64}


def test_the_committed_corpus_is_what_generate_makes():
    """data/pages/ is `quicbench page generate --scale 0.1` output: the same pages anyone regenerates."""
    from conftest import REPO
    files = sorted((REPO / "data" / "pages").glob("*.har"))
    assert [f.stem for f in files] == ["p10-s1", "p10-s2", "p50-s1", "p50-s2", "p90-s1"]
    for f in files:
        shape, seed = f.stem.split("-s")
        assert json.loads(f.read_text()) == generate_page(shape, int(seed), scale=0.1), f.name
