"""A paced UDP sequence probe: what a path does to packets, measured one way.

The sender sends `count` datagrams at `pps` packets per second (an absolute schedule, so a
late packet does not shift the ones after it), each with a sequence number, its send time
(CLOCK_REALTIME ns) and a CRC-32 of its bytes. The receiver takes the kernel's receive
timestamp (SO_TIMESTAMPNS) of every datagram. Sender and receiver sit in different network
namespaces of the same kernel, so they share the clock and one-way delay is receive time
minus send time.

`stats()` (pure) turns the records into loss, duplicates, reordering (RFC 4737: a packet that
arrives after one with a higher sequence number), corrupted-but-delivered datagrams, loss
bursts, one-way-delay quantiles and the receive rate in IP bits/s. `probe()` runs both ends
from one process: each socket is created inside its namespace (setns), then used from threads.
Only the standard library is imported, so it starts fast inside User-Mode Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

MAGIC = b"QBP1"
HEADER = struct.Struct("!4sIQI")      # magic, sequence, send time (ns), crc32 of the rest
IP_UDP_HEADERS = 28                   # IPv4 (20) + UDP (8): IP bytes = payload + 28
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
CLONE_NEWNET = 0x40000000


def make_packet(seq: int, send_ns: int, size: int) -> bytes:
    """A datagram of size bytes (UDP payload, at least the header) for seq sent at send_ns."""
    size = max(size, HEADER.size)
    pad = bytes((seq + i) & 0xFF for i in range(size - HEADER.size))
    crc = zlib.crc32(struct.pack("!IQ", seq, send_ns) + pad)
    return HEADER.pack(MAGIC, seq, send_ns, crc) + pad


def parse_packet(data: bytes) -> tuple[int, int, bool] | None:
    """(seq, send_ns, intact) of a probe datagram; None if it is not one (or its header is hit)."""
    if len(data) < HEADER.size:
        return None
    magic, seq, send_ns, crc = HEADER.unpack_from(data)
    if magic != MAGIC:
        return None
    intact = zlib.crc32(struct.pack("!IQ", seq, send_ns) + data[HEADER.size:]) == crc
    return seq, send_ns, intact


@dataclass(frozen=True)
class Record:
    seq: int
    send_ns: int
    recv_ns: int
    intact: bool = True


def quantile(xs: Sequence[float], q: float) -> float:
    """Quantile q in [0, 1] of sorted xs, linear between order statistics (numpy's default)."""
    if not xs:
        return math.nan
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def loss_bursts(received: set[int], sent: int) -> list[int]:
    """Lengths of the runs of consecutive sequence numbers in 0..sent-1 that never arrived."""
    runs, cur = [], 0
    for s in range(sent):
        if s in received:
            if cur:
                runs.append(cur)
            cur = 0
        else:
            cur += 1
    if cur:
        runs.append(cur)
    return runs


def stats(records: Sequence[Record], sent: int, size: int | None = None) -> dict:
    """Loss, duplicates, reordering, corruption, loss bursts, one-way delay and receive rate.

    records in arrival order; sent = datagrams sent (sequence numbers 0..sent-1); size = UDP
    payload bytes (for the rate in IP bits/s). Fractions are of `sent`, except reorder_frac
    (of the unique datagrams received). Corrupted datagrams count as received, not lost.
    """
    seen: set[int] = set()
    dup = reordered = corrupted = 0
    highest = -1
    owd: list[float] = []
    for r in records:
        if not r.intact:
            corrupted += 1
        if r.seq in seen:
            dup += 1
            continue
        seen.add(r.seq)
        if r.seq < highest:
            reordered += 1
        highest = max(highest, r.seq)
        if r.intact:
            owd.append((r.recv_ns - r.send_ns) / 1e6)
    unique = len(seen)
    owd.sort()
    n = len(owd)
    mean = sum(owd) / n if n else math.nan
    var = sum((x - mean) ** 2 for x in owd) / (n - 1) if n > 1 else math.nan
    std = math.sqrt(var) if n > 1 else math.nan
    skew = (sum((x - mean) ** 3 for x in owd) / n / std ** 3) if n > 2 and std > 0 else math.nan
    bursts = loss_bursts(seen, sent)
    out = {
        "sent": sent, "received": len(records), "unique": unique,
        "lost": sent - unique, "loss_frac": (sent - unique) / sent if sent else math.nan,
        "duplicates": dup, "dup_frac": dup / sent if sent else math.nan,
        "reordered": reordered, "reorder_frac": reordered / unique if unique else math.nan,
        "corrupted": corrupted, "corrupt_frac": corrupted / sent if sent else math.nan,
        "loss_bursts": len(bursts), "loss_burst_mean": sum(bursts) / len(bursts) if bursts else 0.0,
        "owd_ms": {"min": owd[0] if owd else math.nan, "max": owd[-1] if owd else math.nan,
                   "mean": mean, "std": std, "skew": skew,
                   **{f"p{q}": quantile(owd, q / 100) for q in (1, 5, 10, 25, 50, 75, 90, 95, 99)}},
    }
    if size is not None and len(records) >= 2:
        span = (records[-1].recv_ns - records[0].recv_ns) / 1e9
        ip_bytes = (len(records) - 1) * (size + IP_UDP_HEADERS)
        out["rx_ip_mbps"] = ip_bytes * 8 / span / 1e6 if span > 0 else math.nan
    return out


# ------------------------------------------------------------------------------ sockets
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """Run the body with this thread in network namespace name (/run/netns/NAME); None: stay."""
    if name is None:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
        try:
            yield
        finally:
            _libc.setns(own, CLONE_NEWNET)
    finally:
        os.close(target)
        os.close(own)


def udp_socket(netns: str | None, bind: tuple[str, int] | None = None) -> socket.socket:
    """A UDP socket that lives in netns (it stays there whatever thread uses it)."""
    with in_netns(netns):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        if bind:
            s.bind(bind)
    return s


def receive(sock: socket.socket, stop: threading.Event, out: list[Record], idle_s: float = 0.5) -> None:
    """Collect probe datagrams with their kernel receive time until stop is set and the
    socket has been idle for idle_s."""
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(idle_s)
    while True:
        try:
            data, anc, _flags, _addr = sock.recvmsg(65535, 64)
        except (socket.timeout, TimeoutError):
            if stop.is_set():
                return
            continue
        recv_ns = None
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", cdata[:16])
                recv_ns = sec * 1_000_000_000 + nsec
        if recv_ns is None:
            recv_ns = time.time_ns()
        p = parse_packet(data)
        if p is not None:
            out.append(Record(p[0], p[1], recv_ns, p[2]))


def send(sock: socket.socket, dst: tuple[str, int], count: int, pps: float, size: int) -> float:
    """Send count probe datagrams at pps on an absolute schedule; return the achieved pps."""
    interval = 1e9 / pps
    start = time.monotonic_ns()
    for seq in range(count):
        due = start + seq * interval
        while True:
            wait = due - time.monotonic_ns()
            if wait <= 0:
                break
            time.sleep(wait / 1e9 if wait > 2e6 else wait / 2e9)
        try:
            sock.sendto(make_packet(seq, time.time_ns(), size), dst)
        except OSError:   # ENOBUFS under a flood: the datagram is lost at the sender, counted as lost
            pass
    elapsed = (time.monotonic_ns() - start) / 1e9
    return count / elapsed if elapsed > 0 else math.inf


def probe(src_ns: str | None, dst_ns: str | None, dst_ip: str, count: int = 1000, pps: float = 500,
          size: int = 64, port: int = 47000, drain_s: float = 1.0, src_ip: str | None = None,
          samples: bool = False) -> dict:
    """Send count datagrams from namespace src_ns to dst_ip:port in dst_ns and measure them;
    samples: also return every intact datagram's one-way delay (ms, arrival order)."""
    rx = udp_socket(dst_ns, (dst_ip, port))
    tx = udp_socket(src_ns, (src_ip, 0) if src_ip else None)
    records: list[Record] = []
    stop = threading.Event()
    t = threading.Thread(target=receive, args=(rx, stop, records, min(drain_s, 0.5)), daemon=True)
    t.start()
    try:
        achieved = send(tx, (dst_ip, port), count, pps, size)
        time.sleep(drain_s)
    finally:
        stop.set()
        t.join(10)
        tx.close()
        rx.close()
    out = stats(records, count, size)
    out.update({"pps": pps, "achieved_pps": achieved, "size": size})
    if samples:
        out["owd_samples_ms"] = owd_samples(records)
    return out


def owd_samples(records: Sequence[Record]) -> list[float]:
    """One-way delay (ms, µs resolution) of the first intact copy of each datagram."""
    seen: set[int] = set()
    out = []
    for r in records:
        if r.seq in seen or not r.intact:
            continue
        seen.add(r.seq)
        out.append(round((r.recv_ns - r.send_ns) / 1e6, 3))
    return out
