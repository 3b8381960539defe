"""Throughput time series from the capture files: reading them, and choosing which to show
(the median-goodput trial of each protocol per condition, CVart's time series)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from quicbench.store import confined
from quicbench.analysis.load import RunData
from quicbench.model.workload_kinds import measures


def read_timeseries(path: Path) -> pd.DataFrame | None:
    """A capture's time series as columns t_s and mbps; None when unreadable.

    Reads what the wire view writes (trials/NNNNN/timeseries.json: {"bin_ms": 100,
    "down_bytes": [...]}, server->client wire bytes per bin), or CSV / JSON lines with a time
    column (t_s, t, time_s) and either bytes per bin (bytes, bytes_down) or a rate (mbps)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        if path.suffix == ".json":
            obj = json.loads(text)
            if isinstance(obj, dict) and "bin_ms" in obj and "down_bytes" in obj:
                step = float(obj["bin_ms"]) / 1000
                by = np.asarray(obj["down_bytes"], dtype=float)
                return pd.DataFrame({"t_s": np.arange(by.size) * step, "mbps": by * 8 / step / 1e6})
            df = pd.DataFrame(obj if isinstance(obj, list) else [])
        elif path.suffix == ".jsonl":
            df = pd.DataFrame([json.loads(l) for l in text.splitlines() if l.strip()])
        else:
            df = pd.DataFrame(list(csv.DictReader(text.splitlines())))
    except (ValueError, csv.Error):
        return None
    tcol = next((c for c in ("t_s", "t", "time_s") if c in df), None)
    if tcol is None or df.empty:
        return None
    t = pd.to_numeric(df[tcol], errors="coerce")
    if "mbps" in df or "throughput_mbps" in df:
        mbps = pd.to_numeric(df["mbps" if "mbps" in df else "throughput_mbps"], errors="coerce")
    else:
        bcol = next((c for c in ("bytes", "bytes_down") if c in df), None)
        if bcol is None:
            return None
        step = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
        mbps = pd.to_numeric(df[bcol], errors="coerce") * 8 / step / 1e6 if step > 0 else None
        if mbps is None:
            return None
    return pd.DataFrame({"t_s": t, "mbps": mbps}).dropna()


def timeseries_path(run: RunData, row: pd.Series) -> Path | None:
    """The trial's time series: a 'timeseries' column (relative to the run) or trials/NNNNN/timeseries.json."""
    ref = row.get("timeseries")
    if isinstance(ref, str) and ref:
        p = Path(ref)
        return confined(run.run_dir, p if p.is_absolute() else run.run_dir / p)   # the run's own files only
    seq = row.get("seq")
    if seq is not None and not pd.isna(seq):
        p = run.run_dir / "trials" / f"{int(seq):05d}" / "timeseries.json"
        if p.exists():
            return confined(run.run_dir, p)
    return None


def has_timeseries(run: RunData) -> bool:
    return any(timeseries_path(run, r) is not None for _, r in run.ok.iterrows())


@dataclass
class TimeSeries:
    """What the time-series figure draws: one panel per condition, one series per protocol."""
    workload: str
    conditions: list[str]                                    # the panels, in display order
    series: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)   # (condition, protocol) -> t_s, mbps
    more: int = 0                                            # conditions with series that are not drawn


def median_trial_series(run: RunData, max_conditions: int = 6) -> TimeSeries | None:
    """Per condition (the first max_conditions) and protocol, the series of the trial with the median
    goodput, for the largest object workload that has series; None when no series can be read."""
    ok = run.ok
    ok = ok[ok["workload"].map(lambda w: measures(run.kind_of(w), "goodput_mbps")).astype(bool)]   # downloads
    ok = ok[[timeseries_path(run, r) is not None for _, r in ok.iterrows()]]
    if ok.empty:
        return None
    w = max(ok["workload"].unique(), key=lambda x: (run.workloads.index(x) if x in run.workloads else -1))
    ok = ok[ok["workload"] == w]
    conds = [c for c in run.condition_order if c in set(ok["condition"])][:max_conditions]
    out = TimeSeries(w, conds, more=len(set(ok["condition"])) - len(conds))
    for c in conds:
        for proto in run.protocols:
            g = ok[(ok["condition"] == c) & (ok["protocol"] == proto)].sort_values("goodput_mbps")
            if g.empty:
                continue
            row = g.iloc[(len(g) - 1) // 2]
            path = timeseries_path(run, row)
            ts = read_timeseries(path) if path is not None else None
            if ts is not None and not ts.empty:
                out.series[(c, proto)] = ts
    return out if out.series else None
