"""The rendered resolution and the buffer over time of one trial per video cell."""

from __future__ import annotations

from quicbench.analysis.report_data import ReportData
from quicbench.report.figures import palette
from quicbench.report.figures.plotting import Drawing, grid_shape, hide_unused, new_figure, styled


def timelines(data: ReportData) -> Drawing | None:
    cells = data.video_timelines
    if not cells:
        return None
    keys = list(cells)
    nrows, ncols = grid_shape(len(keys), 3)
    with styled():
        fig, axes = new_figure(nrows, ncols, height_in=2.3 * nrows)
        for ax, key in zip(axes, keys):
            c, w, p = key
            cell = cells[key]
            tl = cell["timeline"]
            ax.step(tl["t_s"], tl["height"], where="post", color=palette.color(p), lw=1.6, label="resolution (p)")
            ax.set_ylabel("rendered height (p)")
            ax2 = ax.twinx()
            ax2.plot(tl["t_s"], tl["buffer_s"], color="0.45", lw=1, ls="--", label="buffer (s)")
            ax2.set_ylabel("buffer (s)")
            for start, end in cell["stalls"]:
                if start is not None:
                    ax.axvspan(start, end if end is not None else tl["t_s"].max(), color="#d62728", alpha=0.15, lw=0)
            ax.set_xlabel("time since page load (s)")
            ax.set_title(f"{p} · {c} · {data.workload_short(w)} (trial {cell['seq']})", fontsize=9)
        hide_unused(axes, len(keys))
        return Drawing(fig, {}, ())
