"""Link emulator benchmark (part of `make bench`): writes bench/results/linkem.json.

Measured in one run, in real labs, with iperf3 and ping:
- TCP goodput through linkem with 0 and 10 ms one-way delay vs plain kernel forwarding;
- CPU per forwarded wire packet (linkem's CPU time / packets it forwarded, both directions);
- both with offloads off (every frame a wire packet) and on (GSO super-frames, cut by linkem);
- RTT error p50/p99 at 10/50/100 ms one-way delay (ping RTT - configured RTT);
- TCP goodput / configured rate at 5, 40, 100 Mbit/s, for linkem (with TCP timestamps, as Linux
  defaults, and without, as Windows defaults) and for kernel tbf.
- up to which download rate linkem keeps its schedule with both endpoints busy (real h1 and h3
  trials, key "schedule": bench_link_schedule.py).
Targets: linkem >= 50 % of plain veth's goodput at 10 ms, offloads off and on; CPU per wire packet
<= 2 us with offloads off, <= 1 us with them on; RTT p50 error <= 0.1 ms; goodput >= 97 % of the rate.

TCP's window: a lab's endpoints may buffer 32 MiB per socket (lab/netns.py), which the receiver
turns into a window of about 22 MB: 8.9 Gbit/s at 20 ms RTT, less than linkem forwards with offloads
on (measured with ss at 10 ms: the receiver's window stopped growing at 22,281,216 B and the sender
was receive-window limited). With offloads on the throughput part therefore lets both ends buffer
256 MiB (THROUGHPUT_TCP_BUFFER: a window of about 170 MB, 70 Gbit/s at 20 ms RTT, above what plain
veth forwards), plain included, so that the 10 ms figure measures the link and not the window.
With offloads off (about 3 Gbit/s, well inside the 22 MB window) the lab's own buffers stay: there
the large buffers made linkem slower, not faster (alternating 5 s runs at 10 ms, quiet machine:
1.6-2.0 Gbit/s with 256 MiB against 2.4-3.0 with the lab's 32 MiB).

Where linkem's CPU goes: with `perf` installed, the share of linkem's CPU samples spent in the
kernel's NET_RX softirq is recorded too. A veth transmit runs the receiving namespace's whole
stack (IP, TCP, waking the reader) inline in the sender's system call, so that share is the
endpoints' work charged to linkem, not emulation.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench_link_schedule import figure_text as schedule_figure, schedule as schedule_vs_rate, table as schedule_table
from quicbench.run.calibrate import measure_iperf3
from quicbench.model.conditions import Condition
from quicbench.cpu import process_cpu_seconds
from quicbench.lab import LabSpec, make_lab
from quicbench.paths import REPO_ROOT
from quicbench.proc import run

RESULTS = REPO_ROOT / "bench" / "results"

IPERF_S = 5.0
THROUGHPUT_REPS = 3
# Largest socket buffer (bytes) of both endpoints in the throughput labs: a window for ~70 Gbit/s
# at 20 ms RTT, so the window does not limit (see the module docstring).
THROUGHPUT_TCP_BUFFER = 256 << 20
RATES = (5, 40, 100)
# The most TCP goodput a link can carry at its rate: payload per full-size packet as the rate
# counts it. linkem counts IP bytes (1500 per packet, as mahimahi); tbf counts Ethernet frames
# (1514). TCP payload is 1448 B with timestamps (the Linux default), 1460 B without.
CEILING = {"linkem": 1448 / 1500, "linkem_no_tcp_timestamps": 1460 / 1500, "linkem_offload": 1448 / 1500,
           "tbf": 1448 / 1514}


def _lab(link: str, offload: bool = False):
    return make_lab(LabSpec(name=f"bl{secrets.token_hex(2)}", link=link, offload=offload))


def _cond(**kw) -> Condition:
    return Condition.model_validate({"name": "bench", **kw})


def _rtts(lab, count: int, interval: float) -> list[float]:
    """RTTs of ping's echoes in ms, timed from a tcpdump capture on the client interface
    (ping prints only three significant digits: 100 ms, not 100.012 ms)."""
    import tempfile
    from pathlib import Path

    import dpkt

    from quicbench.run.capture import Capture
    with tempfile.TemporaryDirectory(prefix="qb-bench-") as tmp:
        cap = Capture(lab, "client", lab.interface("client", "server"), lab.address("server"), Path(tmp) / "ping.pcap")
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
    pid = lab.link.pids["router"]
    st = lab.link.stats()["router"]
    return process_cpu_seconds(pid) or 0.0, st["up"]["forwarded"] + st["down"]["forwarded"]


class _Perf:
    """`perf record` on one process while a measurement runs (nothing if perf is missing)."""

    def __init__(self, pid: int, seconds: float):
        self.data = None
        if not shutil.which("perf"):
            return
        with tempfile.NamedTemporaryFile(prefix="qb-bench-perf-", delete=False) as f:
            self.data = f.name
        self.proc = subprocess.Popen(["perf", "record", "-q", "-g", "-p", str(pid), "-o", self.data, "--",
                                      "sleep", str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def share(self, symbol: str) -> float | None:
        """Fraction of the samples with `symbol` on their call chain."""
        if self.data is None:
            return None
        try:
            self.proc.wait(timeout=60)
            rep = subprocess.run(["perf", "report", "-i", self.data, "--children", "--sort", "symbol", "--stdio",
                                  "-g", "none"], capture_output=True, text=True, timeout=120).stdout
        finally:
            os.unlink(self.data)
        m = re.search(r"^\s+([\d.]+)%\s+[\d.]+%\s+\[k\] " + re.escape(symbol) + r"\s", rep, re.M)
        return float(m.group(1)) / 100 if m else None


def _steal_ticks() -> int:
    """CPU time the hypervisor gave to others (ticks, all CPUs): a noisy host shows here."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def _tcp_buffers(lab, most: int) -> None:
    """Let both endpoints' TCP buffers (and so the receive window) grow to `most` bytes."""
    for node in ("client", "server"):
        run(lab.cmd(node, ["sysctl", "-qw", f"net.ipv4.tcp_rmem=4096 131072 {most}",
                           f"net.ipv4.tcp_wmem=4096 16384 {most}"]))


