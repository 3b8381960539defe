"""Everything a report shows, computed once from a run, as data: tables, figure inputs, counts
and what is missing. No drawing here: report/ formats and draws what ReportData holds.

    build_report_data(run, method) -> ReportData
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from quicbench import stats
from quicbench.analysis import honesty
from quicbench.analysis.recovery import RECOVERY_COLUMNS, loss_recovery
from quicbench.analysis.condition_grid import Layout, Sweeps, heatmap_layout, sweeps, varying
from quicbench.analysis.condition_params import swept
from quicbench.analysis.matrix import MatrixGrid, grids_from_rows
from quicbench.analysis.measures import HOL, MeasureData, measure_sections
from quicbench.analysis.load import CAPTURE_NUMERIC, RunData
from quicbench.analysis.studies import REFERENCE_COLUMNS, Bests, StudyData, View, build_studies, figure_views
from quicbench.stats import MIN_N
from quicbench.cpu import SLOWER_THAN_CELL
from quicbench.stats import finite as _f
from quicbench.analysis.tables import METRICS, OPTIONAL_METRICS, Method, cell_summary, optional_metrics, pairwise
from quicbench.analysis.timeseries import TimeSeries, has_timeseries, median_trial_series
from quicbench.analysis.video import median_startup_timelines
from quicbench.model.workload_kinds import report_table

COMPARISONS = (("h3", "h2"), ("h3", "h1"))
# connection phases in httpstat's order (seed 004)
PHASES = ("connect_ms", "tls_ms", "wait_ms", "transfer_ms_p50")
RELATIVE_COLUMNS = ["condition", "workload", "protocol", "pct_of_best", "pct_ci_low", "pct_ci_high"]


# -- labels ---------------------------------------------------------------------------------------
def workload_title(info: pd.DataFrame, workload: str) -> str:
    """'10 x 100KB, 10 in parallel' from the run's workload_info (falls back to the label)."""
    try:
        row = info.loc[workload]
    except KeyError:
        return workload
    if report_table(row.get("kind", "objects")) != "downloads":
        return workload       # a page load or a playback: its label says it
    try:
        count, par = int(row["count"]), int(row["parallel"])
    except (KeyError, TypeError, ValueError):
        return workload
    if par >= count and count > 1:
        par_txt = "all in parallel"
    else:
        par_txt = "one at a time" if par == 1 else f"{par} in parallel"
    return f"{count} × {row['size']}" + (f", {par_txt}" if count > 1 else "") + _policy_text(row) + _resumption_text(row)


def _resumption_text(row: pd.Series) -> str:
    return {"tickets": ", resumed sessions", "0rtt": ", resumed with 0-RTT",
            "0rtt-token": ", resumed with 0-RTT and an address token"}.get(str(row.get("resumption") or "none"), "")


def _policy_text(row: pd.Series) -> str:
    policy = str(row.get("connection_policy") or "shared")
    if policy == "per-object":
        return ", a connection per object"
    if policy.startswith("pool:"):
        return f", a pool of {policy[5:]} connections"
    return ""


def workload_short(info: pd.DataFrame, workload: str, sep: str = "×") -> str:
    """'100KB×10' (size, then objects per trial); the label itself when size or count is unknown."""
    if workload in info.index and report_table(info.at[workload, "kind"]) != "downloads":
        return workload
    try:
        size, count = info.at[workload, "size"], int(info.at[workload, "count"])
        policy = str(info.at[workload, "connection_policy"]) if "connection_policy" in info else "shared"
    except (KeyError, TypeError, ValueError):
        return workload
    tag = {"shared": "", "per-object": "/obj"}.get(policy, "/" + policy.replace("pool:", "pool"))
    return f"{size}{sep}{count}{tag}"


