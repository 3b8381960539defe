"""Connection phases per protocol, as httpstat draws them (seed 004): connect, TLS handshake,
server wait (the rest of the time to first byte), content transfer."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from quicbench.analysis.report_data import PHASES, ReportData
from quicbench.report.figures import palette
from quicbench.report.figures.plotting import Drawing, grid_shape, hide_unused, new_figure, styled


def phases(data: ReportData, max_conditions: int = 6) -> Drawing | None:
    summary, run = data.summary, data.run
    if summary.empty or not data.has_phases:
        return None
    conds = run.condition_order[:max_conditions]
    bars = [(w, p) for w in data.object_workloads for p in run.protocols]
    nrows, ncols = grid_shape(len(conds), 2)
    with styled():
        fig, axes = new_figure(nrows, ncols, height_in=max(1.6, 0.32 * len(bars) + 1.1))
        for ax, c in zip(axes, conds):
            s = summary[summary["condition"] == c].set_index(["workload", "protocol"])
            labels, colors = [], []
            for i, (w, p) in enumerate(bars):
                left = 0.0
                if (w, p) in s.index:
                    r = s.loc[(w, p)]
                    for ph in PHASES:
                        v = r.get(f"{ph}_mean")
                        v = float(v) if v is not None and np.isfinite(v) else 0.0
                        ax.barh(i, v, left=left, color=palette.PHASE_COLORS[ph], height=0.7,
                                edgecolor=palette.color(p), linewidth=1.2)
                        left += v
                labels.append(f"{p} · {data.workload_short(w)}")
                colors.append(palette.color(p))
            ax.set_yticks(range(len(bars)))
            ax.set_yticklabels(labels)
            for t, col in zip(ax.get_yticklabels(), colors):
                t.set_color(col)
                t.set_fontweight("bold")
            ax.invert_yaxis()
            ax.set_xlabel("time (ms)")
            ax.set_title(f"{c} ({run.condition_desc(c)})" if run.condition_desc(c) not in ("", c) else c, fontsize=10)
            ax.grid(axis="y", visible=False)
        hide_unused(axes, len(conds))
        handles = [Patch(facecolor=palette.PHASE_COLORS[ph], label=palette.PHASE_LABELS[ph]) for ph in PHASES]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        more = len(run.condition_order) - len(conds)
        return Drawing(fig, {"more": more}, ("more",) if more > 0 else ())
