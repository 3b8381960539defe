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
from quicbench.analysis.condition_params import parse_delay_loss, swept
from quicbench.analysis.hol import HolData, head_of_line
from quicbench.analysis.load import CAPTURE_NUMERIC, RunData
from quicbench.analysis.seed import SOURCE as SEED_SOURCE
from quicbench.analysis.seed import seed_best, seed_matches
from quicbench.stats import MIN_N
from quicbench.stats import finite as _f
from quicbench.analysis.tables import Method, best_protocols, cell_summary, optional_metrics, pairwise
from quicbench.analysis.timeseries import TimeSeries, has_timeseries, median_trial_series
from quicbench.analysis.video import median_startup_timelines
from quicbench.model.units import size_label

COMPARISONS = (("h3", "h2"), ("h3", "h1"))
# connection phases in httpstat's order (seed 004)
PHASES = ("connect_ms", "tls_ms", "wait_ms", "transfer_ms_p50")
SEED_COLUMNS = ["condition", "workload", "protocol", "seed_condition", "seed_goodput_mbps"]
RELATIVE_COLUMNS = ["condition", "workload", "protocol", "pct_of_best", "pct_ci_low", "pct_ci_high"]


# -- labels ---------------------------------------------------------------------------------------
def workload_title(info: pd.DataFrame, workload: str) -> str:
    """'10 x 100KB, 10 in parallel' from the run's workload_info (falls back to the label)."""
    try:
        row = info.loc[workload]
    except KeyError:
        return workload
    if row.get("kind", "objects") != "objects":
        return workload       # a page load or a playback: its label says it
    try:
        count, par = int(row["count"]), int(row["parallel"])
    except (KeyError, TypeError, ValueError):
        return workload
    if par >= count and count > 1:
        par_txt = "all in parallel"
    else:
        par_txt = "one at a time" if par == 1 else f"{par} in parallel"
    return f"{count} × {row['size']}" + (f", {par_txt}" if count > 1 else "") + _policy_text(row)


def _policy_text(row: pd.Series) -> str:
    policy = str(row.get("connection_policy") or "shared")
    if policy == "per-object":
        return ", a connection per object"
    if policy.startswith("pool:"):
        return f", a pool of {policy[5:]} connections"
    return ""


