"""Video QoE metrics from a recorded playback: pure functions of the player's event log
(``window.qbLog`` of player.html) and the browser's per-request records (DevTools Network).

All times in the log are wall-clock milliseconds (the host's clock, shared with the server's
live publisher); request records carry Unix nanoseconds. See docs/video.md for every figure.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from typing import Any

SEGMENT_RE = re.compile(r"/chunk-stream(\d+)-(\d+)\.m4s$")
DROPPED_FRAMES_LIMIT = 0.01     # more than 1 % dropped frames: the client's CPU did not keep up


# -- QoE as Pensieve defines it (docs/video.md) --------------------------------------------------
# Mao, Netravali, Alizadeh, "Neural Adaptive Video Streaming with Pensieve", SIGCOMM'17, Eq. (2):
#   QoE = sum_n q(R_n) - mu * sum_n T_n - sum_n |q(R_{n+1}) - q(R_n)|
# over the N chunks of a playback (R_n: bitrate of chunk n, T_n: rebuffering while it was due),
# reported per chunk (divided by N). Three utilities q, each with its own rebuffering weight mu.
PENSIEVE_HD_TABLE = ((300, 1.0), (750, 2.0), (1200, 3.0), (1850, 12.0), (2850, 15.0), (4300, 20.0))


def q_lin(kbps: float, min_kbps: float) -> float:
    """QoE_lin's utility: the bitrate in Mbit/s."""
    return kbps / 1000


def q_log(kbps: float, min_kbps: float) -> float:
    """QoE_log's utility: log(R / R_min), R_min the ladder's lowest video bitrate (natural log)."""
    return math.log(kbps / min_kbps)


def q_hd(kbps: float, min_kbps: float) -> float:
    """QoE_hd's utility: Pensieve's table (0.3, 0.75, 1.2, 1.85, 2.85, 4.3 Mbit/s -> 1, 2, 3, 12, 15,
    20). A rung of another bitrate scores as the table's highest bitrate it reaches (a step
    function: 0.8 Mbit/s scores 2, 3 Mbit/s 15); a rung below 0.3 Mbit/s scores 1."""
    score = PENSIEVE_HD_TABLE[0][1]
    for table_kbps, table_score in PENSIEVE_HD_TABLE:
        if kbps >= table_kbps:
            score = table_score
    return score


# name -> (q, mu): QoE_lin mu = 4.3 (1 s of rebuffering costs as much as 4.3 Mbit/s less for one
# chunk), QoE_log mu = 2.66, QoE_hd mu = 8 (Pensieve Sec. 5.1)
QOE_VARIANTS: dict[str, tuple[Callable[[float, float], float], float]] = {
    "lin": (q_lin, 4.3), "log": (q_log, 2.66), "hd": (q_hd, 8.0)}


def qoe_per_chunk(played: list[tuple[int | None, float, float]], kbps_of: dict[int, float], stall_s: float,
                  segment_s: float) -> dict[str, float | None]:
    """Pensieve's QoE_lin, QoE_log and QoE_hd per chunk of one playback.

    played: (level, media from, media to) of every stretch the play position advanced, in order
    (played_stretches); kbps_of: the nominal bitrate of each video level; stall_s: rebuffering
    after the first frame (start-up is not in Eq. (2): it is startup_s). A chunk played whole at
    one level adds q(R_n) once; a chunk played in part, or in parts at two levels (a player that
    replaced buffered media), adds q of each part times the part's share of segment_s. N is the
    chunks played, played seconds / segment_s, and the smoothness term adds |q(a) - q(b)| for
    every change of the played level, which for one level per chunk is sum |q(R_{n+1}) - q(R_n)|.
    """
    known = [(lvl, a, b) for lvl, a, b in played if lvl in kbps_of]
    chunks = sum(b - a for _, a, b in known) / segment_s if segment_s > 0 else 0.0
    out: dict[str, float | None] = {"qoe_chunks": round(chunks, 3) if known else None}
    if not known or chunks <= 0:
        return out | {f"qoe_{name}": None for name in QOE_VARIANTS}
    min_kbps = min(kbps_of.values())
    for name, (q, mu) in QOE_VARIANTS.items():
        utility = sum(q(kbps_of[lvl], min_kbps) * (b - a) / segment_s for lvl, a, b in known)
        smoothness = sum(abs(q(kbps_of[y], min_kbps) - q(kbps_of[x], min_kbps))
                         for (x, _, _), (y, _, _) in zip(known, known[1:]) if x != y)
        out[f"qoe_{name}"] = round((utility - mu * stall_s - smoothness) / chunks, 4)
    return out


