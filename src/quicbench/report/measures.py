"""The report's measure sections (analysis/measures.py: head-of-line blocking, competing traffic,
session resumption and 0-RTT, NAT rebinding), for HTML and Markdown alike: per section a table of
cells and a table of comparisons, and the text that says what the measures isolate."""

from __future__ import annotations

from typing import Any

import pandas as pd

from quicbench.analysis.measures import NOT_TESTED, SAME_OUTCOME, MeasureData
from quicbench.analysis.report_data import ReportData
from quicbench.report.fmt import SimpleTable, center_ci, num, pval, ratio_ci, verdict_text


def _share(k: Any, n: Any, lo: Any, hi: Any) -> str:
    return f"{int(k)}/{int(n)} [{100 * lo:.0f}, {100 * hi:.0f} %]" if pd.notna(lo) else f"{int(k)}/{int(n)}"


def cell_table(data: ReportData, m: MeasureData) -> SimpleTable:
    """Per condition x workload x protocol: each measure's value [95 % CI] (geometric mean on the log
    scale), each count k/n [Wilson CI], n."""
    sec = m.section
    t = SimpleTable(["condition", "workload", "protocol", *[sec.metrics[x] for x in m.metrics],
                     *[c.label for c in sec.counts], "n"])
    for _, r in m.cells.iterrows():
        t.rows.append([r["condition"], data.workload_title(r["workload"]), r["protocol"],
                       *[center_ci(r, x) for x in m.metrics],
                       *[_share(r[f"{c.key}_k"], r["n"], r[f"{c.key}_low"], r[f"{c.key}_high"]) for c in sec.counts],
                       str(int(r["n"]))])
    return t


def _label(m: MeasureData, metric: str) -> str:
    sec = m.section
    return sec.metrics.get(metric) or next((c.label for c in sec.counts if c.key == metric), metric)


def comparison_table(data: ReportData, m: MeasureData) -> SimpleTable:
    """Per cell pair and measure: a against b, the ratio of geometric means with its CI (or, where a
    measure was 0 in some trials, the difference of means; for a count, the difference of shares),
    Holm's p, the verdict."""
    by_workload = m.section.pairing == "workload"
    t = SimpleTable(["condition", "protocol, workload (b)" if by_workload else "workload", "measure", "a vs b", "a",
                     "b", "a/b [CI at the verdict's level]", "a − b", "p (adj.)", "verdict", "n"])
    counts = {c.key for c in m.section.counts}
    name = m.section.workload_name or (lambda run, w: data.workload_title(w))
    for _, r in m.comparisons.iterrows():
        a, b = (name(data.run, r["a"]), name(data.run, r["b"])) if by_workload else (r["a"], r["b"])
        if r["verdict"] in (NOT_TESTED, SAME_OUTCOME):
            verdict = f"not tested: {r['verdict']}"
        elif r["test"] == "fisher":
            verdict = verdict_text(r["verdict"]) + " (Fisher's exact test)"
        elif r["test"] == "welch" and r["verdict"] != "n too small":
            verdict = verdict_text(r["verdict"], r["reps_to_decide"]) + " (Welch on values: some trials 0)"
        else:
            verdict = verdict_text(r["verdict"], r["reps_to_decide"], r.get("within"))
        is_count = r["metric"] in counts
        fmt = (lambda v: f"{100 * v:.0f} %") if is_count else num
        t.rows.append([r["condition"], f"{r['protocol']}, {data.workload_title(r['b'])}" if by_workload
                       else data.workload_title(r["workload"]),
                       _label(m, r["metric"]), f"{a} vs {b}", fmt(r["mean_a"]), fmt(r["mean_b"]),
                       "–" if is_count else ratio_ci(r["ratio"], r["ratio_low"], r["ratio_high"]),
                       (f"{100 * r['diff']:+.0f} points" if is_count else num(r["diff"])), pval(r["p"]), verdict,
                       f"{r['n_a']} / {r['n_b']}"])
    return t


def intro(data: ReportData, m: MeasureData) -> str:
    sec = m.section
    what = ("each mode of the workload against the others, per protocol" if sec.pairing == "workload"
            else " and ".join(f"{a} against {b}" for a, b in sec.protocol_pairs) + " in each condition and workload")
    counted = (" Counted outcomes: k of n trials with Wilson's 95 % interval, compared by Fisher's exact test."
               if sec.counts else "")
    return (f"Per cell, each measure's geometric mean with its 95 % CI (log-t), or where some trials measured 0 "
            f"the arithmetic mean with a bootstrap 95 % CI; a and b below are the same values.{counted} Then {what}: "
            f"the ratio of geometric means a/b with its interval at the verdict's level (it excludes 1 exactly when "
            f"the verdict is 'different') and the verdict — different, equivalent within "
            f"±{100 * data.method.margin:g} %, "
            f"or inconclusive — {'Holm-corrected' if data.method.correction == 'holm' else 'uncorrected'} over "
            f"this section's {m.n_tests} comparisons ({data.method.short()}). {sec.text}")


def markdown_sections(data: ReportData) -> list[str]:
    """Every measure section with data, as Markdown lines."""
    out: list[str] = []
    for m in data.measures:
        out += [f"## {m.section.title}", "", intro(data, m), "", cell_table(data, m).markdown(), ""]
        comp = comparison_table(data, m)
        if comp.rows:
            out += [f"### {m.section.pair_title}", "", comp.markdown(), ""]
    return out


def html_context(data: ReportData) -> list[dict[str, Any]]:
    """What templates/_measures.html.j2 draws: one entry per section with data."""
    out = []
    for m in data.measures:
        out.append({"key": m.section.key, "title": m.section.title, "intro": intro(data, m),
                    "cells": cell_table(data, m), "comparisons": comparison_table(data, m),
                    "pair_title": m.section.pair_title,
                    "n_numeric": len(m.metrics) + len(m.section.counts)})
    return out
