"""Loss recovery, counted per trial: how many packets the sender declared lost, why, and how
many of those were not lost at all (spurious). The mechanism behind "h3 collapses under
jitter" (quic-go declares reordered packets lost; Linux TCP adapts) is measured here, not
asserted.

TCP: the server node's kernel counters (/proc/net/netstat and /proc/net/snmp, per network
namespace) read before and after the transfer. The server is the sender of a download; in a
lab's namespace nothing else sends TCP during a trial (background TCP flows do: their trials
get no TCP counts).

QUIC: the server's qlog (Caddy 2.9+ writes one per connection when QLOGDIR is set, ngtcp2 with
``--qlog-dir``: the plan's ``qlog = true``). A packet declared lost (``recovery:packet_lost``,
with its trigger: reordering threshold, time threshold) and later acknowledged by the peer was
a spurious loss. quic-go's qlog (0.3 and the newer ``quic:`` names) gives the trigger; ngtcp2's
(qlog 0.3) does not, so its losses are counted but not split by trigger (those columns stay
empty). Neither names its congestion controller (ngtcp2's debug log does: servers/ngtcp2.py).
qlog costs the server CPU: it is off unless asked for, and the CPU rule judges those trials
with it on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError

# TcpExt / Tcp counters, as Linux names them (Documentation/networking/snmp_counter.rst)
REORDER = ("TcpExt:TCPSACKReorder", "TcpExt:TCPTSReorder", "TcpExt:TCPRenoReorder")
UNDO = ("TcpExt:TCPFullUndo", "TcpExt:TCPPartialUndo", "TcpExt:TCPDSACKUndo", "TcpExt:TCPLossUndo")
# packet number spaces: 0-RTT and 1-RTT packets share the application space
SPACE = {"initial": "initial", "handshake": "handshake", "0RTT": "app", "1RTT": "app"}


def tcp_counters(lab: Any, node: str = "server") -> dict[str, int] | None:
    """The node's TCP counters ('TcpExt:TCPSACKReorder' -> n), None if they cannot be read."""
    try:
        cp = subprocess.run(lab.cmd(node, ["cat", "/proc/net/netstat", "/proc/net/snmp"]), capture_output=True,
                            text=True, timeout=10)
    except (QuicbenchError, OSError, subprocess.TimeoutExpired):
        return None
    return parse_counters(cp.stdout) if cp.returncode == 0 else None


def parse_counters(text: str) -> dict[str, int]:
    """/proc/net/netstat and /proc/net/snmp: pairs of lines 'Prefix: names...' / 'Prefix: values...'."""
    out: dict[str, int] = {}
    lines = [l.split() for l in text.splitlines() if ":" in l]
    for head, vals in zip(lines[::2], lines[1::2]):
        if not head or head[0] != vals[0]:
            continue
        prefix = head[0].rstrip(":")
        for name, v in zip(head[1:], vals[1:]):
            try:
                out[f"{prefix}:{name}"] = int(v)
            except ValueError:
                pass
    return out


def tcp_columns(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, Any]:
    """The trial's TCP loss-recovery columns from two readings of the sender's counters."""
    if not before or not after:
        return {}

    def d(*names: str) -> int:
        return sum(after.get(n, 0) - before.get(n, 0) for n in names)
    dsack = "TcpExt:TCPDSACKRecvSegs" if "TcpExt:TCPDSACKRecvSegs" in after else "TcpExt:TCPDSACKRecv"
    return {"tcp_out_segs": d("Tcp:OutSegs"), "tcp_retrans_segs": d("Tcp:RetransSegs"),
            "tcp_dsack_segs": d(dsack), "tcp_reorder_events": d(*REORDER), "tcp_loss_undos": d(*UNDO),
            "tcp_spurious_rtos": d("TcpExt:TCPSpuriousRTOs")}


# -- QUIC, from qlog --------------------------------------------------------------------------------
def qlog_records(path: Path):
    """The events of a JSON-SEQ qlog (.sqlog) or a JSON qlog; a torn last record is skipped."""
    data = path.read_bytes()
    if b"\x1e" in data[:1] or path.suffix == ".sqlog":
        for rec in data.split(b"\x1e"):
            rec = rec.strip()
            if rec:
                try:
                    yield json.loads(rec)
                except json.JSONDecodeError:
                    continue      # the writer was still at it when the trial ended
        return
    try:
        doc = json.loads(data)
    except json.JSONDecodeError:
        return
    for trace in doc.get("traces", []):
        yield from trace.get("events", [])