# -- the data -------------------------------------------------------------------------------------
@dataclass
class ReportData:
    run: RunData
    method: Method
    summary: pd.DataFrame                            # summary.csv: one row per condition x workload x protocol
    table1: list[dict[str, Any]]                     # per object workload: rows of conditions, one cell per protocol
    diffs: dict[tuple[str, str], pd.DataFrame]       # (a, b) -> pairwise(): % difference and verdict per cell
    cpu: pd.DataFrame                                # CPU s/GB per protocol x workload
    cpu_bound: pd.DataFrame                          # CPU-bound trials per cell
    cpu_slowed: pd.DataFrame                         # trials the CPU slowed, judged after the run against their cell
    failed: pd.DataFrame                             # every failed row
    failure_reasons: pd.DataFrame                    # failed rows grouped by masked reason
    calibration: pd.DataFrame                        # configured vs measured per condition
    metadata: list[tuple[str, str]]                  # (label, value) of the run's self-description
    counts: dict[str, int]                           # rows, trials, ok, failed, used, warmup, superseded, cpu_bound, cpu_slowed
    missing: list[str]                               # what the report cannot show or claim, and why
    n_tests_table1: int                              # tests behind Table 1's verdicts
    studies: list[StudyData] = field(default_factory=list)          # the studies the run is set beside
    views: list[View] = field(default_factory=list)                 # declared figures (studies' and defaults)
    other_kinds: dict[str, pd.DataFrame] = field(default_factory=dict)   # kind -> its cells + verdicts (a user's kind)
    pages: pd.DataFrame = field(default_factory=pd.DataFrame)       # browser page loads (summary rows + verdicts)
    video: pd.DataFrame = field(default_factory=pd.DataFrame)       # video playback (summary rows + verdicts)
    video_timelines: dict = field(default_factory=dict)             # cell -> median-startup trial's timeline
    hosts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=honesty.HOST_COLUMNS))  # per host (merged runs)
    recovery: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RECOVERY_COLUMNS))  # loss declarations
    measures: list[MeasureData] = field(default_factory=list)   # measure sections (analysis/measures.py) with data
    relative: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RELATIVE_COLUMNS))  # relative_to_best
    sweeps: Sweeps = field(default_factory=dict)     # parameter -> slices swept with the rest fixed
    varying: set[str] = field(default_factory=set)   # condition parameters that take more than one value
    swept: list[str] = field(default_factory=list)   # numeric parameters (delay, loss, rate) that are swept
    heatmap_layout: Layout = field(default_factory=lambda: Layout("list"))
    timeseries: TimeSeries | None = None             # median-goodput trial's throughput series
    matrix: list[MatrixGrid] = field(default_factory=list)   # the stack matrix: senders x receivers (analysis/matrix.py)

    @property
    def hol(self) -> MeasureData:
        """The head-of-line blocking section (empty when the run has none)."""
        return next((m for m in self.measures if m.section.key == HOL.key), MeasureData(HOL))

    @property
    def method_text(self) -> str:
        text = self.method.text(self.n_tests_table1 if self.table1 else None)
        if (self.run.meta.get("plan") or {}).get("link_seed"):
            text += (" The link's random draws restarted from one seed per repetition (link_seed): repetition r of "
                     "every protocol met the same losses and jitter, so the protocols' samples can be correlated, "
                     "positively or negatively (docs/results/seed-pairing.md); the tests treat them as independent, "
                     "and where the correlation is negative they call differences significant more often than "
                     "alpha: compare protocols in a run without link_seed.")
        return text

    @property
    def table1_reference(self) -> StudyData | None:
        """The study whose reference values Table 1 shows beside ours (its reference_columns table
        is for goodput), when one has values that match."""
        for sd in self.studies:
            if sd.columns is not None and sd.columns.metric == "goodput_mbps" and \
                    (sd.refs["metric"] == "goodput_mbps").any():
                return sd
        return None

    @property
    def references(self) -> pd.DataFrame:
        """Every matched reference value of every study."""
        frames = [sd.refs for sd in self.studies if not sd.refs.empty]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=REFERENCE_COLUMNS)

    @property
    def object_workloads(self) -> list[str]:
        return [w for w in self.run.workloads if report_table(self.run.kind_of(w)) == "downloads"]

    @property
    def any_mean_above_ci(self) -> bool:
        """Some Table 1 cell's mean lies above its interval (the geometric mean's): trials very unequal."""
        return any(c.get("mean_above_ci") for blk in self.table1 for r in blk["rows"] for c in r["cells"])

    @property
    def has_phases(self) -> bool:
        s = self.summary
        return not s.empty and has_phases(s[s["workload"].isin(self.object_workloads)])

    def view_sections(self, place: str) -> list[tuple[str, str]]:
        """(section, heading) of the declared figures that go in `place` (main: before the heatmaps,
        views: after them), in declaration order."""
        return list(dict.fromkeys((v.figure.section, v.figure.heading) for v in self.views if v.place == place))

    def workload_title(self, workload: str) -> str:
        return workload_title(self.run.workload_info, workload)

    def workload_short(self, workload: str, sep: str = "×") -> str:
        return workload_short(self.run.workload_info, workload, sep)


