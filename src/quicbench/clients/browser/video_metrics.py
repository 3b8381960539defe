"""Video QoE metrics from a recorded playback: pure functions of the player's event log
(``window.qbLog`` of player.html) and the browser's per-request records (DevTools Network).

All times in the log are wall-clock milliseconds (the host's clock, shared with the server's
live publisher); request records carry Unix nanoseconds. See docs/video.md for every figure.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

SEGMENT_RE = re.compile(r"/chunk-stream(\d+)-(\d+)\.m4s$")
# QoE (docs/video.md): the linear form of Yin et al., "A Control-Theoretic Approach for Dynamic
# Adaptive Video Streaming over HTTP", SIGCOMM'15 (quality - switching penalty - rebuffering
# penalty), per minute of playback, with the rebuffering weight 4.3 (per Mbit/s of the top rung
# order, as Pensieve's QoE_lin) and 1 per switch.
QOE_REBUF_WEIGHT = 4.3
QOE_SWITCH_WEIGHT = 1.0
DROPPED_FRAMES_LIMIT = 0.01     # more than 1 % dropped frames: the client's CPU did not keep up


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


def quality_switches(log: dict) -> list[dict[str, Any]]:
    """Rendered level changes (the first rendered level is not a switch)."""
    out, prev = [], None
    for s in sorted(log.get("switches") or [], key=lambda s: s["t"]):
        if s.get("level") is None:
            continue
        if prev is not None and s["level"] != prev:
            out.append({"t": s["t"], "pos": s.get("pos"), "from": prev, "to": s["level"],
                        "direction": "up" if s["level"] > prev else "down"})
        prev = s["level"]
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


def _advancing_samples(samples: list[dict], t_from: float) -> list[tuple[dict, float, float]]:
    """Samples after t_from where the play position advanced since the previous one, with the
    wall time they cover and the middle of that interval."""
    out, prev = [], None
    for s in samples:
        if s["t"] < t_from:
            prev = s
            continue
        if prev is not None and s.get("pos", 0) > prev.get("pos", 0) + 1e-3 and not s.get("paused"):
            a = max(prev["t"], t_from)
            out.append((s, (s["t"] - a) / 1000, (s["t"] + a) / 2))
        prev = s
    return out


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
    sw = quality_switches(log)
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
    row["switches"] = len(sw)
    row["switches_up"] = sum(s["direction"] == "up" for s in sw)
    row["switches_down"] = sum(s["direction"] == "down" for s in sw)
    # mean played bitrate: the rendered rung's nominal bitrate, weighted by the wall time the
    # play position advanced with it (stalls and the start-up are not played time)
    switches = sorted((s for s in (log.get("switches") or []) if s.get("level") is not None), key=lambda s: s["t"])
    # a player may render its first level without a switch event (dash.js): until the first
    # rendered switch, the level is that of the first video fragment it loaded
    first_frag = next((f for f in sorted(log.get("frags") or [], key=lambda f: f["t"])
                       if f.get("type") in ("main", "video") and f.get("level") is not None), None)
    if first_frag is not None and (not switches or (t_play is not None and switches[0]["t"] > t_play)):
        switches.insert(0, {"t": float("-inf"), "level": first_frag["level"], "kind": "first fragment"})
    by_level = {v["level"]: v for v in streams.values() if v.get("type") == "video"}
    played = _advancing_samples(samples, t_play) if t_play is not None else []
    num = den = 0.0
    level_time: dict[int, float] = {}
    for s, dt, mid in played:
        lvl = level_at(switches, mid)
        if lvl is None or lvl not in by_level:
            continue
        num += by_level[lvl]["kbps"] * dt
        den += dt
        level_time[lvl] = level_time.get(lvl, 0.0) + dt
    row["played_s"] = round(den, 3)
    row["mean_bitrate_kbps"] = round(num / den, 1) if den > 0 else None
    row["level_time_s"] = {str(k): round(v, 2) for k, v in sorted(level_time.items())} or None
    row["top_level_share"] = (round(level_time.get(max(by_level), 0.0) / den, 4) if den > 0 and by_level else None)
    vsegs = [s for s in segs if s["type"] == "video" and s["ok"]]
    row["segments_video"] = len(vsegs)
    row["segments_audio"] = sum(1 for s in segs if s["type"] == "audio" and s["ok"])
    row["segment_bytes"] = sum(s["bytes"] for s in segs if s["ok"])
    for key in ("ttfb_ms", "download_ms"):
        vals = [s[key] for s in vsegs if s[key] is not None]
        row[f"segment_{key}_median"] = round(statistics.median(vals), 3) if vals else None
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
    # QoE (Yin et al. SIGCOMM'15 linear form, per minute): Mbit/s - 4.3 x rebuffer s/min - 1 x switches/min
    if row["mean_bitrate_kbps"] is not None and minutes > 0:
        row["rebuffer_s_per_min"] = round(stall_s / minutes, 3)
        row["switches_per_min"] = round(len(sw) / minutes, 3)
        row["qoe_score"] = round(row["mean_bitrate_kbps"] / 1000 - QOE_REBUF_WEIGHT * row["rebuffer_s_per_min"]
                                 - QOE_SWITCH_WEIGHT * row["switches_per_min"], 3)
    else:
        row["rebuffer_s_per_min"] = row["switches_per_min"] = row["qoe_score"] = None
    errors = log.get("errors") or []
    row["player_errors"] = len(errors)
    row["player_fatal_errors"] = sum(1 for e in errors if e.get("fatal"))
    p1203 = p1203_input(segs, st, row["startup_s"], segment_s, fps, codec, samples, t_play)
    t0 = log.get("t_load_start") or (samples[0]["t"] if samples else 0)
    timeline = [{"t_s": round((s["t"] - t0) / 1000, 3), "buffer_s": s.get("buffer_s"), "height": s.get("h") or None}
                for s in samples]
    spans = [[round((s["t"] - t0) / 1000, 3), round((s["end_t"] - t0) / 1000, 3)] for s in st]
    return {"row": row, "segments": segs, "stalls": st, "switches": sw, "p1203": p1203, "timeline": timeline,
            "stall_spans": spans}


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
