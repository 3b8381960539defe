"""`video`: adaptive video playback (hls.js or dash.js) in Debian's Chromium, inside the client node.

The same structure as the page-load child (driver.py): one child process per trial in the
client namespace, a fresh profile, the protocol forced by ``chromium_flags`` and verified on
every request from the DevTools Network events. The child first checks that this Chromium's
MediaSource plays H.264 (``MediaSource.isTypeSupported('video/mp4; codecs="avc1.64001f"')``),
opens ``/player/player.html?player=...&src=...`` on the lab's server, lets it play for the
workload's duration (a VOD to its end), and writes ``video.json``: the player's log
(``window.qbLog``), every request, the flags. The parent computes the QoE metrics
(video_metrics.py), writes ``video_metrics.json`` and ``p1203.json``, and fails the trial when a
request went over another protocol, the player reported a fatal error, a stall never ended or
playback never started.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from quicbench.clients.base import ClientResult, FetchRequest, Target
from quicbench.clients.browser.driver import (BrowserClient, ChildRun, chromium_flags, run_browser_child,
                                             write_requests_and_summary)
from quicbench.clients.browser.recorder import (_descendants, _Recorder, _settle, _write_prefs, child_main,
                                                record_network, tree_cpu)
from quicbench.clients.browser.video_metrics import (END_SLACK_S, compute, frames_presented, player_cpu,
                                                     player_cpu_bound)

CHILD = "import sys; from quicbench.clients.browser.video import main; sys.exit(main())"
MSE_TYPE = 'video/mp4; codecs="avc1.64001f"'
STARTUP_LIMIT_S = 30.0        # no first frame after this long: the trial fails
STALL_LIMIT_S = 20.0          # a stall longer than this "never ends": the trial fails
# a download the player cancelled itself: Chromium's net::ERR_ABORTED, Firefox's NS_BINDING_ABORTED
ABORTED = ("ERR_ABORTED", "NS_BINDING_ABORTED")


def player_url(target: Target, workload) -> str:
    port = "" if target.port == 443 else f":{target.port}"
    vkey = workload_video_key(workload)
    base = "live" if workload.mode == "live" else "video"
    src = f"/{base}/{vkey}/" + ("manifest.mpd" if workload.player == "dashjs" else "master.m3u8")
    return (f"https://{target.hostname}{port}/player/player.html?player={workload.player}&src={quote(src)}"
            f"&live={1 if workload.mode == 'live' else 0}")


def workload_video_key(workload) -> str:
    return workload.video_spec().key


class VideoClient(BrowserClient):
    name = "video"
    provisions = ("video",)
    workload_kinds = ("video",)

    @classmethod
    def playable_codecs(cls) -> tuple[tuple[str, ...], str] | None:
        """The ladder codecs this browser plays here and the fix for the others; None: not known
        before it starts (Debian's Chromium plays every codec of model.video.CODECS)."""
        return None

    @classmethod
    def version(cls) -> dict[str, str]:
        from quicbench.content.video import player_versions
        out = {**super().version(), **player_versions()}
        try:
            import subprocess
            first = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True,
                                   timeout=20).stdout.split("\n")[0]
            # 'ffmpeg version 5.1.9-0+deb12u1 Copyright (c) ...': the version
            out["ffmpeg"] = first.split()[2] if first.startswith("ffmpeg version ") else first
        except Exception as e:  # noqa: BLE001
            out["ffmpeg"] = f"unknown ({e})"
        return out

    def fetch(self, req: FetchRequest) -> ClientResult:
        target, protocol, workload, trial_dir = req.target, req.protocol, req.workload, req.trial_dir
        vinfo = (target.content.manifest.get("videos") or {}).get(workload_video_key(workload))
        if vinfo is None:
            return ClientResult(requests=[], summary={}, process_cpu_s=None, wall_s=0.0, returncode=-1,
                                error=f"video {workload.label}: not in the content set (generate it with the plan)")

        def make_args(profile: Path) -> dict[str, Any]:
            return {"url": player_url(target, workload), "protocol": protocol, "host": target.hostname,
                    "port": target.port, "address": target.address, "spki": target.tls.spki_sha256_b64,
                    "trial_dir": str(trial_dir), "profile": str(profile), "timeout_s": req.timeout_s,
                    "executable": self.executable(),
                    "play_s": workload.video_spec().duration_s if workload.mode == "vod" else workload.duration_s,
                    "vod": workload.mode == "vod", "settle": os.environ.get("QUICBENCH_BROWSER_SETTLE", "1") != "0",
                    "extra_flags": os.environ.get("QUICBENCH_CHROMIUM_FLAGS", "").split()}

        run = run_browser_child(req, CHILD, "video.json", "video playback",
                                ("video.json", "requests.jsonl", "video_metrics.json", "p1203.json"), make_args)
        if isinstance(run, ClientResult):
            return run
        return self.result_of(run, trial_dir, protocol, vinfo, workload, interpret_video,
                              {"chromium": run.out.get("browser_version"), "flags": run.out.get("flags")})

    @staticmethod
    def result_of(run: ChildRun, trial_dir: Path, protocol: str, vinfo: dict, workload, interpret,
                  browser: dict[str, Any]) -> ClientResult:
        """A playback child's video.json -> the trial's result: metrics, video_metrics.json,
        p1203.json, requests.jsonl, summary.json (browser: the browser's fields in it)."""
        out = run.out
        requests, extra, error = interpret(out, protocol, vinfo, workload)
        if out.get("metrics_detail"):
            detail = out.pop("metrics_detail")
            (trial_dir / "p1203.json").write_text(json.dumps(detail["p1203"], indent=1))
            (trial_dir / "video_metrics.json").write_text(json.dumps(
                {k: detail[k] for k in ("row", "segments", "stalls", "switches", "chunks", "timeline",
                                                      "stall_spans")}, indent=1))
        summary = write_requests_and_summary(trial_dir, requests, out, {
            "url": out.get("url"), **browser, "players": (out.get("qblog") or {}).get("versions")})
        return ClientResult(requests=requests, summary=summary, process_cpu_s=run.cpu, wall_s=run.wall,
                            returncode=run.returncode, error=error, extra=extra)


