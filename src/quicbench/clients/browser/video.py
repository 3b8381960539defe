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
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

from quicbench.clients.base import ClientResult, FetchRequest, Target
from quicbench.clients.browser.child import child_main, plays_h264, settle, timed_playback
from quicbench.clients.browser.driver import (BrowserClient, ChildRun, chromium_flags, run_browser_child,
                                             write_requests_and_summary)
from quicbench.clients.browser.recorder import PlaywrightPage, _Recorder, _write_prefs, record_network
from quicbench.clients.browser.video_metrics import compute, frames_presented, player_cpu, player_cpu_bound

CHILD = "import sys; from quicbench.clients.browser.video import main; sys.exit(main())"
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

    # the playback child's script, how its errors name it, and the files a retried trial starts without
    playback_script: ClassVar[str] = CHILD
    playback_label: ClassVar[str] = "video playback"
    playback_files: ClassVar[tuple[str, ...]] = ("video.json", "requests.jsonl", "video_metrics.json", "p1203.json")

    def playback_args(self, req: FetchRequest, profile: Path) -> dict[str, Any]:
        """The playback child's arguments."""
        target, workload = req.target, req.workload
        return {"url": player_url(target, workload), "protocol": req.protocol, "host": target.hostname,
                "port": target.port, "address": target.address, "spki": target.tls.spki_sha256_b64,
                "trial_dir": str(req.trial_dir), "profile": str(profile), "timeout_s": req.timeout_s,
                "executable": self.executable(),
                "play_s": workload.video_spec().duration_s if workload.mode == "vod" else workload.duration_s,
                "vod": workload.mode == "vod", "settle": os.environ.get("QUICBENCH_BROWSER_SETTLE", "1") != "0",
                "extra_flags": os.environ.get("QUICBENCH_CHROMIUM_FLAGS", "").split()}

    def interpret_playback(self, out: dict, protocol: str, vinfo: dict,
                           workload) -> tuple[list[dict], dict[str, Any], str | None]:
        """video.json -> (per-request records, row columns, error or None): interpret_video, with
        what this browser's own readings add (nothing for Chromium)."""
        return interpret_video(out, protocol, vinfo, workload)

    def fetch(self, req: FetchRequest) -> ClientResult:
        target, protocol, workload, trial_dir = req.target, req.protocol, req.workload, req.trial_dir
        vinfo = (target.content.manifest.get("videos") or {}).get(workload_video_key(workload))
        if vinfo is None:
            return ClientResult(requests=[], summary={}, process_cpu_s=None, wall_s=0.0, returncode=-1,
                                error=f"video {workload.label}: not in the content set (generate it with the plan)")
        run = run_browser_child(req, self.playback_script, "video.json", self.playback_label, self.playback_files,
                                lambda profile: self.playback_args(req, profile))
        if isinstance(run, ClientResult):
            return run
        return self.result_of(run, trial_dir, protocol, vinfo, workload, self.interpret_playback,
                              self.summary_facts(run.out))

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

def run_video(a: dict[str, Any]) -> dict[str, Any]:
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
            pw_page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page = PlaywrightPage(pw_page)
            if not plays_h264(page, a, out, "Chromium",
                              "install Debian's chromium, which is built with the proprietary codecs"):
                return out
            record_network(ctx, pw_page, rec)
            settle(page, a, out)
            timed_playback(page, a, out)
            try:
                out["qblog"] = page.evaluate("() => window.qbLog || null")
            except page.Error as e:
                out["qblog_error"] = page.error_line(e)
            out["requests"] = rec.records({})
        finally:
            ctx.close()
    return out


def main(argv: list[str] | None = None) -> int:
    return child_main(argv, "one video playback in Chromium (run by the video client)", run_video, "video.json",
                      ("url", "protocol", "host"), {"requests": []})


if __name__ == "__main__":
    sys.exit(main())
