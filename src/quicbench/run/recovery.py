"""Loss recovery, counted per trial: how many packets the sender declared lost, why, and how
many of those were not lost at all (spurious). The mechanism behind "h3 collapses under
jitter" (quic-go declares reordered packets lost; Linux TCP adapts) is measured here, not
asserted.

TCP: the server node's kernel counters (/proc/net/netstat and /proc/net/snmp, per network
namespace) read before and after the transfer. The server is the sender of a download; in a
lab's namespace nothing else sends TCP during a trial (background TCP flows do: their trials
get no TCP counts).

QUIC: the server's qlog (Caddy 2.9+ writes one per connection when QLOGDIR is set, ngtcp2 and
``quinn`` with ``--qlog-dir``: the plan's ``qlog = true``). A packet declared lost
(``recovery:packet_lost``, with its trigger: reordering threshold, time threshold) and later
acknowledged by the peer was a spurious loss. quic-go's qlog (0.3 and the newer ``quic:`` names)
gives the trigger; ngtcp2's (qlog 0.3) does not, so its losses are counted but not split by
trigger (those columns stay empty). Neither names its congestion controller (ngtcp2's debug log
does: servers/ngtcp2.py). quiche's qlog (``quiche`` server) has no packet_lost events at all,
only a running count of its losses in recovery_metrics_updated (``cf_lost_packets``): its losses
are counted from that, with no trigger (those columns stay empty) and spurious losses unknown.
qlog costs the server CPU: it is off unless asked for, and the CPU rule judges those trials with
it on.

Flow control: a sender that has data but no credit from the receiver's windows says so with a
DATA_BLOCKED (connection) or STREAM_DATA_BLOCKED (stream) frame; the server's qlog logs the frames
of each packet it sent, and the count of those two is the trial's ``quic_fc_blocked``. It is a
count of frames, not of time blocked (how often a stack repeats one while blocked is its own).
Some stacks never send them (quinn-proto 0.11, aioquic: the driver's ``quic_blocked_frames``) and
a qlog that logs no frames of the packets sent cannot say: both leave the column empty, not 0.

quinn's qlog (quinn-proto 0.11) says less than quic-go's, and the reader makes up for it from
what it does log:
- it logs no acknowledgements (its packet_received events carry no frames, and quinn-proto 0.11
  forgets a packet once declared lost), so whether a loss was spurious comes from the other
  end: a packet the client's qlog (``<odcid>_client.sqlog``, same original destination
  connection ID) shows it received was not lost. Without the client's qlog it is unknown (None).
- its packet_lost trigger is always ``reordering_threshold`` (quinn-proto 0.11.19 compares
  ``time_sent.saturating_duration_since(now)``, always zero, with the loss delay). The reader
  recomputes it with quinn's own rule: a packet whose age when declared lost had reached the loss
  delay, 9/8 x max(smoothed RTT, latest RTT) and at least 1 ms (from its
  recovery:metrics_updated events, which quinn writes in seconds), was lost by the time
  threshold, else by the packet threshold.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time
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


# the frames a sender sends when the receiver's flow control stops it (RFC 9000 19.12, 19.13)
BLOCKED_FRAMES = ("data_blocked", "stream_data_blocked")

# congestion states a sender leaves slow start for (qlog's congestion_state_updated); quic-go also
# logs application_limited, which pauses slow start without ending it
SLOW_START_EXITS = ("congestion_avoidance", "recovery")
# per connection, not summed over a trial's connections
PER_CONNECTION = ("ss_exit_cwnd", "ss_exit_without_loss")

# quinn-proto 0.11's loss delay: time_threshold x max(smoothed, latest RTT), at least the timer granularity
QUINN_TIME_THRESHOLD = 9 / 8
QUINN_GRANULARITY_MS = 1.0
# qlog times are f32 milliseconds: a packet declared lost by the loss timer is exactly the loss
# delay old, give or take the rounding
QUINN_TIME_SLACK_MS = 0.02


def qlog_title(rec: dict[str, Any]) -> str:
    """The qlog header's title (top level or the trace's), '' for an event."""
    trace = rec.get("trace") if isinstance(rec.get("trace"), dict) else {}
    return str(rec.get("title") or trace.get("title") or "")


def _space_pn(data: dict[str, Any]) -> tuple[str, int] | None:
    # aioquic's packet_lost names the packet at the top of its data ("type", "packet_number")
    h = data.get("header") or data
    pn, ptype = h.get("packet_number"), h.get("packet_type") or h.get("type")
    return (SPACE.get(ptype, ptype or "?"), pn) if isinstance(pn, int) else None


def received_packets(path: Path) -> set[tuple[str, int]]:
    """(space, packet number) of every packet an end's qlog says it received."""
    out = set()
    for ev in qlog_records(path):
        if ev.get("name") in ("transport:packet_received", "quic:packet_received"):
            k = _space_pn(ev.get("data") or {})
            if k:
                out.add(k)
    return out


