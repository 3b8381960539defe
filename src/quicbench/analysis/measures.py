"""Sections of measures that only some runs have, declared as data and computed one way:
head-of-line blocking, competing traffic, session resumption and 0-RTT, NAT rebinding.

A `Section` names its measures (columns of the row schema), says which trials it covers and
which cells it compares: protocols within a condition and workload (h3 against h2, ...), or
workloads within a condition and protocol (a resumed session against a full handshake). For each
cell (condition x workload x protocol) it gives each measure's value with the 95 % interval of
quicbench.stats on the measure's scale (tables.metric_scale: the geometric mean with its log-t
interval for times; with zeros, the arithmetic mean with a bootstrap interval; counts their own) and, for counted
outcomes (a trial survived, the server saw the new port), k of n with Wilson's interval. Each
comparison uses the statistics module: the ratio of geometric means with its interval at the
verdict's level and the three
verdicts (different / equivalent / inconclusive); a measure that is 0 in some trials is tested by
Welch on the values (no ratio, no equivalence); a counted outcome by Fisher's exact test
(different or inconclusive). The p-values are Holm-corrected over the section's comparisons.
Adding a section is one declaration in SECTIONS; the report draws every section the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from quicbench import stats
from quicbench.analysis.load import RunData
from quicbench.analysis.tables import Method, center, metric_scale
from quicbench.model.workload_kinds import KINDS

NOT_TESTED = "0 in every trial"      # both samples all zero: nothing to test
SAME_OUTCOME = "the same outcome in every trial"   # a count: all or none in both

COMPARISON_COLUMNS = ["condition", "workload", "protocol", "metric", "a", "b", "mean_a", "mean_b", "n_a", "n_b",
                      "diff", "ratio", "ratio_low", "ratio_high", "test", "p", "verdict", "reps_to_decide",
                      "within"]


@dataclass(frozen=True)
class Count:
    """An outcome counted over a cell's trials: `hit` says, per row, whether it happened."""
    key: str
    label: str
    hit: Callable[[pd.DataFrame], pd.Series]


@dataclass(frozen=True)
class Section:
    key: str                                   # the HTML anchor
    title: str
    metrics: dict[str, str]                    # column -> short title, in display order
    text: str                                  # what the measures isolate, and what they do not
    select: Callable[[RunData], pd.DataFrame]  # the trials the section covers (final rows)
    pairing: str = "protocol"                  # "protocol": a/b are protocols; "workload": workloads
    protocol_pairs: tuple[tuple[str, str], ...] = (("h3", "h2"),)
    workload_pairs: Callable[[RunData, list[str]], list[tuple[str, str]]] | None = None
    workload_name: Callable[[RunData, str], str] | None = None   # a workload's short name in a pair
    compared: tuple[str, ...] | None = None    # the measures tested (default: all)
    counts: tuple[Count, ...] = ()

    @property
    def pair_title(self) -> str:
        if self.pairing == "workload":
            return "each mode against the other, per protocol"
        return ", ".join(f"{a} vs {b}" for a, b in self.protocol_pairs)


@dataclass
class MeasureData:
    section: Section
    cells: pd.DataFrame = field(default_factory=pd.DataFrame)
    comparisons: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COMPARISON_COLUMNS))
    metrics: list[str] = field(default_factory=list)     # the measures this run has values for
    n_tests: int = 0                                      # comparisons in the Holm family

    def __bool__(self) -> bool:
        return not self.cells.empty


def split_protocol(protocol: str) -> tuple[str, str]:
    """'h3@caddy~curl' -> ('h3', '@caddy~curl'): the protocol and what names its stack."""
    i = min((k for k in (protocol.find("@"), protocol.find("~")) if k >= 0), default=len(protocol))
    return protocol[:i], protocol[i:]


def protocol_pairs(protocols: list[str], pairs: tuple[tuple[str, str], ...] = (("h3", "h2"),)) -> list[tuple[str, str]]:
    """(a cell, b cell) pairs of the given protocols with the same server/client suffix."""
    out = []
    for a_base, b_base in pairs:
        for a in protocols:
            pa, sa = split_protocol(a)
            if pa != a_base:
                continue
            out += [(a, b) for b in protocols if split_protocol(b) == (b_base, sa)]
    return out


