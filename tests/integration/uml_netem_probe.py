"""Run inside User-Mode Linux by test_netem_uml.py: build labs with the netem driver, apply
each condition and MEASURE it (paced UDP probe, ping, iperf3). Writes JSON {scenario: result}
to argv[1]. One boot for all scenarios keeps the suite fast.

Usage (inside UML): python uml_netem_probe.py OUT.json [SCENARIO ...]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import traceback

from quicbench.lab import LabSpec, make_lab
from quicbench.model.conditions import Condition
from quicbench.probe.udp import probe
from quicbench.run.calibrate import measure_iperf3

JITTER = {"delay_ms": 30, "jitter_ms": 10, "reorder": True}

# name: (hops of the lab, condition, [measurements]); a measurement is
# ("udp", direction, count, pps, payload bytes) | ("ping", count, interval) | ("iperf3", seconds)
SCENARIOS: dict[str, tuple[int, dict, list[tuple]]] = {
    "delay": (1, {"delay_ms": 20}, [("udp", "up", 1000, 1000, 64), ("ping", 200, 0.01)]),
    # reordering jitter delays each datagram on its own: the pace does not change the law, the
    # count is what the quantile and skewness checks need
    "jitter_uniform": (1, {**JITTER, "jitter_dist": "uniform"}, [("udp", "up", 1500, 1000, 64)]),
    "jitter_normal": (1, {**JITTER, "jitter_dist": "normal"}, [("udp", "up", 1500, 1000, 64)]),
    "jitter_pareto": (1, {**JITTER, "jitter_dist": "pareto"}, [("udp", "up", 1500, 1000, 64)]),
    "jitter_paretonormal": (1, {**JITTER, "jitter_dist": "paretonormal"}, [("udp", "up", 1500, 1000, 64)]),
    "reorder_on": (1, {"delay_ms": 20, "jitter_ms": 5, "reorder": True}, [("udp", "up", 1000, 1000, 64)]),
    "reorder_off": (1, {"delay_ms": 20, "jitter_ms": 5, "reorder": False}, [("udp", "up", 1000, 1000, 64)]),
    # the same as reorder_on, applied after reorder_off (a lab changed with `lab set`)
    "reorder_on_again": (1, {"delay_ms": 20, "jitter_ms": 5, "reorder": True}, [("udp", "up", 1000, 1000, 64)]),
    "loss_random": (1, {"loss_pct": 5}, [("udp", "up", 2000, 1000, 64)]),
    "loss_ge": (1, {"loss": {"model": "gilbert_elliott", "p_pct": 1, "r_pct": 20, "h_pct": 0, "k_pct": 100}},
                [("udp", "up", 4000, 1000, 64)]),
    "duplicate": (1, {"duplicate_pct": 5}, [("udp", "up", 2000, 1000, 64)]),
    "corrupt": (1, {"corrupt_pct": 5}, [("udp", "up", 2000, 1000, 200)]),
    # 1500 IP bytes per datagram, sent at 6 Mbit/s into 4 Mbit/s
    "rate_big": (1, {"rate_mbit": 4}, [("udp", "up", 1500, 500, 1472)]),
    # 100 IP bytes per datagram at 0.72 Mbit/s into 0.5 Mbit/s: an Ethernet header counted by
    # mistake would show as 0.5 * 100 / 114 = 0.44 Mbit/s of IP
    "rate_small": (1, {"rate_mbit": 0.5}, [("udp", "up", 2700, 900, 72)]),
    "rate_overhead": (1, {"rate_mbit": 0.5, "rate_overhead_bytes": 38}, [("udp", "up", 2700, 900, 72)]),
    "rate_tcp": (1, {"rate_mbit": 5, "delay_ms": 5}, [("iperf3", 4)]),
    # CVart's spikes: 4 Mbit/s falling to 10 % for the last 200 ms of every second, flooded at
    # 6 Mbit/s for 4 s: on average 4 x (0.8 + 0.2 x 0.1) = 3.28 Mbit/s arrive
    "rate_spikes": (1, {"rate_mbit": 4, "spikes": {"period_ms": 1000, "duration_ms": 200, "rate_pct": 10}},
                    [("udp", "up", 2000, 500, 1472)]),
    # 1 Mbit/s (12 ms per 1500-byte packet), 100 ms, a 20-packet queue, flooded at 2.4 Mbit/s:
    # a full queue adds 240 ms to the 100 ms
    "queue": (1, {"rate_mbit": 1, "delay_ms": 100, "queue": {"packets": 20}}, [("udp", "up", 600, 200, 1472)]),
    "per_direction": (1, {"up": {"delay_ms": 10}, "down": {"delay_ms": 30, "loss_pct": 10}},
                      [("udp", "up", 1000, 1000, 64), ("udp", "down", 1000, 1000, 64), ("ping", 200, 0.01)]),
    "hops2": (2, {"hops": [{"delay_ms": 5, "loss_pct": 5}, {"delay_ms": 15, "loss_pct": 5}]},
              [("udp", "up", 2000, 1000, 64), ("ping", 200, 0.01)]),
    "hops2_one_hop_condition": (2, {"delay_ms": 10}, [("udp", "up", 1000, 1000, 64)]),
}


def ping(lab, count: int, interval: float) -> dict:
    out = subprocess.run(lab.cmd("client", ["ping", "-n", "-c", str(count), "-i",
                                            str(interval), "-W", "2", lab.address("server")]),
                         capture_output=True, text=True, timeout=count * interval + 60).stdout
    rtts = sorted(float(x) for x in re.findall(r"time=([\d.]+) ms", out))
    from quicbench.probe.udp import quantile
    return {"sent": count, "received": len(rtts), "rtt_p50_ms": quantile(rtts, 0.5),
            "rtt_p90_ms": quantile(rtts, 0.90), "rtt_p99_ms": quantile(rtts, 0.99), "rtt_min_ms": rtts[0] if rtts else None}


def measure(lab, what: tuple) -> tuple[str, dict]:
    kind = what[0]
    if kind == "udp":
        _, direction, count, pps, size = what
        src, dst = ("client", "server") if direction == "up" else ("server", "client")
        # resolve ARP on every segment first: the first datagrams would wait for it (+2 delays)
        subprocess.run(lab.cmd(src, ["ping", "-n", "-c", "1", "-W", "3", lab.address(dst)]),
                       capture_output=True, timeout=10)
        return f"udp_{direction}", probe(lab.ns(src), lab.ns(dst), lab.address(dst), count=count, pps=pps,
                                         size=size, drain_s=0.3)
    if kind == "ping":
        return "ping", ping(lab, what[1], what[2])
    if kind == "iperf3":
        return "iperf3", measure_iperf3(lab, seconds=what[1])
    raise ValueError(kind)


def main() -> int:
    out_path = sys.argv[1]
    wanted = sys.argv[2:] or list(SCENARIOS)
    results: dict[str, dict] = {"_meta": {"started": time.time()}}
    labs = {}
    try:
        for hops in sorted({SCENARIOS[n][0] for n in wanted}):
            labs[hops] = make_lab(LabSpec(name=f"un{hops}", hops=hops, link="netem"))
            labs[hops].__enter__()
        for name in wanted:
            hops, cond, whats = SCENARIOS[name]
            lab = labs[hops]
            t0 = time.monotonic()
            res: dict = {}
            try:
                lab.set_condition(Condition.model_validate({"name": name, **cond}))
                for what in whats:
                    key, val = measure(lab, what)
                    res[key] = val
            except Exception:  # noqa: BLE001 - recorded, the test reports it
                res["error"] = traceback.format_exc()
            res["seconds"] = time.monotonic() - t0
            results[name] = res
            print(f"uml netem probe: {name} {res['seconds']:.1f} s", flush=True)
            with open(out_path, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        for lab in labs.values():
            lab.__exit__(None, None, None)
    results["_meta"]["seconds"] = time.time() - results["_meta"]["started"]
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
