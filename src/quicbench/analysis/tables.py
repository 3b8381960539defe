"""Per-cell statistics (summary.csv), the best protocol per cell, protocol-vs-protocol differences.

A cell is one condition x workload x protocol; its sample is the goodput (and the other
metrics) of its successful, final, non-warm-up trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from quicbench import stats
from quicbench.model import columns
from quicbench.model.workload_kinds import KINDS
from quicbench.analysis.load import OPTIONAL_NUMERIC, RunData

# the metrics summary.csv always has, in order; each shown by its column's title (model/columns.py)
SUMMARY_METRICS = ("goodput_mbps", "total_time_s", "ttfb_ms", "connect_ms", "tls_ms", "wait_ms", "transfer_ms_p50",
                   "request_ms_p50", "client_cpu_s", "server_cpu_s", "cpu_s_per_gb")
# the optional metrics (every numeric column of the optional groups) in summary.csv's order: these
# first, then the others in the columns table's order
_OPTIONAL_FIRST = (
    "wire_bytes_up", "wire_bytes_down", "wire_packets_up", "wire_packets_down", "overhead_pct", "tcp_retransmits",
    "quic_packets_up", "quic_packets_down", "wire_goodput_mbps", "wire_throughput_cv_pct", "capture_dropped",
    "page_load_ms", "load_event_ms", "dom_content_loaded_ms", "first_contentful_paint_ms", "page_ttfb_ms",
    "page_response_start_ms", "page_handshake_ms", "page_connect_ms", "page_tls_ms", "page_weight_bytes",
    "page_body_bytes", "page_requests", "page_connections", "page_html_download_ms", "lcp_ms", "speed_index_ms",
    "httpstat_connect_ms",
    "httpstat_tls_ms", "httpstat_server_ms", "httpstat_transfer_ms", "httpstat_total_ms", "fg_share_pct",
    "jain_index", "load_owd_ms_p50", "load_owd_ms_p99", "startup_s", "stall_total_s", "rebuffer_ratio",
    "mean_bitrate_kbps", "switches_per_min", "live_latency_s_mean", "frag_latency_ms_mean", "frag_kbps_mean",
    "frames_dropped_ratio", "qoe_lin",
)
# metric -> axis/table label with unit (the column's title, else its meaning)
METRICS: dict[str, str] = {m: columns.metric(m).label for m in SUMMARY_METRICS}
OPTIONAL_METRICS: dict[str, str] = {
    m: columns.metric(m).label for m in (*_OPTIONAL_FIRST, *(c.name for c in columns.COLUMNS
                                                            if c.name in OPTIONAL_NUMERIC and c.name not in _OPTIONAL_FIRST))}
assert set(OPTIONAL_METRICS) == set(OPTIONAL_NUMERIC)
# Each metric's interval respects its range (stats.SCALES; docs/report.md, "Intervals").
# Goodputs, times, latencies, start-up, bitrates and the load metrics: strictly positive, skewed to the
# right, multiplicative: summarised and tested on logs, the geometric mean (`<metric>_gmean`) with the
# log-t interval (stats.positive_ci), and "best" chosen on it; with a 0 in a cell, the arithmetic mean
# with the BCa bootstrap interval. Page weight and requests are compared on logs too (ratio of
# geometric means), so they are summarised the same way. CPU costs keep the arithmetic mean (what matters is
# their total; CPU-bound trials make them bimodal, where the geometric mean is far below the mean),
# with the bootstrap interval, as every other non-negative quantity that can be 0 (link lateness,
# sojourn times, stall time, per-trial ratios and shares: the bootstrap never leaves the values'
# range). Counts per trial (retransmitted segments, lost packets, stalls) get count intervals
# (stats.count_ci); QoE, which can be negative, the Student-t interval.
LOG_METRICS = frozenset({
    "goodput_mbps", "wire_goodput_mbps", "total_time_s", "ttfb_ms", "connect_ms", "tls_ms", "wait_ms",
    "transfer_ms_p50", "request_ms_p50", "page_load_ms", "load_event_ms", "dom_content_loaded_ms",
    "first_contentful_paint_ms", "page_ttfb_ms", "page_response_start_ms", "page_handshake_ms", "page_connect_ms",
    "page_tls_ms", "page_html_download_ms", "httpstat_connect_ms", "httpstat_tls_ms", "httpstat_server_ms",
    "httpstat_transfer_ms", "httpstat_total_ms", "frag_latency_ms_mean", "frag_latency_ms_median",
    "segment_ttfb_ms_mean", "segment_ttfb_ms_median",
    "lcp_ms", "speed_index_ms", "visually_complete_ms", "first_visual_change_ms",
    "startup_s", "startup_player_s", "live_latency_s_mean", "live_latency_s_median", "live_latency_s_max",
    "live_latency_s_last", "mean_bitrate_kbps", "segment_kbps_mean", "segment_download_ms_median", "frag_kbps_mean",
    "load_owd_ms_p50", "load_owd_ms_p99", "fg_wire_mbps", "bg_mbps", "fg_share_pct", "page_weight_bytes",
    "page_body_bytes",
    "page_requests", "all_streams_idle_ms", "body_stall_ms_p50", "body_stall_ms_max", "completion_spread_ms",
    "handshake_ms", "rebind_stall_ms",
})
SIGNED_METRICS = frozenset({"qoe_lin", "qoe_log", "qoe_hd", "qoe_score"})
COUNT_METRICS = frozenset(c.name for c in columns.COLUMNS if c.type == "int" and c.name not in LOG_METRICS)


def metric_scale(metric: str) -> str:
    """How the metric's interval is built (stats.SCALES): log, count, non-negative (bootstrap) or signed."""
    if metric in LOG_METRICS:
        return stats.LOG
    if metric in SIGNED_METRICS:
        return stats.SIGNED
    if metric in COUNT_METRICS:
        return stats.COUNT
    return stats.NONNEG


