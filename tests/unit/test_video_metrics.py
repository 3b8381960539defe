"""Video: metric computations from event logs (synthetic and recorded), content validation,
the fMP4 decode-time shift of the live publisher, and kind = "video" plans."""

import json
import math
import shutil
from pathlib import Path

import pytest

from quicbench.clients.browser import video_metrics as vm
from quicbench.clients.browser.video import interpret_video, streams_of
from quicbench.content import video
from quicbench.errors import QuicbenchError
from quicbench.model.plan import Workload, plan_from_dict

FIX = Path(__file__).parent.parent / "fixtures" / "video"
STREAMS = {0: {"type": "video", "level": 0, "kbps": 800, "width": 640, "height": 360},
           1: {"type": "video", "level": 1, "kbps": 1600, "width": 960, "height": 540},
           2: {"type": "video", "level": 2, "kbps": 3000, "width": 1280, "height": 720},
           3: {"type": "audio", "kbps": 128}}
T0 = 1_000_000.0     # wall ms


def ev(t, type_, pos=0.0, **kw):
    return {"t": T0 + t, "type": type_, "pos": pos, **kw}


def samples(t_from, t_to, pos0=0.0, step=250, frozen=()):
    """Samples every `step` ms; the position advances except inside the `frozen` (start, end) ms."""
    out, pos = [], pos0
    for t in range(t_from, t_to + 1, step):
        if not any(a <= t < b for a, b in frozen) and t > t_from:
            pos += step / 1000
        out.append({"t": T0 + t, "pos": pos, "paused": False, "decoded": int(pos * 25), "dropped": 1})
    return out


def seg(path, t_ms, nbytes, ttfb=5, dl=200, proto="h2"):
    ns = lambda ms: int((T0 + ms) * 1e6)  # noqa: E731
    return {"path": path, "start_ns": ns(t_ms), "send_ns": ns(t_ms), "first_byte_ns": ns(t_ms + ttfb),
            "last_byte_ns": ns(t_ms + ttfb + dl), "bytes": nbytes, "status": 200, "proto": proto, "error": None}


def test_startup_stalls_rebuffering_and_qoe():
    # load at 0, first frame at 1.5 s, a 2 s stall at 10 s (media 8.5 s), played until 31.5 s
    log = {"t_load_start": T0, "t_player_start": T0 + 200,
           "events": [ev(0, "load_start"), ev(300, "waiting"), ev(1500, "playing"),
                      ev(10_000, "waiting", 8.5), ev(12_000, "playing", 8.5)],
           "switches": [{"t": T0 + 1500, "level": 0}, {"t": T0 + 5000, "level": 2}, {"t": T0 + 20_000, "level": 1}],
           "samples": samples(1500, 31_500, frozen=[(10_000, 12_000)])}
    d = vm.compute(log, [], STREAMS, 4.0, 25, T0 + 31_500)
    r = d["row"]
    assert r["startup_s"] == 1.5 and r["startup_player_s"] == 1.3
    assert r["stalls"] == 1 and r["stall_total_s"] == 2.0 and not r["stall_unended"]
    assert d["stalls"][0]["pos"] == 8.5
    assert r["watched_s"] == 30.0 and r["rebuffer_ratio"] == round(2 / 30, 4)
    assert (r["switches"], r["switches_up"], r["switches_down"]) == (2, 1, 1)
    # played time: 28 s (30 s watched - 2 s stalled): 3.5 s of 800, 13 s of 3000 (stall excluded), 11.5 s of 1600
    assert r["played_s"] == pytest.approx(28.0, abs=0.01)
    assert r["level_time_s"] == {"0": 3.5, "1": 11.5, "2": 13.0}
    want = (3.5 * 800 + 13 * 3000 + 11.5 * 1600) / 28
    assert r["mean_bitrate_kbps"] == pytest.approx(want, abs=0.1)
    assert r["rebuffer_s_per_min"] == 4.0 and r["switches_per_min"] == 4.0     # over 0.5 min watched
    # Pensieve's QoE_lin per chunk: 28 s played = 7 chunks of 4 s; utility (3.5 x 0.8 + 13 x 3.0 +
    # 11.5 x 1.6) / 4 = 15.05, rebuffering 4.3 x 2 = 8.6, smoothness |3.0 - 0.8| + |1.6 - 3.0| = 3.6
    assert r["qoe_chunks"] == 7.0 and r["qoe_lin"] == pytest.approx((15.05 - 8.6 - 3.6) / 7, abs=1e-4)
    assert r["frames_dropped"] == 1 and r["cpu_health_frames"] == "ok"
    # the timeline the report draws: seconds since page load, the stall as a span
    assert d["stall_spans"] == [[10.0, 12.0]]
    assert d["timeline"][0]["t_s"] == 1.5 and d["timeline"][-1]["t_s"] <= 31.5