def _first(events: list[dict], type_: str, after: float | None = None) -> dict | None:
    return next((e for e in events if e["type"] == type_ and (after is None or e["t"] >= after)), None)


def startup(log: dict) -> dict[str, float | None]:
    """Startup time: load start (the player page's navigation start) -> first `playing`."""
    ev = log.get("events") or []
    t0 = log.get("t_load_start")
    play = _first(ev, "playing")
    out: dict[str, float | None] = {"startup_s": None, "startup_player_s": None}
    if play is not None and t0 is not None:
        out["startup_s"] = round((play["t"] - t0) / 1000, 3)
        if log.get("t_player_start") is not None:
            out["startup_player_s"] = round((play["t"] - log["t_player_start"]) / 1000, 3)
    return out


END_SLACK_S = 0.5      # a VOD "waiting" this close to its end is its end (audio outlasts video a little)


def stalls(log: dict, t_end: float, media_end: float | None = None) -> list[dict[str, Any]]:
    """Rebuffering events after the first `playing`: a `waiting` opens a stall, the next
    `playing` ends it. A stall still open at t_end has ended = False and lasts until t_end.
    `waiting` around a seek, after `ended` or (VOD) within END_SLACK_S of the media's end
    (media_end) is not a stall."""
    ev = sorted(log.get("events") or [], key=lambda e: e["t"])
    out: list[dict[str, Any]] = []
    started = False
    open_: dict | None = None
    seeking = False
    for e in ev:
        if e["t"] > t_end:
            break
        typ = e["type"]
        if typ == "playing":
            started = True
            if open_ is not None:
                open_.update(end_t=e["t"], duration_s=round((e["t"] - open_["t"]) / 1000, 3), ended=True)
                out.append(open_)
                open_ = None
        elif typ == "seeking":
            seeking = True
        elif typ == "seeked":
            seeking = False
        elif typ == "ended":
            break
        elif typ == "waiting" and media_end is not None and e.get("pos", 0.0) >= media_end - END_SLACK_S:
            break
        elif typ == "waiting" and started and open_ is None and not seeking:
            open_ = {"t": e["t"], "pos": round(e.get("pos", 0.0), 3)}
    if open_ is not None:
        open_.update(end_t=t_end, duration_s=round((t_end - open_["t"]) / 1000, 3), ended=False)
        out.append(open_)
    return out


def level_at(switches: list[dict], t: float) -> int | None:
    lvl = None
    for s in switches:
        if s["t"] <= t:
            lvl = s["level"]
        else:
            break
    return lvl


def played_switches(played: list[tuple[int | None, float, float]], times: list[float]) -> list[dict[str, Any]]:
    """Changes of the played level (what the viewer saw; the first level is not a switch), with
    the wall time and media position of the stretch that showed the new level."""
    out, prev = [], None
    for (lvl, a, _), t in zip(played, times):
        if lvl is None:
            continue
        if prev is not None and lvl != prev:
            out.append({"t": t, "pos": round(a, 3), "from": prev, "to": lvl,
                        "direction": "up" if lvl > prev else "down"})
        prev = lvl
    return out