def compute(run: RunData, section: Section, method: Method = Method()) -> MeasureData:
    """The section's cells and comparisons; empty when the run has none of its trials."""
    rows = section.select(run)
    if rows.empty:
        return MeasureData(section)
    used = rows[rows["used"]]
    metrics = [m for m in section.metrics if m in used and used[m].notna().any()]
    if not metrics and not section.counts:
        return MeasureData(section)
    order = {c: i for i, c in enumerate(run.condition_order)}
    wl_order = {w: i for i, w in enumerate(run.workloads)}
    pr_order = {p: i for i, p in enumerate(run.protocols)}
    groups = {k: g for k, g in rows.groupby(["condition", "workload", "protocol"], sort=False)}
    keys = sorted(groups, key=lambda k: (order.get(k[0], 1e9), wl_order.get(k[1], 1e9), pr_order.get(k[2], 1e9)))
    # each counted outcome's k per cell, counted once for the cells and the comparisons
    hits = {(k, cnt.key): int(cnt.hit(g).fillna(False).astype(bool).sum()) for k, g in groups.items()
            for cnt in section.counts}
    cells = []
    for c, w, p in keys:
        g = groups[(c, w, p)]
        ok = g[g["used"]]
        row = {"condition": c, "workload": w, "protocol": p, "n": len(g)}
        for m in section.metrics:
            s = stats.summarize(ok[m] if m in ok else [], scale=metric_scale(m))
            row.update({f"{m}_mean": s.mean if s.n else math.nan, f"{m}_gmean": s.gmean, f"{m}_ci_low": s.ci_low,
                        f"{m}_ci_high": s.ci_high, f"{m}_n": s.n})
        for cnt in section.counts:
            k = hits[((c, w, p), cnt.key)]
            lo, hi = stats.wilson(k, len(g))
            row.update({f"{cnt.key}_k": k, f"{cnt.key}_low": lo, f"{cnt.key}_high": hi})
        cells.append(row)

    tested = [m for m in metrics if section.compared is None or m in section.compared]
    comps, results = [], []

    def add(c: str, w: str, p: str, a_key: tuple, b_key: tuple, a: str, b: str) -> None:
        ga, gb = groups[a_key], groups[b_key]
        base = {"condition": c, "workload": w, "protocol": p, "a": a, "b": b}
        for m in tested:
            xa, xb = stats.clean(ga[ga["used"]][m]), stats.clean(gb[gb["used"]][m])
            if not xa.size or not xb.size:
                continue
            ca, cb = center(m, xa), center(m, xb)      # the values shown: geometric means on the log scale
            row = {**base, "metric": m, "mean_a": ca, "mean_b": cb, "n_a": int(xa.size), "n_b": int(xb.size),
                   "diff": ca - cb}
            if not xa.any() and not xb.any() and xa.size >= method.min_n and xb.size >= method.min_n:
                row.update(test=None, p=None, verdict=NOT_TESTED, ratio=None, ratio_low=None, ratio_high=None,
                           reps_to_decide=None)
                comps.append(row)
                continue
            comps.append(row)
            results.append((row, method.compare(xa, xb)))
        for cnt in section.counts:
            ka, kb = hits[(a_key, cnt.key)], hits[(b_key, cnt.key)]
            na, nb = len(ga), len(gb)
            row = {**base, "metric": cnt.key, "mean_a": ka / na, "mean_b": kb / nb, "n_a": na, "n_b": nb,
                   "diff": ka / na - kb / nb}
            if ka in (0, na) and ka * nb == kb * na:      # every trial of both had the same outcome
                row.update(test=None, p=None, verdict=SAME_OUTCOME, ratio=None, ratio_low=None, ratio_high=None,
                           reps_to_decide=None)
                comps.append(row)
                continue
            comps.append(row)
            results.append((row, stats.compare_proportions(ka, na, kb, nb, method.alpha_per_look, method.min_n)))

    if section.pairing == "workload":
        pairs = section.workload_pairs(run, list(dict.fromkeys(w for _, w, _ in keys))) if section.workload_pairs else []
        for c, p in dict.fromkeys((c, p) for c, _, p in keys):
            for wa, wb in pairs:
                if (c, wa, p) in groups and (c, wb, p) in groups:
                    add(c, "", p, (c, wa, p), (c, wb, p), wa, wb)
    else:
        for c, w in dict.fromkeys((c, w) for c, w, _ in keys):
            for a, b in protocol_pairs(run.protocols, section.protocol_pairs):
                if (c, w, a) in groups and (c, w, b) in groups:
                    add(c, w, "", (c, w, a), (c, w, b), a, b)

    adjusted = stats.adjust([r for _, r in results], method.correction)
    for (row, _), r in zip(results, adjusted):
        row.update(test=r.test, p=r.p, verdict=r.verdict, ratio=r.ratio, ratio_low=r.ratio_low,
                   ratio_high=r.ratio_high, reps_to_decide=r.reps_to_decide, within=stats.margin_text(r))
    n_tests = sum(1 for _, r in results if r.verdict != stats.N_TOO_SMALL)
    return MeasureData(section, cells=pd.DataFrame(cells),
                       comparisons=pd.DataFrame(comps, columns=COMPARISON_COLUMNS), metrics=metrics, n_tests=n_tests)