def workload_short(info: pd.DataFrame, workload: str, sep: str = "×") -> str:
    """'100KB×10' (size, then objects per trial); the label itself when size or count is unknown."""
    if workload in info.index and info.at[workload, "kind"] != "objects":
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
    table1: list[dict[str, Any]]                     # per workload: rows of conditions, one cell per protocol
    seed: pd.DataFrame                               # seed 000's goodput beside our cells (SEED_COLUMNS)
    methods: list[dict[str, Any]]                    # Table 1 the seed's way: seed | per-object | shared
    diffs: dict[tuple[str, str], pd.DataFrame]       # (a, b) -> pairwise(): % difference and verdict per cell
    cpu: pd.DataFrame                                # CPU s/GB per protocol x workload
    cpu_bound: pd.DataFrame                          # CPU-bound trials per cell
    failed: pd.DataFrame                             # every failed row
    failure_reasons: pd.DataFrame                    # failed rows grouped by masked reason
    calibration: pd.DataFrame                        # configured vs measured per condition
    metadata: list[tuple[str, str]]                  # (label, value) of the run's self-description
    counts: dict[str, int]                           # rows, trials, ok, failed, used, warmup, superseded, cpu_bound
    missing: list[str]                               # what the report cannot show or claim, and why
    n_tests_table1: int                              # tests behind Table 1's verdicts
    pages: pd.DataFrame = field(default_factory=pd.DataFrame)       # browser page loads (summary rows + verdict)
    video: pd.DataFrame = field(default_factory=pd.DataFrame)       # video playback (summary rows + verdicts)
    video_timelines: dict = field(default_factory=dict)             # cell -> median-startup trial's timeline
    hosts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=honesty.HOST_COLUMNS))  # per host (merged runs)
    recovery: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RECOVERY_COLUMNS))  # loss declarations
    hol: HolData = field(default_factory=HolData)   # head-of-line blocking: stalls per cell, h3 vs h2
    relative: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RELATIVE_COLUMNS))  # Fig. 12
    sweeps: Sweeps = field(default_factory=dict)     # CVart: parameter -> slices swept with the rest fixed
    varying: set[str] = field(default_factory=set)   # condition parameters that take more than one value
    swept: list[str] = field(default_factory=list)   # numeric parameters (delay, loss, rate) that are swept
    heatmap_layout: Layout = field(default_factory=lambda: Layout("list"))
    timeseries: TimeSeries | None = None             # median-goodput trial's throughput series
    delay_loss_names: bool = False                   # every condition is named delay_loss (Go-Quick)
    seed_source: str = SEED_SOURCE

    @property
    def method_text(self) -> str:
        return self.method.text(self.n_tests_table1)

    @property
    def is_goquick(self) -> bool:
        return not self.seed.empty

    @property
    def any_mean_above_ci(self) -> bool:
        """Some Table 1 cell's mean lies above its interval (the geometric mean's): trials very unequal."""
        return any(c.get("mean_above_ci") for blk in self.table1 for r in blk["rows"] for c in r["cells"])

    @property
    def has_phases(self) -> bool:
        return has_phases(self.summary)

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
                              "mean_above_ci": _above(r["goodput_mbps_mean"], r["goodput_mbps_ci_high"]),
                              "p_vs_best": _f(r["p_vs_best"]), "ratio_vs_best": _f(r["ratio_vs_best"]),
                              "ratio_vs_best_ci_low": _f(r["ratio_vs_best_ci_low"]),
                              "ratio_vs_best_ci_high": _f(r["ratio_vs_best_ci_high"]),
                              "verdict_vs_best": r["verdict_vs_best"] if isinstance(r["verdict_vs_best"], str) else None,
                              "reps_to_decide": _f(r["reps_to_decide"]),
                              "seed": _f(sd.get(k)) if len(sd) else None})
            if not any(cell["present"] for cell in cells):
                continue
            rows.append({"condition": c, "desc": run.condition_desc(c), "cells": cells, **meta,
                         "comparisons": comparisons_text(meta.get("best"), cells),
                         "seed_best": sbest.get((c, w)),
                         "seed_agrees": sbest.get((c, w)) == meta.get("best") if (c, w) in sbest and meta.get("best")
                         else None})
        if rows:
            out.append({"workload": w, "title": workload_title(run.workload_info, w), "rows": rows,
                        "protocols": run.protocols, "has_seed": any(r["seed_best"] for r in rows)})
    return out


def comparisons_text(best: str | None, cells: list[dict[str, Any]]) -> str:
    """The best protocol against each other one: 'vs h1 different, 1.32 [1.10, 1.58], p 0.003;
    vs h2 inconclusive, 1.05 [0.92, 1.20], n>=18 to decide' (ratios best/other)."""
    parts = [stats.comparison_phrase(c["protocol"], c.get("verdict_vs_best"), c.get("ratio_vs_best"),
                               c.get("ratio_vs_best_ci_low"), c.get("ratio_vs_best_ci_high"), c.get("p_vs_best"),
                               c.get("reps_to_decide"))
             for c in cells if c.get("present") and not c.get("is_best") and c.get("verdict_vs_best")]
    return "; ".join(parts) if best else ""


def ranking(means: dict[str, float | None]) -> str:
    """'h1 > h2 > h3': protocols by mean goodput, highest first (protocols without data left out)."""
    have = [(p, v) for p, v in means.items() if v is not None]
    return " > ".join(p for p, _ in sorted(have, key=lambda pv: -pv[1]))


