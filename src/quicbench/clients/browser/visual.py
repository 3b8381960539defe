"""Speed Index from screencast frames, by the visual-metrics method (WebPageTest's visualmetrics.py).

Each frame's visual progress is how much of the colour-histogram change from the blank (white)
page to the last frame (the loaded page) it has made: per channel, the histogram
difference to the final frame's is matched bucket by bucket within a slop of 5 colour levels
(WebPageTest's ``calculate_frame_progress``). Speed Index is the area above the progress curve,
Σ (1 − progress) · Δt, in ms from the navigation start; visually complete is the first frame at
100 %.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

SLOP = 5          # colour levels a value may move and still count as matched (visualmetrics.py)
BUCKETS = 256


def histogram(jpeg_b64: str) -> list[list[int]]:
    """The R, G and B histograms (256 buckets each) of a base64 JPEG frame."""
    from PIL import Image
    img = Image.open(io.BytesIO(base64.b64decode(jpeg_b64))).convert("RGB")
    h = img.histogram()
    return [h[0:256], h[256:512], h[512:768]]


def frame_progress(hist: list[list[int]], start: list[list[int]], final: list[list[int]]) -> int:
    """Visual progress of a frame in whole percent (0-100), as visualmetrics.py computes it."""
    total = matched = 0
    for ch in range(len(hist)):
        available = [abs(hist[ch][i] - start[ch][i]) for i in range(BUCKETS)]
        for i in range(BUCKETS):
            target = abs(final[ch][i] - start[ch][i])
            if not target:
                continue
            total += target
            for j in range(max(0, i - SLOP), min(BUCKETS, i + SLOP)):
                m = min(target, available[j])
                available[j] -= m
                matched += m
                target -= m
    return math.floor(100 * matched / total) if total else 100


def speed_index(progress: list[tuple[float, int]]) -> dict[str, Any]:
    """progress: (ms from navigation start, percent) of each frame in time order, the last at 100.
    {speed_index_ms, visually_complete_ms, first_visual_change_ms}; all None without a frame
    after the navigation start (a screencast that caught only the page before it: no curve)."""
    if not progress or max(t for t, _ in progress) <= 0:
        return {"speed_index_ms": None, "visually_complete_ms": None, "first_visual_change_ms": None}
    si, last_t, last_p = 0.0, 0.0, 0
    complete = first_change = None
    for t, p in progress:
        t = max(t, 0.0)
        si += (t - last_t) * (1 - last_p / 100)
        last_t, last_p = t, p
        if p > 0 and first_change is None:
            first_change = t
        if p >= 100:
            complete = t
            break
    return {"speed_index_ms": round(si, 1), "visually_complete_ms": None if complete is None else round(complete, 1),
            "first_visual_change_ms": None if first_change is None else round(first_change, 1)}


def visual_metrics(frames: list[tuple[float, str]], time_origin_ms: float) -> dict[str, Any]:
    """Speed Index and its companions from screencast frames [(Unix seconds, base64 JPEG)] and the
    page's performance.timeOrigin (Unix ms). A white page is the start, the last frame the end."""
    if not frames:
        return {**speed_index([]), "screencast_frames": len(frames)}
    frames = sorted(frames)
    hists = [histogram(f) for _, f in frames]
    final = hists[-1]
    # the start is the blank (white) page the navigation begins from, whatever the first frame shows
    pixels = sum(final[0])
    start = [[0] * (BUCKETS - 1) + [pixels] for _ in range(3)]
    progress = [(ts * 1000 - time_origin_ms, frame_progress(h, start, final)) for (ts, _), h in zip(frames, hists)]
    return {**speed_index(progress), "screencast_frames": len(frames)}