def streams_of(vinfo: dict) -> dict[int, dict]:
    out = {}
    level = 0
    for s in vinfo["streams"]:
        d = dict(s)
        if s["type"] == "video":
            d["level"] = level
            level += 1
        out[int(s["id"])] = d
    return out


def interpret_video(out: dict, protocol: str, vinfo: dict, workload) -> tuple[list[dict], dict[str, Any], str | None]:
    """video.json -> (per-request records, row columns, error or None). Computes the metrics
    into out['metrics_detail']."""
    requests = out.get("requests") or []
    log = out.get("qblog") or {}
    spec = vinfo["spec"]
    problems: list[str] = []
    if out.get("error"):
        problems.append(out["error"])
    # the requests still in flight when playback was stopped (the next segment, a playlist
    # refresh) and those a player cancelled itself (an abandoned download) are not failures
    finished = [r for r in requests if r.get("error") not in ("unfinished",)
                and not any(a in (r.get("error") or "") for a in ABORTED)]
    mismatches = [f"{r['path']}: {r.get('proto') or r.get('raw_protocol') or 'none'}" for r in requests
                  if r.get("proto") is not None and r["proto"] != protocol]
    extra: dict[str, Any] = {}
    if mismatches:
        extra["protocol_mismatches"] = json.dumps(mismatches)
        problems.append(f"protocol mismatch: requested {protocol}, {len(mismatches)} of {len(requests)} request(s) "
                        f"used another protocol ({', '.join(mismatches[:5])}{', ...' if len(mismatches) > 5 else ''})")
    no_proto = [r for r in finished if r.get("proto") is None and not r.get("error")]
    if no_proto:
        problems.append(f"{len(no_proto)} request(s) without a protocol, first: {no_proto[0]['path']}")
    failed = [r for r in finished if r.get("error")]
    if failed:
        problems.append(f"{len(failed)} of {len(requests)} request(s) failed, first: {failed[0]['path']}: "
                        f"{failed[0]['error']}")
    host = out.get("host")
    foreign = [r["url"] for r in requests if host and urlsplit(r.get("url", "")).hostname != host]
    if foreign:
        problems.append(f"requests outside the lab origin: {', '.join(foreign[:3])}")
    t_end = out.get("t_end_ms") or (max((s["t"] for s in log.get("samples") or []), default=0))
    detail = compute(log, requests, streams_of(vinfo), float(spec["segment_s"]), float(spec["fps"]), t_end,
                     live=workload.mode == "live", codec=spec.get("codec", "h264"),
                     media_end=float(spec["duration_s"]))
    row = detail["row"]
    row.update(frames_presented((log.get("vframes") or []), float(spec["fps"]),
                                next((e["t"] for e in log.get("events") or [] if e["type"] == "playing"), None)))
    row.update(player_cpu(out.get("sched_startup"), out.get("sched_playback")))
    row["player_cpu_bound"] = player_cpu_bound(row)
    out["metrics_detail"] = detail
    extra.update(row)
    extra["video_player"] = workload.player
    extra["video_mode"] = workload.mode
    fatal = [e for e in log.get("errors") or [] if e.get("fatal")]
    if fatal:
        problems.append(f"player error ({fatal[0]['source']}): {fatal[0]['detail']}")
    if row.get("startup_s") is None and not out.get("error"):
        problems.append("playback never started (no 'playing' event)")
    if row.get("stall_unended"):
        last = detail["stalls"][-1]
        problems.append(f"a stall never ended: waiting since media position {last['pos']} s for "
                        f"{last['duration_s']} s")
    if [r for r in requests if r.get("proto") is not None] == [] and not out.get("error"):
        problems.append("no request was recorded")
    vsegs = [s for s in detail["segments"] if s["type"] == "video" and s["ok"]]
    wrong = [s["path"] for s in vsegs if s["proto"] != protocol]
    if wrong:      # already in the mismatch list; said again for segments, the figure that matters
        problems.append(f"{len(wrong)} video segment(s) over another protocol than {protocol}")
    error = "; ".join(dict.fromkeys(problems)) if problems else None
    return requests, extra, error


