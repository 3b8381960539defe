"""Metrics vs swept condition parameters (CVart's views, seed 001, declare them): each metric's
mean vs delay, bandwidth and loss, each swept with the other parameters held fixed; and
throughput time series per protocol from the capture files, when the run has them."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.lines import Line2D

from quicbench.analysis.condition_params import PARAM_LABELS
from quicbench.analysis.report_data import METRIC_LABELS, ReportData
from quicbench.analysis.studies import View
from quicbench.report.figures import palette
from quicbench.report.figures.plotting import Drawing, grid_shape, hide_unused, new_figure, styled, yerr

SLICE_STYLES = ("-", "--")


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


def metric_vs_parameter_view(data: ReportData, view: View, max_workloads: int = 3) -> list[Drawing]:
    """The view's metrics (rows) vs each swept parameter (columns), one figure per workload of its
    kinds (the largest first), mildest and harshest setting of the other parameters."""
    sw, summary, run = data.sweeps, data.summary, data.run
    if not sw or summary.empty:
        return []
    labels = view.figure.metric_labels
    metrics = [(m, labels.get(m) or METRIC_LABELS.get(m, m)) for m in view.figure.metrics
               if f"{m}_mean" in summary and summary[f"{m}_mean"].notna().any()]
    if not metrics:
        return []
    params = run.conditions
    out = []
    workloads = [w for w in run.workloads if run.kind_of(w) in view.figure.workload_kinds]
    for w in workloads[-max_workloads:][::-1]:   # the largest transfers first, as CVart's single file
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
                                below, above = yerr(r[f"{m}_mean"], r[f"{m}_ci_low"], r[f"{m}_ci_high"])
                                lo.append(below)
                                hi.append(above)
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
                                     f"{_slice_label(key, data.varying)}")
            handles += [Line2D([], [], color="grey", linestyle=ls, label=lbl) for ls, lbl in
                        zip(SLICE_STYLES, ("mildest other settings", "harshest other settings"))]
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5), frameon=False)
            out.append(Drawing(fig, {"i": len(out), "workload": data.workload_title(w),
                                     "slices": "; ".join(slice_txt)}))
    return out


def timeseries_view(data: ReportData, view: View) -> Drawing | None:
    """Throughput over time, one panel per condition, the median-goodput trial of each protocol."""
    ts, run = data.timeseries, data.run
    if ts is None:
        return None
    conds = ts.conditions
    nrows, ncols = grid_shape(len(conds), 2)
    with styled():
        fig, axes = new_figure(nrows, ncols, height_in=2.6)
        for ax, c in zip(axes, conds):
            for proto in run.protocols:
                series = ts.series.get((c, proto))
                if series is None:
                    continue
                ax.step(series["t_s"], series["mbps"], where="post", color=palette.color(proto),
                        linestyle=palette.linestyle(proto), linewidth=1.3, label=palette.label(proto))
            ax.set_title(f"{c} ({run.condition_desc(c)})" if run.condition_desc(c) not in ("", c) else c, fontsize=10)
            ax.set_xlabel("time since first request (s)")
            ax.set_ylabel("throughput (Mbit/s)")
            ax.set_ylim(bottom=0)
        hide_unused(axes, len(conds))
        handles = [Line2D([], [], color=palette.color(p), linestyle=palette.linestyle(p), label=palette.label(p))
                   for p in run.protocols]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        return Drawing(fig, {"workload": data.workload_title(ts.workload), "more": ts.more},
                       ("more",) if ts.more > 0 else ())