def has_phases(summary: pd.DataFrame) -> bool:
    return any(f"{p}_mean" in summary and summary[f"{p}_mean"].notna().any() for p in PHASES)


def _above(mean: Any, high: Any) -> bool:
    """The arithmetic mean lies above the interval of the geometric mean (very unequal trials)."""
    m, h = _f(mean), _f(high)
    return m is not None and h is not None and m > h


def _center(r: Any, metric: str) -> float | None:
    """A summary row's geometric mean of the metric, or its arithmetic mean when it has none."""
    g = _f(r.get(f"{metric}_gmean"))
    return g if g is not None else _f(r.get(f"{metric}_mean"))


def build_table1(run: RunData, summary: pd.DataFrame, ref: StudyData | None) -> list[dict[str, Any]]:
    """Table 1 per object workload: rows = conditions, one cell per protocol, best protocol and
    verdict; with a study's reference goodput beside them ("ref" per cell, "ref_best" per row)."""
    s = summary.set_index(["condition", "workload", "protocol"])
    rd = ref.refs[ref.refs["metric"] == "goodput_mbps"] if ref is not None else pd.DataFrame(columns=REFERENCE_COLUMNS)
    rv = rd.set_index(["condition", "workload", "protocol"])["value_metric"] if not rd.empty else {}
    rbest = reference_best(rd)
    out = []
    for w in run.workloads:
        if report_table(run.kind_of(w)) != "downloads":
            continue      # page loads and videos have their own tables, never a goodput verdict
        rows = []
        for c in run.condition_order:
            cells = []
            meta: dict[str, Any] = {}
            for p in run.protocols:
                k = (c, w, p)
                if k not in s.index:
                    cells.append({"protocol": p, "n": 0, "n_trials": 0, "mean": None, "present": False,
                                  "ref": _f(rv.get(k)) if len(rv) else None})
                    continue
                r = s.loc[k]
                meta = {"best": r["cell_best"], "verdict": r["cell_verdict"], "p": _f(r["cell_p"])}
                cells.append({"protocol": p, "present": True, "n": int(r["n"]), "n_trials": int(r["n_trials"]),
                              "n_failed": int(r["n_failed"]), "n_cpu_bound": int(r["n_cpu_bound"]),
                              # the value the interval is for: the geometric mean (the arithmetic one
                              # only where a trial measured 0, with its bootstrap interval)
                              "mean": _center(r, "goodput_mbps"), "ci_low": _f(r["goodput_mbps_ci_low"]),
                              "ci_high": _f(r["goodput_mbps_ci_high"]), "is_best": bool(r["is_best"]),
                              "mean_above_ci": _above(_center(r, "goodput_mbps"), r["goodput_mbps_ci_high"]),
                              "p_vs_best": _f(r["p_vs_best"]), "ratio_vs_best": _f(r["ratio_vs_best"]),
                              "ratio_vs_best_ci_low": _f(r["ratio_vs_best_ci_low"]),
                              "ratio_vs_best_ci_high": _f(r["ratio_vs_best_ci_high"]),
                              "verdict_vs_best": r["verdict_vs_best"] if isinstance(r["verdict_vs_best"], str) else None,
                              "reps_to_decide": _f(r["reps_to_decide"]),
                              "within": stats.margin_label(r["margin"]) if stats.inside_margin(
                                  r["verdict_vs_best"], _f(r["p_equiv_vs_best"]), _f(r["alpha"])) else None,
                              "ref": _f(rv.get(k)) if len(rv) else None})
            if not any(cell["present"] for cell in cells):
                continue
            rows.append({"condition": c, "desc": run.condition_desc(c), "cells": cells, **meta,
                         "comparisons": comparisons_text(meta.get("best"), cells),
                         "ref_best": rbest.get((c, w)),
                         "ref_agrees": rbest.get((c, w)) == meta.get("best") if (c, w) in rbest and meta.get("best")
                         else None})
        if rows:
            out.append({"workload": w, "title": workload_title(run.workload_info, w), "rows": rows,
                        "protocols": run.protocols, "has_ref": any(r["ref_best"] for r in rows),
                        "ref_label": ref.study.label if ref is not None else ""})
    return out