def test_pensieve_qoe_worked_example():
    """Five 4 s chunks played at levels 0, 0, 2, 2, 1 (0.8, 0.8, 3.0, 3.0, 1.6 Mbit/s) with a 2 s
    stall at media position 10 s; QoE = sum q(R_n) - mu x sum T_n - sum |q(R_n+1) - q(R_n)|, / N = 5:
      lin: q = R in Mbit/s, mu = 4.3: (9.2 - 8.6 - (2.2 + 1.4)) / 5 = -0.6
      log: q = ln(R / 0.8), mu = 2.66: q = 0, 0, ln 3.75, ln 3.75, ln 2;
           (2 ln 3.75 + ln 2 - 5.32 - (ln 3.75 + ln 3.75 - ln 2)) / 5 = (2 ln 2 - 5.32) / 5
      hd: q = 2, 2, 15, 15, 3 (the table's 0.75, 2.85 and 1.2 Mbit/s steps), mu = 8:
           (37 - 16 - (13 + 12)) / 5 = -0.8"""
    # wall ms = 1000 + 1000 x position, plus the 2 s stall from position 10 s (11 000 - 13 000 ms)
    log = {"t_load_start": T0, "events": [ev(0, "load_start"), ev(1000, "playing"), ev(11_000, "waiting", 10.0),
                                          ev(13_000, "playing", 10.0)],
           "switches": [{"t": T0 + 1000, "level": 0}, {"t": T0 + 9000, "level": 2}, {"t": T0 + 19_000, "level": 1}],
           "samples": samples(1000, 23_000, frozen=[(11_000, 13_000)])}
    d = vm.compute(log, [], STREAMS, 4.0, 25, T0 + 23_000, media_end=20.0)
    r = d["row"]
    assert r["played_s"] == 20.0 and r["stall_total_s"] == 2.0 and r["qoe_chunks"] == 5.0
    assert r["qoe_lin"] == pytest.approx(-0.6, abs=1e-4)
    assert r["qoe_log"] == pytest.approx((2 * math.log(2) - 5.32) / 5, abs=1e-4)
    assert r["qoe_hd"] == pytest.approx(-0.8, abs=1e-4)
    assert [(c["chunk"], c["level"], c["stall_s"]) for c in d["chunks"]] == \
        [(0, 0, 0.0), (1, 0, 0.0), (2, 2, 2.0), (3, 2, 0.0), (4, 1, 0.0)]
    assert [(s["from"], s["to"], s["pos"]) for s in d["switches"]] == [(0, 2, 8.0), (2, 1, 16.0)]


def test_qoe_utilities_for_our_rungs():
    # QoE_hd on a ladder that is not Pensieve's: the score of the table's highest bitrate reached
    assert [vm.q_hd(k, 800) for k in (200, 300, 800, 1600, 1850, 3000, 4300, 8000)] == [1, 1, 2, 3, 12, 15, 20, 20]
    assert vm.q_log(800, 800) == 0 and vm.q_log(1600, 800) == pytest.approx(math.log(2))
    assert vm.q_lin(3000, 800) == 3.0
    # a chunk played in two parts at two levels counts each by its share; N is the chunks played
    q = vm.qoe_per_chunk([(0, 0.0, 2.0), (2, 2.0, 4.0), (2, 4.0, 6.0)], {0: 800, 2: 3000}, 0.0, 4.0)
    assert q["qoe_chunks"] == 1.5
    assert q["qoe_lin"] == pytest.approx((2 / 4 * 0.8 + 4 / 4 * 3.0 - 2.2) / 1.5)
    assert vm.qoe_per_chunk([], {0: 800}, 0.0, 4.0) == {"qoe_chunks": None, "qoe_lin": None, "qoe_log": None,
                                                        "qoe_hd": None}


