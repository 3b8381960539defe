"""Adaptive video (hls.js, dash.js) in Debian's Chromium through a rate-limited lab: VOD and live
over h1, h2 and h3, every request's protocol verified, and a rate drop during playback that the
metrics must show (a down-switch or a stall). See docs/video.md."""

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from conftest import fetch, root_only
from quicbench.clients.browser.driver import CHROMIUM
from quicbench.clients.browser.video import VideoClient
from quicbench.content.video import LivePublisher
from quicbench.model.conditions import Condition
from quicbench.model.plan import TrialSpec, Workload

needs_video = pytest.mark.skipif(not (os.access(CHROMIUM, os.X_OK) and shutil.which("ffmpeg")),
                                 reason="needs chromium and ffmpeg: apt-get install chromium ffmpeg")
RATE = Condition(name="r10", rate_mbit=10, delay_ms=10)
# 2 s segments: a whole VOD of 4 segments plays in 8 s of real time (the ladder is test_firefox's,
# so the session encodes it once: the `cache` fixture)
SEGMENT_S = 2
VOD = Workload(kind="video", player="hls", mode="vod", duration_s=8, segment_s=SEGMENT_S)
VOD_DASH = Workload(kind="video", player="dashjs", mode="vod", duration_s=8, segment_s=SEGMENT_S)
LIVE = Workload(kind="video", player="dashjs", mode="live", duration_s=8, segment_s=SEGMENT_S)
LIVE_HLS = Workload(kind="video", player="hls", mode="live", duration_s=16, segment_s=SEGMENT_S)
TOP_KBPS = 3000
RTT_MS = RATE.base_rtt_ms


@pytest.fixture(scope="module")
def video_lab(tmp_path_factory, cache):
    from quicbench.clients import Target
    from quicbench.content.objects import generate
    from quicbench.lab import LabSpec, make_lab
    from quicbench.servers import CaddyServer
    from quicbench.tls import make_tls
    wd = tmp_path_factory.mktemp("video")
    # VOD and live share the 8 s ladder (one encode)
    assert VOD.video_spec() == LIVE.video_spec() == VOD_DASH.video_spec() == LIVE_HLS.video_spec()
    # the servers' private copy, which the live publisher writes into (as a run's)
    content = generate({}, seed=1, cache=cache, videos=[VOD.video_spec()]).isolated(wd / "served")
    info = content.manifest["videos"][VOD.video_spec().key]
    with make_lab(LabSpec(name="t-video", link="linkem", condition=RATE)) as lab:
        lab.set_condition(RATE)
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, wd / "caddy", content, tls) as server, \
                LivePublisher(lab, Path(info["vod"]), Path(info["live_dir"]), wd / "live.log"):
            yield lab, server, Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443,
                                      tls=tls, content=content), wd


def _check_playback(row, proto, segments):
    assert row["status"] == "ok", row["error"]
    assert row["protocols"].startswith(f"{proto}:")
    assert all(p.startswith((f"{proto}:", "none:")) for p in row["protocols"].split(","))
    vsegs = [s for s in segments if s["type"] == "video" and s["ok"]]
    assert vsegs and all(s["proto"] == proto for s in vsegs)        # every segment, over the protocol asked
    assert all(s["proto"] == proto for s in segments if s["ok"])
    assert 0 < row["startup_s"] < 10
    assert row["mean_bitrate_kbps"] and 800 <= row["mean_bitrate_kbps"] <= TOP_KBPS
    assert row["segment_ttfb_ms_median"] > 0 and row["segment_download_ms_median"] > 0
    # a segment's request and the first byte of its answer cross the link once each way: its TTFB
    # is at least the round trip (20 ms; 1 ms of slack for the timers' rounding), as is hls.js's
    # fragment latency (DNCS's "latency"), which adds the browser's queueing and the page's event loop
    assert row["segment_ttfb_ms_mean"] >= RTT_MS - 1
    if row["video_player"] == "hls":
        assert row["frag_latency_ms_median"] >= RTT_MS - 1 and row["frag_latency_ms_mean"] >= RTT_MS - 1
        # per fragment, first byte -> buffered: never much above the link's rate (DNCS's "bitrate")
        assert 0 < row["frag_kbps_mean"] <= 1.5 * RATE.down_rate_mbit * 1000
    else:
        assert row["frag_latency_ms_mean"] is None and row["frag_kbps_mean"] is None
    assert row["frames_decoded"] > 0 and row["stall_unended"] is False
    # Pensieve's QoE per chunk over the chunks played; no stall on this link: at most the top
    # rung's utility, less only by the smoothness of the start-up ramp
    assert row["qoe_chunks"] == pytest.approx(row["played_s"] / SEGMENT_S, abs=0.01)
    assert 0 < row["qoe_lin"] <= TOP_KBPS / 1000 and row["qoe_hd"] <= 15 and row["qoe_log"] is not None
    # the compositor presented about the frames played (25 fps), the player's CPU was measured
    assert row["frames_presented"] >= 0.8 * 25 * row["played_s"]
    assert row["renderer_cpu_pct"] > 0 and row["startup_cpu_pct"] > 0 and row["player_cpu_bound"] is not None
    # a video is judged by the player rule, never by the download rule's client or machine figures
    assert not {"client", "machine"} & set((row["cpu_bound_by"] or "").split(","))
    assert row["cpu_bound"] == bool(row["cpu_bound_by"])