def center(metric: str, x: np.ndarray) -> float:
    """The value a cell is ranked and shown by: the geometric mean on the log scale (when every
    value is > 0), else the arithmetic mean."""
    if not x.size:
        return math.nan
    if metric_scale(metric) == stats.LOG and (x > 0).all():
        return stats.gmean(x)
    return float(x.mean())

# metrics whose values can be 0 (or negative), where a geometric mean and a ratio are undefined:
# compared on the difference of means (stats.compare_difference). The value is the equivalence
# margin in the metric's unit (None: none is declared, so no 'equivalent' verdict): half a second
# of stalling per play, and one percentage point of rebuffering (Dobrian et al., SIGCOMM'11: a 1 %
# higher rebuffering ratio cost minutes of viewing). docs/report.md explains the choice.
DIFFERENCE_METRICS: dict[str, float | None] = {
    "stall_total_s": 0.5, "rebuffer_ratio": 0.01, "rebuffer_s_per_min": None, "stalls": None,
    "qoe_lin": None, "qoe_log": None, "qoe_hd": None, "qoe_score": None, "frames_dropped": None,
    "frames_dropped_ratio": None, "switches": None, "switches_per_min": None,
    "cls": None, "total_blocking_time_ms": None, "replay_missed": None,     # often 0 (docs/pages.md)
}
def higher_is_better(metric: str) -> bool:
    """Which way the metric is better (its column's direction, model/columns.py)."""
    return columns.higher_is_better(metric)


CELL_KEYS = ["condition", "workload", "protocol"]


def metric_stats(metric: str) -> tuple[str, ...]:
    """The summary.csv columns of a metric: `_mean` (arithmetic), `_gmean` on the log scale, the interval."""
    return ("mean", "gmean", "ci_low", "ci_high") if metric in LOG_METRICS else ("mean", "ci_low", "ci_high")
