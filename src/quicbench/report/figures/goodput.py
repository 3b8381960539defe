"""Condition-level figures: a metric vs condition per workload (with a study's reference values
as hollow markers: Go-Quick's Fig. 11), a metric as % of the protocol's best workload per
condition (Go-Quick's Fig. 12), and the browser's page load time vs condition, drawn the same way."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.lines import Line2D

from quicbench.analysis.report_data import METRIC_LABELS, ReportData
from quicbench.analysis.studies import View
from quicbench.model.workload_kinds import measures
from quicbench.report.figures import palette
from quicbench.report.figures.plotting import (Drawing, grid_shape, hide_unused, log_yerr, new_figure, plain_log_axis,
                                               styled, yerr)


def _condition_axis(ax, conditions: list[str], xlabel: str = "condition") -> None:
    ax.set_xticks(range(len(conditions)))
    long = max((len(c) for c in conditions), default=0) > 8 or len(conditions) > 6
    ax.set_xticklabels(conditions, rotation=30 if long else 0, ha="right" if long else "center")
    ax.set_xlim(-0.5, len(conditions) - 0.5)
    ax.set_xlabel(xlabel if conditions else "condition")


def _axis_label(label: str, log: bool) -> str:
    """'goodput (Mbit/s)' -> 'goodput (Mbit/s, log scale)' on a log axis."""
    return label[:-1] + ", log scale)" if log and label.endswith(")") else label + (" (log scale)" if log else "")


def metric_vs_condition_view(data: ReportData, view: View) -> list[Drawing]:
    """A declared metric_vs_condition figure: one drawing per metric, for the workloads of its
    kinds, with the study's matching reference values when it asks for them."""
    f = view.figure
    out = []
    workloads = [w for w in data.run.workloads if data.run.kind_of(w) in f.workload_kinds]
    for metric in f.metrics:
        refs = view.refs[view.refs["metric"] == metric] if f.reference else None
        ref = refs[refs["value_metric"].notna()] if refs is not None and refs["value_metric"].notna().any() else None
        label = f.metric_labels.get(metric) or METRIC_LABELS.get(metric, metric)
        d = metric_vs_condition(data, metric, _axis_label(label, f.log), ref=ref, workloads=workloads, log=f.log,
                                notes=("reference",) if ref is not None else (), xlabel=view.xlabel,
                                ref_label=f.reference_label or "reference")
        if d is not None:
            d.fields.update(metric=metric, label=label[0].upper() + label[1:])
            out.append(d)
    return out


def page_loads(data: ReportData) -> Drawing | None:
    """Mean page load time vs condition, one panel per page workload, linear scale."""
    return metric_vs_condition(data, "page_load_ms", "page load time (ms)", log=False,
                               workloads=[w for w in data.run.workloads if measures(data.run.kind_of(w), "page_load_ms")])