def segments(records: list[dict], streams: dict[int, dict], segment_s: float) -> list[dict[str, Any]]:
    """Per media segment request (from the browser's Network records): stream, number, rung,
    bytes, TTFB, download time, protocol. streams: stream id -> {type, kbps, width, height}."""
    out = []
    for r in records:
        m = SEGMENT_RE.search(r.get("path") or "")
        if not m:
            continue
        sid, num = int(m.group(1)), int(m.group(2))
        st = streams.get(sid, {})
        start, send = r.get("start_ns"), r.get("send_ns") or r.get("start_ns")
        first, last = r.get("first_byte_ns"), r.get("last_byte_ns")
        ok = not r.get("error") and r.get("status") == 200
        seg = {"path": r["path"], "stream": sid, "number": num, "type": st.get("type"),
               "level": st.get("level"), "nominal_kbps": st.get("kbps"),
               "resolution": f"{st['width']}x{st['height']}" if st.get("height") else None,
               "bytes": r.get("bytes") if ok else 0, "proto": r.get("proto"), "ok": ok, "error": r.get("error"),
               "request_ms": round((start or 0) / 1e6, 3) if start else None,
               "ttfb_ms": round((first - send) / 1e6, 3) if first and send else None,
               "download_ms": round((last - first) / 1e6, 3) if first and last else None,
               "total_ms": round((last - start) / 1e6, 3) if last and start else None}
        seg["kbps"] = round(seg["bytes"] * 8 / segment_s / 1000, 1) if ok and segment_s > 0 else None
        out.append(seg)
    return out


def hls_fragment_stats(log: dict) -> dict[str, float | None]:
    """hls.js's own fragment figures, as the hls.js demo page computes them (demo/main.js, the
    `stats` it shows: fragAvgLatency, fragAvgKbps), which is where DNCS-HTTP3's hls.js player read
    its "Avg latency" and "Avg bitrate" (docs/video.md, "DNCS-HTTP3's metrics"):

    * latency per fragment: `stats.loading.first - stats.loading.start`, the loader's start of the
      request to the response's first byte (XHR readyState HEADERS_RECEIVED) as the player's
      JavaScript sees it; mean and median over every media fragment hls.js loaded (video and
      audio, FRAG_LOADED);
    * throughput per fragment: `8 * bytes / (stats.buffering.end - stats.loading.first)` in
      kbit/s (bits per ms), the first byte to the fragment's end of buffering (download, demuxing
      and appending); mean over the fragments that were buffered.

    Empty for dash.js (its firstByteDate is the first progress event, and the start date when the
    body came whole in one: not the same figure) and for logs without hls.js fragments."""
    out: dict[str, float | None] = {"frag_latency_ms_mean": None, "frag_latency_ms_median": None,
                                    "frag_kbps_mean": None}
    if log.get("player") != "hls":
        return out
    frags = [f for f in log.get("frags") or [] if f.get("req") is not None and f.get("first") is not None]
    lat = [f["first"] - f["req"] for f in frags if f["first"] >= f["req"]]
    if lat:
        out["frag_latency_ms_mean"] = round(statistics.fmean(lat), 3)
        out["frag_latency_ms_median"] = round(statistics.median(lat), 3)
    kbps = [8 * f["bytes"] / (f["buffered"] - f["first"]) for f in frags
            if f.get("buffered") is not None and f.get("bytes") and f["buffered"] > f["first"]]
    if kbps:
        out["frag_kbps_mean"] = round(statistics.fmean(kbps), 1)
    return out