GOODPUT_STATS = ("mean", "gmean", "sd", "ci_low", "ci_high", "median", "min", "max")

# the columns summary.csv always has, in order (docs/data.md documents each; tests check both)
SUMMARY_COLUMNS = [
    "run_id", "condition", "condition_desc", "delay_ms", "loss_pct", "rate_mbit", "workload", "size_bytes",
    "count", "parallel", "protocol", "server", "n_trials", "n_failed", "n", "n_cpu_bound",
    *[f"goodput_mbps_{s}" for s in GOODPUT_STATS],
    *[f"{m}_{s}" for m in METRICS if m != "goodput_mbps" for s in metric_stats(m)],
    "is_best", "cell_best", "cell_verdict", "cell_p", "p_vs_best", "ratio_vs_best", "ratio_vs_best_ci_low",
    "ratio_vs_best_ci_high", "verdict_vs_best", "p_vs_best_raw", "p_equiv_vs_best", "reps_to_decide",
    "test", "alpha", "correction", "margin",
]


@dataclass(frozen=True)
class Method:
    """How a report compares protocols (docs/report.md): the test, alpha, the multiple-comparison
    correction over a family, and the equivalence margin."""
    test: str = stats.DEFAULT_TEST
    alpha: float = stats.ALPHA
    correction: str = stats.DEFAULT_CORRECTION
    min_n: int = stats.MIN_N
    margin: float = stats.MARGIN
    looks: int = 1        # a sequential run (--until-decided): each look tests at alpha / looks

    @property
    def alpha_per_look(self) -> float:
        return self.alpha / self.looks

    def compare(self, a, b, metric: str = "goodput_mbps") -> stats.TestResult:
        """a vs b on the metric's scale: the ratio of geometric means (the plan's test), or the
        difference of means for a metric that can be 0 (DIFFERENCE_METRICS)."""
        if metric in DIFFERENCE_METRICS:
            return stats.compare_difference(a, b, alpha=self.alpha_per_look, min_n=self.min_n,
                                            margin_abs=DIFFERENCE_METRICS[metric])
        return stats.compare(a, b, test=self.test, alpha=self.alpha_per_look, min_n=self.min_n, margin=self.margin)

    def short(self) -> str:
        return stats.method_short(self.test, self.alpha, self.correction, self.margin) + (
            f"; sequential: {self.looks} looks at alpha {self.alpha_per_look:.3g} each" if self.looks > 1 else "")

    def text(self, n_tests: int | None = None, family: str = "the comparisons of each table") -> str:
        s = stats.method_text(self.test, self.alpha_per_look, self.correction, n_tests, self.min_n, self.margin,
                              family)
        if self.looks > 1:
            s = (f"Sequential (--until-decided): the run looked at its data up to {self.looks} times, adding "
                 f"repetitions to undecided cells; each look tests at alpha {self.alpha:g} / {self.looks} = "
                 f"{self.alpha_per_look:.3g} (Bonferroni alpha spending over the looks), so the chance of any false "
                 f"'different' or 'equivalent' over all looks stays at most {self.alpha:g}. " + s)
        return s


