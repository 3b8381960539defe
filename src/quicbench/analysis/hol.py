"""Head-of-line blocking per protocol (issue 28.2): how long objects stood still, per cell, and
HTTP/3 against HTTP/2 on each measure, for object and page workloads.

The trials' measures come from the client's per-request records (run/metrics.py):
``all_streams_idle_ms`` (every stream in flight on a connection stood still together),
``body_stall_ms_p50`` / ``body_stall_ms_max`` (each body's longest gap after its first byte) and
``completion_spread_ms`` (p90 − p10 of the objects' completion times). What they isolate and
what they do not is said in HOL_TEXT, which both report formats print.

Per cell (condition x workload x protocol): the mean of each measure with the 95 % interval of
quicbench.stats (never below zero). Per condition x workload and measure: h3 against h2 (each
server or client of a sweep against its own), with the statistics module's comparison: the ratio
of geometric means h3/h2 with its 95 % CI and three verdicts (different / equivalent within the
margin / inconclusive), Holm-corrected over every comparison of this section. A measure that is
0 in some trials has no logarithm: then Welch's test on the values decides 'different' or
'inconclusive' and no ratio or equivalence is claimed; a measure that is 0 in every trial of
both protocols is reported as such, without a test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from quicbench import stats
from quicbench.analysis.load import RunData
from quicbench.analysis.tables import Method

# the measures, in the order the report shows them: column -> short title
HOL_METRICS = {
    "all_streams_idle_ms": "all streams idle, ms",
    "body_stall_ms_p50": "longest body stall (median request), ms",
    "body_stall_ms_max": "longest body stall (any request), ms",
    "completion_spread_ms": "completion spread p90−p10, ms",
}
PAIRS = (("h3", "h2"),)
NOT_TESTED = "0 in every trial"      # both samples all zero: nothing to test

CELL_COLUMNS = ["condition", "workload", "protocol", "n"] + [
    f"{m}_{s}" for m in HOL_METRICS for s in ("mean", "ci_low", "ci_high", "n")]
COMPARISON_COLUMNS = ["condition", "workload", "metric", "a", "b", "mean_a", "mean_b", "n_a", "n_b", "diff",
                      "ratio", "ratio_low", "ratio_high", "test", "p", "verdict", "reps_to_decide"]

HOL_TEXT = (
    "What these measures isolate, and what they do not. Under loss, TCP delivers nothing after a "
    "missing segment until its retransmission arrives, so every HTTP/2 stream of the connection "
    "waits for it (head-of-line blocking); QUIC delivers each stream's data as it comes, so a loss "
    "holds only the streams whose data it carried. 'All streams idle' is the time every request in "
    "flight on one connection (at least two) stood still together, in gaps of at least half the base "
    "RTT: HOL blocking shows there, but so does a sender that waits for acknowledgements (a small "
    "congestion window after a loss, slow start) — that idles every stream of either protocol, so "
    "the measure compares protocols under one condition and is not HOL blocking alone (that needs the "
    "transport's own reassembly times: TCP from a capture, QUIC from qlog). 'Longest body stall' is, "
    "per request, the longest gap between two deliveries of its body after its first byte, for any "
    "reason (loss, HOL, the server's stream scheduling, flow control). 'Completion spread' is the "
    "p90 − p10 of the objects' completion times (last byte) in a trial (a page: its subresources, "
    "the document excluded); when a loss delays only the streams it hit (QUIC), the spread can widen "
    "while the others finish early, and when it holds every stream (TCP) they finish later together: "
    "read it with the trial's goodput or load time, and mind that it also reflects the server's stream "
    "scheduling and, for HTTP/1.1, the number of connections. Page loads time their deliveries as "
    "Chromium hands data on (DevTools' Network.dataReceived, in chunks), object downloads as qb-load reads "
    "them: compare protocols within one client, not pages with objects.")


@dataclass
class HolData:
    cells: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CELL_COLUMNS))
    comparisons: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COMPARISON_COLUMNS))
    metrics: list[str] = field(default_factory=list)     # the measures this run has values for
    n_tests: int = 0                                      # comparisons in the Holm family

    def __bool__(self) -> bool:
        return not self.cells.empty


def _split(protocol: str) -> tuple[str, str]:
    """'h3@caddy~curl' -> ('h3', '@caddy~curl'): the protocol and what names its stack."""
    i = min((k for k in (protocol.find("@"), protocol.find("~")) if k >= 0), default=len(protocol))
    return protocol[:i], protocol[i:]


def protocol_pairs(protocols: list[str]) -> list[tuple[str, str]]:
    """(h3 cell, h2 cell) pairs with the same server/client suffix."""
    out = []
    for a_base, b_base in PAIRS:
        for a in protocols:
            pa, sa = _split(a)
            if pa != a_base:
                continue
            out += [(a, b) for b in protocols if _split(b) == (b_base, sa)]
    return out


def head_of_line(run: RunData, method: Method = Method()) -> HolData:
    """The section's data: workloads of several objects (a page, or two objects or more); empty
    when no successful trial of such a workload has a HOL measure."""
    ok = run.ok
    metrics = [m for m in HOL_METRICS if m in ok and ok[m].notna().any()]
    if not metrics or ok.empty:
        return HolData()
    # several objects that can wait for one another: a page, or objects workloads of two or more
    info = run.workload_info
    several = {w for w in info.index if info.at[w, "kind"] == "page"
               or (info.at[w, "kind"] == "objects" and pd.notna(info.at[w, "count"]) and info.at[w, "count"] >= 2)}
    ok = ok[ok["workload"].isin(several) & ok[metrics].notna().any(axis=1)]
    if ok.empty:
        return HolData()
    order = {c: i for i, c in enumerate(run.condition_order)}
    wl_order = {w: i for i, w in enumerate(run.workloads)}
    pr_order = {p: i for i, p in enumerate(run.protocols)}
    groups = {k: g for k, g in ok.groupby(["condition", "workload", "protocol"], sort=False)}
    keys = sorted(groups, key=lambda k: (order.get(k[0], 1e9), wl_order.get(k[1], 1e9), pr_order.get(k[2], 1e9)))
    cells = []
    for c, w, p in keys:
        g = groups[(c, w, p)]
        row = {"condition": c, "workload": w, "protocol": p, "n": len(g)}
        for m in HOL_METRICS:
            s = stats.summarize(g[m] if m in g else [], positive=True)
            row.update({f"{m}_mean": s.mean if s.n else math.nan, f"{m}_ci_low": s.ci_low,
                        f"{m}_ci_high": s.ci_high, f"{m}_n": s.n})
        cells.append(row)
    comps, results = [], []
    for c, w in dict.fromkeys((c, w) for c, w, _ in keys):
        for a, b in protocol_pairs(run.protocols):
            if (c, w, a) not in groups or (c, w, b) not in groups:
                continue
            for m in metrics:
                xa, xb = stats.clean(groups[(c, w, a)][m]), stats.clean(groups[(c, w, b)][m])
                if not xa.size or not xb.size:
                    continue
                row = {"condition": c, "workload": w, "metric": m, "a": a, "b": b, "mean_a": float(xa.mean()),
                       "mean_b": float(xb.mean()), "n_a": int(xa.size), "n_b": int(xb.size),
                       "diff": float(xa.mean() - xb.mean())}
                if not xa.any() and not xb.any() and xa.size >= method.min_n and xb.size >= method.min_n:
                    row.update(test=None, p=None, verdict=NOT_TESTED, ratio=None, ratio_low=None, ratio_high=None,
                               reps_to_decide=None)
                    comps.append(row)
                    continue
                comps.append(row)
                results.append((row, method.compare(xa, xb)))
    adjusted = stats.adjust([r for _, r in results], method.correction)
    for (row, _), r in zip(results, adjusted):
        row.update(test=r.test, p=r.p, verdict=r.verdict, ratio=r.ratio, ratio_low=r.ratio_low,
                   ratio_high=r.ratio_high, reps_to_decide=r.reps_to_decide)
    n_tests = sum(1 for _, r in results if r.verdict != stats.N_TOO_SMALL)
    return HolData(cells=pd.DataFrame(cells, columns=CELL_COLUMNS),
                   comparisons=pd.DataFrame(comps, columns=COMPARISON_COLUMNS), metrics=metrics, n_tests=n_tests)

