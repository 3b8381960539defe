"""Link emulator benchmark (part of `make bench`): writes bench/results/linkem.json.

Measured in one run, in real labs, with iperf3 and ping:
- TCP goodput through linkem with 0 and 10 ms one-way delay vs plain kernel forwarding;
- CPU per forwarded packet (linkem's CPU time / packets it forwarded, both directions);
- RTT error p50/p99 at 10/50/100 ms one-way delay (ping RTT - configured RTT);
- TCP goodput / configured rate at 5, 40, 100 Mbit/s, for linkem and for kernel tbf.
Targets (issue "link emulator"): >= 1 Gbit/s with 10 ms; RTT p50 error <= 0.1 ms; goodput
>= 97 % of the rate; <= 1 us CPU per packet.
"""

from __future__ import annotations

import json
import secrets
import statistics
import time

from rich.console import Console
from rich.table import Table

from .calibrate import measure_iperf3
from .conditions import Condition
from .cpu import process_cpu_seconds
from .lab import LabSpec, make_lab
from .proc import run

IPERF_S = 5.0
# TCP payload per 1514-byte frame with timestamps (1448 B): the most goodput a link that
# serialises whole frames at its rate can carry, for linkem and tbf alike
TCP_CEILING = 1448 / 1514


def _lab(link: str):
    return make_lab(LabSpec(name=f"bl{secrets.token_hex(2)}", link=link))


def _cond(**kw) -> Condition:
    return Condition.model_validate({"name": "bench", **kw})


def _rtts(lab, count: int, interval: float) -> list[float]:
    """RTTs of ping's echoes in ms, timed from a tcpdump capture on the client interface
    (ping prints only three significant digits: 100 ms, not 100.012 ms)."""
    import tempfile
    from pathlib import Path

    import dpkt

    from .capture import Capture
    with tempfile.TemporaryDirectory(prefix="qb-bench-") as tmp:
        cap = Capture(lab, "client", "eth0", lab.address("server"), Path(tmp) / "ping.pcap")
        cap.start()
        try:
            run(lab.cmd("client", ["ping", "-n", "-q", "-c", str(count), "-i", str(interval), lab.address("server")]),
                check=False, timeout=count * interval + 60)
        finally:
            cap.stop()
        sent: dict[tuple[int, int], float] = {}
        rtts = []
        with open(cap.pcap, "rb") as f:
            for ts, buf in dpkt.pcap.Reader(f):
                ip = dpkt.ethernet.Ethernet(buf).data
                if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.icmp.ICMP):
                    continue
                icmp = ip.data
                echo = icmp.data
                key = (echo.id, echo.seq)
                if icmp.type == dpkt.icmp.ICMP_ECHO:
                    sent[key] = ts
                elif icmp.type == dpkt.icmp.ICMP_ECHOREPLY and key in sent:
                    rtts.append(1000 * (ts - sent[key]))
        return rtts


def _linkem_cpu_and_packets(lab) -> tuple[float, int]:
    pid = lab.state["linkem_pids"]["router"]
    st = lab.link.stats()["router"]
    return process_cpu_seconds(pid) or 0.0, st["up"]["forwarded"] + st["down"]["forwarded"]


def throughput() -> dict:
    out: dict = {}
    with _lab("plain") as lab:
        out["plain_mbps"] = measure_iperf3(lab, IPERF_S, reverse=False)["goodput_mbps"]
    with _lab("linkem") as lab:
        for delay in (0, 10):
            lab.link.apply(_cond(delay_ms=delay))
            cpu0, p0 = _linkem_cpu_and_packets(lab)
            res = measure_iperf3(lab, IPERF_S, reverse=False)
            cpu1, p1 = _linkem_cpu_and_packets(lab)
            out[f"linkem_{delay}ms_mbps"] = res["goodput_mbps"]
            out[f"linkem_{delay}ms_cpu_us_per_packet"] = 1e6 * (cpu1 - cpu0) / max(p1 - p0, 1)
            out[f"linkem_{delay}ms_packets"] = p1 - p0
    out["ratio_0ms_vs_plain"] = out["linkem_0ms_mbps"] / out["plain_mbps"]
    out["ratio_10ms_vs_plain"] = out["linkem_10ms_mbps"] / out["plain_mbps"]
    return out