def test_a_stall_that_never_ends_and_waiting_that_is_no_stall():
    log = {"t_load_start": T0, "events": [ev(0, "load_start"), ev(1000, "playing"), ev(3000, "seeking", 2),
                                          ev(3050, "waiting", 30), ev(3100, "seeked", 30), ev(3200, "playing", 30),
                                          ev(9000, "waiting", 35.8)],
           "samples": samples(1000, 20_000, frozen=[(9000, 20_000)])}
    d = vm.compute(log, [], STREAMS, 4.0, 25, T0 + 20_000)
    assert d["row"]["stalls"] == 1 and d["row"]["stall_unended"] is True       # the seek's waiting is not a stall
    assert d["stalls"][0]["duration_s"] == 11.0 and d["stalls"][0]["pos"] == 35.8
    # a VOD of 36 s waiting at 35.8 s is its end (audio outlasts video a little), not a stall
    d = vm.compute(log, [], STREAMS, 4.0, 25, T0 + 20_000, media_end=36.0)
    assert d["row"]["stalls"] == 0
    # no playing at all: no startup, no QoE
    d = vm.compute({"t_load_start": T0, "events": [ev(0, "load_start"), ev(100, "waiting")]}, [], STREAMS, 4, 25,
                   T0 + 5000)
    assert d["row"]["startup_s"] is None and d["row"]["qoe_lin"] is None and d["row"]["stalls"] == 0


def test_segments_and_p1203_shape():
    recs = [seg("/video/k/init-stream0.m4s", 0, 800), seg("/video/k/chunk-stream0-00001.m4s", 100, 400_000),
            seg("/video/k/chunk-stream3-00001.m4s", 110, 64_000),
            seg("/video/k/chunk-stream2-00002.m4s", 400, 1_500_000, ttfb=12, dl=1300),
            seg("/video/k/chunk-stream2-00001.m4s", 2000, 1_600_000),       # replaces segment 1 at 720p
            seg("/video/k/chunk-stream2-00003.m4s", 2500, 1_500_000)]
    log = {"t_load_start": T0, "events": [ev(0, "load_start"), ev(900, "playing"), ev(5000, "waiting", 3.0),
                                          ev(6000, "playing", 3.0)],
           "samples": samples(900, 9000, frozen=[(5000, 6000)])}
    d = vm.compute(log, recs, STREAMS, 4.0, 25, T0 + 9000)
    s = [x for x in d["segments"] if x["type"] == "video"]
    assert [(x["stream"], x["number"], x["resolution"]) for x in s] == \
        [(0, 1, "640x360"), (2, 2, "1280x720"), (2, 1, "1280x720"), (2, 3, "1280x720")]
    assert s[1]["ttfb_ms"] == 12 and s[1]["download_ms"] == 1300 and s[1]["kbps"] == 3000.0
    assert d["row"]["segments_video"] == 4 and d["row"]["segments_audio"] == 1
    p = d["p1203"]
    # media order, the last download of a position wins; played up to media position 7.1 s: 2 segments
    assert [(x["start"], x["resolution"], x["bitrate"]) for x in p["I13"]["segments"]] == \
        [(0.0, "1280x720", 3200.0), (4.0, "1280x720", 3000.0)]
    assert all(x["codec"] == "h264" and x["fps"] == 25 and x["duration"] == 4.0 for x in p["I13"]["segments"])
    assert p["I11"]["segments"][0]["codec"] == "aaclc"
    assert p["I23"]["stalling"] == [[0.0, 0.9], [3.0, 1.0]]
    json.dumps(p)


def test_live_latency():
    log = {"t_load_start": T0, "events": [ev(0, "load_start"), ev(1000, "playing", 100)],
           "samples": [{"t": T0 + t, "pos": 100 + t / 1000, "latency_s": 12 + t / 10_000} for t in range(0, 5001, 1000)]}
    r = vm.compute(log, [], STREAMS, 4.0, 25, T0 + 5000, live=True)["row"]
    assert r["live_latency_s_mean"] == pytest.approx(12.3) and r["live_latency_s_max"] == 12.5
    assert r["live_latency_s_last"] == 12.5


def _recorded(name):
    out = json.loads((FIX / name).read_text())
    vinfo = {"spec": {"segment_s": 4.0, "fps": 25, "codec": "h264", "duration_s": 16.0},
             "streams": [{"id": i, **{k: v for k, v in s.items() if k != "level"}} for i, s in STREAMS.items()]}
    return out, vinfo