def method_for(meta: dict[str, Any], test: str | None = None, alpha: float | None = None,
               correction: str | None = None, margin_pct: float | None = None) -> Method:
    """The method of a run's reports: the plan's `statistics` (meta.json), each part overridable
    (the report command's flags). Bad values: a QuicbenchError naming the field and what is accepted."""
    from quicbench.errors import QuicbenchError
    plan_stats = ((meta or {}).get("plan") or {}).get("statistics") or {}
    test = test or plan_stats.get("test") or stats.DEFAULT_TEST
    correction = correction or plan_stats.get("correction") or stats.DEFAULT_CORRECTION
    alpha = alpha if alpha is not None else plan_stats.get("alpha", stats.ALPHA)
    margin_pct = margin_pct if margin_pct is not None else plan_stats.get("margin_pct", 100 * stats.MARGIN)
    if test not in stats.TESTS:
        raise QuicbenchError(f"test: unknown test '{test}', accepted: {', '.join(stats.TESTS)}")
    if correction not in stats.CORRECTIONS:
        raise QuicbenchError(f"correction: unknown correction '{correction}', accepted: {', '.join(stats.CORRECTIONS)}")
    if not 0 < float(alpha) < 0.5:
        raise QuicbenchError(f"alpha: {alpha} is out of range; accepted: 0 < alpha < 0.5")
    if not 0 < float(margin_pct) < 100:
        raise QuicbenchError(f"margin: {margin_pct} % is out of range; accepted: 0 < margin < 100 (%)")
    looks = int(((meta or {}).get("sequential") or {}).get("looks") or 1)
    return Method(test=test, alpha=float(alpha), correction=correction, margin=float(margin_pct) / 100, looks=looks)


def optional_metrics(run: RunData) -> list[str]:
    """The optional metric columns this run has values for."""
    return [m for m in OPTIONAL_METRICS if run.rows[m].notna().any()]


def samples(run: RunData, metric: str = "goodput_mbps", kind: str | None = None
            ) -> dict[tuple[str, str, str], np.ndarray]:
    """(condition, workload, protocol) -> the metric's values over the cell's successful trials
    (only workloads of `kind` when given)."""
    ok = run.ok
    if kind is not None:
        ok = ok[ok["workload"].map(run.kind_of) == kind]
    return {k: stats.clean(g[metric]) for k, g in ok.groupby(CELL_KEYS, sort=False)}


def cell_verdict(results: dict[str, stats.TestResult]) -> tuple[str, float | None]:
    """A cell's verdict, from the best protocol's comparison with each other one, never hiding a
    significant difference behind another comparison's p: 'faster than all', or each other
    protocol's own verdict ('faster than h1; equivalent to h2; inconclusive vs h3'), a difference
    shown smaller than the margin saying so ('ahead of h2 inside the ±10 % margin'). The p
    returned is the largest (adjusted) p of the comparisons that decided 'different'."""
    if not results:
        return ("only one protocol with data", None)
    by: dict[str, list[str]] = {}
    small: dict[str, list[str]] = {}        # different, and shown equivalent within this margin
    for proto, r in results.items():
        within = stats.margin_text(r)
        if within:
            small.setdefault(within, []).append(proto)
        else:
            by.setdefault(r.verdict, []).append(proto)
    diff = [r.p for r in results.values() if r.verdict == stats.DIFFERENT and r.p is not None]
    if set(by) == {stats.DIFFERENT} and not small:
        return (FASTER_THAN_ALL, max(diff) if diff else None)
    if not by and len(small) == 1:
        return (f"{FASTER_THAN_ALL}, {stats.inside_margin_words(next(iter(small)))}", max(diff) if diff else None)
    parts = []
    if stats.DIFFERENT in by:
        parts.append("ahead of " + ", ".join(by[stats.DIFFERENT]))
    for within, protos in small.items():
        parts.append(f"ahead of {', '.join(protos)} {stats.inside_margin_words(within)}")
    if stats.EQUIVALENT in by:
        parts.append("equivalent to " + ", ".join(by[stats.EQUIVALENT]))
    if stats.INCONCLUSIVE in by:
        parts.append("inconclusive vs " + ", ".join(by[stats.INCONCLUSIVE]))
    if stats.N_TOO_SMALL in by:
        parts.append("n too small vs " + ", ".join(by[stats.N_TOO_SMALL]))
    return ("; ".join(parts), max(diff) if diff else None)


FASTER_THAN_ALL = "ahead of all"


