"""CPU cost per protocol: client and server CPU seconds per GB of payload, per workload."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from quicbench.analysis.report_data import ReportData
from quicbench.report.figures import palette
from quicbench.report.figures.plotting import Drawing, new_figure, styled, yerr


def cpu_per_gb(data: ReportData) -> Drawing | None:
    table, run = data.cpu, data.run
    if table.empty or not table["cpu_s_per_gb_mean"].notna().any():
        return None
    workloads = [w for w in run.workloads if w in set(table["workload"])]
    protos = run.protocols
    t = table.set_index(["workload", "protocol"])
    width = 0.8 / max(len(protos), 1)
    with styled():
        fig, axes = new_figure(1, 1, height_in=3.4, width_in=min(10.0, 2.5 + 1.6 * len(workloads)))
        ax = axes[0]
        for j, p in enumerate(protos):
            for i, w in enumerate(workloads):
                if (w, p) not in t.index:
                    continue
                r = t.loc[(w, p)]
                x = i - 0.4 + width * (j + 0.5)
                c, s = r["client_cpu_s_per_gb_mean"], r["server_cpu_s_per_gb_mean"]
                c = c if np.isfinite(c) else 0.0
                s = s if np.isfinite(s) else 0.0
                ax.bar(x, c, width=width * 0.9, color=palette.color(p))
                ax.bar(x, s, width=width * 0.9, bottom=c, color=palette.color(p), alpha=0.45, hatch="//",
                       edgecolor="white")
                tot, lo, hi = r["cpu_s_per_gb_mean"], r["cpu_s_per_gb_ci_low"], r["cpu_s_per_gb_ci_high"]
                if np.isfinite(tot) and np.isfinite(lo):
                    below, above = yerr(tot, lo, hi)
                    ax.errorbar(x, tot, yerr=[[below], [above]], color="black", linewidth=1, capsize=3)
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels([data.workload_title(w).split(",")[0] for w in workloads])
        ax.set_xlabel("workload")
        ax.set_ylabel("CPU seconds per GB of payload")
        ax.grid(axis="x", visible=False)
        handles = [Patch(facecolor=palette.color(p), label=palette.label(p)) for p in protos]
        handles += [Patch(facecolor="grey", label="client (solid)"),
                    Patch(facecolor="grey", alpha=0.45, hatch="//", edgecolor="white", label="server (hatched)")]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return Drawing(fig)
