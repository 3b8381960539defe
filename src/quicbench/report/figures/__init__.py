"""The report's figures, as data: FIGURES lists each figure (family) with its id, the report
section it goes in, its title and caption, and the pure function that draws it from a
ReportData. The HTML renderer iterates FIGURES; nothing here computes a statistic.

Ids, titles and captions are str.format templates filled with the fields the draw function
returns (a heatmap's protocols, a CVart view's workload...); ``notes`` are caption sentences
appended when the drawing says they apply (e.g. seed values are drawn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from quicbench.analysis.report_data import ReportData
from quicbench.report.figures import compare, cpu, cvart, goodput, heatmap, phases, video
from quicbench.report.figures.plotting import Drawing, Plot, render



@dataclass(frozen=True)
class FigureSpec:
    id: str                      # template: "heatmap-{a}-vs-{b}"
    section: str                 # the report section (HTML anchor) the figure goes in
    title: str                   # template
    caption: str                 # template
    draw: Callable[[Any], Drawing | list[Drawing] | None]
    notes: Mapping[str, str] = field(default_factory=dict)   # optional caption sentences (templates)

    def render(self, data: Any) -> list[Plot]:
        """Draw the figure(s) and render them as PNG Plots with their id, title and caption."""
        drawn = self.draw(data)
        drawings = [] if drawn is None else drawn if isinstance(drawn, list) else [drawn]
        out = []
        for d in drawings:
            caption = " ".join([self.caption.format(**d.fields), *(self.notes[n].format(**d.fields) for n in d.notes)])
            out.append(render(d.fig, self.id.format(**d.fields), self.title.format(**d.fields), caption))
        return out


FIGURES: list[FigureSpec] = [
    FigureSpec(
        id="fig11-goodput-vs-condition", section="fig11", title="Fig. 11 replica: goodput vs condition",
        caption="Mean goodput per protocol with the 95 % confidence interval of the geometric mean (a t-interval on "
                "log goodput, never below zero), one panel per workload (Go-Quick's Fig. 11). Protocols are drawn "
                "slightly apart so that the bars do not hide each other.",
        notes={"seed": "Hollow markers on dotted lines: the seed's own Table 1 (no spread given)."},
        draw=goodput.fig11),
    FigureSpec(
        id="fig12-relative-to-best-size", section="fig12",
        title="Fig. 12 replica: goodput relative to the best object size",
        caption="Each protocol's mean goodput as a percentage of its own best workload in the same condition "
                "(Go-Quick's Fig. 12), one panel per condition. Bars scale that workload's 95 % CI by the best "
                "mean (the best mean's own uncertainty is not propagated).",
        draw=goodput.fig12),
    FigureSpec(
        id="heatmap-{a}-vs-{b}", section="heatmaps", title="{A} vs {B}: % difference in mean goodput",
        caption="100 × (mean {a} − mean {b}) / mean {b}, per cell. Coloured only where the difference is significant "
                "({method}); other cells show the value in grey, marked n.s. (or 'n too small'). Colour scale "
                "centred on 0, clipped at ±{vmax:g} %.",
        notes={"not_crossed": "The conditions do not cross delay and loss (they rise together), so the map is "
                              "condition × workload."},
        draw=heatmap.heatmaps),
    FigureSpec(
        id="cvart-{i}", section="cvart", title="CVart views: {workload}",
        caption="Means of each metric as one condition parameter is swept with the others held fixed (CVart, "
                "seed 001), with 95 % confidence intervals: of the geometric mean for transfer time and bandwidth "
                "(never below zero), Student-t for overhead. {slices}.",
        draw=cvart.cvart_views),
    FigureSpec(
        id="timeseries", section="timeseries", title="Throughput time series: {workload}",
        caption="Server→client wire throughput per capture interval (Ethernet frames, headers included) for "
                "the trial with the median goodput of each protocol (CVart's time series).",
        notes={"more": "{more} more conditions are not drawn."},
        draw=cvart.timeseries),
    FigureSpec(
        id="phases", section="phases", title="Connection phases per protocol",
        caption="Mean over successful trials of the first request's connect, TLS handshake and remaining time to "
                "first byte (server wait), then the median request's content transfer, as httpstat shows them "
                "(seed 004). HTTP/3 has no separate TLS phase: QUIC's handshake is inside 'connect'. Bars are "
                "outlined in the protocol's colour.",
        notes={"more": "{more} more conditions are in the table."},
        draw=phases.phases),
    FigureSpec(
        id="cpu-per-gb", section="cpu", title="CPU seconds per GB",
        caption="Client (solid) and server (hatched) CPU seconds per GB of payload, mean over successful trials "
                "of all conditions, with the 95 % CI of the total. The client's CPU time is its own report over "
                "the fetch window (process start-up excluded) when the client gives one, else the process's.",
        draw=cpu.cpu_per_gb),
    FigureSpec(
        id="page-load-vs-condition", section="pages", title="Page load time vs condition",
        caption="Mean time from navigation start to the load event in the browser, with the 95 % confidence "
                "interval of the geometric mean (never below zero), one panel per page workload (DNCS's page "
                "metrics, seed 004).",
        draw=goodput.page_loads),
    FigureSpec(
        id="video-timelines", section="video", title="Video playback over time",
        caption="For the trial with the median startup of each protocol × condition × video workload: the rendered "
                "resolution (solid, the player's ABR choice) and the buffer ahead of the play position (dashed); "
                "red bands are stalls.",
        draw=video.timelines),
]

# the figure of `quicbench compare` (draws a CompareData)
COMPARE_FIGURE = FigureSpec(
    id="compare-diff", section="compare", title="B vs A per cell",
    caption="100 × (mean B − mean A) / mean A for every cell in both runs; filled markers are significant.",
    draw=compare.compare_diff)


def render_figures(data: ReportData, figures: list[FigureSpec] = FIGURES) -> dict[str, list[Plot]]:
    """section -> the rendered plots of that section, in FIGURES order (empty when no cell has data)."""
    out: dict[str, list[Plot]] = {spec.section: [] for spec in figures}
    if data.summary.empty:
        return out
    for spec in figures:
        out[spec.section] += spec.render(data)
    return out


__all__ = ["FigureSpec", "FIGURES", "COMPARE_FIGURE", "render_figures", "Plot"]