def quic_counts(path: Path) -> dict[str, int]:
    """One connection's loss recovery as one end saw it: packets sent, declared lost (by trigger),
    declared lost but later acknowledged (spurious); packets received, and of those received
    after a higher packet number of their space (reordered on the way)."""
    sent = received = out_of_order = 0
    highest: dict[str, int] = {}
    lost: dict[tuple[str, int], str] = {}
    acked: dict[str, list[tuple[int, int]]] = {}
    for ev in qlog_records(path):
        name, data = ev.get("name"), ev.get("data") or {}
        if name in ("transport:packet_sent", "quic:packet_sent"):
            sent += 1
        elif name in ("recovery:packet_lost", "quic:packet_lost"):
            h = data.get("header") or {}
            space = SPACE.get(h.get("packet_type"), h.get("packet_type") or "?")
            if isinstance(h.get("packet_number"), int):
                lost[(space, h["packet_number"])] = str(data.get("trigger") or "unknown")
        elif name in ("transport:packet_received", "quic:packet_received"):
            header = data.get("header") or {}
            space = SPACE.get(header.get("packet_type"), "?")
            pn = header.get("packet_number")
            received += 1
            if isinstance(pn, int):
                if pn < highest.get(space, -1):
                    out_of_order += 1
                highest[space] = max(highest.get(space, -1), pn)
            for f in data.get("frames") or ():
                if f.get("frame_type") == "ack":
                    for r in f.get("acked_ranges") or ():
                        if r:
                            acked.setdefault(space, []).append((int(r[0]), int(r[-1])))
    spurious = sum(1 for (space, pn) in lost if any(lo <= pn <= hi for lo, hi in acked.get(space, ())))
    triggers = list(lost.values())
    return {"sent": sent, "lost": len(lost), "reordering": triggers.count("reordering_threshold"),
            "time": triggers.count("time_threshold"), "untriggered": triggers.count("unknown"),
            "spurious": spurious, "received": received, "out_of_order": out_of_order}


def _sum_counts(files: list[Path]) -> dict[str, int]:
    total: dict[str, int] = {}
    for f in files:
        for k, v in quic_counts(f).items():
            total[k] = total.get(k, 0) + v
    return total


def quic_columns(files: list[Path]) -> dict[str, Any]:
    """The trial's QUIC loss-recovery columns, summed over its connections' server qlogs."""
    if not files:
        return {}
    t = _sum_counts(files)
    # a sender whose qlog gives no trigger (ngtcp2) has no split by trigger: empty, not 0
    split = t["untriggered"] == 0
    return {"quic_packets_sent": t["sent"], "quic_lost": t["lost"],
            "quic_lost_reordering": t["reordering"] if split else None,
            "quic_lost_time": t["time"] if split else None, "quic_lost_spurious": t["spurious"],
            "quic_qlog_connections": len(files)}


def quic_client_columns(qlog_dir: Path) -> dict[str, Any]:
    """The client's side, from its qlogs (qb-load writes one per connection into the trial's
    qlog/ with qlog = true): what it received and how much arrived out of order, and its own
    (few: requests and acknowledgements) loss declarations."""
    files = sorted(qlog_dir.glob("*.sqlog")) + sorted(qlog_dir.glob("*.qlog")) if qlog_dir.is_dir() else []
    if not files:
        return {}
    t = _sum_counts(files)
    return {"quic_client_received": t["received"], "quic_client_out_of_order": t["out_of_order"],
            "quic_client_lost": t["lost"], "quic_client_lost_spurious": t["spurious"]}


def take_server_qlogs(qlog_dir: Path | None, trial_dir: Path) -> list[Path]:
    """Move the server's qlogs of this trial (every file in its qlog directory: the previous
    trial took its own) into trial_dir/qlog-server; a file still open keeps being written there."""
    if qlog_dir is None or not qlog_dir.is_dir():
        return []
    files = sorted(p for p in qlog_dir.iterdir() if p.suffix in (".sqlog", ".qlog"))
    if not files:
        return []
    dest = trial_dir / "qlog-server"
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for p in files:
        target = dest / p.name
        shutil.move(str(p), target)
        out.append(target)
    return out