def level_on_screen(log: dict, by_level: dict[int, dict], t_play: float) -> Callable[[dict, float], int | None]:
    """How to tell the level on screen at a sample: the rung of the video's decoded height
    (videoHeight, what the viewer saw: the players' switch events come when the new level is
    buffered, seconds before it plays) when the ladder's heights tell rungs apart; else the
    player's last switch event, and before the first one the level of the first video fragment."""
    by_height = {v.get("height"): lvl for lvl, v in by_level.items()}
    heights_unique = len(by_height) == len(by_level) and None not in by_height
    switches = sorted((s for s in (log.get("switches") or []) if s.get("level") is not None), key=lambda s: s["t"])
    # a player may render its first level without a switch event (dash.js)
    first_frag = next((f for f in sorted(log.get("frags") or [], key=lambda f: f["t"])
                       if f.get("type") in ("main", "video") and f.get("level") is not None), None)
    if first_frag is not None and (not switches or switches[0]["t"] > t_play):
        switches.insert(0, {"t": float("-inf"), "level": first_frag["level"], "kind": "first fragment"})

    def level_of(sample: dict, t: float) -> int | None:
        if heights_unique and sample.get("h") in by_height:
            return by_height[sample["h"]]
        return level_at(switches, t)
    return level_of


def chunk_table(played: list[tuple[int | None, float, float]], st: list[dict], segment_s: float
                ) -> list[dict[str, Any]]:
    """Per media chunk (segment n covers media time [n, n+1) x segment_s): seconds played at each
    level, the level that played most of it, and the rebuffering at its positions."""
    if segment_s <= 0:
        return []
    chunks: dict[int, dict[str, Any]] = {}

    def chunk(n: int) -> dict[str, Any]:
        return chunks.setdefault(n, {"chunk": n, "media_start_s": round(n * segment_s, 3), "played_s": {},
                                     "stall_s": 0.0})
    for lvl, a, b in played:
        while b - a > 1e-9:
            n = int(math.floor(a / segment_s + 1e-9))
            end = min(b, (n + 1) * segment_s)
            c = chunk(n)
            key = str(lvl)
            c["played_s"][key] = c["played_s"].get(key, 0.0) + (end - a)
            a = end
    for s in st:
        chunk(int(math.floor(s["pos"] / segment_s + 1e-9)))["stall_s"] += s["duration_s"]
    out = []
    for n in sorted(chunks):
        c = chunks[n]
        c["played_s"] = {k: round(v, 3) for k, v in c["played_s"].items()}
        most = max(c["played_s"], key=c["played_s"].get, default="None")
        c["level"] = None if most == "None" else int(most)
        c["stall_s"] = round(c["stall_s"], 3)
        out.append(c)
    return out


POSITION_JUMP_S = 0.25     # playback at rate 1 moves the position by the wall time, give or take


def played_stretches(samples: list[dict], t_from: float, level_of: Callable[[dict, float], int | None]
                     ) -> tuple[list[tuple[int | None, float, float]], list[float]]:
    """The stretches of media played after t_from: for every pair of consecutive samples between
    which the position advanced, (level, media from, media to), and the sample's wall time. A
    position that moved more than POSITION_JUMP_S beyond the wall time between the samples jumped
    (a seek, a skipped gap): only the wall time counts as played. level_of(sample, wall ms) names
    the level on screen."""
    out, times, prev = [], [], None
    for s in samples:
        if s["t"] < t_from:
            prev = s
            continue
        if prev is not None and s.get("pos", 0) > prev.get("pos", 0) + 1e-3 and not s.get("paused"):
            wall = (s["t"] - max(prev["t"], t_from)) / 1000
            to = s["pos"]
            start = prev.get("pos", 0)
            if to - start > wall + POSITION_JUMP_S:
                start = to - wall
            if to > start:
                out.append((level_of(s, (s["t"] + max(prev["t"], t_from)) / 2), start, to))
                times.append(s["t"])
        prev = s
    return out, times