# -- the sections ------------------------------------------------------------------------------------
def _several_objects(run: RunData) -> set[str]:
    info = run.workload_info
    return {w for w in info.index if info.at[w, "kind"] in KINDS and KINDS.get(info.at[w, "kind"]).several_objects(
        int(info.at[w, "count"]) if pd.notna(info.at[w, "count"]) else None)}


HOL_METRICS = {
    "all_streams_idle_ms": "all streams idle, ms",
    "body_stall_ms_p50": "longest body stall (median request), ms",
    "body_stall_ms_max": "longest body stall (any request), ms",
    "completion_spread_ms": "completion spread p90−p10, ms",
}

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


def _hol_rows(run: RunData) -> pd.DataFrame:
    ok = run.ok
    metrics = [m for m in HOL_METRICS if m in ok and ok[m].notna().any()]
    if not metrics or ok.empty:
        return ok.iloc[0:0]
    return ok[ok["workload"].isin(_several_objects(run)) & ok[metrics].notna().any(axis=1)]


HOL = Section("hol", "Head-of-line blocking", HOL_METRICS, HOL_TEXT, _hol_rows)


LOAD_METRICS = {
    "goodput_mbps": "goodput, Mbit/s",
    "fg_share_pct": "its share of the bottleneck, %",
    "jain_index": "Jain's index",
    "bg_mbps": "competing flows, Mbit/s",
    "load_owd_ms_p50": "one-way delay under load p50, ms",
    "load_owd_ms_p99": "one-way delay under load p99, ms",
}

LOAD_TEXT = (
    "The trial's own transfer against the condition's background flows (bulk flows started through the "
    "same bottleneck before the trial and kept during it), counted on the wire at the client as IP bytes "
    "over the trial's transfer: its share of everything delivered and Jain's fairness index over it and "
    "each background flow (1: equal rates; 1/2 with one competitor: one flow took all). A condition with "
    "`latency_probe` sends 100 probe packets a second from server to client during the transfer: their "
    "one-way delay, queueing included, is the delay under load that the transfer itself causes (compare "
    "it with the condition's one-way delay). Goodput is the trial's payload over its time; the share and "
    "the index are measured over the same window, so a transfer that finishes early has had its share only "
    "while it ran.")


def _load_rows(run: RunData) -> pd.DataFrame:
    t = run.trials
    have = pd.Series(False, index=t.index)
    for c in ("bg_flows", "load_owd_samples"):
        if c in t:
            have |= pd.to_numeric(t[c], errors="coerce").fillna(0) > 0
    return t[have & t["used"]]


LOAD = Section("load", "Competing traffic and delay under load", LOAD_METRICS, LOAD_TEXT, _load_rows,
               protocol_pairs=(("h3", "h1"), ("h3", "h2"), ("h2", "h1")),
               compared=("goodput_mbps", "fg_share_pct", "load_owd_ms_p50", "load_owd_ms_p99"))


RESUMPTION_METRICS = {
    "ttfb_ms": "first request's time to first byte, ms",
    "total_time_s": "all objects, s",
    "handshake_ms": "handshake (median connection), ms",
    "resumed_pct": "connections resumed, %",
    "early_data_pct": "0-RTT accepted, %",
}

RESUMPTION_TEXT = (
    "Each mode of the workload's `resumption` against the others, per protocol and condition: `none` (every "
    "connection a full handshake), `tickets` (every measured connection resumes a TLS 1.3 session ticket "
    "taken by an unmeasured priming request) and `0rtt` (as tickets, and HTTP/3 sends its request in 0-RTT "
    "data; HTTP/1.1 and HTTP/2 resume only, as Go's TLS has no client 0-RTT) and `0rtt-token` (as 0rtt, and "
    "HTTP/3 presents an address-validation token left by a priming connection: without one the "
    "server sends at most 3x what it received until the handshake completes, RFC 9000 section 8.1, which "
    "holds back a 0-RTT response larger than that, a few KB, for a round trip). 'Connections resumed' and "
    "'0-RTT accepted' are read from each connection's own TLS state (a trial whose connections did not all "
    "resume fails). With 0-RTT an HTTP/3 connection's handshake time is when it could send, at once, not "
    "when its handshake completed.")


