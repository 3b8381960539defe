"""Loss recovery per cell: what the sender declared lost and how much of it was not lost at all
(the trials' counts from run/recovery.py), so the mechanism behind a result is shown by counts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quicbench.analysis.load import RunData

RECOVERY_COLUMNS = ["condition", "workload", "protocol", "n", "sent", "declared_lost_pct", "spurious_of_lost_pct",
                    "by_reordering_pct", "out_of_order_pct", "tcp_reorder_events", "tcp_undos",
                    "ss_exit_cwnd_kb", "ss_exit_early", "n_ss_exit", "bdp_kb"]


def _pct(num: pd.Series, den: pd.Series) -> float | None:
    n, d = num.sum(), den.sum()
    return float(100 * n / d) if d > 0 else None


def _known_pct(g: pd.DataFrame, num: str, den: str) -> float | None:
    """_pct over the trials whose numerator is known (a quinn server's spurious losses are known
    only with the client's qlog: run/recovery.py), None if none is."""
    known = g[num].notna()
    return _pct(g.loc[known, num], g.loc[known, den]) if known.any() else None


def bdp_bytes(run: RunData, condition: str) -> float | None:
    """The condition's bandwidth-delay product: its bottleneck rate times its base RTT, bytes."""
    if condition not in run.conditions.index:
        return None
    rate, rtt = run.conditions.at[condition, "rate_mbit"], run.conditions.at[condition, "rtt_ms"]
    return None if pd.isna(rate) or pd.isna(rtt) or not rtt else float(rate) * 1e6 / 8 * float(rtt) / 1000


NO_SLOW_START_EXITS = {"ss_exit_cwnd_kb": None, "ss_exit_early": None, "n_ss_exit": None, "bdp_kb": None}


def slow_start_exits(q: pd.DataFrame, bdp: float | None) -> dict[str, float | int | None]:
    """The window the server left slow start with (median, KB), and in how many trials it left it
    without a loss below the path's BDP (a delay-based exit that leaves the window to grow a packet
    per round trip), of the trials whose qlog logs its congestion state."""
    if "quic_ss_exit_cwnd" not in q or not q["quic_ss_exit_cwnd"].notna().any():
        return NO_SLOW_START_EXITS
    known = q[q["quic_ss_exit_cwnd"].notna()]
    cwnd = known["quic_ss_exit_cwnd"].astype(float)
    early = None if bdp is None else int(((cwnd < bdp) & (known["quic_ss_exit_without_loss"].fillna(0) > 0)).sum())
    return {"ss_exit_cwnd_kb": float(cwnd.median()) / 1000, "ss_exit_early": early, "n_ss_exit": len(known),
            "bdp_kb": None if bdp is None else bdp / 1000}


def loss_recovery(run: RunData) -> pd.DataFrame:
    """Per condition x workload x protocol, over the successful trials with counts: packets
    (QUIC) or segments (TCP) the server sent; the share it declared lost (QUIC) or retransmitted
    (TCP); the share of those that were spurious (QUIC: acknowledged later; TCP: reported as
    duplicates by DSACK); QUIC's share declared by the packet-reordering threshold; TCP's
    reordering detections and undone recoveries per trial (median); QUIC's slow-start exits
    (slow_start_exits)."""
    ok = run.ok
    has_quic = ok["quic_packets_sent"].notna() if "quic_packets_sent" in ok else pd.Series(False, index=ok.index)
    has_tcp = ok["tcp_out_segs"].notna() if "tcp_out_segs" in ok else pd.Series(False, index=ok.index)
    rows = []
    for (c, w, p), g in ok[has_quic | has_tcp].groupby(["condition", "workload", "protocol"], sort=False):
        q, t = g[g["quic_packets_sent"].notna()], g[g["tcp_out_segs"].notna()]
        if len(q):
            rows.append({"condition": c, "workload": w, "protocol": p, "n": len(q),
                         "sent": float(q["quic_packets_sent"].median()),
                         "declared_lost_pct": _pct(q["quic_lost"], q["quic_packets_sent"]),
                         "spurious_of_lost_pct": _known_pct(q, "quic_lost_spurious", "quic_lost"),
                         # ngtcp2's qlog names no trigger: unknown, not 0
                         "by_reordering_pct": _known_pct(q, "quic_lost_reordering", "quic_lost"),
                         "out_of_order_pct": _pct(q["quic_client_out_of_order"], q["quic_client_received"])
                         if q["quic_client_received"].notna().any() else None,
                         "tcp_reorder_events": None, "tcp_undos": None, **slow_start_exits(q, bdp_bytes(run, c))})
        elif len(t):
            rows.append({"condition": c, "workload": w, "protocol": p, "n": len(t),
                         "sent": float(t["tcp_out_segs"].median()),
                         "declared_lost_pct": _pct(t["tcp_retrans_segs"], t["tcp_out_segs"]),
                         "spurious_of_lost_pct": _pct(t["tcp_dsack_segs"], t["tcp_retrans_segs"]),
                         "by_reordering_pct": None, "out_of_order_pct": None,
                         "tcp_reorder_events": float(np.median(t["tcp_reorder_events"].astype(float))),
                         "tcp_undos": float(np.median(t["tcp_loss_undos"].astype(float))),
                         **NO_SLOW_START_EXITS})
    out = pd.DataFrame(rows, columns=RECOVERY_COLUMNS)
    order = {c: i for i, c in enumerate(run.condition_order)}
    return out.sort_values(["condition", "workload", "protocol"], key=lambda s: s.map(order) if s.name == "condition"
                           else s, kind="stable").reset_index(drop=True)