def test_recorded_live_rate_drop_shows_a_down_switch():
    """hls.js live over h3 through the lab: 10 Mbit/s, then 1.5 Mbit/s (tests/integration/test_video.py)."""
    out, vinfo = _recorded("hls-live-rate-drop.json")
    reqs, extra, err = interpret_video(out, "h3", vinfo, Workload(kind="video", player="hls", mode="live",
                                                                  duration_s=24))
    assert err is None, err
    assert extra["switches_down"] >= 1 and extra["stalls"] == 0
    assert 800 < extra["mean_bitrate_kbps"] < 3000
    assert 10 < extra["live_latency_s_median"] < 16
    segs = out["metrics_detail"]["segments"]
    assert max(s["download_ms"] for s in segs if s["type"] == "video" and s["ok"]) > 1000
    # the same playback, claimed to be h2, fails: every request was h3
    _, extra, err = interpret_video(json.loads((FIX / "hls-live-rate-drop.json").read_text()), "h2", vinfo,
                                    Workload(kind="video", player="hls", mode="live", duration_s=24))
    assert "protocol mismatch: requested h2" in err and "video segment(s) over another protocol" in err
    assert extra["protocol_mismatches"]


def test_recorded_dashjs_vod_and_player_errors():
    out, vinfo = _recorded("dashjs-vod-h2.json")
    w = Workload(kind="video", player="dashjs", mode="vod", duration_s=16)
    _, extra, err = interpret_video(out, "h2", vinfo, w)
    assert err is None, err
    assert extra["startup_s"] > 0 and extra["stalls"] == 0 and extra["video_player"] == "dashjs"
    # QoE by hand from the log: the first `playing` at 1.85 s; the video showed 360p (level 0) up to
    # the sample at position 3.809607 s and 720p (level 2) from the next one to the last sample,
    # 15.688952 s (dash.js said "rendered" for 720p at position 1.59 s, when it had only buffered it):
    # level 0 for 3.809607 s, level 2 for 11.879345 s, N = 15.688952 / 4 = 3.922238 chunks, no
    # stall, one switch 0 -> 2
    n = 15.688952 / 4
    assert extra["level_time_s"] == {"0": 3.81, "2": 11.88} and extra["switches_up"] == 1
    assert extra["qoe_chunks"] == pytest.approx(n, abs=1e-3)
    assert extra["qoe_lin"] == pytest.approx(((3.809607 * 0.8 + 11.879345 * 3.0) / 4 - 2.2) / n, abs=1e-4)
    assert extra["qoe_log"] == pytest.approx((11.879345 * math.log(3.75) / 4 - math.log(3.75)) / n, abs=1e-4)
    assert extra["qoe_hd"] == pytest.approx(((3.809607 * 2 + 11.879345 * 15) / 4 - 13) / n, abs=1e-4)
    out, _ = _recorded("dashjs-vod-h2.json")
    out["qblog"]["errors"].append({"t": 0, "source": "dashjs", "detail": "MEDIA_ERR_DECODE", "fatal": True})
    _, _, err = interpret_video(out, "h2", vinfo, w)
    assert "player error (dashjs): MEDIA_ERR_DECODE" in err


def test_dncs_latency_is_hls_js_fragment_latency_from_a_recorded_log():
    """DNCS-HTTP3's "Avg latency" is the hls.js demo's fragAvgLatency: per fragment the loader's
    request start to the response's first byte (stats.loading.first - loading.start), averaged
    over every fragment, video and audio. Computed here from the recorded hls.js live log (10 ms
    each way: a 20 ms round trip) and checked against the browser's own network records."""
    out, vinfo = _recorded("hls-live-rate-drop.json")
    frags = out["qblog"]["frags"]
    assert len(frags) == 19 and {f["type"] for f in frags} == {"main", "audio"}
    # the first fragment by hand: requested at ...293052.9 ms, first byte at ...293080.5 ms
    assert frags[0]["first"] - frags[0]["req"] == pytest.approx(27.6, abs=0.01)
    lat = sorted(f["first"] - f["req"] for f in frags)
    got = vm.hls_fragment_stats(out["qblog"])
    assert got["frag_latency_ms_mean"] == pytest.approx(sum(lat) / 19, abs=1e-3)
    assert got["frag_latency_ms_median"] == pytest.approx(lat[9], abs=1e-3)          # the 10th of 19
    assert got["frag_latency_ms_mean"] == pytest.approx(105.205, abs=0.01)
    assert got["frag_kbps_mean"] is None          # this log predates the buffering times (player.html)
    # what each latency is: the player's figure adds the browser's own queueing and the delivery of
    # the headers to the page's JavaScript to the network's request-sent -> headers time: never less,
    # fragment by fragment, and never less than the round trip
    net = {r["path"]: (r["first_byte_ns"] - r["send_ns"]) / 1e6 for r in out["requests"]
           if r.get("first_byte_ns") and r.get("send_ns")}
    for f in frags:
        path = "/" + f["url"].split("/", 3)[3]
        assert f["first"] - f["req"] >= net[path] >= 20.0
    # the row has both, beside the live-edge latency (seconds, another quantity altogether)
    _, extra, err = interpret_video(out, "h3", vinfo, Workload(kind="video", player="hls", mode="live",
                                                                duration_s=24))
    assert err is None, err
    assert extra["frag_latency_ms_mean"] == got["frag_latency_ms_mean"]
    vnet = [s["ttfb_ms"] for s in out["metrics_detail"]["segments"] if s["type"] == "video" and s["ok"]]
    assert extra["segment_ttfb_ms_mean"] == pytest.approx(sum(vnet) / len(vnet), abs=1e-3)
    assert extra["segment_ttfb_ms_mean"] < extra["frag_latency_ms_mean"] < 1000 * extra["live_latency_s_median"]


