"""Matplotlib without pyplot (Agg canvas, no global state): figure creation, common styling,
PNG as base64 for embedding, and small helpers shared by the figure modules."""

from __future__ import annotations

import base64
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from quicbench.report import palette

WIDTH_IN = 10.0   # at DPI this is 1000 px: the report's content width
DPI = 100
STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "legend.fontsize": 9, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "axes.spines.top": False, "axes.spines.right": False, "figure.facecolor": "white",
    "savefig.facecolor": "white", "errorbar.capsize": 3,
}


@dataclass
class Plot:
    """A rendered figure: what the report embeds."""
    id: str
    title: str
    caption: str
    png: bytes = field(repr=False)

    @property
    def b64(self) -> str:
        return base64.b64encode(self.png).decode("ascii")


def new_figure(nrows: int = 1, ncols: int = 1, height_in: float = 3.6, width_in: float = WIDTH_IN,
               **kw) -> tuple[Figure, list]:
    """A figure with an Agg canvas and a flat list of its axes."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width_in, height_in * nrows), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, [ax for row in axes for ax in row]


def render(fig: Figure, id: str, title: str, caption: str) -> Plot:
    buf = io.BytesIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(buf, format="png", dpi=DPI)
    return Plot(id, title, caption, buf.getvalue())


def style_axes(ax) -> None:
    """Apply the report style to axes made outside rc_context (rc params bind at creation)."""
    ax.grid(True, alpha=0.3, linewidth=0.6)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)


def hide_unused(axes: Sequence, used: int) -> None:
    for ax in axes[used:]:
        ax.set_visible(False)


def grid_shape(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols) or 1
    return (math.ceil(n / cols) or 1, cols)


def log_yerr(mean: float, lo: float, hi: float) -> tuple[float, float]:
    """Asymmetric error bar lengths that survive a log axis (lower bounds <= 0 are clipped)."""
    if any(v is None or not math.isfinite(v) for v in (mean, lo, hi)):
        return (0.0, 0.0)
    low = min(mean - lo, mean * 0.95) if lo <= 0 else mean - lo
    return (max(low, 0.0), max(hi - mean, 0.0))


def legend_protocols(ax, protocols: Iterable[str], loc: str = "best", **kw) -> None:
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=palette.color(p), marker=palette.marker(p), linestyle=palette.linestyle(p),
                      label=palette.label(p)) for p in protocols]
    ax.legend(handles=handles, loc=loc, **kw)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def save_pngs(plots: Iterable[Plot], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for p in plots:
        path = directory / f"{p.id}.png"
        path.write_bytes(p.png)
        out.append(path)
    return out


def styled():
    """The report's rc parameters, for building a whole figure inside."""
    return matplotlib.rc_context(STYLE)


def workload_title(info, workload: str) -> str:
    """'10 x 100KB, 10 in parallel' from the run's workload_info (falls back to the label)."""
    if workload.startswith("page:"):
        return "page " + workload.removeprefix("page:").replace("x", " × ", 1)
    try:
        row = info.loc[workload]
        count, par = int(row["count"]), int(row["parallel"])
    except (KeyError, TypeError, ValueError):
        return workload
    if par >= count and count > 1:
        par_txt = "all in parallel"
    else:
        par_txt = "one at a time" if par == 1 else f"{par} in parallel"
    return f"{count} × {row['size']}" + (f", {par_txt}" if count > 1 else "")


def plain_log_axis(ax, axis: str = "y") -> None:
    """Log-axis tick labels as plain numbers (10, 100, 0.5), minor ones only over short spans."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    a.set_major_formatter(fmt)
    if lo > 0 and hi / lo < 30:
        a.set_minor_locator(LogLocator(base=10, subs=(2.0, 3.0, 5.0)))
        a.set_minor_formatter(fmt)
    else:
        a.set_minor_formatter(NullFormatter())


def workload_short(info, workload: str, sep: str = "×") -> str:
    """'100KB×10' (size, then objects per trial); the label itself when size or count is unknown."""
    if workload.startswith("page:"):
        return workload
    try:
        size, count = info.at[workload, "size"], int(info.at[workload, "count"])
    except (KeyError, TypeError, ValueError):
        return workload
    return f"{size}{sep}{count}"