def rtt_error() -> dict:
    out: dict = {}
    with _lab("linkem") as lab:
        base = statistics.median(_rtts(lab, 50, 0.01))          # the stack's own RTT, no emulation
        out["stack_rtt_ms"] = base
        for delay in (10, 50, 100):
            lab.link.apply(_cond(delay_ms=delay))
            rtts = _rtts(lab, 200, 0.01)
            errs = sorted(r - 2 * delay for r in rtts)
            q = statistics.quantiles(errs, n=100)
            out[f"{delay}ms"] = {"p50_error_ms": statistics.median(errs), "p99_error_ms": q[98],
                                 "p50_error_minus_stack_ms": statistics.median(errs) - base, "n": len(errs)}
    return out


def rate_accuracy() -> dict:
    out: dict = {"linkem": {}, "tbf": {}}
    with _lab("linkem") as lab:
        for rate in (5, 40, 100):
            lab.link.apply(_cond(rate_mbit=rate))
            gp = measure_iperf3(lab, IPERF_S)["goodput_mbps"]
            out["linkem"][str(rate)] = {"goodput_mbps": gp, "ratio": gp / rate}
    with _lab("plain") as lab:
        for rate in (5, 40, 100):
            burst = max(1600, int(rate * 1e6 / 8 / 250))          # 4 ms of bursts at the rate (>= 1 MTU)
            limit = max(3000, int(rate * 1e6 / 8 * 0.02))          # 20 ms of queue, as linkem's default
            for dev in ("to-client", "to-server"):
                run(lab.cmd("router", ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate}mbit",
                                       "burst", str(burst), "limit", str(limit)]))
            gp = measure_iperf3(lab, IPERF_S)["goodput_mbps"]
            out["tbf"][str(rate)] = {"goodput_mbps": gp, "ratio": gp / rate}
    return out


def main(console: Console | None = None) -> dict:
    from .bench import RESULTS
    console = console or Console()
    t0 = time.time()
    res = {"throughput": throughput(), "rtt_error": rtt_error(), "rate": rate_accuracy(),
           "iperf3_seconds": IPERF_S, "started": t0}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "linkem.json").write_text(json.dumps(res, indent=2))
    tp, rt, ra = res["throughput"], res["rtt_error"], res["rate"]
    t = Table("measure", "value", "target", title="linkem benchmark (iperf3 TCP, ping)")
    t.add_row("plain kernel forwarding", f"{tp['plain_mbps']:.0f} Mbit/s", "")
    for d in (0, 10):
        t.add_row(f"linkem, {d} ms one-way", f"{tp[f'linkem_{d}ms_mbps']:.0f} Mbit/s "
                  f"({100 * tp[f'ratio_{d}ms_vs_plain']:.0f} % of plain)", ">= 1000 Mbit/s" if d == 10 else "")
        t.add_row(f"CPU per packet, {d} ms", f"{tp[f'linkem_{d}ms_cpu_us_per_packet']:.2f} us", "<= 1 us")
    for d in (10, 50, 100):
        e = rt[f"{d}ms"]
        t.add_row(f"RTT error at {d} ms one-way", f"p50 {e['p50_error_ms']:+.3f} ms, p99 {e['p99_error_ms']:+.3f} ms "
                  f"(stack alone {rt['stack_rtt_ms']:.3f})", "p50 <= 0.1 ms")
    for rate in ("5", "40", "100"):
        t.add_row(f"goodput/rate at {rate} Mbit/s", f"linkem {100 * ra['linkem'][rate]['ratio']:.1f} %, "
                  f"tbf {100 * ra['tbf'][rate]['ratio']:.1f} % (ceiling {100 * TCP_CEILING:.2f} %)", ">= 97 %")
    console.print(t)
    return res


if __name__ == "__main__":
    main()