def quic_counts(path: Path, peer: Path | None = None) -> dict[str, int | None]:
    """One connection's loss recovery as one end saw it: packets sent, declared lost (by trigger),
    declared lost but later acknowledged (spurious); packets received, and of those received
    after a higher packet number of their space (reordered on the way). ``peer``: the other
    end's qlog of the same connection, for a sender whose qlog has no acknowledgements (quinn);
    without it their spurious count is None (unknown)."""
    sent = received = out_of_order = acks_sent = 0
    highest: dict[str, int] = {}
    lost: dict[tuple[str, int], str] = {}
    acked: dict[str, list[tuple[int, int]]] = {}
    quinn = False
    # quinn: when each packet was sent, its RTT estimate, and its loss declarations waiting for
    # the RTT update that the same datagram brought (quinn writes metrics_updated after them)
    sent_at: dict[tuple[str, int], float] = {}
    rtt = {"smoothed_rtt": 0.0, "latest_rtt": 0.0}
    pending: list[tuple[tuple[str, int], float]] = []
    # slow start's end: the window when the sender first left it, and whether it had declared a
    # packet lost by then (no: a delay-based exit, HyStart in quic-go)
    cwnd: int | None = None
    ss_exit: tuple[int | None, bool] | None = None
    # quiche logs no packet_lost events, only its running count (recovery_metrics_updated's
    # cf_lost_packets.total): losses counted, with no packet numbers and no trigger
    cf_lost: int | None = None
    # flow control: BLOCKED frames sent, and whether the qlog logs the frames of what it sent at all
    blocked_sent = 0
    frames_sent_logged = False

    def settle() -> None:
        delay = max(QUINN_TIME_THRESHOLD * max(rtt["smoothed_rtt"], rtt["latest_rtt"]) * 1000, QUINN_GRANULARITY_MS)
        for key, at in pending:
            age = at - sent_at.get(key, at)
            lost[key] = "time_threshold" if age >= delay - QUINN_TIME_SLACK_MS else "reordering_threshold"
        pending.clear()

    for ev in qlog_records(path):
        name, data = ev.get("name"), ev.get("data") or {}
        if name is None:
            quinn = quinn or "quinn-proto 0.11." in qlog_title(ev)
            continue
        t = ev.get("time")
        if quinn and pending and (name in ("recovery:metrics_updated", "quic:recovery_metrics_updated")
                                  or t != pending[-1][1]):
            for k in rtt:
                if isinstance(data.get(k), (int, float)) and name.endswith("metrics_updated"):
                    rtt[k] = float(data[k])
            settle()
        if name in ("transport:packet_sent", "quic:packet_sent"):
            sent += 1
            frames = data.get("frames") or ()
            frames_sent_logged = frames_sent_logged or bool(frames)
            acks_sent += any(f.get("frame_type") == "ack" for f in frames)
            blocked_sent += sum(1 for f in frames if f.get("frame_type") in BLOCKED_FRAMES)
            k = _space_pn(data)
            if quinn and k and isinstance(t, (int, float)):
                sent_at[k] = float(t)
        elif name in ("recovery:packet_lost", "quic:packet_lost"):
            k = _space_pn(data)
            if k and quinn and isinstance(t, (int, float)):
                pending.append((k, float(t)))
            elif k:
                lost[k] = str(data.get("trigger") or "unknown")
        elif name in ("recovery:metrics_updated", "quic:recovery_metrics_updated"):
            if isinstance(data.get("congestion_window"), (int, float)):
                cwnd = int(data["congestion_window"])
            if isinstance(data.get("cf_lost_packets"), dict) and isinstance(data["cf_lost_packets"].get("total"), int):
                cf_lost = data["cf_lost_packets"]["total"]
            if quinn:
                for k in rtt:
                    if isinstance(data.get(k), (int, float)):
                        rtt[k] = float(data[k])
        elif name in ("recovery:congestion_state_updated", "quic:congestion_state_updated"):
            if ss_exit is None and data.get("new") in SLOW_START_EXITS:
                ss_exit = (cwnd, bool(lost or pending or cf_lost))
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
    settle()
    # a connection that sent nothing (a stray Initial answered by no packet) was blocked 0 times
    blocked = blocked_sent if frames_sent_logged or not sent else None
    # what every qlog gives, whichever way it accounts for its losses
    counts = {"sent": sent, "received": received, "out_of_order": out_of_order, "acks_sent": acks_sent,
              "blocked_sent": blocked, "ss_exit_cwnd": ss_exit[0] if ss_exit else None,
              "ss_exit_without_loss": None if ss_exit is None else int(not ss_exit[1])}
    if not lost and cf_lost:
        # quiche: how many, not which: neither the trigger nor whether they were spurious is known
        return {**counts, "lost": cf_lost, "reordering": 0, "time": 0, "untriggered": cf_lost, "spurious": None}
    spurious: int | None
    if quinn:
        got = received_packets(peer) if peer is not None and peer.is_file() else None
        spurious = None if got is None else sum(1 for k in lost if k in got)
    else:
        spurious = sum(1 for (space, pn) in lost if any(lo <= pn <= hi for lo, hi in acked.get(space, ())))
    triggers = list(lost.values())
    return {**counts, "lost": len(lost), "reordering": triggers.count("reordering_threshold"),
            "time": triggers.count("time_threshold"), "untriggered": triggers.count("unknown"),
            "spurious": spurious}


