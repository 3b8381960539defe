"""The wire view of a trial, from its client-side capture (parsed with dpkt).

- bytes and packets on the wire in each direction (frame lengths, Ethernet header included);
- overhead % = (wire bytes both ways - application payload bytes) / payload bytes;
- TCP retransmissions (a data segment whose sequence range was already sent);
- QUIC: UDP packet counts;
- wire goodput: payload bits over the time from the first to the last server data packet
  (as the QUIC interop runner computes it), beside the application-level goodput;
- a throughput time series of server->client wire bytes in fixed bins, and its steadiness:
  the coefficient of variation of those bins over the middle of the transfer (CVart's
  "stability", seed 001 section 3.6, read from its time-series plots).
"""

from __future__ import annotations

import json
import socket
import statistics
from pathlib import Path
from typing import Any

import dpkt

BIN_MS = 100
STEADY_TRIM = 0.1        # the share of the transfer's bins left out at each end (slow start, the tail)
STEADY_MIN_BINS = 5      # fewer bins in the middle: no coefficient of variation


def analyze_pcap(pcap: Path, server_ip: str, payload_bytes: int | None, bin_ms: int = BIN_MS) -> dict[str, Any]:
    server = socket.inet_aton(server_ip)
    down_b = up_b = down_p = up_p = 0
    tcp_seen: dict[tuple, set[int]] = {}
    retrans = 0
    udp_down = udp_up = 0
    first_data = last_data = None
    t0 = None
    bins: dict[int, int] = {}
    with open(pcap, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        for ts, buf in reader:
            try:
                eth = dpkt.ethernet.Ethernet(buf)
            except (dpkt.UnpackError, dpkt.NeedData):
                continue
            ip = eth.data
            if not isinstance(ip, dpkt.ip.IP):
                continue
            t0 = ts if t0 is None else t0
            down = ip.src == server
            l4 = ip.data
            data_len = 0
            if isinstance(l4, dpkt.tcp.TCP):
                data_len = ip.len - ip.hl * 4 - l4.off * 4
                if data_len > 0:
                    key = (ip.src, l4.sport, ip.dst, l4.dport)
                    seen = tcp_seen.setdefault(key, set())
                    if l4.seq in seen:
                        retrans += 1
                    seen.add(l4.seq)
            elif isinstance(l4, dpkt.udp.UDP):
                data_len = l4.ulen - 8
                if down:
                    udp_down += 1
                else:
                    udp_up += 1
            # Ethernet header + IP datagram: the frame on the wire (the capture keeps only
            # the first bytes, but the IP header carries the real length)
            frame_len = ip.len + 14
            if down:
                down_b += frame_len
                down_p += 1
                if data_len > 0:
                    first_data = ts if first_data is None else first_data
                    last_data = ts
                b = int((ts - t0) * 1000 // bin_ms)
                bins[b] = bins.get(b, 0) + frame_len
            else:
                up_b += frame_len
                up_p += 1
    out: dict[str, Any] = {"wire_bytes_down": down_b, "wire_bytes_up": up_b, "wire_packets_down": down_p,
                           "wire_packets_up": up_p, "tcp_retransmits": retrans,
                           "quic_packets_down": udp_down, "quic_packets_up": udp_up}
    if payload_bytes:
        out["overhead_pct"] = 100 * (down_b + up_b - payload_bytes) / payload_bytes
        if first_data is not None and last_data is not None and last_data > first_data:
            out["wire_goodput_mbps"] = payload_bytes * 8 / (last_data - first_data) / 1e6
    n = max(bins) + 1 if bins else 0
    series = [bins.get(i, 0) for i in range(n)]
    out["timeseries"] = {"bin_ms": bin_ms, "down_bytes": series}
    if first_data is not None and last_data is not None and t0 is not None:
        out["wire_throughput_cv_pct"] = steady_cv(series[int((first_data - t0) * 1000 // bin_ms):
                                                         int((last_data - t0) * 1000 // bin_ms) + 1])
    return out


def steady_cv(transfer_bins: list[int]) -> float | None:
    """Coefficient of variation (population sd / mean, %) of the bins from the first to the last
    data bin, without the first and last STEADY_TRIM of them, at least one each (slow start and
    the partial tail); None when fewer than STEADY_MIN_BINS remain."""
    cut = max(1, int(len(transfer_bins) * STEADY_TRIM))
    mid = transfer_bins[cut:len(transfer_bins) - cut]
    mean = statistics.fmean(mid) if len(mid) >= STEADY_MIN_BINS else 0.0
    return 100 * statistics.pstdev(mid, mean) / mean if mean > 0 else None


def write_timeseries(trial_dir: Path, ts: dict[str, Any]) -> Path:
    p = trial_dir / "timeseries.json"
    p.write_text(json.dumps(ts, separators=(",", ":")))
    return p
