"""Speed Index by the visual-metrics method: frame progress from colour histograms, the area above
the progress curve, and the whole path from JPEG frames."""

import base64
import io

from PIL import Image

from quicbench.clients.browser.visual import frame_progress, speed_index, visual_metrics


def hist(counts):
    """Three identical channels from {level: pixels}."""
    ch = [0] * 256
    for level, n in counts.items():
        ch[level] = n
    return [ch[:], ch[:], ch[:]]


def test_frame_progress():
    start, final = hist({255: 100}), hist({255: 40, 0: 60})
    assert frame_progress(start, start, final) == 0
    assert frame_progress(final, start, final) == 100
    assert frame_progress(hist({255: 70, 0: 30}), start, final) == 50
    # within the slop of 5 levels a colour counts as reached (JPEG noise)
    assert frame_progress(hist({255: 40, 3: 60}), start, final) == 100
    assert frame_progress(hist({255: 40, 30: 60}), start, final) < 100
    assert frame_progress(start, start, start) == 100          # nothing to change: complete


def test_speed_index_is_the_area_above_the_curve():
    # blank until 100 ms, half at 100 ms, complete at 300 ms: 100 + 200 x 0.5 = 200
    r = speed_index([(0, 0), (100, 50), (300, 100)])
    assert r == {"speed_index_ms": 200.0, "visually_complete_ms": 300.0, "first_visual_change_ms": 100.0}
    assert speed_index([(-20, 0), (50, 100)])["speed_index_ms"] == 50.0   # frames before the start count from 0
    assert speed_index([])["speed_index_ms"] is None
    # only a frame from before the navigation: no progress curve, not a Speed Index of 0
    assert speed_index([(-5, 100)]) == {"speed_index_ms": None, "visually_complete_ms": None,
                                        "first_visual_change_ms": None}


def jpeg(fill):
    img = Image.new("RGB", (100, 50), (255, 255, 255))
    img.paste((0, 0, 0), (0, 0, fill, 50))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    return base64.b64encode(buf.getvalue()).decode()


def test_visual_metrics_from_frames():
    t0 = 1_700_000_000_000.0           # timeOrigin, Unix ms
    frames = [(t0 / 1000 + 0.2, jpeg(50)), (t0 / 1000 + 0.1, jpeg(0)), (t0 / 1000 + 0.5, jpeg(100))]
    m = visual_metrics(frames, t0)
    assert m["screencast_frames"] == 3 and m["first_visual_change_ms"] == 200.0
    assert m["visually_complete_ms"] == 500.0
    # white until 200 ms, about half until 500 ms: 200 + ~0.5 x 300
    assert 330 <= m["speed_index_ms"] <= 370
    assert visual_metrics([], t0)["speed_index_ms"] is None
    assert visual_metrics([(t0 / 1000 - 0.01, jpeg(0))], t0)["speed_index_ms"] is None
