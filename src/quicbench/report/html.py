"""Render a ReportModel (or a comparison) as one self-contained HTML file: inline CSS, PNGs as
base64 data URIs, no scripts, nothing fetched when it opens."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jinja2

from quicbench import __version__
from quicbench.analysis.stats import TESTS
from quicbench.report import palette, views
from quicbench.report.fmt import ci, num, p_is, pct, plural, pval
from quicbench.report.model import SEED_NOTE, ReportModel

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


def render_report(model: ReportModel) -> str:
    plan = model.run.meta.get("plan") or {}
    ctx = {
        **_common(), "m": model, "plan_name": plan.get("name") or model.run.run_id,
        "plan_desc": plan.get("description") or "", "test_name": TESTS[model.method.test], "seed_source": SEED_NOTE,
        "diff_tables": [((a, b), views.diff_table(model, a, b)) for (a, b) in model.diffs],
        "phases_table": views.phases_table(model), "cpu_table": views.cpu_table(model),
        "cpu_bound_table": views.cpu_bound_table(model), "failure_table": views.failure_reason_table(model),
        "failed_table": views.failed_table(model), "calibration_table": views.calibration_table(model),
        "calibration_details": views.calibration_details(model),
        "metadata_table": views.metadata_table(model), "pages_table": views.pages_table(model),
    }
    return environment().get_template("report.html.j2").render(**ctx)


def render_compare(ctx: dict[str, Any]) -> str:
    return environment().get_template("compare.html.j2").render(**_common(), **ctx)