# ---------------------------------------------------------------------------------------------
# The child: runs inside the client namespace, plays the video in Chromium.
# ---------------------------------------------------------------------------------------------

_STATE_JS = """() => { const l = window.qbLog; if (!l) return null;
  const ev = l.events, v = document.getElementById('v');
  return {n: ev.length, playing: ev.some(e => e.type === 'playing'), ended: ev.some(e => e.type === 'ended'),
          last: ev.length ? ev[ev.length - 1].type : null, t_last: ev.length ? ev[ev.length - 1].t : null,
          fatal: l.errors.filter(e => e.fatal).length, pos: v ? v.currentTime : null,
          waiting_since: (() => { for (let i = ev.length - 1; i >= 0; i--) {
            if (ev[i].type === 'playing') return null; if (ev[i].type === 'waiting') return ev[i].t; }
            return null; })(),
          now: performance.timeOrigin + performance.now()}; }"""


# Firefox's process types as the CPU columns name Chromium's: the content process ("tab") runs the
# page (the player's JavaScript, MSE) as Chromium's renderer does; Firefox decodes video in its
# RDD process ("firefox:rdd"), which Chromium does in the renderer (docs/video.md, Firefox)
FIREFOX_KINDS = {"tab": "renderer", "gpu": "gpu-process"}


