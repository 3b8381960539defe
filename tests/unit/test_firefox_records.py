"""The Firefox path's pure parts: preferences per protocol, per-request records and the HAR from
WebDriver BiDi events, the plan's `browser`, and the refusal of a video the browser cannot play."""

import pytest

from quicbench.clients.browser import firefox
from quicbench.clients.browser.firefox import firefox_prefs, with_disagreements
from quicbench.clients.browser.firefox_child import BidiRecorder, build_har, protocol_disagreements, records
from quicbench.clients.browser.page_metrics import interpret
from quicbench.errors import QuicbenchError
from quicbench.model.plan import plan_from_dict

T0 = 1_800_000_000_000.0      # ms


def test_prefs_per_protocol():
    h3, h2, h1 = (firefox_prefs(p, "www.quicbench.test", 4433) for p in ("h3", "h2", "h1"))
    assert h3["network.http.http3.enable"] and h3["network.http.http2.enabled"]
    assert h3["network.http.http3.alt-svc-mapping-for-testing"] == "www.quicbench.test;h3=:4433"
    assert h3["network.http.http3.disable_when_third_party_roots_found"] is False
    assert not h2["network.http.http3.enable"] and h2["network.http.http2.enabled"]
    assert not h1["network.http.http3.enable"] and not h1["network.http.http2.enabled"]
    assert "network.http.http3.alt-svc-mapping-for-testing" not in h2
    for p in (h1, h2, h3):      # nothing leaves for anything but the page
        assert p["network.trr.mode"] == 5 and p["network.captive-portal-service.enabled"] is False
        assert p["toolkit.telemetry.enabled"] is False and p["app.normandy.enabled"] is False
    with pytest.raises(ValueError, match="accepted h1, h2, h3"):
        firefox_prefs("h4", "x", 443)


def _events(rec: BidiRecorder, rid: str, url: str, proto: str, new_conn: bool, start: float, status: int = 200,
            body: int = 1000, error: str | None = None) -> None:
    timings = {"timeOrigin": 0, "requestTime": start, "fetchStart": start, "dnsStart": 0, "dnsEnd": 0,
               "connectStart": start + 1 if new_conn else 0, "connectEnd": start + 11 if new_conn else 0,
               "tlsStart": start + 2 if new_conn else 0, "tlsEnd": start + 11 if new_conn else 0,
               "requestStart": start + 12, "responseStart": start + 20, "responseEnd": start + 30}
    req = {"request": rid, "url": url, "method": "GET", "headers": [{"name": "Host", "value": {"type": "string",
                                                                                             "value": "h"}}],
           "destination": "image", "headersSize": 400, "timings": timings}
    rec.on_event("network.beforeRequestSent", {"request": req, "timestamp": start, "redirectCount": 0})
    if error:
        rec.on_event("network.fetchError", {"request": req, "errorText": error, "timestamp": start + 5})
        return
    resp = {"url": url, "protocol": proto, "status": status, "statusText": "", "headers": [], "mimeType": "image/png",
            "bytesReceived": body + 300, "headersSize": 300, "bodySize": body}
    rec.on_event("network.responseStarted", {"request": req, "response": resp, "timestamp": start + 20})
    rec.on_event("network.responseCompleted", {"request": req, "response": resp, "timestamp": start + 30})