def metric_vs_condition(data: ReportData, metric: str, ylabel: str, ref: pd.DataFrame | None = None,
                        workloads: list[str] | None = None, log: bool = True, notes: tuple[str, ...] = (),
                        xlabel: str = "condition", ref_label: str = "reference") -> Drawing | None:
    """A metric's value and 95 % CI vs condition (the geometric mean where the metric is summarised on
    logs, else the arithmetic mean: the value the interval is for), one panel per workload, one line
    per protocol; ref (condition, workload, protocol, value_metric): reference values as hollow markers."""
    summary, run = data.summary, data.run
    col = f"{metric}_mean"
    if summary.empty or col not in summary or summary[col].notna().sum() == 0:
        return None
    conds, protos = run.condition_order, run.protocols
    workloads = [w for w in (workloads if workloads is not None else run.workloads)
                 if summary.loc[summary["workload"] == w, col].notna().any()]
    if not workloads:
        return None
    nrows, ncols = grid_shape(len(workloads))
    with styled():
        fig, axes = new_figure(nrows, ncols, height_in=3.4 if ncols > 1 else 3.8)
        width = 0.08 * (len(protos) - 1)
        for ax, w in zip(axes, workloads):
            s = summary[summary["workload"] == w].set_index(["condition", "protocol"])
            for j, p in enumerate(protos):
                xs, ys, errs = [], [], [[], []]
                for i, c in enumerate(conds):
                    if (c, p) not in s.index:
                        continue
                    r = s.loc[(c, p)]
                    g = r.get(f"{metric}_gmean")
                    m = g if isinstance(g, float) and math.isfinite(g) else r[col]
                    if not (isinstance(m, float) and math.isfinite(m)) or (log and m <= 0):
                        continue
                    lo, hi = r[f"{metric}_ci_low"], r[f"{metric}_ci_high"]
                    if log:
                        lo, hi = log_yerr(m, lo, hi)
                    else:
                        lo, hi = yerr(m, lo, hi)
                    xs.append(i - width / 2 + j * 0.08 if len(protos) > 1 else i)
                    ys.append(m)
                    errs[0].append(lo)
                    errs[1].append(hi)
                if xs:
                    ax.errorbar(xs, ys, yerr=errs, color=palette.color(p), marker=palette.marker(p),
                                linestyle=palette.linestyle(p), linewidth=1.6, markersize=5, label=palette.label(p))
                if ref is not None and not ref.empty:
                    sd = ref[(ref["workload"] == w) & (ref["protocol"] == p)].set_index("condition")
                    pts = [(i, float(sd.at[c, "value_metric"])) for i, c in enumerate(conds) if c in sd.index]
                    if pts:
                        ax.plot(*zip(*pts), color=palette.color(p), marker=palette.marker(p), markerfacecolor="white",
                                linestyle=":", linewidth=1.0, markersize=5, alpha=0.8)
            if log:
                ax.set_yscale("log")
                plain_log_axis(ax)
            else:
                ax.set_ylim(bottom=0)
            ax.set_title(data.workload_title(w))
            ax.set_ylabel(ylabel)
            _condition_axis(ax, conds, xlabel)
        hide_unused(axes, len(workloads))
        handles = [Line2D([], [], color=palette.color(p), marker=palette.marker(p), linestyle=palette.linestyle(p),
                          label=palette.label(p)) for p in protos]
        if ref is not None and not ref.empty:
            handles.append(Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle=":",
                                  label=ref_label))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        return Drawing(fig, notes=notes)


def relative_to_best_view(data: ReportData, view: View) -> Drawing | None:
    """Goodput as % of the same protocol's best workload, vs object size, one panel per condition
    (the object workloads; data.relative holds the numbers)."""
    run, rel = data.run, data.relative
    workloads = [w for w in run.workloads if run.kind_of(w) in view.figure.workload_kinds]
    if len(workloads) < 2 or rel.empty:
        return None
    conds, protos = run.condition_order, run.protocols
    nrows, ncols = grid_shape(len(conds))
    with styled():
        fig, axes = new_figure(nrows, ncols, height_in=3.0 if ncols > 1 else 3.6)
        for ax, c in zip(axes, conds):
            s = rel[rel["condition"] == c]
            for p in protos:
                sp = s[s["protocol"] == p].set_index("workload")
                if sp.empty:
                    continue
                xs, ys, errs = [], [], [[], []]
                for i, w in enumerate(workloads):
                    if w not in sp.index:
                        continue
                    r = sp.loc[w]
                    lo, hi = log_yerr(r["pct_of_best"], r["pct_ci_low"], r["pct_ci_high"])
                    xs.append(i + 0.05 * (protos.index(p) - (len(protos) - 1) / 2))
                    ys.append(r["pct_of_best"])
                    errs[0].append(lo)
                    errs[1].append(hi)
                ax.errorbar(xs, ys, yerr=errs, color=palette.color(p), marker=palette.marker(p),
                            linestyle=palette.linestyle(p), linewidth=1.6, markersize=5)
            ax.set_yscale("log")
            plain_log_axis(ax)
            ax.axhline(100, color="black", linewidth=0.6, alpha=0.5)
            desc = run.condition_desc(c)
            # the description goes on a second, smaller line so that narrow panels do not collide
            ax.set_title(f"{c}" + (f"\n{desc}" if desc not in ("", c) else ""), fontsize=9)
            ax.set_xticks(range(len(workloads)))
            ax.set_xticklabels([data.workload_short(w, "\n×") for w in workloads])
            ax.set_xlim(-0.4, len(workloads) - 0.6)
            ax.set_xlabel("object size (× objects per trial)")
            ax.set_ylabel("% of protocol's best size (log)")
        hide_unused(axes, len(conds))
        handles = [Line2D([], [], color=palette.color(p), marker=palette.marker(p), linestyle=palette.linestyle(p),
                          label=palette.label(p)) for p in protos]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        return Drawing(fig)
