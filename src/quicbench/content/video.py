"""Adaptive video content: an H.264/AAC ladder in fMP4 segments with an HLS master playlist and a
DASH MPD over the same segments, made by Debian's ffmpeg from a synthetic source (lavfi
``testsrc2`` + ``sine``: nothing is downloaded), and a live publisher.

VOD: ``make_vod(spec)`` encodes every rung in one ffmpeg run (``-f dash -hls_playlist 1``):
CBR-like rungs (``-b:v = -maxrate = -bufsize``) so segment sizes are predictable, a fixed GOP
of exactly one segment (``-g = -keyint_min = fps * segment_s``, ``-sc_threshold 0``), and
writes ``manifest.mpd``, ``master.m3u8`` + ``media_<i>.m3u8``, ``init-stream<i>.m4s`` and
``chunk-stream<i>-<n>.m4s``. Sets are cached under ``<cache>/video/<key>/`` by their parameters,
with a ``manifest.json`` (path, size, sha256 of every file, the ladder and the streams).

Live: ``LivePublisher`` runs a small process in the server node for the whole run. It publishes
the VOD's segments in real time (segment n becomes available at AST + n x segment_s, as a
packager behind a live encoder does), looping over the VOD with every fragment's decode time
(``tfdt``) shifted by the loop so the timeline never goes back, into a live directory with a
sliding-window HLS playlist per stream carrying ``#EXT-X-PROGRAM-DATE-TIME`` and a dynamic DASH
MPD (``availabilityStartTime`` = AST). Media time t is wall-clock AST + t in both, so the
latency to the live edge is the wall clock minus the program date time of the play position.
Encoding stays out of the measurement: the server node's CPU during a trial is the web
server's and the publisher's (a file copy every segment).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.model.video import CODECS, DEFAULT_LADDER, GENERATOR, VideoSpec, validate  # noqa: F401 - re-exported
from quicbench.paths import cache_dir, publish_cache_dir

FFMPEG_HINT = "run 'make video' (Debian's ffmpeg)"
PLAYER_DIR = Path(__file__).resolve().parents[3] / "player"   # player/package.json + node_modules (npm ci)
PLAYER_PAGE = Path(__file__).resolve().parent / "player.html"
PLAYER_DIST = {"hls.min.js": "hls.js/dist/hls.min.js",
               "dash.all.min.js": "dashjs/dist/modern/umd/dash.all.min.js"}
LIVE_WINDOW = 6            # segments in the live HLS playlist and DASH time-shift buffer


def ffmpeg_binary() -> str:
    exe = shutil.which("ffmpeg")
    if not exe:
        raise QuicbenchError(f"missing 'ffmpeg' (video content is encoded locally): {FFMPEG_HINT}")
    return exe


def ffmpeg_argv(spec: VideoSpec, out: Path) -> list[str]:
    """One ffmpeg run: every rung of the ladder plus one AAC stream, dash muxer writing both an
    MPD and HLS playlists over the same fMP4 segments."""
    venc, aenc = CODECS[spec.codec]
    top = max(h for h, _ in spec.ladder)
    width = lambda h: int(round(h * 16 / 9 / 2)) * 2   # noqa: E731 - 16:9, even
    n = len(spec.ladder)
    gop = int(spec.fps * spec.segment_s)
    dur = spec.segments * spec.segment_s
    splits = "".join(f"[s{i}]" for i in range(n))
    chains = ";".join(f"[s{i}]scale={width(h)}:{h},setdar=16/9[v{i}]" for i, (h, _) in enumerate(spec.ladder))
    argv = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
            "-f", "lavfi", "-i", f"testsrc2=size={width(top)}x{top}:rate={spec.fps}:duration={dur}",
            "-f", "lavfi", "-i", f"sine=frequency=440:beep_factor=4:sample_rate=48000:duration={dur}",
            "-filter_complex", f"[0:v]split={n}{splits};{chains}"]
    for i in range(n):
        argv += ["-map", f"[v{i}]"]
    argv += ["-map", "1:a",
             "-c:v", venc, "-preset", spec.preset, "-profile:v", "high", "-pix_fmt", "yuv420p",
             "-g", str(gop), "-keyint_min", str(gop), "-sc_threshold", "0",
             "-x264-params", "nal-hrd=cbr:force-cfr=1"]
    for i, (_, kbps) in enumerate(spec.ladder):
        argv += [f"-b:v:{i}", f"{kbps}k", f"-maxrate:v:{i}", f"{kbps}k", f"-bufsize:v:{i}", f"{kbps}k"]
    argv += ["-c:a", aenc, "-b:a", f"{spec.audio_kbps}k", "-ac", "2",
             "-f", "dash", "-seg_duration", str(spec.segment_s), "-use_template", "1", "-use_timeline", "0",
             "-hls_playlist", "1", "-adaptation_sets", "id=0,streams=v id=1,streams=a",
             str(out / "manifest.mpd")]
    return argv


@dataclass(frozen=True)
class VideoSet:
    root: Path
    manifest: dict = field(hash=False)

    @property
    def key(self) -> str:
        return self.root.name


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_vod(spec: VideoSpec, cache: Path | None = None) -> VideoSet:
    """Encode (or reuse) the ladder of `spec`; raises QuicbenchError on a bad spec or a failed encode."""
    validate(spec)
    base = (cache or cache_dir()) / "video"
    root = base / spec.key
    if (root / "manifest.json").exists():
        return VideoSet(root, json.loads((root / "manifest.json").read_text()))
    exe = ffmpeg_binary()
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=base))
    try:
        argv = ffmpeg_argv(spec, tmp)
        argv[0] = exe
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            tail = " | ".join(p.stderr.strip().splitlines()[-3:])
            raise QuicbenchError(
                f"video.ladder: ffmpeg could not encode {[list(r) for r in spec.ladder]} with {spec.codec} "
                f"(exit {p.returncode}: {tail}); use fewer or smaller rungs, or check 'ffmpeg -encoders'")
        encode_s = time.monotonic() - t0
        files = [{"path": str(f.relative_to(tmp)), "size": f.stat().st_size, "sha256": _sha256(f)}
                 for f in sorted(tmp.iterdir()) if f.is_file()]
        streams = [{"id": i, "type": "video", "height": h, "width": int(round(h * 16 / 9 / 2)) * 2,
                    "kbps": kbps, "codecs": "avc1"} for i, (h, kbps) in enumerate(spec.ladder)]
        streams.append({"id": len(spec.ladder), "type": "audio", "kbps": spec.audio_kbps, "codecs": "mp4a.40.2"})
        manifest = {"generator": GENERATOR, "key": spec.key, "spec": {**asdict(spec),
                    "ladder": [list(r) for r in spec.ladder]}, "segments": spec.segments,
                    "streams": streams, "encode_s": round(encode_s, 2), "files": files,
                    "ffmpeg": " ".join(argv[1:])}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        publish_cache_dir(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return VideoSet(root, json.loads((root / "manifest.json").read_text()))


def install_player(dest: Path) -> list[dict[str, Any]]:
    """Copy player.html and the pinned hls.js / dash.js builds into dest (served by the lab's
    server, no CDN). Returns manifest entries relative to dest's parent."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for name, rel in [("player.html", None), *PLAYER_DIST.items()]:
        src = PLAYER_PAGE if rel is None else PLAYER_DIR / "node_modules" / rel
        if not src.is_file():
            raise QuicbenchError(f"missing player file {src}: run 'make video' (npm ci in player/, "
                                 "hls.js and dash.js pinned in player/package-lock.json)")
        shutil.copyfile(src, dest / name)
        os.chmod(dest / name, 0o644)
        out.append({"path": f"{dest.name}/{name}", "size": (dest / name).stat().st_size,
                    "sha256": _sha256(dest / name)})
    return out