def reference_best(refs: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(condition, workload) -> the protocol the reference found best (highest goodput)."""
    refs = refs[refs["value_metric"].notna()] if not refs.empty else refs
    if refs.empty:
        return {}
    vals = refs.assign(v=refs["value_metric"].astype(float))
    idx = vals.groupby(["condition", "workload"])["v"].idxmax()
    return {k: vals.at[i, "protocol"] for k, i in idx.items()}


def comparisons_text(best: str | None, cells: list[dict[str, Any]]) -> str:
    """The best protocol against each other one: 'vs h1 different, 1.32 [1.10, 1.58], p 0.003;
    vs h2 inconclusive, 1.05 [0.92, 1.20], n>=18 to decide' (ratios best/other)."""
    parts = [stats.comparison_phrase(c["protocol"], c.get("verdict_vs_best"), c.get("ratio_vs_best"),
                               c.get("ratio_vs_best_ci_low"), c.get("ratio_vs_best_ci_high"), c.get("p_vs_best"),
                               c.get("reps_to_decide"), within=c.get("within"))
             for c in cells if c.get("present") and not c.get("is_best") and c.get("verdict_vs_best")]
    return "; ".join(parts) if best else ""


def counts(run: RunData, cpu_slowed: pd.DataFrame) -> dict[str, int]:
    r = run.rows
    t = run.trials
    return {"rows": len(r), "trials": len(t), "ok": int((t["status"] == "ok").sum()),
            "failed": int((t["status"] != "ok").sum()), "used": int(r["used"].sum()),
            "warmup": int(r["warmup"].sum()), "superseded": int(r["superseded"].sum()),
            "cpu_bound": int(run.ok["cpu_bound"].sum()), "cpu_slowed": len(cpu_slowed),
            "link_late": int(run.ok["link_late"].sum()) if "link_late" in run.ok else 0}


def _expected_trials(run: RunData) -> int | None:
    plan = run.meta.get("plan") or {}
    shard = run.meta.get("shard") or {}
    if isinstance(shard.get("trials"), int):
        return shard["trials"]     # a shard expects its share of the plan
    if not plan or run.meta.get("only"):
        return None
    reps = run.meta.get("reps") or plan.get("repetitions")
    try:
        return len(plan["conditions"]) * len(plan["workloads"]) * len(plan["protocols"]) * int(reps)
    except (KeyError, TypeError, ValueError):
        return None


def missing_items(run: RunData, summary: pd.DataFrame, studies: list[StudyData], study_notes: list[str],
                  calibration: pd.DataFrame, c: dict[str, int]) -> list[str]:
    """What this report cannot show or claim, and why, in plain words (c: the run's counts())."""
    out = list(run.notes)
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
        out.append(f"{c['cpu_bound']} of {c['used']} successful trials were CPU-bound (a path process ran ≥ 90 % of a "
                   "core, or with every CPU busy and goodput below 80 % of the rate the path's processes waited for "
                   "a CPU ≥ 20 % of the transfer): their goodput measures the CPU rather than the protocol on the link "
                   "(marked ⚙).")
    if c["cpu_slowed"]:
        out.append(f"{c['cpu_slowed']} of {c['used']} successful trials took ≥ {100 * SLOWER_THAN_CELL:g} % longer "
                   "than their cell's median while the path's processes waited for a CPU at least that extra time "
                   "(judged after the run; listed in the honesty panel): a busy CPU likely slowed them.")
    near = int((run.ok["near_ceiling"] == True).sum()) if "near_ceiling" in run.ok else 0  # noqa: E712 - nullable
    if near:
        ceiling = run.meta.get("ceiling") or {}
        top = ", ".join(f"{p} {g:.1f}" for p, g in (ceiling.get("goodput_mbps") or {}).items())
        out.append(f"{near} of {c['used']} successful trials reached {100 * ceiling.get('near', 0.8):.0f} % of this "
                   f"kernel's own ceiling (goodput on an "
                   f"unimpaired link in the kernel the run used: {top} Mbit/s): the kernel, not the condition, set "
                   f"their pace (column near_ceiling).")
    beside = int((run.ok["concurrent"].fillna(0) > 0).sum()) if "concurrent" in run.ok else 0
    if beside:
        out.append(f"{beside} of {c['used']} successful trials ran beside other trials (quicbench run --jobs): they "
                   f"shared the machine's CPUs; the 'concurrent' column of trials.parquet says with how many.")
    objects = [w for w in run.workloads if report_table(run.kind_of(w)) == "downloads"]
    if objects:
        if len(run.condition_order) == 1:
            out.append("Only one network condition: the goodput-vs-condition figure and the heatmaps have a single "
                       "column.")
        if len(objects) == 1:
            out.append("Only one object workload: goodput relative to the best workload needs two or more.")
        for a, b in COMPARISONS:
            if a not in run.protocols or b not in run.protocols:
                out.append(f"No {a.upper()} vs {b.upper()} heatmap: the run lacks {a if a not in run.protocols else b}.")
    if not any(m in CAPTURE_NUMERIC for m in optional_metrics(run)):
        out.append("No packet captures: wire bytes, overhead, retransmissions and throughput time series are not "
                   "shown (set capture = true in the plan).")
    elif not has_timeseries(run):
        out.append("The captures have no throughput time series.")
    if calibration.empty:
        out.append("No link calibration in meta.json: the configured conditions are not verified by measurement "
                   "(set calibrate = true in the plan).")
    if objects and not sweeps(run.conditions):
        out.append("No parameter sweeps: no condition parameter (delay, rate, loss) is swept with the others held "
                   "fixed.")
    if objects and (summary.empty or not has_phases(summary)):
        out.append("No connection-phase timings (connect, TLS, TTFB) in the trial rows.")
    if run.trials["client_cpu_s"].isna().all() and run.trials["server_cpu_s"].isna().all():
        out.append("No CPU measurements: CPU cost and CPU-bound checks are missing.")
    out += study_notes
    if not studies:
        from quicbench.model.study import available
        out.append(f"No study's reference values are shown: the plan names none (study = \"NAME\" or a study file; "
                   f"built in: {', '.join(available())}) and none applies by its plan or condition names "
                   f"(docs/report.md, \"Studies\").")
    return out


# what a page table and a video table show, each with a verdict of its own (the best protocol
# against each other one, Holm over the metric's comparisons of the table): (metric, label)
PAGE_METRICS = (("page_load_ms", "load (ms)"), ("lcp_ms", "LCP (ms)"), ("speed_index_ms", "Speed Index (ms)"),
                ("dom_content_loaded_ms", "DOMContentLoaded (ms)"),
                ("page_ttfb_ms", "TTFB (ms)"), ("page_weight_bytes", "page weight (MB)"),
                ("page_requests", "requests"))
VIDEO_METRICS = (("startup_s", "startup (s)"), ("stall_total_s", "stalled (s)"),
                 ("mean_bitrate_kbps", "played bitrate (kbit/s)"), ("live_latency_s_mean", "live latency (s)"),
                 # DNCS-HTTP3's "latency": hls.js's fragment request -> first byte (docs/video.md)
                 ("frag_latency_ms_mean", "segment latency, hls.js (ms)"),
                 ("qoe_lin", "QoE_lin per chunk"), ("qoe_log", "QoE_log per chunk"), ("qoe_hd", "QoE_hd per chunk"))


def _with_verdicts(run: RunData, rows: pd.DataFrame, metrics: tuple[tuple[str, str], ...], kind: str,
                   bests: Bests) -> pd.DataFrame:
    """Per metric: the best protocol of each cell, its verdict and p ({metric}_cell_best, ...), and
    whether every trial of the cell had the same value ({metric}_constant: no comparison to make)."""
    keys = list(zip(rows["condition"], rows["workload"]))
    ok = run.ok
    for metric, _ in metrics:
        if f"{metric}_mean" not in rows or not rows[f"{metric}_mean"].notna().any():
            continue
        best = bests.get(metric, kind)
        for col in ("cell_best", "cell_verdict", "cell_p"):
            rows[f"{metric}_{col}"] = [best.at[k, col] if k in best.index else None for k in keys]
        rows[f"{metric}_comparisons"] = [tests_text(best.at[k, "tests"]) if k in best.index else ""
                                         for k in keys]
        same = {}
        for k in set(keys):
            x = ok.loc[(ok["condition"] == k[0]) & (ok["workload"] == k[1]), metric].dropna()
            same[k] = len(x) > 1 and x.nunique() == 1
        rows[f"{metric}_constant"] = [same[k] for k in keys]
    return rows


def tests_text(tests: dict[str, Any]) -> str:
    """The best protocol against each other one, in words: 'vs h1: different, 0.82 [0.75, 0.90],
    p 0.003; vs h3: inconclusive, diff +0.2 [-0.1, +0.5]'."""
    return "; ".join(stats.comparison_phrase(p, t.verdict, _f(t.ratio), _f(t.ratio_low), _f(t.ratio_high), _f(t.p),
                                             t.reps_to_decide, _f(t.difference), _f(t.diff_low), _f(t.diff_high),
                                             within=stats.margin_text(t))
                     for p, t in tests.items())


def page_loads(run: RunData, summary: pd.DataFrame, bests: Bests) -> pd.DataFrame:
    """Browser page loads per cell (summary columns) with, per metric, the best protocol and its
    verdict (DNCS's page table: load, DOMContentLoaded, TTFB, weight, requests)."""
    if summary.empty:
        return pd.DataFrame()
    pages = summary[summary["workload"].map(lambda w: report_table(run.kind_of(w))) == "pages"].copy()
    if pages.empty:
        return pd.DataFrame()
    return _with_verdicts(run, pages, PAGE_METRICS, "page", bests).reset_index(drop=True)


def video_cells(run: RunData, summary: pd.DataFrame, bests: Bests) -> pd.DataFrame:
    """Video playback per cell (summary columns of the QoE metrics) with, per metric, the best
    protocol and its verdict against every other protocol (startup, stalls, bitrate, latency, QoE)."""
    if summary.empty:
        return pd.DataFrame()
    video = summary[summary["workload"].map(lambda w: report_table(run.kind_of(w))) == "video"].copy()
    if video.empty:
        return pd.DataFrame()
    return _with_verdicts(run, video, VIDEO_METRICS, "video", bests).reset_index(drop=True)


def kind_metrics(kind: str) -> tuple[tuple[str, str], ...]:
    """(metric, label) of a kind's declared metrics (model/workload_kinds.py)."""
    from quicbench.model.workload_kinds import KINDS
    if kind not in KINDS:
        return ()
    return tuple((m.name, METRIC_LABELS.get(m.name, m.header)) for m in KINDS.get(kind).metrics)


def other_kind_cells(run: RunData, summary: pd.DataFrame, bests: Bests) -> dict[str, pd.DataFrame]:
    """Per kind without a table of its own: its cells with a verdict per declared metric."""
    out: dict[str, pd.DataFrame] = {}
    if summary.empty:
        return out
    kinds = summary["workload"].map(run.kind_of)
    for kind in dict.fromkeys(kinds):
        if report_table(kind) != "generic" or not kind_metrics(kind):   # a table of its own, or nothing to show
            continue
        out[kind] = _with_verdicts(run, summary[kinds == kind].copy(), kind_metrics(kind), kind,
                                   bests).reset_index(drop=True)
    return out


def relative_to_best(run: RunData, summary: pd.DataFrame) -> pd.DataFrame:
    """Each goodput of an object workload (the geometric mean, and its CI bounds) as % of the same
    protocol's best object workload in the same condition; protocols without a positive best are left out."""
    rows = []
    if summary.empty or "goodput_mbps_mean" not in summary:
        return pd.DataFrame(columns=RELATIVE_COLUMNS)
    objects = [w for w in run.workloads if report_table(run.kind_of(w)) == "downloads"]
    summary = summary[summary["workload"].isin(objects)].copy()
    summary["goodput_mbps_mean"] = [_center(r, "goodput_mbps") for _, r in summary.iterrows()]
    for c in run.condition_order:
        s = summary[summary["condition"] == c]
        for p in run.protocols:
            sp = s[s["protocol"] == p].set_index("workload")
            best = sp["goodput_mbps_mean"].max()
            if not (isinstance(best, float) and best > 0):
                continue
            for w in objects:
                if w not in sp.index or not sp.at[w, "goodput_mbps_mean"] > 0:
                    continue
                rows.append({"condition": c, "workload": w, "protocol": p,
                             "pct_of_best": 100 * sp.at[w, "goodput_mbps_mean"] / best,
                             "pct_ci_low": 100 * sp.at[w, "goodput_mbps_ci_low"] / best,
                             "pct_ci_high": 100 * sp.at[w, "goodput_mbps_ci_high"] / best})
    return pd.DataFrame(rows, columns=RELATIVE_COLUMNS)


METRIC_LABELS = {**METRICS, **OPTIONAL_METRICS}


def build_report_data(run: RunData, method: Method = Method(), studies: list[str] | None = None) -> ReportData:
    """Compute everything the report shows (statistics, tables, figure inputs, notes) from a run.
    studies: names or files of studies to set the run beside (default: the plan's, or those that
    apply by their [applies] rule)."""
    summary = cell_summary(run, method)
    bests = Bests(run, method)
    study_data, study_notes = build_studies(run, summary, method, bests, METRIC_LABELS, studies)
    diffs = {(a, b): pairwise(run, a, b, method, kind="objects") for a, b in COMPARISONS
             if a in run.protocols and b in run.protocols}
    calibration = honesty.calibration(run.meta)
    slowed = honesty.cpu_slowed_trials(run)
    c = counts(run, slowed)
    params = run.conditions
    objects = (summary[summary["workload"].map(lambda w: report_table(run.kind_of(w))) == "downloads"]
               if not summary.empty else summary)
    data = ReportData(
        run=run, method=method, summary=summary, table1=[], diffs=diffs,
        cpu=honesty.cpu_per_gb(run), cpu_bound=honesty.cpu_bound_trials(run),
        cpu_slowed=slowed, failed=honesty.failed_trials(run),
        failure_reasons=honesty.failure_reasons(run), calibration=calibration, metadata=honesty.metadata(run),
        counts=c, missing=missing_items(run, summary, study_data, study_notes, calibration, c),
        n_tests_table1=int(objects["p_vs_best"].notna().sum()) if not objects.empty else 0,
        studies=study_data, views=figure_views(study_data),
        pages=page_loads(run, summary, bests), video=video_cells(run, summary, bests),
        other_kinds=other_kind_cells(run, summary, bests),
        video_timelines=median_startup_timelines(run) if not summary.empty else {},
        relative=relative_to_best(run, summary), hosts=honesty.per_host(run), recovery=loss_recovery(run),
        sweeps=sweeps(params), varying=varying(params), swept=swept(params) if not params.empty else [],
        heatmap_layout=heatmap_layout(params), timeseries=median_trial_series(run) if not summary.empty else None,
        measures=measure_sections(run, method), matrix=grids_from_rows(run.rows, method))
    data.table1 = build_table1(run, summary, data.table1_reference)
    return data
