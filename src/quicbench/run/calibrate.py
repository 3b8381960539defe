"""Measure a lab's path with tools nobody here wrote: ping (RTT, loss) and iperf3 (TCP goodput).

Configured vs measured, with a verdict per quantity:
- RTT p50 within max(0.5 ms, 5 %) of the configured base RTT (sum of one-way delays);
- loss within the binomial 99 % interval of the configured round-trip loss;
- TCP goodput at least 90 % of the bottleneck rate (only judged without loss, where TCP
  can fill the link).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import time
from typing import Any

from quicbench.model.conditions import Condition
from quicbench.lab.base import Lab
from quicbench.proc import run


def round_trip_loss(c: Condition) -> float:
    """Probability that a ping or its reply is lost, from the per-direction random losses."""
    survive = 1.0
    for h in c.hops:
        for d in (h.up, h.down):
            loss = d.effective_loss
            if loss is not None and loss.model == "random":
                survive *= 1 - loss.pct / 100
    return 1 - survive


def binomial_interval(n: int, p: float, z: float = 2.576) -> tuple[float, float]:
    """Normal-approximation 99 % interval of the observed fraction for n trials at p."""
    half = z * math.sqrt(max(p * (1 - p), 1e-12) / max(n, 1))
    return max(0.0, p - half), min(1.0, p + half)


def measure_ping(lab: Lab, count: int = 200, interval: float = 0.01) -> dict[str, Any]:
    out = run(lab.cmd("client", ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2",
                                 lab.address("server")]), check=False, timeout=count * interval + 30).stdout
    rtts = [float(m) for m in re.findall(r"time=([\d.]+) ms", out)]
    sent = count
    received = len(rtts)
    q = statistics.quantiles(rtts, n=100) if len(rtts) >= 2 else rtts * 99
    return {"sent": sent, "received": received, "loss_pct": 100 * (sent - received) / sent,
            "rtt_p50_ms": statistics.median(rtts) if rtts else None,
            "rtt_p99_ms": q[98] if rtts else None,
            "rtt_min_ms": min(rtts) if rtts else None}


def measure_iperf3(lab: Lab, seconds: float = 3.0, reverse: bool = True) -> dict[str, Any]:
    server = subprocess.Popen(lab.cmd("server", ["iperf3", "-s", "-1", "-B", lab.address("server")]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            ss = run(lab.cmd("server", ["ss", "-Hltn", "sport = :5201"]), check=False).stdout
            if ss.strip():
                break
            time.sleep(0.02)
        argv = ["iperf3", "-c", lab.address("server"), "-t", f"{seconds:g}", "-J", "-O", "1"]
        if reverse:
            argv.append("-R")   # server -> client, as the HTTP downloads
        cp = run(lab.cmd("client", argv), check=False, timeout=seconds + 30)
        try:
            data = json.loads(cp.stdout)
        except json.JSONDecodeError:
            return {"error": f"iperf3 gave no result: {(cp.stderr or cp.stdout).strip()[:200]}"}
        if "error" in data:
            return {"error": f"iperf3: {data['error']}"}
        end = data["end"]
        return {"goodput_mbps": end["sum_received"]["bits_per_second"] / 1e6,
                "retransmits": end.get("sum_sent", {}).get("retransmits"), "seconds": seconds}
    finally:
        server.kill()
        server.wait()


def calibrate(lab: Lab, condition: Condition, pings: int = 200, iperf_seconds: float = 3.0) -> dict[str, Any]:
    """Configured vs measured for the condition currently applied to the lab."""
    configured = {"rtt_ms": condition.base_rtt_ms, "loss_pct": 100 * round_trip_loss(condition),
                  "rate_mbit": condition.bottleneck_mbit}
    ping = measure_ping(lab, count=pings, interval=0.01 if condition.base_rtt_ms < 50 else 0.005)
    verdicts: dict[str, str] = {}
    if ping["rtt_p50_ms"] is None:
        verdicts["rtt"] = "fail: no ping reply"
    else:
        tol = max(0.5, 0.05 * configured["rtt_ms"])
        # with jitter the median shifts by the distribution's median, so widen the tolerance
        jitter = sum(d.jitter_ms for h in condition.hops for d in (h.up, h.down))
        tol += jitter
        err = ping["rtt_p50_ms"] - configured["rtt_ms"]
        verdicts["rtt"] = ("ok" if abs(err) <= tol else "off") + f": {err:+.3f} ms (tolerance ±{tol:.2f})"
    lo, hi = binomial_interval(ping["sent"], configured["loss_pct"] / 100)
    meas = ping["loss_pct"] / 100
    verdicts["loss"] = ("ok" if lo - 1e-9 <= meas <= hi + 1e-9 else "off") + \
        f": {100 * meas:.2f} % (99 % interval {100 * lo:.2f}..{100 * hi:.2f} %)"
    result: dict[str, Any] = {"condition": condition.name, "configured": configured, "ping": ping}
    if iperf_seconds > 0:
        ip = measure_iperf3(lab, seconds=iperf_seconds)
        result["iperf3"] = ip
        rate = configured["rate_mbit"]
        if "error" in ip:
            verdicts["goodput"] = f"fail: {ip['error']}"
        elif rate and configured["loss_pct"] == 0 and not condition.hops[0].down.spikes:
            ratio = ip["goodput_mbps"] / rate
            verdicts["goodput"] = ("ok" if ratio >= 0.9 else "off") + f": {100 * ratio:.1f} % of {rate:g} Mbit/s"
        else:
            verdicts["goodput"] = f"info: {ip['goodput_mbps']:.1f} Mbit/s (not judged: loss, spikes or no rate)"
    result["verdicts"] = verdicts
    result["ok"] = not any(v.startswith(("off", "fail")) for v in verdicts.values())
    return result
