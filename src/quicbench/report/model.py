"""Everything a report shows, computed once from a run: tables, figures, and what is missing.

The HTML and the Markdown renderers only format what is here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from quicbench.analysis import honesty
from quicbench.analysis.load import CAPTURE_NUMERIC, RunData
from quicbench.analysis.seed import SOURCE as SEED_SOURCE
from quicbench.analysis.seed import seed_best, seed_matches
from quicbench.analysis.stats import MIN_N
from quicbench.analysis.tables import Method, best_protocols, cell_summary, optional_metrics, pairwise
from quicbench.report import fig_cpu, fig_cvart, fig_goodput, fig_heatmap, fig_phases
from quicbench.report.plotting import Plot, workload_title
from quicbench.analysis.stats import finite as _f

COMPARISONS = (("h3", "h2"), ("h3", "h1"))


@dataclass
class ReportModel:
    run: RunData
    method: Method
    summary: pd.DataFrame
    table1: list[dict[str, Any]]
    seed: pd.DataFrame
    diffs: dict[tuple[str, str], pd.DataFrame]
    cpu: pd.DataFrame
    cpu_bound: pd.DataFrame
    failed: pd.DataFrame
    failure_reasons: pd.DataFrame
    calibration: pd.DataFrame
    metadata: list[tuple[str, str]]
    counts: dict[str, int]
    missing: list[str]
    n_tests_table1: int
    pages: pd.DataFrame = field(default_factory=pd.DataFrame)
    plots: dict[str, list[Plot]] = field(default_factory=dict)

    @property
    def method_text(self) -> str:
        return self.method.text(self.n_tests_table1)

    @property
    def is_goquick(self) -> bool:
        return not self.seed.empty




def build_table1(run: RunData, summary: pd.DataFrame, seed: pd.DataFrame) -> list[dict[str, Any]]:
    """Table 1 per workload: rows = conditions, one cell per protocol, best protocol and verdict."""
    s = summary.set_index(["condition", "workload", "protocol"])
    sd = seed.set_index(["condition", "workload", "protocol"])["seed_goodput_mbps"] if not seed.empty else {}
    sbest = seed_best(seed)
    out = []
    for w in run.workloads:
        rows = []
        for c in run.condition_order:
            cells = []
            meta: dict[str, Any] = {}
            for p in run.protocols:
                k = (c, w, p)
                if k not in s.index:
                    cells.append({"protocol": p, "n": 0, "n_trials": 0, "mean": None, "present": False,
                                  "seed": _f(sd.get(k)) if len(sd) else None})
                    continue
                r = s.loc[k]
                meta = {"best": r["cell_best"], "verdict": r["cell_verdict"], "p": _f(r["cell_p"])}
                cells.append({"protocol": p, "present": True, "n": int(r["n"]), "n_trials": int(r["n_trials"]),
                              "n_failed": int(r["n_failed"]), "n_cpu_bound": int(r["n_cpu_bound"]),
                              "mean": _f(r["goodput_mbps_mean"]), "ci_low": _f(r["goodput_mbps_ci_low"]),
                              "ci_high": _f(r["goodput_mbps_ci_high"]), "is_best": bool(r["is_best"]),
                              "p_vs_best": _f(r["p_vs_best"]), "seed": _f(sd.get(k)) if len(sd) else None})
            if not any(cell["present"] for cell in cells):
                continue
            rows.append({"condition": c, "desc": run.condition_desc(c), "cells": cells, **meta,
                         "seed_best": sbest.get((c, w)),
                         "seed_agrees": sbest.get((c, w)) == meta.get("best") if (c, w) in sbest and meta.get("best")
                         else None})
        if rows:
            out.append({"workload": w, "title": workload_title(run.workload_info, w), "rows": rows,
                        "protocols": run.protocols, "has_seed": any(r["seed_best"] for r in rows)})
    return out


def _counts(run: RunData) -> dict[str, int]:
    r = run.rows
    t = run.trials
    return {"rows": len(r), "trials": len(t), "ok": int((t["status"] == "ok").sum()),
            "failed": int((t["status"] != "ok").sum()), "used": int(r["used"].sum()),
            "warmup": int(r["warmup"].sum()), "superseded": int(r["superseded"].sum()),
            "cpu_bound": int(run.ok["cpu_bound"].sum())}


def _expected_trials(run: RunData) -> int | None:
    plan = run.meta.get("plan") or {}
    if not plan or run.meta.get("only"):
        return None
    reps = run.meta.get("reps") or plan.get("repetitions")
    try:
        return len(plan["conditions"]) * len(plan["workloads"]) * len(plan["protocols"]) * int(reps)
    except (KeyError, TypeError, ValueError):
        return None


def missing_items(run: RunData, summary: pd.DataFrame, seed: pd.DataFrame, calibration: pd.DataFrame) -> list[str]:
    """What this report cannot show or claim, and why, in plain words."""
    out = list(run.notes)
    c = _counts(run)
    if c["trials"] == 0:
        return out + ["The run has no trial rows: there is nothing to analyse."]
    expected = _expected_trials(run)
    if expected and c["trials"] < expected:
        out.append(f"{expected - c['trials']} of {expected} planned trials have no row (run status "
                   f"'{run.meta.get('status', '?')}'); resume the run to complete it.")
    if c["used"] == 0:
        return out + ["No trial succeeded: no goodput statistics, figures or significance (see Failed trials)."]
    if not summary.empty and c["used"]:
        n = summary["n"]
        small = int((n < MIN_N).sum())
        if small == len(summary):
            out.append(f"Every cell has fewer than {MIN_N} successful trials: confidence intervals are missing or wide "
                       f"and no difference is called significant. Run 10–20 repetitions per cell.")
        elif small:
            out.append(f"{small} of {len(summary)} cells have fewer than {MIN_N} successful trials: no significance is "
                       f"claimed for them.")
        if n.max() < 10 and small < len(summary):
            lo, hi = int(n[n > 0].min()) if (n > 0).any() else 0, int(n.max())
            out.append(f"Cells have n = {lo if lo == hi else f'{lo}–{hi}'} successful trials; the studies reviewers "
                       f"trust (Kakhki et al. IMC'17, Yu & Benson WWW'21) use 10–20.")
    if c["cpu_bound"]:
        out.append(f"{c['cpu_bound']} of {c['used']} successful trials were CPU-bound (client or server ran, or below the "
                   f"link's rate wanted, ≥ 90 % of a core): their goodput measures the CPU rather than the protocol on the link (marked ⚙).")
    if len(run.condition_order) == 1:
        out.append("Only one network condition: Fig. 11 and the heatmaps have a single column.")
    if len(run.workloads) == 1:
        out.append("Only one workload: Fig. 12 (goodput relative to the best object size) needs two or more.")
    for a, b in COMPARISONS:
        if a not in run.protocols or b not in run.protocols:
            out.append(f"No {a.upper()} vs {b.upper()} heatmap: the run lacks {a if a not in run.protocols else b}.")
    if not any(m in CAPTURE_NUMERIC for m in optional_metrics(run)):
        out.append("No packet captures: wire bytes, overhead, retransmissions and throughput time series are not "
                   "shown (set capture = true in the plan).")
    elif not fig_cvart.has_timeseries(run):
        out.append("The captures have no throughput time series.")
    if calibration.empty:
        out.append("No link calibration in meta.json: the configured conditions are not verified by measurement "
                   "(set calibrate = true in the plan).")
    if not fig_cvart.sweeps(run):
        out.append("No CVart views: no condition parameter (delay, rate, loss) is swept with the others held fixed.")
    if summary.empty or not fig_phases.has_phases(summary):
        out.append("No connection-phase timings (connect, TLS, TTFB) in the trial rows.")
    if run.trials["client_cpu_s"].isna().all() and run.trials["server_cpu_s"].isna().all():
        out.append("No CPU measurements: CPU cost and CPU-bound checks are missing.")
    if seed.empty:
        out.append("Seed 000's Table 1 is shown only for Go-Quick conditions (names delay_loss such as 12.5_0.5, or a "
                   "go-quick plan) and objects of 10KB, 100KB or 1MB; this run has none.")
    return out


def page_loads(run: RunData, summary: pd.DataFrame, method: Method) -> pd.DataFrame:
    """Browser page loads per cell (summary columns) with the fastest protocol and its verdict."""
    if summary.empty or "page_load_ms_mean" not in summary or not summary["page_load_ms_mean"].notna().any():
        return pd.DataFrame()
    pages = summary[summary["page_load_ms_mean"].notna()].copy()
    best = best_protocols(run, method, "page_load_ms", higher_is_better=False).set_index(["condition", "workload"])
    keys = list(zip(pages["condition"], pages["workload"]))
    for col in ("cell_best", "cell_verdict", "cell_p"):
        pages[f"load_{col}"] = [best.at[k, col] if k in best.index else None for k in keys]
    return pages.reset_index(drop=True)


def build(run: RunData, method: Method = Method(), figures: bool = True) -> ReportModel:
    summary = cell_summary(run, method)
    seed = seed_matches(run) if not summary.empty else pd.DataFrame(
        columns=["condition", "workload", "protocol", "seed_condition", "seed_goodput_mbps"])
    table1 = build_table1(run, summary, seed)
    diffs = {(a, b): pairwise(run, a, b, method) for a, b in COMPARISONS
             if a in run.protocols and b in run.protocols}
    cpu = honesty.cpu_per_gb(run)
    n_tests = int(summary["p_vs_best"].notna().sum()) if not summary.empty else 0
    plots: dict[str, list[Plot]] = {}
    if figures and not summary.empty:
        plots = {
            "fig11": [p for p in [fig_goodput.fig11(run, summary, seed)] if p],
            "fig12": [p for p in [fig_goodput.fig12(run, summary)] if p],
            "heatmaps": [p for p in (fig_heatmap.heatmap(run, a, b, method) for a, b in COMPARISONS
                                     if a in run.protocols and b in run.protocols) if p],
            "cvart": fig_cvart.cvart_views(run, summary),
            "timeseries": [p for p in [fig_cvart.timeseries(run)] if p],
            "phases": [p for p in [fig_phases.phases(run, summary)] if p],
            "cpu": [p for p in [fig_cpu.cpu_per_gb(run, cpu)] if p],
            "pages": [p for p in [fig_goodput.metric_vs_condition(
                run, summary, "page_load_ms", "page load time (ms)", "page-load-vs-condition",
                "Page load time vs condition",
                "Mean time from navigation start to the load event in the browser, with 95 % CIs, one panel per "
                "page workload (DNCS's page metrics, seed 004).", log=False)] if p],
        }
    calibration = honesty.calibration(run.meta)
    model = ReportModel(
        run=run, method=method, summary=summary, table1=table1, seed=seed, diffs=diffs, cpu=cpu,
        cpu_bound=honesty.cpu_bound_trials(run), failed=honesty.failed_trials(run),
        failure_reasons=honesty.failure_reasons(run), calibration=calibration, metadata=honesty.metadata(run),
        counts=_counts(run), missing=[], n_tests_table1=n_tests, pages=page_loads(run, summary, method),
        plots=plots)
    model.missing = missing_items(run, summary, seed, calibration)
    return model


SEED_NOTE = SEED_SOURCE