def throughput() -> dict:
    """Each figure is the median of THROUGHPUT_REPS iperf3 runs (this VM's host is noisy).
    Measured twice: with offloads off (the default lab: every frame is a wire packet) and on
    (endpoints hand GSO super-frames to the path; linkem runs its pipeline per wire packet).
    With offloads on endpoints may buffer THROUGHPUT_TCP_BUFFER bytes, so that TCP's window is not
    the limit (module docstring)."""
    out: dict = {"reps": THROUGHPUT_REPS, "tcp_buffer_max_bytes_offload": THROUGHPUT_TCP_BUFFER}
    for off in (False, True):
        tag = "_offload" if off else ""
        with _lab("plain", offload=off) as lab:
            if off:
                _tcp_buffers(lab, THROUGHPUT_TCP_BUFFER)
            runs = [measure_iperf3(lab, IPERF_S, reverse=False)["goodput_mbps"] for _ in range(THROUGHPUT_REPS)]
            out[f"plain{tag}_mbps"], out[f"plain{tag}_mbps_runs"] = statistics.median(runs), runs
        with _lab("linkem", offload=off) as lab:
            if off:
                _tcp_buffers(lab, THROUGHPUT_TCP_BUFFER)
            for delay in (0, 10):
                key = f"linkem{tag}_{delay}ms"
                lab.set_condition(_cond(delay_ms=delay))
                mbps, cpu_pp, share = [], [], None
                for rep in range(THROUGHPUT_REPS):
                    cpu0, p0 = _linkem_cpu_and_packets(lab)
                    # perf on the first run only: its sampling costs linkem a little CPU
                    perf = _Perf(lab.link.pids["router"], IPERF_S - 1) if rep == 0 else None
                    mbps.append(measure_iperf3(lab, IPERF_S, reverse=False)["goodput_mbps"])
                    cpu1, p1 = _linkem_cpu_and_packets(lab)
                    cpu_pp.append(1e6 * (cpu1 - cpu0) / max(p1 - p0, 1))
                    if perf is not None:
                        # share of linkem's CPU that is the receiving stacks' work, run inline by veth
                        share = perf.share("net_rx_action")
                out[f"{key}_mbps"], out[f"{key}_mbps_runs"] = statistics.median(mbps), mbps
                out[f"{key}_cpu_us_per_packet"] = statistics.median(cpu_pp)
                out[f"{key}_cpu_us_per_packet_runs"] = cpu_pp
                out[f"{key}_cpu_share_net_rx_softirq"] = share
                out[f"ratio{tag}_{delay}ms_vs_plain"] = out[f"{key}_mbps"] / out[f"plain{tag}_mbps"]
    return out


def rtt_error() -> dict:
    out: dict = {}
    with _lab("linkem") as lab:
        base = statistics.median(_rtts(lab, 50, 0.01))          # the stack's own RTT, no emulation
        out["stack_rtt_ms"] = base
        for delay in (10, 50, 100):
            lab.set_condition(_cond(delay_ms=delay))
            rtts = _rtts(lab, 200, 0.01)
            errs = sorted(r - 2 * delay for r in rtts)
            q = statistics.quantiles(errs, n=100)
            out[f"{delay}ms"] = {"p50_error_ms": statistics.median(errs), "p99_error_ms": q[98],
                                 "p50_error_minus_stack_ms": statistics.median(errs) - base, "n": len(errs)}
    return out


