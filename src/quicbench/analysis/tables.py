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

from quicbench.analysis import stats
from quicbench.model import columns
from quicbench.analysis.load import OPTIONAL_NUMERIC, RunData

# metric -> axis/table label with unit
METRICS: dict[str, str] = {
    "goodput_mbps": "goodput (Mbit/s)",
    "total_time_s": "total transfer time (s)",
    "ttfb_ms": "time to first byte (ms)",
    "connect_ms": "connect (ms)",
    "tls_ms": "TLS handshake (ms)",
    "wait_ms": "server wait (ms)",
    "transfer_ms_p50": "transfer, median request (ms)",
    "request_ms_p50": "request, median (ms)",
    "client_cpu_s": "client CPU (s)",
    "server_cpu_s": "server CPU (s)",
    "cpu_s_per_gb": "client + server CPU (s per GB)",
}
OPTIONAL_METRICS: dict[str, str] = {
    "wire_bytes_up": "wire bytes client→server",
    "wire_bytes_down": "wire bytes server→client",
    "wire_packets_up": "packets client→server",
    "wire_packets_down": "packets server→client",
    "overhead_pct": "overhead (% of payload)",
    "tcp_retransmits": "TCP retransmitted segments",
    "quic_packets_up": "QUIC packets client→server",
    "quic_packets_down": "QUIC packets server→client",
    "wire_goodput_mbps": "wire goodput (Mbit/s)",
    "capture_dropped": "packets the capture missed",
    "page_load_ms": "page load time (ms)",
    "load_event_ms": "load event (ms)",
    "dom_content_loaded_ms": "DOMContentLoaded (ms)",
    "first_contentful_paint_ms": "first contentful paint (ms)",
    "page_ttfb_ms": "page TTFB, waiting (ms)",
    "page_response_start_ms": "page response start (ms)",
    "page_handshake_ms": "page connect + TLS (ms)",
    "page_connect_ms": "page connect (ms)",
    "page_tls_ms": "page TLS (ms)",
    "page_weight_bytes": "page weight (bytes)",
    "page_body_bytes": "page body bytes",
    "page_requests": "page requests",
    "page_connections": "page connections",
    "startup_s": "video startup (s)",
    "stall_total_s": "video stall time (s)",
    "rebuffer_ratio": "rebuffer ratio",
    "mean_bitrate_kbps": "played bitrate (kbit/s)",
    "switches_per_min": "quality switches per minute",
    "live_latency_s_mean": "live latency (s)",
    "frames_dropped_ratio": "dropped frames ratio",
    "qoe_lin": "QoE_lin per chunk (Pensieve)",
}
# the other numeric columns of the row schema (video details) are labelled by their meaning
OPTIONAL_METRICS.update({c.name: f"{c.meaning} ({c.unit})" if c.unit else c.meaning
                         for c in columns.COLUMNS if c.name in OPTIONAL_NUMERIC and c.name not in OPTIONAL_METRICS})
assert set(OPTIONAL_METRICS) == set(OPTIONAL_NUMERIC)
# goodputs and times (latencies): positive values, skewed to the right, so their 95 % intervals are
# log-t intervals (stats.positive_ci: the geometric mean's, never below zero). CPU costs keep the
# Student-t interval of the mean: what matters is their mean, they are pooled over conditions (large
# n), and CPU-bound trials make them bimodal, where the geometric mean is far below the mean.
POSITIVE_METRICS = frozenset({
    "goodput_mbps", "wire_goodput_mbps", "total_time_s", "ttfb_ms", "connect_ms", "tls_ms", "wait_ms",
    "transfer_ms_p50", "request_ms_p50", "page_load_ms", "load_event_ms", "dom_content_loaded_ms",
    "first_contentful_paint_ms", "page_ttfb_ms", "page_response_start_ms", "page_handshake_ms", "page_connect_ms",
    "page_tls_ms",
})

CELL_KEYS = ["condition", "workload", "protocol"]
GOODPUT_STATS = ("mean", "sd", "ci_low", "ci_high", "median", "min", "max")

# the columns summary.csv always has, in order (docs/data.md documents each; tests check both)
SUMMARY_COLUMNS = [
    "run_id", "condition", "condition_desc", "delay_ms", "loss_pct", "rate_mbit", "workload", "size_bytes",
    "count", "parallel", "protocol", "server", "n_trials", "n_failed", "n", "n_cpu_bound",
    *[f"goodput_mbps_{s}" for s in GOODPUT_STATS],
    *[f"{m}_{s}" for m in METRICS if m != "goodput_mbps" for s in ("mean", "ci_low", "ci_high")],
    "is_best", "cell_best", "cell_verdict", "cell_p", "p_vs_best", "test", "alpha", "correction",
]