def _sum_counts(files: list[Path], peers: dict[Path, Path] | None = None) -> dict[str, Any]:
    """Counts summed over connections; a count unknown for one of them is unknown (None). The
    per-connection measures (PER_CONNECTION) are lists, one value per connection that has it."""
    total: dict[str, Any] = {k: [] for k in PER_CONNECTION}
    for f in files:
        for k, v in quic_counts(f, (peers or {}).get(f)).items():
            if k in PER_CONNECTION:
                if v is not None:
                    total[k].append(v)
                continue
            prev = total.get(k, 0)
            total[k] = None if v is None or prev is None else prev + v
    return total


def quic_columns(files: list[Path], client_qlog_dir: Path | None = None,
                 blocked_frames: bool = True) -> dict[str, Any]:
    """The trial's QUIC loss-recovery and flow-control columns, summed over its connections' server
    qlogs. The client's qlogs (client_qlog_dir) tell a sender that logs no acknowledgements which of
    its losses were spurious, matched by file name (``<odcid>_server`` / ``<odcid>_client``).
    blocked_frames: the sender's stack sends DATA_BLOCKED / STREAM_DATA_BLOCKED frames (else its
    count says nothing: empty)."""
    if not files:
        return {}
    peers = {}
    if client_qlog_dir is not None:
        for f in files:
            peer = client_qlog_dir / f.name.replace("_server.", "_client.")
            if peer != f and peer.is_file():
                peers[f] = peer
    t = _sum_counts(files, peers)
    # a sender whose qlog gives no trigger (ngtcp2) has no split by trigger: empty, not 0
    split = t["untriggered"] == 0
    return {"quic_packets_sent": t["sent"], "quic_lost": t["lost"],
            "quic_lost_reordering": t["reordering"] if split else None,
            "quic_lost_time": t["time"] if split else None, "quic_lost_spurious": t["spurious"],
            "quic_qlog_connections": len(files),
            "quic_fc_blocked": t.get("blocked_sent") if blocked_frames else None,
            "quic_ss_exit_cwnd": int(statistics.median(t["ss_exit_cwnd"])) if t["ss_exit_cwnd"] else None,
            "quic_ss_exit_without_loss": sum(t["ss_exit_without_loss"]) if t["ss_exit_without_loss"] else None}


def quic_client_columns(qlog_dir: Path) -> dict[str, Any]:
    """The client's side, from its qlogs (qb-load writes one per connection into the trial's
    qlog/ with qlog = true): what it received and how much arrived out of order, how often it
    acknowledged (packets received per packet it sent with an ACK frame: a receiver's ACK
    frequency shapes its sender), and its own (few: requests and acknowledgements) loss
    declarations."""
    files = sorted(qlog_dir.glob("*.sqlog")) + sorted(qlog_dir.glob("*.qlog")) if qlog_dir.is_dir() else []
    if not files:
        return {}
    t = _sum_counts(files)
    return {"quic_client_received": t["received"], "quic_client_out_of_order": t["out_of_order"],
            "quic_client_lost": t["lost"], "quic_client_lost_spurious": t["spurious"],
            "quic_client_acks_sent": t["acks_sent"],
            "quic_client_ack_ratio": t["received"] / t["acks_sent"] if t["acks_sent"] else None}


# A server still writing a connection's qlog may name it <name>.part and rename it when the
# connection has closed (quinn's does): the trial waits for that, this long at most (a client
# whose CONNECTION_CLOSE was lost leaves the server waiting for its idle timeout).
QLOG_OPEN_SUFFIX = ".part"
QLOG_SETTLE_S = 2.0


def take_server_qlogs(qlog_dir: Path | None, trial_dir: Path, settle_s: float = QLOG_SETTLE_S) -> list[Path]:
    """Move the server's qlogs of this trial (every file in its qlog directory: the previous
    trial took its own) into trial_dir/qlog-server, once the server has closed them (no
    ``.part`` left, settle_s at most); a file still open keeps being written there."""
    if qlog_dir is None or not qlog_dir.is_dir():
        return []

    def still_open() -> bool:
        return any(p.name.endswith(QLOG_OPEN_SUFFIX) for p in qlog_dir.iterdir())
    deadline = time.monotonic() + settle_s
    while still_open() and time.monotonic() < deadline:
        time.sleep(0.01)
    files = sorted(p for p in qlog_dir.iterdir()
                   if Path(p.name.removesuffix(QLOG_OPEN_SUFFIX)).suffix in (".sqlog", ".qlog"))
    if not files:
        return []
    dest = trial_dir / "qlog-server"
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for p in files:
        target = dest / p.name.removesuffix(QLOG_OPEN_SUFFIX)
        shutil.move(str(p), target)
        out.append(target)
    return out