def _resumption_of(run: RunData) -> dict[str, str]:
    return run.workload_info["resumption"].to_dict()


def _resumption_rows(run: RunData) -> pd.DataFrame:
    modes = _resumption_of(run)
    if not any(m != "none" for m in modes.values()):
        return run.ok.iloc[0:0]
    return run.ok[run.ok["workload"].map(lambda w: modes.get(w, "none")).notna()]


def _resumption_pairs(run: RunData, workloads: list[str]) -> list[tuple[str, str]]:
    """(mode workload, full-handshake workload) and (0rtt, tickets) pairs of otherwise equal workloads."""
    modes = _resumption_of(run)
    info = run.workload_info

    def same(a: str, b: str) -> bool:
        cols = ["kind", "size_bytes", "count", "parallel", "connection_policy"]
        return all(str(info.at[a, c]) == str(info.at[b, c]) for c in cols)

    out = []
    for a_mode, b_mode in (("tickets", "none"), ("0rtt", "none"), ("0rtt", "tickets"), ("0rtt-token", "none"),
                           ("0rtt-token", "0rtt")):
        for a in workloads:
            if modes.get(a) != a_mode:
                continue
            out += [(a, b) for b in workloads if modes.get(b) == b_mode and same(a, b)]
    return out


RESUMPTION = Section("resumption", "Session resumption and 0-RTT", RESUMPTION_METRICS, RESUMPTION_TEXT,
                     _resumption_rows, pairing="workload", workload_pairs=_resumption_pairs,
                     workload_name=lambda run, w: _resumption_of(run).get(w, "none"),
                     compared=("ttfb_ms", "total_time_s"))


REBIND_METRICS = {"rebind_stall_ms": "longest body gap after the rebinding, ms (transfers that survived)",
                  "total_time_s": "transfer time, s (transfers that survived)"}

REBIND_TEXT = (
    "The condition's `rebind_at_s`: that long into the transfer the client's source port, as the server "
    "sees it, changes and the old mapping is gone (a NAT rebinding). 'Survived' counts the trials whose "
    "transfer completed; 'server saw the new port' the trials in which the server's node received packets "
    "from the new port (an nftables counter there), 'survived on its one connection' those that completed "
    "without opening another (Go's HTTP/1.1 client retries a GET on a fresh connection after a reset: a "
    "survival of the application, not of the connection), 'rebound in time' those in which the rewrite was in "
    "place before the transfer ended. A TCP connection cannot follow a new port (the server answers the "
    "unknown 4-tuple with a reset, or nothing); a QUIC connection can, if the server validates the new path "
    "and moves to it (RFC 9000, section 9). Counted outcomes are compared with Fisher's exact test.")


def _rebind_rows(run: RunData) -> pd.DataFrame:
    t = run.trials
    if "rebind_at_s" not in t:
        return t.iloc[0:0]
    return t[pd.to_numeric(t["rebind_at_s"], errors="coerce").notna()]


REBINDING = Section("rebinding", "NAT rebinding", REBIND_METRICS, REBIND_TEXT, _rebind_rows,
                    protocol_pairs=(("h3", "h1"), ("h3", "h2")),
                    counts=(Count("survived", "survived", lambda g: g["status"] == "ok"),
                            Count("kept", "survived on its one connection",
                                  lambda g: (g["status"] == "ok") & (pd.to_numeric(g["connections"], errors="coerce") <= 1)),
                            Count("seen", "server saw the new port", lambda g: g["rebind_seen_by_server"] == True),  # noqa: E712
                            Count("rebound", "rebound in time", lambda g: g["rebound"] == True)),  # noqa: E712
                    compared=("rebind_stall_ms",))

SECTIONS: tuple[Section, ...] = (HOL, LOAD, RESUMPTION, REBINDING)


def measure_sections(run: RunData, method: Method = Method()) -> list[MeasureData]:
    """Every declared section this run has data for, in SECTIONS' order."""
    out = [compute(run, s, method) for s in SECTIONS]
    return [d for d in out if d]