@dataclass(frozen=True)
class Method:
    test: str = "welch"
    alpha: float = stats.ALPHA
    correction: str = "none"
    min_n: int = stats.MIN_N

    def compare(self, a, b) -> stats.TestResult:
        return stats.compare(a, b, test=self.test, alpha=self.alpha, min_n=self.min_n)

    def short(self) -> str:
        return stats.method_short(self.test, self.alpha, self.correction)

    def text(self, n_tests: int | None = None) -> str:
        return stats.method_text(self.test, self.alpha, self.correction, n_tests, self.min_n)


def optional_metrics(run: RunData) -> list[str]:
    """The optional metric columns this run has values for."""
    return [m for m in OPTIONAL_METRICS if run.rows[m].notna().any()]


def samples(run: RunData, metric: str = "goodput_mbps") -> dict[tuple[str, str, str], np.ndarray]:
    """(condition, workload, protocol) -> the metric's values over the cell's successful trials."""
    ok = run.ok
    return {k: stats.clean(g[metric]) for k, g in ok.groupby(CELL_KEYS, sort=False)}


def cell_verdict(results: dict[str, stats.TestResult]) -> tuple[str, float | None]:
    """A cell's verdict: the best protocol differs significantly from every other one?"""
    if not results:
        return ("only one protocol with data", None)
    if any(r.verdict == stats.N_TOO_SMALL for r in results.values()):
        return (stats.N_TOO_SMALL, None)
    p = max(r.p for r in results.values() if r.p is not None)
    return (stats.SIGNIFICANT if all(r.significant for r in results.values()) else stats.NOT_SIGNIFICANT, p)


def best_protocols(run: RunData, method: Method = Method(), metric: str = "goodput_mbps",
                   higher_is_better: bool = True) -> pd.DataFrame:
    """Per condition x workload: the protocol with the best mean (highest goodput) and its tests.

    The best protocol is tested against each other protocol of the cell; the cell is
    'significant' only if all those tests are (cell_p is the largest p). With Holm, the
    family is every test of the table.
    """
    smp = samples(run, metric)
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
        b = max(with_data, key=lambda p: sign * with_data[p].mean())
        best[cw] = b
        for p, x in by_proto.items():
            if p != b:
                pending.append((cw, b, p, method.compare(with_data[b], x)))
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
    cols = SUMMARY_COLUMNS + [f"{m}_{s}" for m in optional_metrics(run) for s in ("mean", "ci_low", "ci_high")]
    if trials.empty:
        return pd.DataFrame(columns=cols)
    best = best_protocols(run, method).set_index(["condition", "workload"])
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
        for m in [*(m for m in METRICS if m != "goodput_mbps"), *optional_metrics(run)]:
            x = stats.clean(used[m])
            lo, hi = stats.interval(x, positive=m in POSITIVE_METRICS)
            row.update({f"{m}_mean": float(x.mean()) if x.size else math.nan, f"{m}_ci_low": lo, f"{m}_ci_high": hi})
        b = best.loc[(c, w)] if (c, w) in best.index else None
        row["cell_best"] = b["cell_best"] if b is not None else None
        row["is_best"] = b is not None and b["cell_best"] == p
        row["cell_verdict"] = b["cell_verdict"] if b is not None else "no data"
        row["cell_p"] = b["cell_p"] if b is not None else None
        t = b["tests"].get(p) if b is not None else None
        row["p_vs_best"] = t.p if t is not None else None
        row.update(test=method.test, alpha=method.alpha, correction=method.correction)
        rows.append(row)
    df = pd.DataFrame(rows)
    order_c = {c: i for i, c in enumerate(run.condition_order)}
    order_w = {w: i for i, w in enumerate(run.workloads)}
    order_p = {p: i for i, p in enumerate(run.protocols)}
    df = df.sort_values(["condition", "workload", "protocol"], key=lambda s: s.map(
        {"condition": order_c, "workload": order_w, "protocol": order_p}[s.name]), kind="stable")
    return df.reindex(columns=cols).reset_index(drop=True)


def pairwise(run: RunData, a: str, b: str, method: Method = Method(), metric: str = "goodput_mbps") -> pd.DataFrame:
    """Protocol a vs b per condition x workload: means, % difference of a over b, test verdict.

    With Holm, the family is every cell of this comparison.
    """
    smp = samples(run, metric)
    rows, results = [], []
    for c in run.condition_order:
        for w in run.workloads:
            xa, xb = smp.get((c, w, a)), smp.get((c, w, b))
            if xa is None or xb is None or not xa.size or not xb.size:
                continue
            r = method.compare(xa, xb)
            results.append(r)
            rows.append({"condition": c, "workload": w, "a": a, "b": b, "mean_a": float(xa.mean()),
                         "mean_b": float(xb.mean()), "n_a": int(xa.size), "n_b": int(xb.size),
                         "diff_pct": stats.pct_diff(float(xa.mean()), float(xb.mean()))})
    for row, r in zip(rows, stats.adjust(results, method.correction)):
        row.update(p=r.p, verdict=r.verdict, significant=r.significant)
    return pd.DataFrame(rows, columns=["condition", "workload", "a", "b", "mean_a", "mean_b", "n_a", "n_b",
                                       "diff_pct", "p", "verdict", "significant"])