def best_protocols(run: RunData, method: Method = Method(), metric: str = "goodput_mbps",
                   higher_is_better: bool = True, kind: str | None = None) -> pd.DataFrame:
    """Per condition x workload (of `kind`, when given): the protocol with the best value (center():
    the highest geometric-mean goodput) and its comparisons with every other protocol of the cell (cell_verdict), on the
    metric's scale (Method.compare). With Holm, the family is every comparison of the table (all
    cells of the kind).
    """
    smp = samples(run, metric, kind)
    sign = 1 if higher_is_better else -1
    groups: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for (c, w, p), x in smp.items():
        groups.setdefault((c, w), {})[p] = x
    pending: list[tuple[tuple[str, str], str, str, stats.TestResult]] = []
    best: dict[tuple[str, str], str] = {}
    for cw, by_proto in groups.items():
        with_data = {p: x for p, x in by_proto.items() if x.size}
        if not with_data:
            continue
        b = max(with_data, key=lambda p: sign * center(metric, with_data[p]))
        best[cw] = b
        for p, x in by_proto.items():
            if p != b:
                pending.append((cw, b, p, method.compare(with_data[b], x, metric)))
    adjusted = stats.adjust([r for *_, r in pending], method.correction)
    per_cell: dict[tuple[str, str], dict[str, stats.TestResult]] = {cw: {} for cw in best}
    for (cw, _b, p, _r), r in zip(pending, adjusted):
        per_cell[cw][p] = r
    rows = []
    for cw, b in best.items():
        verdict, p = cell_verdict(per_cell[cw])
        rows.append({"condition": cw[0], "workload": cw[1], "cell_best": b, "cell_verdict": verdict, "cell_p": p,
                     "tests": per_cell[cw]})
    return pd.DataFrame(rows, columns=["condition", "workload", "cell_best", "cell_verdict", "cell_p", "tests"])


def _first(series: pd.Series) -> Any:
    s = series.dropna()
    return s.iloc[0] if len(s) else None


def cell_summary(run: RunData, method: Method = Method()) -> pd.DataFrame:
    """The rows of summary.csv: one per condition x workload x protocol, in display order."""
    trials = run.trials
    optional = optional_metrics(run)
    cols = SUMMARY_COLUMNS + [f"{m}_{s}" for m in optional for s in metric_stats(m)]
    if trials.empty:
        return pd.DataFrame(columns=cols)
    # the best protocol of a cell by its kind's headline metric (goodput, page load time, QoE),
    # each kind's cells one family
    kinds = dict.fromkeys(run.kind_of(w) for w in run.workloads)
    headlines = {k: KINDS.get(k).headline().name for k in kinds if k in KINDS}
    frames = [best_protocols(run, method, m, higher_is_better(m), kind=k) for k, m in headlines.items()]
    frames = [f for f in frames if not f.empty]
    best = (pd.concat(frames, ignore_index=True) if frames else best_protocols(run, method, kind="")
            ).set_index(["condition", "workload"])
    params = run.conditions
    rows = []
    for (c, w, p), g in trials.groupby(CELL_KEYS, sort=False):
        used = g[g["used"]]
        row: dict[str, Any] = {
            "run_id": run.run_id, "condition": c, "condition_desc": _first(g["condition_desc"]),
            "delay_ms": params.at[c, "delay_ms"] if c in params.index else math.nan,
            "loss_pct": params.at[c, "loss_pct"] if c in params.index else math.nan,
            "rate_mbit": params.at[c, "rate_mbit"] if c in params.index else math.nan,
            "workload": w, "size_bytes": _first(g["size_bytes"]), "count": _first(g["count"]),
            "parallel": _first(g["parallel"]), "protocol": p, "server": _first(g["server"]),
            "n_trials": len(g), "n_failed": int((g["status"] != "ok").sum()), "n": len(used),
            "n_cpu_bound": int(used["cpu_bound"].sum()),
        }
        s = stats.summarize(used["goodput_mbps"], positive=True)
        row.update({f"goodput_mbps_{k}": getattr(s, k) for k in GOODPUT_STATS})
        for m in [*(m for m in METRICS if m != "goodput_mbps"), *optional]:
            x = stats.clean(used[m])
            lo, hi = stats.interval(x, scale=metric_scale(m))
            row.update({f"{m}_mean": float(x.mean()) if x.size else math.nan, f"{m}_ci_low": lo, f"{m}_ci_high": hi})
            if m in LOG_METRICS:
                row[f"{m}_gmean"] = stats.gmean(x)
        b = best.loc[(c, w)] if (c, w) in best.index else None
        row["cell_best"] = b["cell_best"] if b is not None else None
        row["is_best"] = b is not None and b["cell_best"] == p
        row["cell_verdict"] = b["cell_verdict"] if b is not None else "no data"
        row["cell_p"] = b["cell_p"] if b is not None else None
        t = b["tests"].get(p) if b is not None else None
        row.update({"p_vs_best": t.p if t is not None else None,
                    "ratio_vs_best": t.ratio if t is not None else None,     # best / this protocol
                    "ratio_vs_best_ci_low": t.ratio_low if t is not None else None,
                    "ratio_vs_best_ci_high": t.ratio_high if t is not None else None,
                    "verdict_vs_best": t.verdict if t is not None else None,
                    "p_vs_best_raw": t.p_raw if t is not None else None,
                    "p_equiv_vs_best": t.p_equiv if t is not None else None,
                    "reps_to_decide": t.reps_to_decide if t is not None else None})
        row.update(test=method.test, alpha=method.alpha, correction=method.correction, margin=method.margin)
        rows.append(row)
    df = pd.DataFrame(rows)
    order_c = {c: i for i, c in enumerate(run.condition_order)}
    order_w = {w: i for i, w in enumerate(run.workloads)}
    order_p = {p: i for i, p in enumerate(run.protocols)}
    df = df.sort_values(["condition", "workload", "protocol"], key=lambda s: s.map(
        {"condition": order_c, "workload": order_w, "protocol": order_p}[s.name]), kind="stable")
    return df.reindex(columns=cols).reset_index(drop=True)


