"""Render a ReportData (or a CompareData) as one self-contained HTML file: inline CSS, PNGs as
base64 data URIs, no scripts, nothing fetched when it opens."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jinja2

from quicbench import __version__
from quicbench.analysis.compare import CompareData
from quicbench.analysis.report_data import ReportData
from quicbench.model.workload_kinds import KINDS
from quicbench.stats import TESTS
from quicbench.report import views
from quicbench.report.matrix import html_context as matrix_context
from quicbench.report.measures import html_context as measures_context
from quicbench.report.compare import compare_table
from quicbench.report.figures import palette, render_figures
from quicbench.report.figures.plotting import Plot
from quicbench.report.fmt import ci, num, p_is, pct, plural, pval

TEMPLATES = Path(__file__).parent / "templates"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=jinja2.select_autoescape(
        enabled_extensions=("html", "j2", "css"), default_for_string=True), trim_blocks=False, lstrip_blocks=False,
        undefined=jinja2.StrictUndefined)
    env.filters.update(num=num, pval=pval, pct=pct, ci=ci, plural=plural, p_is=p_is)
    return env


def _common() -> dict[str, Any]:
    return {"version": __version__, "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "colors": palette.PROTOCOL_COLORS}


def render_report(data: ReportData, plots: dict[str, list[Plot]] | None = None) -> str:
    """The report page. plots: section -> rendered figures, as render_figures(data) gives them (drawn
    here when not given), placed in their section in the order of figures.FIGURES."""
    if plots is None:
        plots = render_figures(data)
    plan = data.run.meta.get("plan") or {}
    ctx = {
        **_common(), "m": data, "plots": plots, "plan_name": plan.get("name") or data.run.run_id,
        "plan_desc": plan.get("description") or "", "test_name": TESTS[data.method.test],
        "diff_tables": [((a, b), views.diff_table(data, a, b)) for (a, b) in data.diffs],
        "phases_table": views.phases_table(data), "cpu_table": views.cpu_table(data),
        "cpu_bound_table": views.cpu_bound_table(data), "cpu_slowed_table": views.cpu_slowed_table(data),
        "slowed_note": views.SLOWED_NOTE, "host_table": views.host_table(data), "failure_table": views.failure_reason_table(data),
        "failed_table": views.failed_table(data), "calibration_table": views.calibration_table(data),
        "calibration_details": views.calibration_details(data),
        "metadata_table": views.metadata_table(data), "pages_table": views.pages_table(data),
        "page_phases_table": views.page_phases_table(data), "page_phases_note": views.PAGE_PHASES_NOTE,
        "video_table": views.video_table(data), "recovery_table": views.recovery_table(data),
        "measures": measures_context(data), "matrix": matrix_context(data),
        "claims_tables": views.claims_tables(data), "variants_tables": views.variants_tables(data), "explained_tables": views.explained_tables(data),
        "explained_note": views.EXPLAINED_NOTE, "explanations_text": views.explanations_text, "page_verdicts": views.verdict_table(data, "page"),
        "video_verdicts": views.verdict_table(data, "video"),
        "kind_tables": [(KINDS.get(k).title, k, views.kind_table(data, k), views.verdict_table(data, k))
                        for k in data.other_kinds],
    }
    return environment().get_template("report.html.j2").render(**ctx)


def render_compare(data: CompareData, figure: Plot | None) -> str:
    ctx = {"run_a": data.run_a, "run_b": data.run_b, "dir_a": data.dir_a, "dir_b": data.dir_b,
           "method_text": data.method_text, "setup_diffs": data.setup_diffs, "n_sig": data.n_sig, "tally": data.tally,
           "n_tested": data.n_tested, "notes": data.notes, "figure": figure, "table": compare_table(data.frame)}
    return environment().get_template("compare.html.j2").render(**_common(), **ctx)
