"""What a video workload encodes: the ladder, segment length and codec (pure data, validated here)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from quicbench.errors import QuicbenchError

GENERATOR = "quicbench-video/1"
DEFAULT_LADDER = ((360, 800), (540, 1600), (720, 3000))      # (height, kbit/s)
# codec name -> (ffmpeg encoder, audio encoder); only H.264 + AAC is offered: what every MSE has
CODECS = {"h264": ("libx264", "aac")}


@dataclass(frozen=True)
class VideoSpec:
    """What is encoded. duration_s is the VOD's length (a whole number of segments)."""
    duration_s: float = 60.0
    segment_s: float = 4.0
    fps: int = 25
    ladder: tuple[tuple[int, int], ...] = DEFAULT_LADDER
    codec: str = "h264"
    audio_kbps: int = 128
    preset: str = "veryfast"

    @property
    def segments(self) -> int:
        return max(1, int(round(self.duration_s / self.segment_s)))

    @property
    def key(self) -> str:
        params = {"generator": GENERATOR, **asdict(self)}
        params["ladder"] = [list(r) for r in self.ladder]
        return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def validate(spec: VideoSpec, where: str = "video") -> None:
    """Raise QuicbenchError naming the field and the fix."""
    if spec.codec not in CODECS:
        raise QuicbenchError(f"{where}.codec: unknown codec '{spec.codec}': accepted: {', '.join(CODECS)}")
    if not spec.segment_s > 0:
        raise QuicbenchError(f"{where}.segment_s: segment length must be > 0 s, got {spec.segment_s} "
                             "(use 2 to 6 s; 4 s is the default)")
    if spec.segment_s * spec.fps != int(spec.segment_s * spec.fps):
        raise QuicbenchError(f"{where}.segment_s: {spec.segment_s} s x {spec.fps} fps is not a whole number "
                             "of frames: the GOP must fill a segment exactly")
    if not spec.duration_s >= spec.segment_s:
        raise QuicbenchError(f"{where}.duration_s: {spec.duration_s} s is shorter than one segment "
                             f"({spec.segment_s} s)")
    if not spec.ladder:
        raise QuicbenchError(f"{where}.ladder: empty: give rungs as [[height, kbit/s], ...]")
    for h, kbps in spec.ladder:
        if not (144 <= h <= 2160 and h % 2 == 0):
            raise QuicbenchError(f"{where}.ladder: height {h} out of range: use an even height of 144 to 2160")
        if not 50 <= kbps <= 50_000:
            raise QuicbenchError(f"{where}.ladder: {kbps} kbit/s out of range: use 50 to 50000 kbit/s")
    if list(spec.ladder) != sorted(spec.ladder, key=lambda r: r[1]):
        raise QuicbenchError(f"{where}.ladder: rungs must go up in bitrate, got {list(spec.ladder)}")
