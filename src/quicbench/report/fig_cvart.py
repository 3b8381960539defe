"""CVart's views (seed 001): total transfer time, average bandwidth and overhead vs delay,
bandwidth and loss, each swept with the other parameters held fixed; and throughput time
series per protocol from the capture files, when the run has them."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from quicbench.analysis.condition_params import PARAM_LABELS
from quicbench.analysis.load import RunData
from quicbench.report import palette
from quicbench.report.plotting import Plot, grid_shape, hide_unused, new_figure, render, styled, workload_title

AXES = ("delay_ms", "rate_mbit", "loss_pct")
HELD = ("delay_ms", "loss_pct", "rate_mbit", "jitter_ms", "spikes")
METRICS = (("total_time_s", "total transfer time (s)"), ("goodput_mbps", "average bandwidth (Mbit/s)"),
           ("overhead_pct", "overhead (% of payload)"))
SLICE_STYLES = ("-", "--")


def _harshness(key: dict) -> tuple:
    rate = key.get("rate_mbit")
    rate = math.inf if rate is None or (isinstance(rate, float) and math.isnan(rate)) else rate
    return (bool(key.get("spikes")), key.get("jitter_ms") or 0, key.get("loss_pct") or 0, -rate,
            key.get("delay_ms") or 0)


def sweeps(run: RunData) -> dict[str, list[tuple[dict, list[str]]]]:
    """param -> up to two slices (mildest and harshest) of conditions sweeping it with the rest fixed."""
    params = run.conditions
    params = params[params["known"]] if not params.empty else params
    out: dict[str, list[tuple[dict, list[str]]]] = {}
    for p in AXES:
        if params.empty or params[p].dropna().nunique() < 2:
            continue
        others = [c for c in HELD if c != p]
        keyed = params[others].astype(object).where(params[others].notna(), None)
        slices = []
        for _, g in params.groupby([keyed[c].map(repr) for c in others], sort=False):
            if g[p].dropna().nunique() >= 2:
                key = {c: g.iloc[0][c] for c in others}
                slices.append((key, list(g.sort_values(p).index)))
        if slices:
            slices.sort(key=lambda s: _harshness(s[0]))
            out[p] = [slices[0]] + ([slices[-1]] if len(slices) > 1 else [])
    return out


def _slice_label(key: dict, varying: set[str]) -> str:
    parts = []
    for c, v in key.items():
        if c not in varying:
            continue
        if c == "spikes":
            parts.append("spikes" if v else "no spikes")
        elif v is None or (isinstance(v, float) and math.isnan(v)):
            parts.append("rate unlimited" if c == "rate_mbit" else f"{c} -")
        else:
            parts.append({"delay_ms": f"delay {v:g} ms", "loss_pct": f"loss {v:g} %", "rate_mbit": f"{v:g} Mbit/s",
                          "jitter_ms": f"jitter {v:g} ms"}[c])
    return ", ".join(parts) or "others fixed"


def cvart_views(run: RunData, summary: pd.DataFrame, max_workloads: int = 3) -> list[Plot]:
    sw = sweeps(run)
    if not sw or summary.empty:
        return []
    metrics = [(m, lbl) for m, lbl in METRICS if f"{m}_mean" in summary and summary[f"{m}_mean"].notna().any()]
    params = run.conditions
    varying = {c for c in HELD if params[c].astype(object).nunique(dropna=False) > 1}
    plots = []
    for w in run.workloads[-max_workloads:][::-1]:   # the largest transfers first, as CVart's single file
        s = summary[summary["workload"] == w].set_index(["condition", "protocol"])
        with styled():
            fig, axes = new_figure(len(metrics), len(sw), height_in=2.8)
            for mi, (m, mlabel) in enumerate(metrics):
                for pi, (p, slices) in enumerate(sw.items()):
                    ax = axes[mi * len(sw) + pi]
                    for si, (key, conds) in enumerate(slices):
                        for proto in run.protocols:
                            xs, ys, lo, hi = [], [], [], []
                            for c in conds:
                                if (c, proto) not in s.index:
                                    continue
                                r = s.loc[(c, proto)]
                                if not np.isfinite(r[f"{m}_mean"]):
                                    continue
                                xs.append(params.at[c, p])
                                ys.append(r[f"{m}_mean"])
                                lo.append(r[f"{m}_mean"] - r[f"{m}_ci_low"] if np.isfinite(r[f"{m}_ci_low"]) else 0)
                                hi.append(r[f"{m}_ci_high"] - r[f"{m}_mean"] if np.isfinite(r[f"{m}_ci_high"]) else 0)
                            if xs:
                                ax.errorbar(xs, ys, yerr=[lo, hi], color=palette.color(proto),
                                            marker=palette.marker(proto), linestyle=SLICE_STYLES[si], linewidth=1.5,
                                            markersize=4.5, alpha=1.0 if si == 0 else 0.75)
                    if p == "rate_mbit":
                        ax.set_xscale("log")
                        ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
                    ax.set_xlabel(PARAM_LABELS[p])
                    ax.set_ylabel(mlabel)
                    ax.set_ylim(bottom=0)
                    if mi == 0:
                        ax.set_title(f"vs {PARAM_LABELS[p].split(' (')[0]}", fontsize=10)
            handles = [Line2D([], [], color=palette.color(pr), marker=palette.marker(pr), linestyle="-",
                              label=palette.label(pr)) for pr in run.protocols]
            slice_txt = []
            for p, slices in sw.items():
                for si, (key, _) in enumerate(slices):
                    slice_txt.append(f"vs {PARAM_LABELS[p].split(' (')[0]}: {'solid' if si == 0 else 'dashed'} = "
                                     f"{_slice_label(key, varying)}")
            handles += [Line2D([], [], color="grey", linestyle=ls, label=lbl) for ls, lbl in
                        zip(SLICE_STYLES, ("mildest other settings", "harshest other settings"))]
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5), frameon=False)
            plots.append(render(fig, f"cvart-{len(plots)}", f"CVart views: {workload_title(run.workload_info, w)}",
                                "Means with 95 % CIs of each metric as one condition parameter is swept with the others "
                                "held fixed (CVart, seed 001). " + "; ".join(slice_txt) + "."))
    return plots


# -- time series ----------------------------------------------------------------------------
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
        return p if p.is_absolute() else run.run_dir / p
    seq = row.get("seq")
    if seq is not None and not pd.isna(seq):
        p = run.run_dir / "trials" / f"{int(seq):05d}" / "timeseries.json"
        if p.exists():
            return p
    return None


def has_timeseries(run: RunData) -> bool:
    return any(timeseries_path(run, r) is not None for _, r in run.ok.iterrows())


def timeseries(run: RunData, max_conditions: int = 6) -> Plot | None:
    """Throughput over time, one panel per condition, the median-goodput trial of each protocol."""
    ok = run.ok
    ok = ok[[timeseries_path(run, r) is not None for _, r in ok.iterrows()]]
    if ok.empty:
        return None
    w = max(ok["workload"].unique(), key=lambda x: (run.workloads.index(x) if x in run.workloads else -1))
    ok = ok[ok["workload"] == w]
    conds = [c for c in run.condition_order if c in set(ok["condition"])][:max_conditions]
    nrows, ncols = grid_shape(len(conds), 2)
    drawn = 0
    with styled():
        fig, axes = new_figure(nrows, ncols, height_in=2.6)
        for ax, c in zip(axes, conds):
            for proto in run.protocols:
                g = ok[(ok["condition"] == c) & (ok["protocol"] == proto)].sort_values("goodput_mbps")
                if g.empty:
                    continue
                row = g.iloc[(len(g) - 1) // 2]
                path = timeseries_path(run, row)
                ts = read_timeseries(path) if path is not None else None
                if ts is None or ts.empty:
                    continue
                ax.step(ts["t_s"], ts["mbps"], where="post", color=palette.color(proto),
                        linestyle=palette.linestyle(proto), linewidth=1.3, label=palette.label(proto))
                drawn += 1
            ax.set_title(f"{c} ({run.condition_desc(c)})" if run.condition_desc(c) not in ("", c) else c, fontsize=10)
            ax.set_xlabel("time since first request (s)")
            ax.set_ylabel("throughput (Mbit/s)")
            ax.set_ylim(bottom=0)
        hide_unused(axes, len(conds))
        if not drawn:
            return None
        handles = [Line2D([], [], color=palette.color(p), linestyle=palette.linestyle(p), label=palette.label(p))
                   for p in run.protocols]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        more = len(set(ok["condition"])) - len(conds)
        return render(fig, "timeseries", f"Throughput time series: {workload_title(run.workload_info, w)}",
                      "Server→client wire throughput per capture interval (Ethernet frames, headers included) for "
                      "the trial with the median goodput of each protocol (CVart's time series)." + (f" {more} more conditions are not drawn." if more > 0 else ""))