def process_kind(pid: int) -> str | None:
    """What a process of the browser's tree is: Chromium's `--type` (renderer, gpu-process,
    utility:<sub-type>, zygote, ...), Firefox's `-contentproc` type (FIREFOX_KINDS), `browser` for
    the browser's main process, `driver` for the rest (this child, Playwright's driver, the
    Firefox bridge); None when it is gone."""
    try:     # Chromium rewrites its helpers' command lines into one string: split at spaces too
        argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return None
    if b"-contentproc" in argv:     # Firefox's child processes end their command line with their type
        ptype = argv[-1].decode(errors="replace")
        return FIREFOX_KINDS.get(ptype, f"firefox:{ptype}")
    kind = next((a[7:].decode() for a in argv if a.startswith(b"--type=")), None)
    if kind == "utility":
        sub = next((a.split(b"=", 1)[1].decode() for a in argv if a.startswith(b"--utility-sub-type=")), "")
        return f"utility:{sub.rsplit('.', 1)[-1] or '?'}"
    if kind:
        return kind
    name = Path(argv[0].decode(errors="replace")).name if argv else ""
    return "browser" if "chrom" in name or "firefox" in name else "driver"


def sched_snapshot() -> dict[tuple[int, int], tuple[str, str, float, float]]:
    """(pid, tid) -> (process kind, thread name, on-CPU s, run-queue wait s) of every thread of
    this child's tree (the scheduler's nanosecond counters, /proc/PID/task/TID/schedstat); a
    process's main thread is named `main` (a renderer's runs the page's JavaScript)."""
    out = {}
    for pid in [os.getpid(), *_descendants(os.getpid())]:
        kind = process_kind(pid)
        if kind is None:
            continue
        try:
            tasks = list((Path("/proc") / str(pid) / "task").iterdir())
        except OSError:
            continue
        for t in tasks:
            try:
                run, wait = (t / "schedstat").read_text().split()[:2]
                name = (t / "comm").read_text().strip()
            except (OSError, ValueError):
                continue
            tid = int(t.name)
            out[(pid, tid)] = (kind, "main" if tid == pid else name, int(run) / 1e9, int(wait) / 1e9)
    return out


def sched_delta(before: dict, after: dict) -> dict[str, dict[str, list[float]]]:
    """On-CPU and wait seconds between two snapshots, per process kind and per (kind, thread
    name): {"by_process": {kind: [cpu, wait]}, "by_thread": {"kind/thread": [cpu, wait]}}. A thread
    born between the snapshots counts from zero; one that ended is not counted."""
    by_process: dict[str, list[float]] = {}
    by_thread: dict[str, list[float]] = {}
    for key, (kind, name, run, wait) in after.items():
        _, _, run0, wait0 = before.get(key, (kind, name, 0.0, 0.0))
        d_run, d_wait = max(0.0, run - run0), max(0.0, wait - wait0)
        for table, k in ((by_process, kind), (by_thread, f"{kind}/{name}")):
            acc = table.setdefault(k, [0.0, 0.0])
            acc[0] += d_run
            acc[1] += d_wait
    rnd = lambda t: {k: [round(v[0], 3), round(v[1], 3)] for k, v in sorted(t.items())}  # noqa: E731
    return {"by_process": rnd(by_process), "by_thread": rnd(by_thread)}


def play(page, a: dict, out: dict, at_playing: dict) -> None:
    """Wait while the player plays: until the watched time is reached (VOD: or its end), a fatal
    player error, a stall longer than STALL_LIMIT_S, or no start within STARTUP_LIMIT_S. At the
    first `playing`, at_playing gets the time and the threads' scheduler counters (sched_snapshot)."""
    t0 = time.time()
    deadline = t0 + a["timeout_s"]
    t_play = None
    while True:
        page.wait_for_timeout(250)
        s = page.evaluate(_STATE_JS) or {}
        now = time.time()
        if s.get("fatal"):
            out["stop_reason"] = "player error"
            return
        if s.get("playing") and t_play is None:
            t_play = now
            at_playing.update(t=time.time(), threads=sched_snapshot())   # splits start-up and playback
        if t_play is None and now - t0 > STARTUP_LIMIT_S:
            out["stop_reason"] = f"no playback after {STARTUP_LIMIT_S:.0f} s"
            return
        if s.get("waiting_since") and t_play is not None and (s["now"] - s["waiting_since"]) / 1000 > STALL_LIMIT_S:
            out["stop_reason"] = f"stalled for more than {STALL_LIMIT_S:.0f} s"
            return
        if s.get("ended") or (a.get("vod") and (s.get("pos") or 0) >= a["play_s"] - END_SLACK_S):
            out["stop_reason"] = "ended"
            return
        if t_play is not None and now - t_play >= a["play_s"] + (2.0 if a.get("vod") else 0.0):
            out["stop_reason"] = "duration reached"
            return
        if now > deadline:
            out["stop_reason"] = "trial timeout"
            return


