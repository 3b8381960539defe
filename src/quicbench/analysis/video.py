"""Video timelines: the rendered resolution and the buffer over time of one trial per cell."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from quicbench.analysis.load import RunData
from quicbench.store import RunLayout, confined


def median_startup_timelines(run: RunData, max_cells: int = 12) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(condition, workload, protocol) -> {"seq", "startup_s", "timeline": DataFrame(t_s, buffer_s, height),
    "stalls": [(start_s, end_s)]} for the trial with the median startup of each video cell."""
    ok = run.ok
    if ok.empty or "startup_s" not in ok or not ok["startup_s"].notna().any():
        return {}
    layout = RunLayout(run.run_dir)
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (c, w, p), g in ok[ok["startup_s"].notna()].groupby(["condition", "workload", "protocol"], sort=False):
        if len(out) >= max_cells:
            break
        g = g.sort_values("startup_s")
        row = g.iloc[(len(g) - 1) // 2]
        path = confined(run.run_dir, layout.trial(int(row["seq"])) / "video_metrics.json")
        try:
            detail = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        tl = pd.DataFrame(detail.get("timeline") or [], columns=["t_s", "buffer_s", "height"])
        if tl.empty:
            continue
        out[(c, w, p)] = {"seq": int(row["seq"]), "startup_s": float(row["startup_s"]), "timeline": tl,
                          "stalls": [tuple(s) for s in detail.get("stall_spans") or []]}
    return out