def build_methods_table(run: RunData, summary: pd.DataFrame, seed: pd.DataFrame) -> list[dict[str, Any]]:
    """Seed 000's Table 1 beside ours with the seed's method (one connection per object, as
    getFiles) and ours with shared connections: per object size and condition, each one's
    goodput per protocol and ranking, and whether our ranking differs from the seed's."""
    if seed.empty or summary.empty:
        return []
    info = run.workload_info
    s = summary.set_index(["condition", "workload", "protocol"])
    sd = seed.set_index(["condition", "workload", "protocol"])["seed_goodput_mbps"]
    out = []
    for size in sorted(info["size_bytes"].dropna().unique(), reverse=True):
        by_policy: dict[str, str] = {}
        for w in run.workloads:
            if info.at[w, "size_bytes"] == size and info.at[w, "kind"] == "objects":
                kind = str(info.at[w, "connection_policy"]).split(":", 1)[0]
                by_policy.setdefault(kind, w)
        if "per-object" not in by_policy and "shared" not in by_policy:
            continue
        rows = []
        for c in run.condition_order:
            any_w = next(iter(by_policy.values()))
            seed_means = {p: _f(sd.get((c, w, p))) for p in run.protocols for w in [any_w]}
            if all(v is None for v in seed_means.values()):
                continue
            row: dict[str, Any] = {"condition": c, "seed": seed_means, "seed_rank": ranking(seed_means)}
            for kind in ("per-object", "shared"):
                w = by_policy.get(kind)
                cells = {}
                for p in run.protocols:
                    k = (c, w, p)
                    if w is None or k not in s.index:
                        cells[p] = None
                        continue
                    r = s.loc[k]
                    cells[p] = {"mean": _f(r["goodput_mbps_mean"]), "ci_low": _f(r["goodput_mbps_ci_low"]),
                                "ci_high": _f(r["goodput_mbps_ci_high"]), "n": int(r["n"]),
                                "n_cpu_bound": int(r["n_cpu_bound"])}
                means = {p: (v or {}).get("mean") for p, v in cells.items()}
                rank = ranking(means) if w is not None else ""
                verdict = None
                if w is not None:
                    best_rows = [s.loc[(c, w, p)] for p in run.protocols if (c, w, p) in s.index]
                    verdict = str(best_rows[0]["cell_verdict"]) if best_rows else None
                row[kind] = {"workload": w, "cells": cells, "rank": rank, "verdict": verdict,
                             "differs": bool(rank) and rank != row["seed_rank"],
                             "best_differs": bool(rank) and rank.split(" > ")[0] != row["seed_rank"].split(" > ")[0]}
            rows.append(row)
        if rows:
            out.append({"size": size_label(int(size)), "protocols": run.protocols, "rows": rows,
                        "policies": [k for k in ("per-object", "shared") if k in by_policy]})
    return out