def _tcp_timestamps(lab, on: bool) -> None:
    for node in ("client", "server"):
        run(lab.cmd(node, ["sysctl", "-qw", f"net.ipv4.tcp_timestamps={int(on)}"]))


def rate_accuracy() -> dict:
    out: dict = {"linkem": {}, "linkem_no_tcp_timestamps": {}, "linkem_offload": {}, "tbf": {}, "ceiling": CEILING}
    for off in (False, True):
        with _lab("linkem", offload=off) as lab:
            runs = (("linkem_offload", True),) if off else (("linkem", True), ("linkem_no_tcp_timestamps", False))
            for key, ts in runs:
                _tcp_timestamps(lab, ts)
                for rate in RATES:
                    lab.set_condition(_cond(rate_mbit=rate))
                    gp = measure_iperf3(lab, IPERF_S)["goodput_mbps"]
                    out[key][str(rate)] = {"goodput_mbps": gp, "ratio": gp / rate,
                                           "of_ceiling": gp / rate / CEILING[key]}
    with _lab("plain") as lab:
        for rate in RATES:
            burst = max(1600, int(rate * 1e6 / 8 / 250))          # 4 ms of bursts at the rate (>= 1 MTU)
            limit = max(3000, int(rate * 1e6 / 8 * 0.02))          # 20 ms of queue, as linkem's default
            for dev in (lab.interface("router", "client"), lab.interface("router", "server")):
                run(lab.cmd("router", ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate}mbit",
                                       "burst", str(burst), "limit", str(limit)]))
            gp = measure_iperf3(lab, IPERF_S)["goodput_mbps"]
            out["tbf"][str(rate)] = {"goodput_mbps": gp, "ratio": gp / rate, "of_ceiling": gp / rate / CEILING["tbf"]}
    return out


def main(console: Console | None = None, results: Path = RESULTS) -> dict:
    console = console or Console()
    t0, steal0 = time.time(), _steal_ticks()
    res = {"throughput": throughput(), "rtt_error": rtt_error(), "rate": rate_accuracy(),
           "schedule": schedule_vs_rate(), "iperf3_seconds": IPERF_S, "started": t0}
    # share of the machine's CPU time the hypervisor gave to other guests while we measured
    res["steal_pct"] = 100 * (_steal_ticks() - steal0) / (os.sysconf("SC_CLK_TCK") * (time.time() - t0) * os.cpu_count())
    results.mkdir(parents=True, exist_ok=True)
    (results / "linkem.json").write_text(json.dumps(res, indent=2))
    tp, rt, ra = res["throughput"], res["rtt_error"], res["rate"]
    t = Table("measure", "value", "target", title="linkem benchmark (iperf3 TCP, ping)")
    for tag, label in (("", "offloads off"), ("_offload", "offloads on")):
        t.add_row(f"plain kernel forwarding, {label}", f"{tp[f'plain{tag}_mbps']:.0f} Mbit/s", "")
        for d in (0, 10):
            key = f"linkem{tag}_{d}ms"
            t.add_row(f"linkem, {d} ms one-way, {label}", f"{tp[f'{key}_mbps']:.0f} Mbit/s "
                      f"({100 * tp[f'ratio{tag}_{d}ms_vs_plain']:.0f} % of plain)", ">= 50 % of plain" if d == 10 else "")
            cpu = tp[f"{key}_cpu_us_per_packet"]
            share = tp.get(f"{key}_cpu_share_net_rx_softirq")
            split = (f" ({share * cpu:.2f} us of it receiving stacks run inline, {(1 - share) * cpu:.2f} us linkem's own)"
                     if share is not None else "")
            t.add_row(f"CPU per wire packet, {d} ms, {label}", f"{cpu:.2f} us{split}", "<= 1 us" if tag else "<= 2 us")
    for d in (10, 50, 100):
        e = rt[f"{d}ms"]
        t.add_row(f"RTT error at {d} ms one-way", f"p50 {e['p50_error_ms']:+.3f} ms, p99 {e['p99_error_ms']:+.3f} ms "
                  f"(stack alone {rt['stack_rtt_ms']:.3f})", "p50 <= 0.1 ms")
    for rate in map(str, RATES):
        t.add_row(f"goodput/rate at {rate} Mbit/s",
                  "; ".join(f"{label} {100 * ra[k][rate]['ratio']:.1f} % (ceiling {100 * CEILING[k]:.1f})"
                            for k, label in (("linkem", "linkem"), ("linkem_no_tcp_timestamps", "no TCP timestamps"),
                                             ("linkem_offload", "offloads on"), ("tbf", "tbf"))), ">= 97 %")
    console.print(t)
    console.print(schedule_table(res["schedule"]))
    console.print(schedule_figure(res["schedule"]))
    console.print(f"CPU steal while measuring: {res['steal_pct']:.1f} % (time the host gave to other guests); "
                  f"throughput rows are medians of {tp['reps']} runs")
    return res


if __name__ == "__main__":
    main()