@pytest.mark.parametrize("proto", ["h1", "h2", "h3"])
@pytest.mark.integration
@root_only
@needs_video
def test_vod_and_live_over_each_protocol(video_lab, proto):
    from quicbench.run.trial import run_trial
    lab, server, target, wd = video_lab
    vod = VOD if proto != "h2" else VOD_DASH              # both players, every protocol
    row = run_trial(TrialSpec(0, RATE, vod, proto, "caddy", 1), target, VideoClient(), server.pid,
                    wd / f"vod-{proto}", 60)
    segs = json.loads((wd / f"vod-{proto}" / "video_metrics.json").read_text())["segments"]
    _check_playback(row, proto, segs)
    # the whole 8 s VOD: 4 video segments at least (a replaced segment counts twice)
    assert row["segments_video"] >= 4 and 7 <= row["played_s"] <= 12
    assert row["video_player"] == vod.player
    p1203 = json.loads((wd / f"vod-{proto}" / "p1203.json").read_text())
    assert len(p1203["I13"]["segments"]) == 4
    assert {s["resolution"] for s in p1203["I13"]["segments"]} <= {"640x360", "960x540", "1280x720"}
    assert p1203["I23"]["stalling"][0] == [0.0, row["startup_s"]]
    print(f"\n{proto}: vod ({vod.player}) startup {row['startup_s']} s, {row['mean_bitrate_kbps']} kbit/s, "
          f"stalls {row['stalls']}, switches {row['switches']}")

    row = run_trial(TrialSpec(1, RATE, LIVE, proto, "caddy", 1), target, VideoClient(), server.pid,
                    wd / f"live-{proto}", 60)
    segs = json.loads((wd / f"live-{proto}" / "video_metrics.json").read_text())["segments"]
    _check_playback(row, proto, segs)
    # 3 segments behind the live edge (player setting) plus the position inside a segment
    assert 3 * SEGMENT_S - 1 <= row["live_latency_s_median"] <= 20
    print(f"\n{proto}: live startup {row['startup_s']} s, {row['mean_bitrate_kbps']} kbit/s, latency {row['live_latency_s_median']} s")


@pytest.mark.integration
@root_only
@needs_video
def test_rate_drop_during_live_playback_shows_in_the_metrics(video_lab):
    """10 Mbit/s, then 1.5 Mbit/s from 8 s into the trial: the top rung (3 Mbit/s) no longer fits,
    the player must switch down (or stall); either is what the metrics have to show."""
    lab, server, target, wd = video_lab
    drop = Condition(name="drop", rate_mbit=1.5, delay_ms=10)
    timer = threading.Timer(8.0, lambda: lab.set_condition(drop))
    timer.start()
    try:
        res = fetch(VideoClient(), target, "h3", LIVE_HLS, wd / "drop", timeout_s=90)
    finally:
        timer.cancel()
        lab.set_condition(RATE)
    assert (wd / "drop" / "video_metrics.json").exists(), res.error
    x = res.extra
    detail = json.loads((wd / "drop" / "video_metrics.json").read_text())
    print(f"\nrate drop: switches {detail['switches']}, stalls {detail['stalls']}, levels {x['level_time_s']}")
    assert res.error is None or "stall never ended" not in res.error, res.error
    if x["level_time_s"] and set(x["level_time_s"]) != {"0"}:
        # the player had climbed above the lowest rung: the drop must show as a down-switch or a stall
        assert x["switches_down"] >= 1 or x["stalls"] >= 1
    # (a player that never left the lowest rung, as on a host whose CPU is saturated, has nothing to
    # switch down from: then the slower segments below are what the drop shows)
    # the segments fetched after the drop are slower: download time over the link's new rate
    segs = [s for s in detail["segments"] if s["type"] == "video" and s["ok"]]
    assert max(s["download_ms"] for s in segs) > 1000


@pytest.mark.integration
@root_only
@needs_video
def test_live_publisher_playlist_and_mpd(video_lab):
    lab, server, target, wd = video_lab
    live = Path(target.content.manifest["videos"][VOD.video_spec().key]["live_dir"])
    info = json.loads((live / "live.json").read_text())
    pl = (live / "media_0.m3u8").read_text()
    assert "#EXT-X-PROGRAM-DATE-TIME:" in pl and "#EXT-X-ENDLIST" not in pl
    assert pl.count("#EXTINF:") == 6                                     # the sliding window
    mpd = (live / "manifest.mpd").read_text()
    assert 'type="dynamic"' in mpd and "availabilityStartTime" in mpd and "mediaPresentationDuration" not in mpd
    # segment n is published at AST + n x segment_s: the newest is never ahead of the clock
    newest = int(pl.strip().splitlines()[-1].split("-")[-1].split(".")[0])
    assert info["ast"] + newest * info["segment_s"] <= time.time() + 0.5