def compute(log: dict, records: list[dict], streams: dict[int, dict], segment_s: float, fps: float,
            t_end: float, live: bool = False, codec: str = "h264", media_end: float | None = None
            ) -> dict[str, Any]:
    """Every metric of a playback. Returns {"row": flat columns for the trial row,
    "segments": [...], "stalls": [...], "switches": [...], "p1203": P.1203-shaped input}."""
    row: dict[str, Any] = {}
    row.update(startup(log))
    ev = log.get("events") or []
    play = _first(ev, "playing")
    t_play = play["t"] if play else None
    st = stalls(log, t_end, None if live else media_end)
    segs = segments(records, streams, segment_s)
    samples = sorted(log.get("samples") or [], key=lambda s: s["t"])
    watched_s = (t_end - t_play) / 1000 if t_play is not None else 0.0
    stall_s = sum(s["duration_s"] for s in st)
    row["stalls"] = len(st)
    row["stall_total_s"] = round(stall_s, 3)
    row["stall_unended"] = any(not s["ended"] for s in st)
    row["rebuffer_ratio"] = round(stall_s / watched_s, 4) if watched_s > 0 else None
    row["watched_s"] = round(watched_s, 3)
    minutes = watched_s / 60
    by_level = {v["level"]: v for v in streams.values() if v.get("type") == "video"}
    kbps_of = {lvl: float(v["kbps"]) for lvl, v in by_level.items() if v.get("kbps")}
    played, played_t = (played_stretches(samples, t_play, level_on_screen(log, by_level, t_play))
                        if t_play is not None else ([], []))
    sw = played_switches(played, played_t)
    row["switches"] = len(sw)
    row["switches_up"] = sum(s["direction"] == "up" for s in sw)
    row["switches_down"] = sum(s["direction"] == "down" for s in sw)
    # mean played bitrate: the nominal bitrate of the level on screen, weighted by the media time
    # played with it (stalls and the start-up are not played time)
    level_time: dict[int, float] = {}
    for lvl, a, b in played:
        if lvl in kbps_of:
            level_time[lvl] = level_time.get(lvl, 0.0) + (b - a)
    den = sum(level_time.values())
    row["played_s"] = round(den, 3)
    row["mean_bitrate_kbps"] = (round(sum(kbps_of[lvl] * t for lvl, t in level_time.items()) / den, 1)
                                if den > 0 else None)
    row["level_time_s"] = {str(k): round(v, 2) for k, v in sorted(level_time.items())} or None
    row["top_level_share"] = (round(level_time.get(max(by_level), 0.0) / den, 4) if den > 0 and by_level else None)
    row.update(qoe_per_chunk(played, kbps_of, stall_s, segment_s))
    vsegs = [s for s in segs if s["type"] == "video" and s["ok"]]
    row["segments_video"] = len(vsegs)
    row["segments_audio"] = sum(1 for s in segs if s["type"] == "audio" and s["ok"])
    row["segment_bytes"] = sum(s["bytes"] for s in segs if s["ok"])
    for key in ("ttfb_ms", "download_ms"):
        vals = [s[key] for s in vsegs if s[key] is not None]
        row[f"segment_{key}_median"] = round(statistics.median(vals), 3) if vals else None
    ttfbs = [s["ttfb_ms"] for s in vsegs if s["ttfb_ms"] is not None]
    row["segment_ttfb_ms_mean"] = round(statistics.fmean(ttfbs), 3) if ttfbs else None
    row.update(hls_fragment_stats(log))
    row["segment_kbps_mean"] = round(statistics.fmean(s["kbps"] for s in vsegs), 1) if vsegs else None
    # frames: the last sample's counters (CPU health, not QoE: a busy client drops frames)
    last = next((s for s in reversed(samples) if s.get("decoded") is not None), None)
    row["frames_decoded"] = last.get("decoded") if last else None
    row["frames_dropped"] = last.get("dropped") if last else None
    row["frames_dropped_ratio"] = (round(last["dropped"] / last["decoded"], 4)
                                   if last and last.get("decoded") else None)
    row["cpu_health_frames"] = (None if row["frames_dropped_ratio"] is None
                                else ("ok" if row["frames_dropped_ratio"] <= DROPPED_FRAMES_LIMIT else "dropping"))
    if live:
        lat = [s["latency_s"] for s in samples if s.get("latency_s") is not None and t_play is not None
               and s["t"] >= t_play]
        row["live_latency_s_mean"] = round(statistics.fmean(lat), 3) if lat else None
        row["live_latency_s_median"] = round(statistics.median(lat), 3) if lat else None
        row["live_latency_s_max"] = round(max(lat), 3) if lat else None
        row["live_latency_s_last"] = round(lat[-1], 3) if lat else None
    row["rebuffer_s_per_min"] = round(stall_s / minutes, 3) if minutes > 0 and t_play is not None else None
    row["switches_per_min"] = round(len(sw) / minutes, 3) if minutes > 0 and t_play is not None else None
    errors = log.get("errors") or []
    row["player_errors"] = len(errors)
    row["player_fatal_errors"] = sum(1 for e in errors if e.get("fatal"))
    p1203 = p1203_input(segs, st, row["startup_s"], segment_s, fps, codec, samples, t_play)
    t0 = log.get("t_load_start") or (samples[0]["t"] if samples else 0)
    timeline = [{"t_s": round((s["t"] - t0) / 1000, 3), "buffer_s": s.get("buffer_s"), "height": s.get("h") or None}
                for s in samples]
    spans = [[round((s["t"] - t0) / 1000, 3), round((s["end_t"] - t0) / 1000, 3)] for s in st]
    return {"row": row, "segments": segs, "stalls": st, "switches": sw, "p1203": p1203, "timeline": timeline,
            "stall_spans": spans, "chunks": chunk_table(played, st, segment_s)}