def test_dncs_bitrate_is_hls_js_fragment_throughput():
    """The hls.js demo's fragAvgKbps (DNCS's "Avg bitrate"): per fragment 8 x bytes / (buffering
    end - first byte) in kbit/s, averaged; a fragment never buffered does not count."""
    log = {"player": "hls", "frags": [
        {"req": 1000.0, "first": 1020.0, "end": 1100.0, "buffered": 1120.0, "bytes": 500_000},   # 40 000 kbit/s
        {"req": 2000.0, "first": 2030.0, "end": 2200.0, "buffered": 2230.0, "bytes": 1_000_000},  # 40 000 kbit/s
        {"req": 3000.0, "first": 3050.0, "end": 3100.0, "buffered": 3150.0, "bytes": 250_000},    # 20 000 kbit/s
        {"req": 4000.0, "first": 4010.0, "end": 4090.0, "bytes": 100_000}]}                       # not buffered
    got = vm.hls_fragment_stats(log)
    assert got["frag_kbps_mean"] == pytest.approx((40_000 + 40_000 + 20_000) / 3, abs=0.1)
    assert got["frag_latency_ms_mean"] == pytest.approx((20 + 30 + 50 + 10) / 4)
    assert got["frag_latency_ms_median"] == pytest.approx(25.0)
    # dash.js's firstByteDate is another figure (its first progress event): no column for it
    assert vm.hls_fragment_stats({**log, "player": "dashjs"}) == {
        "frag_latency_ms_mean": None, "frag_latency_ms_median": None, "frag_kbps_mean": None}
    out, vinfo = _recorded("dashjs-vod-h2.json")
    _, extra, _ = interpret_video(out, "h2", vinfo, Workload(kind="video", player="dashjs", mode="vod",
                                                             duration_s=16))
    assert extra["frag_latency_ms_mean"] is None and extra["segment_ttfb_ms_mean"] > 0


def test_streams_levels():
    s = streams_of({"streams": [{"id": 0, "type": "video"}, {"id": 1, "type": "video"}, {"id": 2, "type": "audio"}]})
    assert s[0]["level"] == 0 and s[1]["level"] == 1 and "level" not in s[2]


# -- content ------------------------------------------------------------------------------------

def test_validation_names_the_field_and_the_fix(monkeypatch, tmp_path):
    with pytest.raises(QuicbenchError, match=r"codec: unknown codec 'vp9': accepted: h264"):
        video.validate(video.VideoSpec(codec="vp9"))
    with pytest.raises(QuicbenchError, match=r"segment_s: segment length must be > 0"):
        video.validate(video.VideoSpec(segment_s=0))
    with pytest.raises(QuicbenchError, match=r"ladder: rungs must go up"):
        video.validate(video.VideoSpec(ladder=((720, 3000), (360, 800))))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(QuicbenchError, match=r"missing 'ffmpeg'.*make video"):
        video.make_vod(video.VideoSpec(duration_s=4), cache=tmp_path)


needs_ffmpeg = pytest.mark.skipif(not shutil.which("ffmpeg"), reason="apt-get install ffmpeg")