def run_video(a: dict[str, Any]) -> dict[str, Any]:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    flags = chromium_flags(a["protocol"], a["host"], a["port"], a["address"], a["spki"])
    flags += ["--autoplay-policy=no-user-gesture-required"]
    flags += a.get("extra_flags") or []
    if a.get("netlog"):
        flags += [f"--log-net-log={a['netlog']}", "--net-log-capture-mode=Default"]
    if a.get("keylog"):
        flags += [f"--ssl-key-log-file={a['keylog']}"]
    out: dict[str, Any] = {"url": a["url"], "protocol": a["protocol"], "host": a["host"], "port": a["port"],
                           "flags": flags, "error": None}
    _write_prefs(Path(a["profile"]))
    rec = _Recorder()
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            a["profile"], executable_path=a["executable"], headless=True, args=flags, service_workers="block",
            viewport={"width": 1366, "height": 768}, timeout=60_000)
        try:
            out["browser_version"] = ctx.browser.version if ctx.browser else None
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            supported = page.evaluate(f"() => window.MediaSource ? MediaSource.isTypeSupported('{MSE_TYPE}') : null")
            out["mse_h264"] = supported
            if not supported:
                out["error"] = (f"this Chromium ({a['executable']}) cannot play H.264 in MediaSource "
                                f"(isTypeSupported('{MSE_TYPE}') is {supported}): install Debian's chromium, "
                                "which is built with the proprietary codecs")
                return out
            record_network(ctx, page, rec)
            if a.get("settle", True):
                out["settle_s"] = _settle(page)
            cpu0 = tree_cpu()
            sched0 = sched_snapshot()
            at_playing: dict = {}
            t0 = time.time()
            try:
                page.goto(a["url"], wait_until="load", timeout=a["timeout_s"] * 1000)
                play(page, a, out, at_playing)
            except PlaywrightError as e:
                out["error"] = f"video page over {a['protocol']} failed: " + \
                    str(e).splitlines()[0].removeprefix("Page.goto: ")
            out["t_end_ms"] = time.time() * 1000
            out["play_wall_s"] = time.time() - t0
            cpu1 = tree_cpu()
            sched1 = sched_snapshot()
            out["sched"] = sched_delta(sched0, sched1)
            if at_playing:       # load start -> first frame, first frame -> stop
                out["sched_startup"] = {"wall_s": round(at_playing["t"] - t0, 3),
                                        **sched_delta(sched0, at_playing["threads"])}
                out["sched_playback"] = {"wall_s": round(time.time() - at_playing["t"], 3),
                                         **sched_delta(at_playing["threads"], sched1)}
            out["cpu_user_s"], out["cpu_sys_s"] = max(0.0, cpu1[0] - cpu0[0]), max(0.0, cpu1[1] - cpu0[1])
            out["cpu_wait_s"] = max(0.0, cpu1[2] - cpu0[2])
            try:
                out["qblog"] = page.evaluate("() => window.qbLog || null")
            except PlaywrightError as e:
                out["qblog_error"] = str(e).splitlines()[0]
            out["requests"] = rec.records({})
        finally:
            ctx.close()
    return out


def main(argv: list[str] | None = None) -> int:
    return child_main(argv, "one video playback in Chromium (run by the video client)", run_video, "video.json",
                      ("url", "protocol", "host"), {"requests": []})


if __name__ == "__main__":
    sys.exit(main())
