"""The report's figures, as data: FIGURES lists each figure (family) the report always draws when
it has data, with its id, the report section it goes in, its title and caption, and the pure
function that draws it from a ReportData. The figures studies declare (model/study.py; and the
defaults analysis/studies.py declares the same way) are drawn by the function VIEW_KINDS names
for their kind. The HTML renderer places each section; nothing here computes a statistic.

Ids, titles and captions are str.format templates filled with the fields the draw function
returns (a heatmap's protocols, a sweep view's workload...); ``notes`` are caption sentences
appended when the drawing says they apply (e.g. reference values are drawn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from quicbench.analysis.report_data import ReportData
from quicbench.analysis.studies import View
from quicbench.report.figures import compare, cpu, goodput, heatmap, phases, sweeps, video
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
        id="heatmap-{a}-vs-{b}", section="heatmaps", title="{A} vs {B}: % difference in geometric mean goodput",
        caption="100 × (gmean {a} − gmean {b}) / gmean {b} (geometric means: the ratio the test judges, − 1), per cell. Coloured only where the difference is significant "
                "({method}); other cells show the value in grey, marked n.s. (or 'n too small'). Colour scale "
                "centred on 0, clipped at ±{vmax:g} %.",
        notes={"not_crossed": "The conditions do not cross delay and loss (they rise together), so the map is "
                              "condition × workload."},
        draw=heatmap.heatmaps),
    FigureSpec(
        id="phases", section="phases", title="Connection phases per protocol",
        caption="Arithmetic mean (so the phases add up) over successful trials of the first request's connect, TLS handshake and remaining time to "
                "first byte (server wait), then the median request's content transfer, as httpstat shows them "
                "(seed 004). HTTP/3 has no separate TLS phase: QUIC's handshake is inside 'connect'. Bars are "
                "outlined in the protocol's colour.",
        notes={"more": "{more} more conditions are in the table."},
        draw=phases.phases),
    FigureSpec(
        id="cpu-per-gb", section="cpu", title="CPU seconds per GB",
        caption="Client (solid) and server (hatched) CPU seconds per GB of payload, arithmetic mean over successful "
                "trials of all conditions, with the bootstrap 95 % CI of the total. The client's CPU time is its own report over "
                "the fetch window (process start-up excluded) when the client gives one, else the process's.",
        draw=cpu.cpu_per_gb),
    FigureSpec(
        id="page-load-vs-condition", section="pages", title="Page load time vs condition",
        caption="Geometric mean time from navigation start to the load event in the browser, with its 95 % confidence "
                "interval (never below zero), one panel per page workload (DNCS's page "
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
    caption="100 × (B − A) / A on each cell's value (the geometric mean of goodputs and times) for every cell in both "
            "runs; filled markers are significant.",
    draw=compare.compare_diff)


# the generic figure kinds a study can declare (model/study.py Figure.kind) -> draw(data, view)
VIEW_KINDS: dict[str, Callable[[ReportData, View], Drawing | list[Drawing] | None]] = {
    "metric_vs_condition": goodput.metric_vs_condition_view,
    "relative_to_best": goodput.relative_to_best_view,
    "metric_vs_parameter": sweeps.metric_vs_parameter_view,
    "timeseries": sweeps.timeseries_view,
}


def view_spec(view: View) -> FigureSpec:
    """A declared figure as a FigureSpec (its note "reference" is its reference_note)."""
    f = view.figure
    return FigureSpec(id=f.id, section=f.section, title=f.title, caption=f.caption,
                      draw=lambda data: VIEW_KINDS[f.kind](data, view),
                      notes={"reference": f.reference_note, "more": "{more} more conditions are not drawn."})


def render_figures(data: ReportData, figures: list[FigureSpec] = FIGURES) -> dict[str, list[Plot]]:
    """section -> the rendered plots of that section: the report's own figures (FIGURES order)
    and the declared ones (data.views); empty when no cell has data."""
    specs = [*figures, *(view_spec(v) for v in data.views)]
    out: dict[str, list[Plot]] = {spec.section: [] for spec in specs}
    if data.summary.empty:
        return out
    for spec in specs:
        out[spec.section] += spec.render(data)
    return out


__all__ = ["FigureSpec", "FIGURES", "VIEW_KINDS", "COMPARE_FIGURE", "render_figures", "Plot"]