def counts(run: RunData) -> dict[str, int]:
    r = run.rows
    t = run.trials
    return {"rows": len(r), "trials": len(t), "ok": int((t["status"] == "ok").sum()),
            "failed": int((t["status"] != "ok").sum()), "used": int(r["used"].sum()),
            "warmup": int(r["warmup"].sum()), "superseded": int(r["superseded"].sum()),
            "cpu_bound": int(run.ok["cpu_bound"].sum()),
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


def missing_items(run: RunData, summary: pd.DataFrame, seed: pd.DataFrame, calibration: pd.DataFrame) -> list[str]:
    """What this report cannot show or claim, and why, in plain words."""
    out = list(run.notes)
    c = counts(run)
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
    elif not has_timeseries(run):
        out.append("The captures have no throughput time series.")
    if calibration.empty:
        out.append("No link calibration in meta.json: the configured conditions are not verified by measurement "
                   "(set calibrate = true in the plan).")
    if not sweeps(run.conditions):
        out.append("No CVart views: no condition parameter (delay, rate, loss) is swept with the others held fixed.")
    if summary.empty or not has_phases(summary):
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


# the video QoE a report shows, with whether lower is better (for the verdict)
VIDEO_METRICS = (("startup_s", "startup (s)", False), ("stall_total_s", "stalled (s)", False),
                 ("mean_bitrate_kbps", "played bitrate (kbit/s)", True),
                 ("live_latency_s_mean", "live latency (s)", False),
                 # DNCS-HTTP3's "latency": hls.js's fragment request → first byte (docs/video.md)
                 ("frag_latency_ms_mean", "segment latency, hls.js (ms)", False),
                 ("qoe_lin", "QoE_lin per chunk", True))


def video_cells(run: RunData, summary: pd.DataFrame, method: Method) -> pd.DataFrame:
    """Video playback per cell (summary columns of the QoE metrics) with, per metric, the best
    protocol and its verdict against every other protocol (DNCS's startup, latency, bitrate)."""
    if summary.empty or "startup_s_mean" not in summary or not summary["startup_s_mean"].notna().any():
        return pd.DataFrame()
    video = summary[summary["startup_s_mean"].notna()].copy()
    keys = list(zip(video["condition"], video["workload"]))
    for metric, _, higher in VIDEO_METRICS:
        if f"{metric}_mean" not in video or not video[f"{metric}_mean"].notna().any():
            continue
        best = best_protocols(run, method, metric, higher_is_better=higher).set_index(["condition", "workload"])
        for col in ("cell_best", "cell_verdict", "cell_p"):
            video[f"{metric}_{col}"] = [best.at[k, col] if k in best.index else None for k in keys]
    return video.reset_index(drop=True)


def relative_to_best(run: RunData, summary: pd.DataFrame) -> pd.DataFrame:
    """Fig. 12's numbers: each mean goodput (and its CI bounds) as % of the same protocol's best
    workload in the same condition; protocols without a positive best are left out."""
    rows = []
    if summary.empty or "goodput_mbps_mean" not in summary:
        return pd.DataFrame(columns=RELATIVE_COLUMNS)
    for c in run.condition_order:
        s = summary[summary["condition"] == c]
        for p in run.protocols:
            sp = s[s["protocol"] == p].set_index("workload")
            best = sp["goodput_mbps_mean"].max()
            if not (isinstance(best, float) and best > 0):
                continue
            for w in run.workloads:
                if w not in sp.index or not sp.at[w, "goodput_mbps_mean"] > 0:
                    continue
                rows.append({"condition": c, "workload": w, "protocol": p,
                             "pct_of_best": 100 * sp.at[w, "goodput_mbps_mean"] / best,
                             "pct_ci_low": 100 * sp.at[w, "goodput_mbps_ci_low"] / best,
                             "pct_ci_high": 100 * sp.at[w, "goodput_mbps_ci_high"] / best})
    return pd.DataFrame(rows, columns=RELATIVE_COLUMNS)


def build_report_data(run: RunData, method: Method = Method()) -> ReportData:
    """Compute everything the report shows (statistics, tables, figure inputs, notes) from a run."""
    summary = cell_summary(run, method)
    seed = seed_matches(run) if not summary.empty else pd.DataFrame(columns=SEED_COLUMNS)
    diffs = {(a, b): pairwise(run, a, b, method) for a, b in COMPARISONS
             if a in run.protocols and b in run.protocols}
    calibration = honesty.calibration(run.meta)
    params = run.conditions
    conds = run.condition_order
    return ReportData(
        run=run, method=method, summary=summary, table1=build_table1(run, summary, seed), seed=seed, diffs=diffs,
        methods=build_methods_table(run, summary, seed),
        cpu=honesty.cpu_per_gb(run), cpu_bound=honesty.cpu_bound_trials(run), failed=honesty.failed_trials(run),
        failure_reasons=honesty.failure_reasons(run), calibration=calibration, metadata=honesty.metadata(run),
        counts=counts(run), missing=missing_items(run, summary, seed, calibration),
        n_tests_table1=int(summary["p_vs_best"].notna().sum()) if not summary.empty else 0,
        pages=page_loads(run, summary, method), video=video_cells(run, summary, method),
        video_timelines=median_startup_timelines(run) if not summary.empty else {},
        relative=relative_to_best(run, summary), hosts=honesty.per_host(run), recovery=loss_recovery(run),
        sweeps=sweeps(params), varying=varying(params), swept=swept(params) if not params.empty else [],
        heatmap_layout=heatmap_layout(params), timeseries=median_trial_series(run) if not summary.empty else None,
        delay_loss_names=bool(conds) and all(parse_delay_loss(c) for c in conds),
        hol=head_of_line(run, method))
