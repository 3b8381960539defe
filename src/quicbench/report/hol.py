"""The report's "Head-of-line blocking" section, for HTML and Markdown alike: what ReportData.hol
holds (analysis/hol.py), drawn as two tables and the text that says what the measures isolate."""

from __future__ import annotations

from typing import Any

from quicbench.analysis.hol import HOL_METRICS, HOL_TEXT, NOT_TESTED
from quicbench.analysis.report_data import ReportData
from quicbench.report.fmt import SimpleTable, mean_ci, num, pval, ratio_ci, verdict_text

TITLE = "Head-of-line blocking"


def cell_table(data: ReportData) -> SimpleTable:
    """Per condition x workload x protocol: each measure's mean [95 % CI], and n."""
    h = data.hol
    t = SimpleTable(["condition", "workload", "protocol", *[HOL_METRICS[m] for m in h.metrics], "n"])
    for _, r in h.cells.iterrows():
        t.rows.append([r["condition"], data.workload_title(r["workload"]), r["protocol"],
                       *[mean_ci(r[f"{m}_mean"], r[f"{m}_ci_low"], r[f"{m}_ci_high"]) for m in h.metrics],
                       str(int(r["n"]))])
    return t


def comparison_table(data: ReportData) -> SimpleTable:
    """Per condition x workload x measure: h3 against h2, the ratio of geometric means with its CI
    (or, where a measure was 0 in some trials, the difference of means), Holm's p, the verdict."""
    t = SimpleTable(["condition", "workload", "measure", "a vs b", "mean a", "mean b", "a/b [95 % CI]",
                     "a − b, ms", "p (adj.)", "verdict", "n"])
    for _, r in data.hol.comparisons.iterrows():
        if r["verdict"] == NOT_TESTED:
            verdict = f"not tested: {NOT_TESTED}"
        elif r["test"] == "welch" and r["verdict"] != "n too small":
            verdict = verdict_text(r["verdict"], r["reps_to_decide"]) + " (Welch on values: some trials 0)"
        else:
            verdict = verdict_text(r["verdict"], r["reps_to_decide"])
        t.rows.append([r["condition"], data.workload_title(r["workload"]), HOL_METRICS[r["metric"]],
                       f"{r['a']} vs {r['b']}", num(r["mean_a"]), num(r["mean_b"]),
                       ratio_ci(r["ratio"], r["ratio_low"], r["ratio_high"]), num(r["diff"]), pval(r["p"]), verdict,
                       f"{r['n_a']} / {r['n_b']}"])
    return t


def intro(data: ReportData) -> str:
    h = data.hol
    return (f"Per cell, the mean of each measure with its 95 % CI (the geometric mean's, or where some trials "
            f"measured 0 the Student-t interval raised to 0). Then h3 against h2 in each condition and workload: "
            f"the ratio of geometric means h3/h2 (below 1: h3's is smaller) with its 95 % CI and the verdict — "
            f"different, equivalent within ±{100 * data.method.margin:g} %, or inconclusive — "
            f"{'Holm-corrected' if data.method.correction == 'holm' else 'uncorrected'} over this section's "
            f"{h.n_tests} comparisons ({data.method.short()}). {HOL_TEXT}")


def markdown_section(data: ReportData) -> list[str]:
    """The section as Markdown lines; none when the run has no HOL measure."""
    if not data.hol:
        return []
    out = [f"## {TITLE}", "", intro(data), "", cell_table(data).markdown(), ""]
    comp = comparison_table(data)
    if comp:
        out += ["### h3 vs h2", "", comp.markdown(), ""]
    return out


def html_context(data: ReportData) -> dict[str, Any] | None:
    """What templates/_hol.html.j2 draws; None when the run has no HOL measure."""
    if not data.hol:
        return None
    return {"title": TITLE, "intro": intro(data), "cells": cell_table(data), "comparisons": comparison_table(data),
            "n_metrics": len(data.hol.metrics)}
