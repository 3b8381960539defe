"""`quicbench compare`'s figure: the % difference of each cell's value (geometric mean of goodput for downloads, of load
time for pages), B over A; cells compared on a difference (video QoE) are not drawn."""

from __future__ import annotations

from matplotlib.lines import Line2D

from quicbench.stats import DIFFERENT
from quicbench.analysis.compare import CompareData
from quicbench.report.figures import palette
from quicbench.report.figures.plotting import Drawing, new_figure, styled


def compare_diff(data: CompareData) -> Drawing | None:
    df, protocols = data.frame, data.protocols
    d = df[(df["in"] == "both") & df["diff_pct"].notna()]
    if d.empty:
        return None
    cells = list(dict.fromkeys(zip(d["condition"], d["workload"])))
    with styled():
        fig, axes = new_figure(1, 1, height_in=3.6)
        ax = axes[0]
        step = 0.8 / max(len(protocols), 1)
        for j, p in enumerate(protocols):
            dp = d[d["protocol"] == p].set_index(["condition", "workload"])
            for i, cw in enumerate(cells):
                if cw not in dp.index:
                    continue
                r = dp.loc[cw]
                sig = r["verdict"] == DIFFERENT
                ax.plot(i - 0.4 + step * (j + 0.5), r["diff_pct"], marker=palette.marker(p), markersize=7,
                        color=palette.color(p), markerfacecolor=palette.color(p) if sig else "white", linestyle="none")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(cells)))
        ax.set_xticklabels([f"{c}\n{w}" for c, w in cells], rotation=30 if len(cells) > 6 else 0,
                           ha="right" if len(cells) > 6 else "center", fontsize=8)
        ax.set_xlim(-0.6, len(cells) - 0.4)
        ax.set_ylabel("cell value, B vs A (%)" if d["metric"].nunique() > 1 else
                      f"{d['metric'].iloc[0].replace('_mbps', '').replace('_ms', ' time').replace('_', ' ')}, "
                      f"B vs A (%)")
        ax.set_xlabel("condition / workload")
        handles = [Line2D([], [], color=palette.color(p), marker=palette.marker(p), linestyle="none",
                          label=palette.label(p)) for p in protocols]
        handles += [Line2D([], [], color="grey", marker="o", linestyle="none", label="different"),
                    Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle="none",
                           label="equivalent / inconclusive / n too small")]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return Drawing(fig)