def frames_presented(vframes: list[list[float]], fps: float, t_from: float | None) -> dict[str, Any]:
    """What the compositor showed after t_from (requestVideoFrameCallback, player.html's
    `vframes`: [wall ms, media time s, presentedFrames]): frames presented, and frames skipped:
    for two successive callbacks, the frames the media time advanced by (× fps) that the
    presentedFrames counter did not (a step back or of a second or more is a seek, not counted)."""
    if not vframes or t_from is None or fps <= 0:
        return {"frames_presented": None, "frames_skipped": None, "frames_skipped_ratio": None}
    frames = [f for f in vframes if f[0] >= t_from]
    skipped = 0
    for (_, m0, n0), (_, m1, n1) in zip(frames, frames[1:]):
        if 0 < m1 - m0 < 1.0:
            skipped += max(0, round((m1 - m0) * fps) - max(0, n1 - n0))
    presented = frames[-1][2] - frames[0][2] + 1 if frames else 0
    return {"frames_presented": presented, "frames_skipped": skipped,
            "frames_skipped_ratio": round(skipped / (presented + skipped), 4) if presented + skipped else None}


def player_cpu(startup: dict | None, playback: dict | None) -> dict[str, float | None]:
    """The browser's CPU by process kind (video.py's sched_delta of the start-up, page load start
    -> first frame, and of the playback, first frame -> stop): on-CPU and run-queue wait as % of
    one core over the phase. Playback: the renderer (the player page: demuxing, decoding in its
    Media thread, the video frame compositor) and the GPU process (with --disable-gpu: the
    display compositor). Start-up: the CPU of every browser process (navigation, network,
    JavaScript, MSE; not the Playwright driver), and the wait of the renderer's main thread, which
    runs the player's JavaScript and lies on the start-up's critical path."""
    out: dict[str, float | None] = {}

    def pct(seconds: float | None, phase: dict | None) -> float | None:
        wall = (phase or {}).get("wall_s")
        return round(100 * seconds / wall, 1) if seconds is not None and wall else None

    by = (playback or {}).get("by_process") or {}
    for col, kind in (("renderer", "renderer"), ("gpu_process", "gpu-process")):
        cpu, wait = by.get(kind, (None, None))
        out[f"{col}_cpu_pct"], out[f"{col}_wait_pct"] = pct(cpu, playback), pct(wait, playback)
    browser = [v for k, v in ((startup or {}).get("by_process") or {}).items() if k != "driver"]
    out["startup_cpu_pct"] = pct(sum(v[0] for v in browser), startup) if browser else None
    main = ((startup or {}).get("by_thread") or {}).get("renderer/main")
    out["startup_main_wait_pct"] = pct(main[1], startup) if main else None
    return out