def player_versions() -> dict[str, str]:
    out = {}
    for pkg in ("hls.js", "dashjs"):
        try:
            out[pkg] = json.loads((PLAYER_DIR / "node_modules" / pkg / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            out[pkg] = "missing"
    return out


# ---------------------------------------------------------------------------------------------
# fMP4: shift the decode time of every fragment (looping a VOD into a live timeline)
# ---------------------------------------------------------------------------------------------

def _boxes(buf: bytes | bytearray, start: int, end: int):
    off = start
    while off + 8 <= end:
        size, typ = struct.unpack_from(">I4s", buf, off)
        hdr = 8
        if size == 1:
            size = struct.unpack_from(">Q", buf, off + 8)[0]
            hdr = 16
        elif size == 0:
            size = end - off
        if size < hdr:
            break
        yield typ.decode("latin-1"), off, hdr, size
        off += size


def track_timescales(init: bytes) -> dict[int, int]:
    """track_ID -> media timescale, from an init segment's moov/trak/(tkhd, mdia/mdhd)."""
    out: dict[int, int] = {}
    for typ, off, hdr, size in _boxes(init, 0, len(init)):
        if typ != "moov":
            continue
        for t2, o2, h2, s2 in _boxes(init, off + hdr, off + size):
            if t2 != "trak":
                continue
            tid = ts = None
            for t3, o3, h3, s3 in _boxes(init, o2 + h2, o2 + s2):
                if t3 == "tkhd":
                    v = init[o3 + h3]
                    tid = struct.unpack_from(">I", init, o3 + h3 + (20 if v == 1 else 12))[0]
                elif t3 == "mdia":
                    for t4, o4, h4, s4 in _boxes(init, o3 + h3, o3 + s3):
                        if t4 == "mdhd":
                            v = init[o4 + h4]
                            ts = struct.unpack_from(">I", init, o4 + h4 + (20 if v == 1 else 12))[0]
            if tid is not None and ts:
                out[tid] = ts
    return out


def shift_decode_time(seg: bytes, shift_s: float, timescales: dict[int, int]) -> bytes:
    """Add shift_s seconds to every traf's tfdt (and sidx's earliest presentation time)."""
    if shift_s == 0:
        return seg
    buf = bytearray(seg)
    default_ts = next(iter(timescales.values()), 1)
    for typ, off, hdr, size in _boxes(buf, 0, len(buf)):
        if typ == "sidx":
            v = buf[off + hdr]
            ts = struct.unpack_from(">I", buf, off + hdr + 8)[0]
            if v == 1:
                t = struct.unpack_from(">Q", buf, off + hdr + 12)[0]
                struct.pack_into(">Q", buf, off + hdr + 12, t + round(shift_s * ts))
            else:
                t = struct.unpack_from(">I", buf, off + hdr + 12)[0]
                struct.pack_into(">I", buf, off + hdr + 12, (t + round(shift_s * ts)) & 0xFFFFFFFF)
        if typ != "moof":
            continue
        for t2, o2, h2, s2 in _boxes(buf, off + hdr, off + size):
            if t2 != "traf":
                continue
            tid = None
            for t3, o3, h3, s3 in _boxes(buf, o2 + h2, o2 + s2):
                if t3 == "tfhd":
                    tid = struct.unpack_from(">I", buf, o3 + h3 + 4)[0]
                elif t3 == "tfdt":
                    ts = timescales.get(tid, default_ts) if tid is not None else default_ts
                    v = buf[o3 + h3]
                    if v == 1:
                        t = struct.unpack_from(">Q", buf, o3 + h3 + 4)[0]
                        struct.pack_into(">Q", buf, o3 + h3 + 4, t + round(shift_s * ts))
                    else:
                        t = struct.unpack_from(">I", buf, o3 + h3 + 4)[0]
                        new = t + round(shift_s * ts)
                        if new >= 1 << 32:
                            raise QuicbenchError("live: tfdt overflows 32 bits; re-encode with a smaller timescale")
                        struct.pack_into(">I", buf, o3 + h3 + 4, new)
    return bytes(buf)


# ---------------------------------------------------------------------------------------------
# Live publisher
# ---------------------------------------------------------------------------------------------

def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(t * 1000) % 1000:03d}Z"


def live_mpd(vod_mpd: str, ast: float, seg_s: float, window: int) -> str:
    """The VOD's static MPD turned dynamic: availabilityStartTime = AST, a time-shift window."""
    import re
    mpd = re.sub(r'type="static"', 'type="dynamic"', vod_mpd, count=1)
    mpd = re.sub(r'\s*mediaPresentationDuration="[^"]*"', "", mpd, count=1)
    attrs = (f'type="dynamic" availabilityStartTime="{iso(ast)}" publishTime="{iso(ast)}" '
             f'minimumUpdatePeriod="PT{max(2.0, seg_s)}S" timeShiftBufferDepth="PT{window * seg_s}S" '
             f'suggestedPresentationDelay="PT{3 * seg_s}S"')
    return mpd.replace('type="dynamic"', attrs, 1)


def live_media_playlist(stream: int, first: int, last: int, seg_s: float, ast: float) -> str:
    lines = ["#EXTM3U", "#EXT-X-VERSION:7", f"#EXT-X-TARGETDURATION:{int(-(-seg_s // 1))}",
             f"#EXT-X-MEDIA-SEQUENCE:{first}", f'#EXT-X-MAP:URI="init-stream{stream}.m4s"']
    for n in range(first, last + 1):
        lines += [f"#EXT-X-PROGRAM-DATE-TIME:{iso(ast + (n - 1) * seg_s)}", f"#EXTINF:{seg_s:.6f},",
                  f"chunk-stream{stream}-{n:05d}.m4s"]
    return "\n".join(lines) + "\n"


def _write_atomic(path: Path, data: bytes | str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def publish_live(vod: Path, live: Path, window: int = LIVE_WINDOW, prefill: int | None = None,
                 stop_after_s: float | None = None) -> None:
    """Publish the VOD in `vod` as a live stream into `live` until killed (or stop_after_s).

    Segment n (1-based) is the VOD's segment ((n-1) mod N)+1 with its decode times shifted by
    (n-1) div N loops, written when the wall clock reaches AST + n x segment_s. `prefill`
    segments are available at once (AST is that far in the past), so a player can start.
    """
    man = json.loads((vod / "manifest.json").read_text())
    seg_s = float(man["spec"]["segment_s"])
    nseg = int(man["segments"])
    streams = [s["id"] for s in man["streams"]]
    prefill = window if prefill is None else prefill
    if live.exists():
        shutil.rmtree(live)
    live.mkdir(parents=True)
    os.chmod(live, 0o755)
    timescales = {}
    for s in streams:
        init = (vod / f"init-stream{s}.m4s").read_bytes()
        timescales[s] = track_timescales(init)
        _write_atomic(live / f"init-stream{s}.m4s", init)
    t_start = time.time()
    ast = float(int((t_start - prefill * seg_s) * 1000)) / 1000   # whole ms: exact in the MPD and playlists
    cache: dict[tuple[int, int], bytes] = {}

    def publish(n: int) -> None:
        src, loop = (n - 1) % nseg + 1, (n - 1) // nseg
        for s in streams:
            data = cache.get((s, src))
            if data is None:
                data = cache[(s, src)] = (vod / f"chunk-stream{s}-{src:05d}.m4s").read_bytes()
            _write_atomic(live / f"chunk-stream{s}-{n:05d}.m4s",
                          shift_decode_time(data, loop * nseg * seg_s, timescales[s]))
            old = live / f"chunk-stream{s}-{n - 2 * window:05d}.m4s"
            old.unlink(missing_ok=True)
        first = max(1, n - window + 1)
        for s in streams:
            _write_atomic(live / f"media_{s}.m3u8", live_media_playlist(s, first, n, seg_s, ast))

    n = 0
    while True:
        now = time.time()
        due = int((now - ast) // seg_s)                 # segments whose end is in the past
        while n < due:
            n += 1
            publish(n)
            if n == due:
                if not (live / "master.m3u8").exists():
                    master = (vod / "master.m3u8").read_text()
                    _write_atomic(live / "master.m3u8", master)
                    _write_atomic(live / "manifest.mpd", live_mpd((vod / "manifest.mpd").read_text(), ast,
                                                                  seg_s, window))
                    _write_atomic(live / "live.json", json.dumps({"ast": ast, "segment_s": seg_s,
                                                                  "window": window, "started": t_start}))
        if stop_after_s is not None and now - t_start >= stop_after_s:
            return
        time.sleep(max(0.01, min(0.5, ast + (n + 1) * seg_s - time.time())))


LIVE_CHILD = "import sys; from quicbench.content.video import live_main; sys.exit(live_main())"


def live_main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="publish a VOD ladder as a live stream in real time")
    ap.add_argument("vod")
    ap.add_argument("live")
    ap.add_argument("--window", type=int, default=LIVE_WINDOW)
    ns = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    publish_live(Path(ns.vod), Path(ns.live), window=ns.window)
    return 0


class LivePublisher:
    """The live publisher process, started in the lab's server node for the run."""

    def __init__(self, lab, vod: Path, live: Path, log: Path, window: int = LIVE_WINDOW):
        self.lab, self.vod, self.live, self.log, self.window = lab, vod, live, log, window
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> None:
        argv = [sys.executable, "-c", LIVE_CHILD, str(self.vod), str(self.live), "--window", str(self.window)]
        if self.lab is not None:
            argv = self.lab.cmd("server", argv)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while not (self.live / "live.json").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise QuicbenchError(f"live publisher for {self.vod} did not start (see {self.log})")
            time.sleep(0.05)

    @property
    def info(self) -> dict:
        return json.loads((self.live / "live.json").read_text())

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.proc = None

    def __enter__(self) -> "LivePublisher":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
