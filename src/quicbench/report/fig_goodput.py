"""Goodput figures: Fig. 11 (goodput vs condition per object size) and Fig. 12 (goodput as %
of the protocol's best object size, per condition), after seed 000."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.lines import Line2D

from quicbench.analysis.condition_params import parse_delay_loss
from quicbench.analysis.load import RunData
from quicbench.report import palette
from quicbench.report.plotting import (Plot, grid_shape, hide_unused, log_yerr, new_figure, plain_log_axis, render, styled,
                       workload_short, workload_title)


def _condition_axis(ax, conditions: list[str]) -> None:
    ax.set_xticks(range(len(conditions)))
    long = max((len(c) for c in conditions), default=0) > 8 or len(conditions) > 6
    ax.set_xticklabels(conditions, rotation=30 if long else 0, ha="right" if long else "center")
    ax.set_xlim(-0.5, len(conditions) - 0.5)
    if conditions and all(parse_delay_loss(c) for c in conditions):
        ax.set_xlabel("condition (delay ms _ loss %, each direction)")
    else:
        ax.set_xlabel("condition")


def fig11(run: RunData, summary: pd.DataFrame, seed: pd.DataFrame | None = None) -> Plot | None:
    """Goodput vs condition, one panel per workload, log scale, mean with 95 % CI per protocol."""
    cap = ("Mean goodput per protocol with Student-t 95 % confidence intervals of the mean, one panel per "
           "workload (Go-Quick's Fig. 11). Protocols are drawn slightly apart so that the bars do not hide each "
           "other; lower CI bounds at or below zero are clipped on the log axis.")
    if seed is not None and not seed.empty:
        cap += " Hollow markers on dotted lines: the seed's own Table 1 (no spread given)."
    return metric_vs_condition(run, summary, "goodput_mbps", "goodput (Mbit/s, log scale)",
                               "fig11-goodput-vs-condition", "Fig. 11 replica: goodput vs condition", cap, seed=seed)


def metric_vs_condition(run: RunData, summary: pd.DataFrame, metric: str, ylabel: str, id: str, title: str,
                        caption: str, seed: pd.DataFrame | None = None, workloads: list[str] | None = None,
                        log: bool = True) -> Plot | None:
    """A metric's mean and 95 % CI vs condition, one panel per workload, one line per protocol."""
    col = f"{metric}_mean"
    if summary.empty or col not in summary or summary[col].notna().sum() == 0:
        return None
    conds, protos = run.condition_order, run.protocols
    workloads = workloads if workloads is not None else [
        w for w in run.workloads if summary.loc[summary["workload"] == w, col].notna().any()]
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
                    m = r[col]
                    if not (isinstance(m, float) and math.isfinite(m)) or (log and m <= 0):
                        continue
                    lo, hi = r[f"{metric}_ci_low"], r[f"{metric}_ci_high"]
                    if log:
                        lo, hi = log_yerr(m, lo, hi)
                    else:
                        lo, hi = (m - lo, hi - m) if math.isfinite(lo) and math.isfinite(hi) else (0.0, 0.0)
                    xs.append(i - width / 2 + j * 0.08 if len(protos) > 1 else i)
                    ys.append(m)
                    errs[0].append(lo)
                    errs[1].append(hi)
                if xs:
                    ax.errorbar(xs, ys, yerr=errs, color=palette.color(p), marker=palette.marker(p),
                                linestyle=palette.linestyle(p), linewidth=1.6, markersize=5, label=palette.label(p))
                if seed is not None and not seed.empty:
                    sd = seed[(seed["workload"] == w) & (seed["protocol"] == p)].set_index("condition")
                    pts = [(i, sd.at[c, "seed_goodput_mbps"]) for i, c in enumerate(conds) if c in sd.index]
                    if pts:
                        ax.plot(*zip(*pts), color=palette.color(p), marker=palette.marker(p), markerfacecolor="white",
                                linestyle=":", linewidth=1.0, markersize=5, alpha=0.8)
            if log:
                ax.set_yscale("log")
                plain_log_axis(ax)
            else:
                ax.set_ylim(bottom=0)
            ax.set_title(workload_title(run.workload_info, w))
            ax.set_ylabel(ylabel)
            _condition_axis(ax, conds)
        hide_unused(axes, len(workloads))
        handles = [Line2D([], [], color=palette.color(p), marker=palette.marker(p), linestyle=palette.linestyle(p),
                          label=palette.label(p)) for p in protos]
        if seed is not None and not seed.empty:
            handles.append(Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle=":",
                                  label="seed 000, Table 1"))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        return render(fig, id, title, caption)


def fig12(run: RunData, summary: pd.DataFrame) -> Plot | None:
    """Goodput as % of the same protocol's best workload, vs object size, one panel per condition."""
    workloads = run.workloads
    if len(workloads) < 2 or summary["goodput_mbps_mean"].notna().sum() == 0:
        return None
    conds, protos = run.condition_order, run.protocols
    nrows, ncols = grid_shape(len(conds))
    info = run.workload_info
    with styled():
        fig, axes = new_figure(nrows, ncols, height_in=3.0 if ncols > 1 else 3.6)
        for ax, c in zip(axes, conds):
            s = summary[summary["condition"] == c]
            for p in protos:
                sp = s[s["protocol"] == p].set_index("workload")
                best = sp["goodput_mbps_mean"].max()
                if not (isinstance(best, float) and best > 0):
                    continue
                xs, ys, errs = [], [], [[], []]
                for i, w in enumerate(workloads):
                    if w not in sp.index or not sp.at[w, "goodput_mbps_mean"] > 0:
                        continue
                    m = sp.at[w, "goodput_mbps_mean"]
                    lo, hi = log_yerr(m, sp.at[w, "goodput_mbps_ci_low"], sp.at[w, "goodput_mbps_ci_high"])
                    xs.append(i + 0.05 * (protos.index(p) - (len(protos) - 1) / 2))
                    ys.append(100 * m / best)
                    errs[0].append(100 * lo / best)
                    errs[1].append(100 * hi / best)
                ax.errorbar(xs, ys, yerr=errs, color=palette.color(p), marker=palette.marker(p),
                            linestyle=palette.linestyle(p), linewidth=1.6, markersize=5)
            ax.set_yscale("log")
            plain_log_axis(ax)
            ax.axhline(100, color="black", linewidth=0.6, alpha=0.5)
            desc = run.condition_desc(c)
            # the description goes on a second, smaller line so that narrow panels do not collide
            ax.set_title(f"{c}" + (f"\n{desc}" if desc not in ("", c) else ""), fontsize=9)
            ax.set_xticks(range(len(workloads)))
            ax.set_xticklabels([workload_short(info, w, "\n×") for w in workloads])
            ax.set_xlim(-0.4, len(workloads) - 0.6)
            ax.set_xlabel("object size (× objects per trial)")
            ax.set_ylabel("% of protocol's best size (log)")
        hide_unused(axes, len(conds))
        handles = [Line2D([], [], color=palette.color(p), marker=palette.marker(p), linestyle=palette.linestyle(p),
                          label=palette.label(p)) for p in protos]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        return render(fig, "fig12-relative-to-best-size", "Fig. 12 replica: goodput relative to the best object size",
                      "Each protocol's mean goodput as a percentage of its own best workload in the same condition "
                      "(Go-Quick's Fig. 12), one panel per condition. Bars scale that workload's 95 % CI by the best "
                      "mean (the best mean's own uncertainty is not propagated).")
