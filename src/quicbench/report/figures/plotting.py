"""Matplotlib without pyplot (Agg canvas, no global state): figure creation, common styling,
PNG rendering, and small drawing helpers shared by the figure modules."""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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


@dataclass
class Drawing:
    """What a figure's draw() returns: the drawn figure, the values its FigureSpec's id, title and
    caption templates are filled with, and which of the spec's optional caption notes apply."""
    fig: Figure
    fields: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


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


def hide_unused(axes: Sequence, used: int) -> None:
    for ax in axes[used:]:
        ax.set_visible(False)


def grid_shape(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols) or 1
    return (math.ceil(n / cols) or 1, cols)


def yerr(mean: float, lo: float, hi: float) -> tuple[float, float]:
    """Error bar lengths below and above the mean for the interval [lo, hi]; (0, 0) without an interval.

    Never negative: where the mean lies outside the interval (an interval of the geometric mean can
    end below the arithmetic mean of very unequal trials) the bar stops at the mean on that side."""
    if any(v is None or not math.isfinite(v) for v in (mean, lo, hi)):
        return (0.0, 0.0)
    return (max(mean - lo, 0.0), max(hi - mean, 0.0))


def log_yerr(mean: float, lo: float, hi: float) -> tuple[float, float]:
    """Asymmetric error bar lengths that survive a log axis (lower bounds <= 0 are clipped)."""
    if any(v is None or not math.isfinite(v) for v in (mean, lo, hi)):
        return (0.0, 0.0)
    low = min(mean - lo, mean * 0.95) if lo <= 0 else mean - lo
    return (max(low, 0.0), max(hi - mean, 0.0))


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