def pairwise(run: RunData, a: str, b: str, method: Method = Method(), metric: str = "goodput_mbps",
             kind: str | None = None) -> pd.DataFrame:
    """Protocol a vs b per condition x workload (of `kind`, when given): the values on the test's
    scale (mean_a, mean_b: geometric means on the log scale, center()), % difference of a over b on
    that scale, the ratio a/b of geometric means with its interval at the verdict's level, the
    verdict. With Holm, the family is
    every cell of this comparison.
    """
    smp = samples(run, metric, kind)
    rows, results = [], []
    for c in run.condition_order:
        for w in run.workloads:
            xa, xb = smp.get((c, w, a)), smp.get((c, w, b))
            if xa is None or xb is None or not xa.size or not xb.size:
                continue
            r = method.compare(xa, xb, metric)
            results.append(r)
            ca, cb = center(metric, xa), center(metric, xb)
            rows.append({"condition": c, "workload": w, "a": a, "b": b, "mean_a": ca, "mean_b": cb,
                         "n_a": int(xa.size), "n_b": int(xb.size), "diff_pct": stats.pct_diff(ca, cb)})
    for row, r in zip(rows, stats.adjust(results, method.correction)):
        row.update(p=r.p, p_raw=r.p_raw, p_equiv=r.p_equiv, verdict=r.verdict, significant=r.significant,
                   ratio=r.ratio, ratio_low=r.ratio_low, ratio_high=r.ratio_high, reps_to_decide=r.reps_to_decide,
                   within=stats.margin_text(r))
    return pd.DataFrame(rows, columns=["condition", "workload", "a", "b", "mean_a", "mean_b", "n_a", "n_b",
                                       "diff_pct", "ratio", "ratio_low", "ratio_high", "p", "p_raw", "p_equiv",
                                       "verdict", "significant", "reps_to_decide", "within"])