@needs_ffmpeg
def test_a_ladder_ffmpeg_cannot_encode_fails_clearly(tmp_path):
    with pytest.raises(QuicbenchError, match=r"video.ladder: ffmpeg could not encode .*exit"):
        video.make_vod(video.VideoSpec(duration_s=2, segment_s=2, ladder=((144, 100),), preset="no-such-preset"),
                       cache=tmp_path)
    assert not list((tmp_path / "video").iterdir())           # nothing half-made is left in the cache


@needs_ffmpeg
def test_tiny_ladder_cache_manifest_and_live_shift(tmp_path):
    spec = video.VideoSpec(duration_s=4, segment_s=2, ladder=((144, 100), (240, 300)), audio_kbps=32,
                           preset="ultrafast")
    v = video.make_vod(spec, cache=tmp_path)
    assert v.manifest["segments"] == 2 and (v.root / "master.m3u8").exists() and (v.root / "manifest.mpd").exists()
    names = {f["path"] for f in v.manifest["files"]}
    assert {"chunk-stream0-00001.m4s", "chunk-stream1-00002.m4s", "init-stream2.m4s", "media_0.m3u8"} <= names
    for f in v.manifest["files"]:
        assert (v.root / f["path"]).stat().st_size == f["size"]
    assert video.make_vod(spec, cache=tmp_path).root == v.root            # cached by parameters
    master = (v.root / "master.m3u8").read_text()
    assert "RESOLUTION=256x144" in master and "RESOLUTION=426x240" in master   # 16:9, even
    ts = video.track_timescales((v.root / "init-stream0.m4s").read_bytes())
    seg = (v.root / "chunk-stream0-00002.m4s").read_bytes()
    shifted = video.shift_decode_time(seg, 4.0, ts)
    assert len(shifted) == len(seg) and shifted != seg

    def tfdt(b):
        i = b.index(b"tfdt")
        ver = b[i + 4]
        import struct
        return struct.unpack_from(">Q" if ver == 1 else ">I", b, i + 8)[0]
    assert tfdt(shifted) - tfdt(seg) == 4 * next(iter(ts.values()))


@needs_ffmpeg
def test_live_publisher_writes_a_sliding_window(tmp_path):
    spec = video.VideoSpec(duration_s=2, segment_s=1, fps=10, ladder=((144, 100),), audio_kbps=32, preset="ultrafast")
    v = video.make_vod(spec, cache=tmp_path)
    video.publish_live(v.root, tmp_path / "live", window=3, prefill=3, stop_after_s=1.2)
    pl = (tmp_path / "live" / "media_0.m3u8").read_text()
    info = json.loads((tmp_path / "live" / "live.json").read_text())
    assert pl.count("#EXTINF:") == 3 and pl.count("#EXT-X-PROGRAM-DATE-TIME:") == 3
    assert "#EXT-X-MEDIA-SEQUENCE:2" in pl and "chunk-stream0-00004.m4s" in pl   # 4 published after 1.2 s
    assert video.iso(info["ast"] + 3 * 1.0) in pl            # PDT of segment n = AST + (n-1) x segment_s
    assert 'type="dynamic"' in (tmp_path / "live" / "manifest.mpd").read_text()


def test_video_workloads_in_plans():
    p = plan_from_dict({"protocols": ["h1", "h3"], "workloads": [
        {"kind": "video", "player": "dashjs", "mode": "live", "duration_s": 30},
        {"kind": "video", "duration_s": 20, "segment_s": 2, "ladder": [[360, 600], [720, 2500]]}]})
    a, b = p.workloads
    assert a.label == "video:dashjs:live:30s:seg4" and b.label.startswith("video:hls:vod:20s:seg2:")
    assert p.clients_for(a) == ["video"] and p.content_objects() == {}
    assert len(p.video_specs()) == 2 and p.live_videos() == [a.video_spec()]
    assert b.video_spec().ladder == ((360, 600), (720, 2500)) and b.video_spec().duration_s == 20
    with pytest.raises(QuicbenchError, match=r"segment_s"):
        plan_from_dict({"workloads": [{"kind": "video", "segment_s": 0}]})
    with pytest.raises(QuicbenchError, match=r"unknown codec 'av1'"):
        plan_from_dict({"workloads": [{"kind": "video", "codec": "av1"}]})
    with pytest.raises(QuicbenchError, match=r"player"):
        plan_from_dict({"workloads": [{"kind": "video", "player": "shaka"}]})


