"""Connection phases per protocol, as httpstat draws them (seed 004): connect, TLS handshake,
server wait (the rest of the time to first byte), content transfer."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from quicbench.analysis.load import RunData
from quicbench.report import palette
from quicbench.report.plotting import Plot, grid_shape, hide_unused, new_figure, render, styled, workload_short

PHASES = ("connect_ms", "tls_ms", "wait_ms", "transfer_ms_p50")


def has_phases(summary: pd.DataFrame) -> bool:
    return any(f"{p}_mean" in summary and summary[f"{p}_mean"].notna().any() for p in PHASES)


def phases(run: RunData, summary: pd.DataFrame, max_conditions: int = 6) -> Plot | None:
    if summary.empty or not has_phases(summary):
        return None
    conds = run.condition_order[:max_conditions]
    bars = [(w, p) for w in run.workloads for p in run.protocols]
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
                labels.append(f"{p} · {workload_short(run.workload_info, w)}")
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
        return render(fig, "phases", "Connection phases per protocol",
                      "Mean over successful trials of the first request's connect, TLS handshake and remaining time to "
                      "first byte (server wait), then the median request's content transfer, as httpstat shows them "
                      "(seed 004). HTTP/3 has no separate TLS phase: QUIC's handshake is inside 'connect'. Bars are "
                      "outlined in the protocol's colour." + (f" {more} more conditions are in the table." if more > 0
                                                              else ""))
