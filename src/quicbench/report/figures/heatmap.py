"""Heatmaps of the % goodput difference of one protocol over another across the condition grid.

When delay and loss (or rate) are crossed, the map is delay x loss with one panel per workload
and per value of the remaining parameters (rate, jitter, spikes); when they are not (Go-Quick's
conditions raise delay and loss together), it is condition x workload. Colour only where the
difference is significant; the scale is symmetric around 0 (clipped at +-100 %, the printed
numbers are exact).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import Normalize

from quicbench.stats import DIFFERENT, EQUIVALENT, INCONCLUSIVE
from quicbench.analysis.condition_params import PARAM_LABELS
from quicbench.analysis.report_data import COMPARISONS, ReportData
from quicbench.report.figures import palette
from quicbench.report.figures.plotting import Drawing, new_figure, styled

CLIP = 100.0


def _fmt_param(p: str, v) -> str:
    if p == "spikes":
        return "spikes" if bool(v) else "no spikes"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return f"{PARAM_LABELS[p].split(' (')[0]} unlimited" if p == "rate_mbit" else "-"
    unit = {"delay_ms": " ms", "loss_pct": " %", "rate_mbit": " Mbit/s", "jitter_ms": " ms jitter"}[p]
    return f"{v:g}{unit}"


def _draw(ax, values: np.ndarray, verdicts: np.ndarray, xlabels: list[str], ylabels: list[str], norm,
          origin: str = "lower") -> object:
    sig = verdicts == DIFFERENT
    shown = np.where(sig, values, np.nan)
    im = ax.imshow(np.clip(shown, -CLIP, CLIP), cmap=palette.DIVERGING_CMAP, norm=norm, aspect="auto",
                   origin=origin, interpolation="nearest")
    ax.set_facecolor("white")
    for (i, j), v in np.ndenumerate(values):
        if math.isnan(v):
            ax.add_patch(_hatch(j, i))
            ax.text(j, i, "no data", ha="center", va="center", fontsize=8, color="#888888")
        elif sig[i, j]:
            dark = abs(max(min(v, CLIP), -CLIP)) > 0.6 * norm.vmax
            ax.text(j, i, f"{v:+.0f} %", ha="center", va="center", fontsize=9, color="white" if dark else "black",
                    fontweight="bold")
        else:
            why = {EQUIVALENT: "equiv.", INCONCLUSIVE: "inconcl."}.get(verdicts[i, j], str(verdicts[i, j]))
            ax.text(j, i, f"{v:+.0f} %\n{why}", ha="center", va="center", fontsize=7.5, color="#999999")
    ax.set_xticks(range(len(xlabels)))
    ax.set_xticklabels(xlabels, rotation=30 if max(map(len, xlabels), default=0) > 8 else 0,
                       ha="right" if max(map(len, xlabels), default=0) > 8 else "center")
    ax.set_yticks(range(len(ylabels)))
    ax.set_yticklabels(ylabels)
    ax.grid(False)
    ax.set_xticks(np.arange(-0.5, len(xlabels)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(ylabels)), minor=True)
    ax.grid(which="minor", color="#dddddd", linewidth=1)
    ax.tick_params(which="minor", length=0)
    return im


def _hatch(x: float, y: float):
    from matplotlib.patches import Rectangle
    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="#f3f3f3", edgecolor="#dddddd", hatch="//", linewidth=0)


def heatmaps(data: ReportData) -> list[Drawing]:
    """H3 vs H2 and H3 vs H1, those the run has both protocols for."""
    return [d for d in (heatmap(data, a, b) for a, b in COMPARISONS if (a, b) in data.diffs) if d]


def heatmap(data: ReportData, a: str, b: str) -> Drawing | None:
    """% difference of geometric mean goodput, a over b, over the condition grid; None when a or b is missing."""
    d = data.diffs.get((a, b))
    if d is None or d.empty:
        return None
    run = data.run
    lay = data.heatmap_layout
    diffs = d.set_index(["condition", "workload"])
    sig_vals = d.loc[d["significant"], "diff_pct"].abs()
    vmax = min(CLIP, max(10.0, math.ceil((sig_vals.max() if len(sig_vals) else d["diff_pct"].abs().max()) / 10) * 10))
    norm = Normalize(vmin=-vmax, vmax=vmax)
    params = run.conditions
    workloads = [w for w in run.workloads if w in set(d["workload"])]
    with styled():
        if lay.kind == "list":
            conds = [c for c in run.condition_order if c in set(d["condition"])]
            vals = np.full((len(workloads), len(conds)), np.nan)
            sig = np.full(vals.shape, "", dtype=object)
            for (c, w), r in diffs.iterrows():
                vals[workloads.index(w), conds.index(c)] = r["diff_pct"]
                sig[workloads.index(w), conds.index(c)] = r["verdict"]
            fig, axes = new_figure(1, 1, height_in=max(2.2, 0.9 * len(workloads) + 1.4),
                                   width_in=min(10.0, 3.0 + 1.2 * len(conds)))
            im = _draw(axes[0], vals, sig, conds, [data.workload_title(w) for w in workloads], norm,
                       origin="upper")
            axes[0].set_xlabel("condition")
            axes[0].set_ylabel("workload")
            used = axes
        else:
            panels = (params[list(lay.panel_by)].astype(object).drop_duplicates().values.tolist()
                      if lay.panel_by else [[]])
            xs = sorted(params[lay.x].dropna().unique())
            ys = sorted(params[lay.y].dropna().unique())
            nrows, ncols = len(workloads), len(panels)
            fig, axes = new_figure(nrows, ncols, height_in=max(2.4, 0.55 * len(ys) + 1.5),
                                   width_in=min(10.0, (1.2 * len(xs) + 2.2) * ncols + 1))
            used = []
            for wi, w in enumerate(workloads):
                for pi, pv in enumerate(panels):
                    ax = axes[wi * ncols + pi]
                    used.append(ax)
                    vals = np.full((len(ys), len(xs)), np.nan)
                    sig = np.full(vals.shape, "", dtype=object)
                    sel = params
                    for col, v in zip(lay.panel_by, pv):
                        sel = sel[sel[col].astype(object) == v] if not (isinstance(v, float) and math.isnan(v)) \
                            else sel[sel[col].isna()]
                    for c, pr in sel.iterrows():
                        if (c, w) in diffs.index:
                            r = diffs.loc[(c, w)]
                            i, j = ys.index(pr[lay.y]), xs.index(pr[lay.x])
                            vals[i, j], sig[i, j] = r["diff_pct"], r["verdict"]
                    im = _draw(ax, vals, sig, [f"{v:g}" for v in xs], [f"{v:g}" for v in ys], norm)
                    ax.set_xlabel(PARAM_LABELS[lay.x])
                    ax.set_ylabel(PARAM_LABELS[lay.y])
                    ttl = data.workload_title(w)
                    if pv:
                        ttl += " · " + ", ".join(_fmt_param(col, v) for col, v in zip(lay.panel_by, pv))
                    ax.set_title(ttl, fontsize=10)
        cb = fig.colorbar(im, ax=used, shrink=0.9, extend="both" if d["diff_pct"].abs().max() > vmax else "neither")
        cb.set_label(f"geometric mean goodput, {a.upper()} vs {b.upper()} (%)\npositive: {a.upper()} faster")
        notes = ("not_crossed",) if lay.kind == "list" and len(data.swept) >= 2 else ()
        return Drawing(fig, {"a": a, "b": b, "A": a.upper(), "B": b.upper(), "method": data.method.short(),
                             "vmax": vmax}, notes)