# -- the player's CPU -----------------------------------------------------------------------------

def test_frames_presented_counts_frames_the_compositor_never_showed():
    # 25 fps: media time steps of 0.04 s; presentedFrames counts what the compositor showed
    vframes = [[T0 + 1000, 1.00, 10], [T0 + 1040, 1.04, 11], [T0 + 1160, 1.16, 12],   # 0.12 s: 3 due, 1 shown
               [T0 + 1200, 1.20, 13], [T0 + 1240, 1.24, 15],                            # 2 due, 2 shown (coalesced)
               [T0 + 1300, 9.00, 16], [T0 + 1340, 9.04, 17]]                            # a seek: not counted
    f = vm.frames_presented([[T0 + 500, 0.5, 1]] + vframes, 25, T0 + 1000)   # before the first frame: left out
    assert f == {"frames_presented": 8, "frames_skipped": 2, "frames_skipped_ratio": round(2 / 10, 4)}
    assert vm.frames_presented([], 25, T0)["frames_presented"] is None


def test_player_cpu_figures_by_process_and_phase():
    startup = {"wall_s": 0.5, "by_process": {"renderer": [0.3, 0.2], "browser": [0.1, 0.1], "driver": [0.4, 0.4]},
               "by_thread": {"renderer/main": [0.2, 0.25], "renderer/Media": [0.1, 0.0]}}
    playback = {"wall_s": 20.0, "by_process": {"renderer": [4.0, 5.0], "gpu-process": [1.0, 0.5]}, "by_thread": {}}
    c = vm.player_cpu(startup, playback)
    assert (c["renderer_cpu_pct"], c["renderer_wait_pct"]) == (20.0, 25.0)
    assert (c["gpu_process_cpu_pct"], c["gpu_process_wait_pct"]) == (5.0, 2.5)
    assert c["startup_cpu_pct"] == 80.0 and c["startup_main_wait_pct"] == 50.0    # the driver is not the browser
    assert vm.player_cpu(None, None) == {"renderer_cpu_pct": None, "renderer_wait_pct": None,
                                         "gpu_process_cpu_pct": None, "gpu_process_wait_pct": None,
                                         "startup_cpu_pct": None, "startup_main_wait_pct": None}


def test_player_cpu_rule():
    busy = {"renderer_wait_pct": 25.0, "startup_main_wait_pct": 10.0}
    assert vm.player_cpu_bound({**busy, "frames_dropped_ratio": 0.02, "frames_skipped_ratio": 0.0})
    assert vm.player_cpu_bound({**busy, "frames_dropped_ratio": 0.0, "frames_skipped_ratio": 0.02})
    # frames lost at a level switch, the renderer barely waiting: the player's own, not the CPU's
    assert not vm.player_cpu_bound({**busy, "renderer_wait_pct": 5.0, "frames_dropped_ratio": 0.12})
    # the renderer waited, no frame lost: it never reached the viewer
    assert not vm.player_cpu_bound({**busy, "renderer_wait_pct": 80.0, "frames_dropped_ratio": 0.0})
    # the player's JavaScript waited half the start-up
    assert vm.player_cpu_bound({"startup_main_wait_pct": 50.0, "renderer_wait_pct": None})
    assert vm.player_cpu_bound({}) is None


def test_sched_delta_per_process_kind_and_thread():
    from quicbench.clients.browser.child import sched_delta
    before = {(10, 10): ("renderer", "main", 1.0, 0.5), (10, 11): ("renderer", "Media", 2.0, 0.1),
              (20, 21): ("gpu-process", "VizCompositorTh", 0.5, 0.5), (30, 30): ("utility:NetworkService", "main", 1, 1)}
    after = {(10, 10): ("renderer", "main", 1.5, 1.5), (10, 11): ("renderer", "Media", 4.0, 0.2),
             (10, 12): ("renderer", "Media", 0.25, 0.0),              # born between the snapshots: from zero
             (20, 21): ("gpu-process", "VizCompositorTh", 1.0, 0.75)}  # pid 30 ended: not counted
    d = sched_delta(before, after)
    assert d["by_process"] == {"gpu-process": [0.5, 0.25], "renderer": [2.75, 1.1]}
    assert d["by_thread"]["renderer/Media"] == [2.25, 0.1] and d["by_thread"]["renderer/main"] == [0.5, 1.0]