# The player rule (docs/video.md, "CPU-bound playback")
PLAYER_FRAMES_LOST_LIMIT = 0.01      # dropped or never-presented frames, share of the frames ...
PLAYER_RENDERER_WAIT_LIMIT = 20.0    # ... while the renderer waited this % of the playback for a CPU
PLAYER_STARTUP_WAIT_LIMIT = 50.0     # the player's JavaScript waited this % of the start-up


def player_cpu_bound(row: dict[str, Any], frames_limit: float = PLAYER_FRAMES_LOST_LIMIT,
                     wait_limit: float = PLAYER_RENDERER_WAIT_LIMIT,
                     startup_limit: float = PLAYER_STARTUP_WAIT_LIMIT) -> bool | None:
    """Did the client's CPU, not the network, shape a playback's figures? Yes when
    * the viewer lost frames (the decoder dropped more than frames_limit of them, or the
      compositor never presented that share) while the renderer waited for a CPU at least
      wait_limit % of the playback: lost frames without that wait are the player's own (a level
      switch that flushed the buffer), wait without lost frames never reached the viewer; or
    * the renderer's main thread, which runs the player's JavaScript, waited for a CPU at least
      startup_limit % of the start-up: startup_s then measures the CPU as much as the network.
    row holds the video columns (frames_*_ratio, renderer_wait_pct, startup_main_wait_pct); None
    when none of the figures was measured."""
    lost = [row.get("frames_dropped_ratio"), row.get("frames_skipped_ratio")]
    wait, startup = row.get("renderer_wait_pct"), row.get("startup_main_wait_pct")
    if startup is None and (wait is None or lost == [None, None]):
        return None
    frames = wait is not None and max(x or 0.0 for x in lost) > frames_limit and wait >= wait_limit
    return frames or (startup is not None and startup >= startup_limit)


def p1203_input(segs: list[dict], st: list[dict], startup_s: float | None, segment_s: float, fps: float,
                codec: str, samples: list[dict], t_play: float | None) -> dict[str, Any]:
    """An ITU-T P.1203 (mode 0) input in the JSON shape of the standalone implementations:
    I13 = video segments (codec, bitrate, resolution, fps, duration, start) as played, in media
    order (the last download of each media position wins, as a replacement would), I11 = audio
    segments, I23 = stalls [[media position, duration]] with the initial loading as [0, startup]."""
    end_pos = max((s.get("pos", 0.0) for s in samples), default=0.0)

    def played(kind: str) -> list[dict]:
        chosen: dict[int, dict] = {}
        for s in segs:
            if s["type"] == kind and s["ok"]:
                chosen[s["number"]] = s
        if not chosen:
            return []
        first = min(chosen)
        out = []
        for n in sorted(chosen):
            start = (n - first) * segment_s
            if out and (n - 1) * segment_s >= end_pos:      # media time of segment n: (n-1) x segment_s
                break
            s = chosen[n]
            item = {"start": start, "duration": segment_s, "bitrate": s["kbps"], "codec": codec if kind == "video"
                    else "aaclc"}
            if kind == "video":
                item.update(resolution=s["resolution"], fps=fps)
            out.append(item)
        return out

    stalling = [[0.0, startup_s]] if startup_s is not None else []
    stalling += [[s["pos"], s["duration_s"]] for s in st]
    return {"I11": {"segments": played("audio"), "streamId": 1},
            "I13": {"segments": played("video"), "streamId": 1},
            "I23": {"stalling": stalling, "streamId": 1},
            "IGen": {"device": "pc", "displaySize": "1280x720", "viewingDistance": "150cm"}}