def test_records_from_bidi_events_and_resource_timing():
    rec = BidiRecorder()
    _events(rec, "1", "https://h/p/index.html", "h3", True, T0)
    _events(rec, "2", "https://h/p/a.png", "h3", False, T0 + 40)
    _events(rec, "3", "https://h/favicon.ico", "h3", False, T0 + 41)       # the browser's, not the page's
    _events(rec, "4", "https://h/p/b.png", "h3", False, T0 + 42, status=404)
    _events(rec, "5", "https://h/p/c.png", "", False, T0 + 43, error="NS_ERROR_CONNECTION_REFUSED")
    assert rec.pending() == 0 and rec.ignored == ["https://h/favicon.ico"]
    resources = [{"name": "https://h/p/a.png", "nextHopProtocol": "h3", "decodedBodySize": 999, "startTime": 40},
                 {"name": "https://h/p/index.html", "nextHopProtocol": "h3", "decodedBodySize": 1000, "startTime": 0}]
    recs = records(rec.snapshot(), resources)
    assert [r["path"] for r in recs] == ["/p/index.html", "/p/a.png", "/p/b.png", "/p/c.png"]
    page, a, b, c = recs
    ns = lambda ms: int(round(ms * 1e6))  # noqa: E731
    # QUIC: connect done = TLS done = handshake complete; a request on an open connection has none
    assert page["conn_id"] == "c1" and page["connect_start_ns"] == ns(T0 + 1)
    assert page["connect_done_ns"] == page["tls_done_ns"] == ns(T0 + 11)
    assert a["conn_id"] is None and a["conn_reused"] and a["connect_start_ns"] is None
    assert page["start_ns"] == ns(T0) and page["first_byte_ns"] == ns(T0 + 20) and page["last_byte_ns"] == ns(T0 + 30)
    # the body from Resource Timing's decodedBodySize when there is an entry, else BiDi's bodySize
    assert a["bytes"] == 999 and page["bytes"] == 1000 and page["wire_bytes"] == 1300
    assert a["proto"] == a["rt_protocol"] == "h3" and a["type"] == "Image"
    assert b["error"] == "HTTP 404" and b["bytes"] == 0 and b["rt_protocol"] is None
    assert c["error"] == "NS_ERROR_CONNECTION_REFUSED" and c["proto"] is None
    assert protocol_disagreements(recs) == []
    # TCP: connect done where TLS starts; over h1 the first byte of a request that opened its
    # connection is unknown (Firefox stamps it at the request), of a request on an open one known
    rec2 = BidiRecorder()
    _events(rec2, "1", "https://h/x", "http/1.1", True, T0)
    _events(rec2, "2", "https://h/y", "http/1.1", False, T0 + 50)
    x, y = records(rec2.snapshot(), [{"name": "https://h/x", "nextHopProtocol": "h2", "startTime": 0}])
    assert x["proto"] == "h1" and x["connect_done_ns"] == ns(T0 + 2) and x["tls_done_ns"] == ns(T0 + 11)
    assert x["first_byte_ns"] is None and x["first_byte_unknown"]
    assert y["first_byte_ns"] == ns(T0 + 70) and "first_byte_unknown" not in y
    # the two readings of the protocol disagree: the trial fails and says which request
    bad = protocol_disagreements([x])
    assert bad == ["/x: BiDi http/1.1, Resource Timing h2"]
    assert "protocol readings disagree for 1 request(s) (/x: BiDi http/1.1" in with_disagreements(
        None, {"protocol_disagreements": bad})
    assert with_disagreements("e", {}) == "e"


def test_a_second_use_of_an_image_from_firefoxs_cache_is_no_request():
    rec = BidiRecorder()
    _events(rec, "1", "https://h/p/a.png", "h2", True, T0)
    req = {"request": "2", "url": "https://h/p/a.png", "method": "GET", "timings": {}}
    rec.on_event("network.beforeRequestSent", {"request": req, "timestamp": T0 + 50})
    assert rec.pending() == 1
    rec.on_event("network.responseCompleted", {"request": req, "timestamp": T0 + 51, "response": {
        "protocol": "http/1.1", "status": 200, "fromCache": True, "bytesReceived": 0, "bodySize": 0}})
    assert rec.pending() == 0 and rec.ignored == ["https://h/p/a.png (from cache)"]
    assert [(r["path"], r["proto"]) for r in records(rec.snapshot(), [])] == [("/p/a.png", "h2")]


def test_mismatch_and_failures_fail_the_load_as_for_chromium():
    rec = BidiRecorder()
    _events(rec, "1", "https://h/p/index.html", "h3", True, T0)
    _events(rec, "2", "https://h/p/a.png", "h2", True, T0 + 40)
    _events(rec, "3", "https://h/p/b.png", "h3", False, T0 + 41, status=500)
    recs = records(rec.snapshot(), [])
    _, extra, error = interpret({"requests": recs}, "h3", None)
    assert "protocol mismatch: requested h3, 1 of 3 request(s) used another protocol (/p/a.png: h2)" in error
    assert "/p/b.png: HTTP 500" in error and extra["protocol_mismatches"] == '["/p/a.png: h2"]'


def test_har_from_bidi_events():
    rec = BidiRecorder()
    _events(rec, "1", "https://h/p/index.html", "h3", True, T0)
    _events(rec, "2", "https://h/p/a.png", "h3", False, T0 + 40)
    reqs = rec.snapshot()
    har = build_har(reqs, records(reqs, []), "https://h/p/index.html", "153.7.0", {"loadEventStart": 80.5}, T0)
    log = har["log"]
    assert log["version"] == "1.2" and log["browser"] == {"name": "Firefox", "version": "153.7.0"}
    assert log["pages"][0]["pageTimings"]["onLoad"] == 80.5
    first, second = log["entries"]
    assert first["request"]["httpVersion"] == first["response"]["httpVersion"] == "HTTP/3"
    assert first["timings"] == {"blocked": 1.0, "dns": -1, "connect": 10.0, "ssl": 9.0, "send": 0, "wait": 8.0,
                                "receive": 10.0}
    assert first["time"] == 29.0 and first["request"]["headers"] == [{"name": "Host", "value": "h"}]
    assert second["timings"]["connect"] == -1 and second["response"]["bodySize"] == 1000


def _video_plan(browser):
    return plan_from_dict({"browser": browser, "workloads": [{"kind": "video", "duration_s": 8, "segment_s": 2}]},
                          source="p.toml")


def test_plan_browser_picks_the_clients():
    p = plan_from_dict({"browser": ["chromium", "firefox"], "repetitions": 1,
                        "workloads": [{"kind": "page", "size": "100KB", "count": 10}]}, source="p.toml")
    assert p.clients_for(p.workloads[0]) == ["browser", "firefox"]
    assert _video_plan("firefox").clients_for(_video_plan("firefox").workloads[0]) == ["firefox-video"]
    assert plan_from_dict({"workloads": [{"kind": "page"}]}, source="p").clients_for(
        plan_from_dict({"workloads": [{"kind": "page"}]}, source="p").workloads[0]) == ["browser"]
    from quicbench.model.plan import expand
    keys = {t.key for t in expand(p)}
    assert "none|page:10x100KB|h3~firefox|caddy|r1" in keys and "none|page:10x100KB|h3~browser|caddy|r1" in keys
    for bad in ("safari", ["firefox", "firefox"], []):
        with pytest.raises(QuicbenchError, match="browser: name one browser or a list of different ones; "
                                                 "accepted: chromium, firefox"):
            plan_from_dict({"browser": bad, "workloads": [{"kind": "page"}]}, source="p.toml")


def test_video_firefox_cannot_play_is_refused_before_the_run(monkeypatch):
    from quicbench.model.shard import Selection
    from quicbench.run.preflight import _check_codecs, driver_classes

    def check(browser):
        run = Selection().resolve(_video_plan(browser))
        _check_codecs(run.matrix, driver_classes(run), "p.toml")
    monkeypatch.setattr(firefox, "libavcodec", lambda: None)
    with pytest.raises(QuicbenchError) as e:
        check("firefox")
    msg = str(e.value)
    assert msg.startswith("p.toml: browser: firefox cannot play workloads.codec = 'h264'")
    assert "it plays: none" in msg and "apt-get install ffmpeg" in msg and 'browser = "chromium"' in msg
    assert "\n" not in msg
    check("chromium")          # Chromium's codecs are not known before it starts
    monkeypatch.setattr(firefox, "libavcodec", lambda: "libavcodec.so.59")
    check("firefox")
