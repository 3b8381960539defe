"""Competing traffic on the bottleneck and the delay a probe sees under load (issue 28.1).

A condition's ``background`` flows are bulk downloads from the server node to the client node,
through the same routers as the trial: ``tcp`` flows are iperf3 (``-R``: the server sends) with
the congestion control asked (iperf3 sets it on the sending socket), ``h3`` flows are qb-load
fetching a 10 MB object again and again over one QUIC connection from the trial's own server.
They start before each trial and run for ``WARMUP_S`` before its transfer begins (past slow
start, into the steady state a competing flow is in), and stop after it.

What each flow delivered is counted at the client by nftables rules in the client node, one per
flow (TCP flows by their server port, QUIC flows by the client UDP port qb-load binds), plus the
trial's own traffic from the server port: IP bytes, read just before and just after the trial's
transfer, so every rate is over the same window. From these: each flow's rate, the trial's
share, and Jain's fairness index over the trial (counted as one flow, whatever its connections)
and every background flow.

A paced UDP probe (100 packets/s, 64 bytes) from the server node to the client node runs with
them (or alone, ``latency_probe = true``): the one-way delay of its packets sent during the
transfer is the delay a packet of a competing application sees, queueing included (as Flent's
RRUL measures latency under load). Sender and receiver share this host's clock (network
namespaces), so the backend must be ``netns``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.model.conditions import BACKGROUND_OBJECT_BYTES, Condition
from quicbench.probe.udp import Record, make_packet, quantile, receive, udp_socket

BG_TCP_PORT = 5301          # iperf3 server k listens on BG_TCP_PORT + k
BG_UDP_PORT = 47100         # background qb-load k binds its client UDP socket to BG_UDP_PORT + k
PROBE_PORT = 47050
PROBE_PPS = 100
PROBE_BYTES = 64
WARMUP_S = 2.0
NFT_TABLE = "qb_bg"


@dataclass(frozen=True)
class Reading:
    """The counters of every flow (IP bytes delivered to the client) at one instant."""
    at_ns: int
    bytes: dict[str, int]


@dataclass
class Flow:
    id: str          # bg1, bg2, ...
    kind: str        # tcp:cubic, h3
    port: int
    procs: list[subprocess.Popen] = field(default_factory=list)


def jain_index(rates: list[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n Σx²): 1 when all rates are equal, 1/n when one takes all."""
    if not rates or not any(rates):
        return None
    return sum(rates) ** 2 / (len(rates) * sum(x * x for x in rates))


def window_metrics(before: Reading, after: Reading, flows: list[tuple[str, str]],
                   probe: list[Record] | None) -> dict[str, Any]:
    """The trial's columns from two readings and the probe's records. flows: (id, kind) of the
    background flows; the trial's own traffic is the 'fg' counters."""
    secs = (after.at_ns - before.at_ns) / 1e9
    if secs <= 0:
        return {}

    def mbps(key: str) -> float:
        return (after.bytes.get(key, 0) - before.bytes.get(key, 0)) * 8 / secs / 1e6
    out: dict[str, Any] = {}
    if flows:
        fg = mbps("fg")
        rates = {fid: mbps(fid) for fid, _ in flows}
        by_class: dict[str, float] = {}
        for fid, kind in flows:
            by_class[kind] = by_class.get(kind, 0.0) + rates[fid]
        total = fg + sum(rates.values())
        out.update({
            "bg_flows": len(flows),
            "bg_mbps": sum(rates.values()),
            "bg_class_mbps": ",".join(f"{k}={v:.3f}" for k, v in sorted(by_class.items())),
            "fg_wire_mbps": fg,
            "fg_share_pct": 100 * fg / total if total > 0 else None,
            "jain_index": jain_index([fg, *rates.values()]),
        })
    if probe is not None:
        owd = sorted((r.recv_ns - r.send_ns) / 1e6 for r in probe if r.intact and before.at_ns <= r.send_ns <= after.at_ns)
        out.update({"load_owd_samples": len(owd),
                    "load_owd_ms_p50": quantile(owd, 0.5) if owd else None,
                    "load_owd_ms_p99": quantile(owd, 0.99) if owd else None})
    return out


class Background:
    """The background flows and the latency probe of one trial (netns labs only)."""

    def __init__(self, lab: Any, target: Any, condition: Condition, tcp_cc: str, qb_load: str, workdir: Path):
        self.lab, self.target, self.condition = lab, target, condition
        self.tcp_cc, self.qb_load, self.workdir = tcp_cc, qb_load, workdir
        self.flows: list[Flow] = []
        self.server_ip = lab.address("server")
        self._probe_records: list[Record] = []
        self._probe_stop = threading.Event()
        self._probe_threads: list[threading.Thread] = []
        self._probe_socks: list[Any] = []
        n = 0
        for b in condition.background:
            for _ in range(b.flows):
                n += 1
                kind = f"tcp:{b.cc or tcp_cc}" if b.protocol == "tcp" else "h3"
                port = BG_TCP_PORT + n if b.protocol == "tcp" else BG_UDP_PORT + n
                self.flows.append(Flow(f"bg{n}", kind, port))

    # -- life cycle ---------------------------------------------------------------------------
    def __enter__(self) -> "Background":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.flows:
            self._nft(self._ruleset())
            for f in self.flows:
                if f.kind.startswith("tcp"):
                    self._start_tcp(f)
                else:
                    self._start_h3(f)
        if self.condition.probes_latency:
            self._start_probe()
        if self.flows:
            time.sleep(WARMUP_S)
            idle = [f.id for f, got in zip(self.flows, self._flow_bytes_now()) if got == 0]
            dead = [f"{f.id} ({f.kind}) exited with code {p.returncode}: see {self.workdir}"
                    for f in self.flows for p in f.procs if p.poll() is not None]
            if dead or idle:
                raise QuicbenchError("background flows did not start: " + "; ".join(dead or [f"{i} delivered nothing" for i in idle]))

    def stop(self) -> None:
        for f in self.flows:
            for p in f.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
            f.procs = []
        self._probe_stop.set()
        for t in self._probe_threads:
            t.join(5)
        for s in self._probe_socks:
            s.close()
        self._probe_threads, self._probe_socks = [], []
        if self.flows:
            subprocess.run(self.lab.cmd("client", ["nft", "delete", "table", "inet", NFT_TABLE]),
                           capture_output=True, timeout=10)

    # -- measuring ----------------------------------------------------------------------------
    def mark(self) -> Reading:
        return Reading(time.time_ns(), self._counters() if self.flows else {})

    def metrics(self, before: Reading, after: Reading) -> dict[str, Any]:
        probe = list(self._probe_records) if self.condition.probes_latency else None
        return window_metrics(before, after, [(f.id, f.kind) for f in self.flows], probe)

    # -- the parts ----------------------------------------------------------------------------
    def _ruleset(self) -> str:
        fg = self.target.port
        udp_ports = ", ".join(str(f.port) for f in self.flows if f.kind == "h3")
        rules = [f'ip saddr {self.server_ip} tcp sport {f.port} counter comment "{f.id}"' for f in self.flows
                 if f.kind.startswith("tcp")]
        rules += [f'ip saddr {self.server_ip} udp dport {f.port} counter comment "{f.id}"' for f in self.flows
                  if f.kind == "h3"]
        rules.append(f'ip saddr {self.server_ip} tcp sport {fg} counter comment "fg"')
        not_bg = f" udp dport != {{ {udp_ports} }}" if udp_ports else ""
        rules.append(f'ip saddr {self.server_ip} udp sport {fg}{not_bg} counter comment "fg"')
        body = "\n".join(f"    {r}" for r in rules)
        return (f"table inet {NFT_TABLE} {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n"
                f"{body}\n  }}\n}}\n")

    def _nft(self, ruleset: str) -> None:
        cp = subprocess.run(self.lab.cmd("client", ["nft", "-f", "-"]), input=ruleset, capture_output=True,
                            text=True, timeout=10)
        if cp.returncode != 0:
            raise QuicbenchError(f"background flows: nft could not count them: {cp.stderr.strip()}")

    def _counters(self) -> dict[str, int]:
        cp = subprocess.run(self.lab.cmd("client", ["nft", "-j", "list", "table", "inet", NFT_TABLE]),
                            capture_output=True, text=True, timeout=10)
        if cp.returncode != 0:
            raise QuicbenchError(f"background flows: reading the counters failed: {cp.stderr.strip()}")
        out: dict[str, int] = {}
        for item in json.loads(cp.stdout).get("nftables", []):
            rule = item.get("rule")
            if not rule or "comment" not in rule:
                continue
            n = next((e["counter"]["bytes"] for e in rule.get("expr", []) if "counter" in e), 0)
            out[rule["comment"]] = out.get(rule["comment"], 0) + n
        return out

    def _flow_bytes_now(self) -> list[int]:
        c = self._counters()
        return [c.get(f.id, 0) for f in self.flows]

    def _spawn(self, node: str, argv: list[str], log: str) -> subprocess.Popen:
        with open(self.workdir / log, "ab") as out:
            return subprocess.Popen(self.lab.cmd(node, argv), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def _start_tcp(self, f: Flow) -> None:
        cc = f.kind.split(":", 1)[1]
        f.procs.append(self._spawn("server", ["iperf3", "-s", "-1", "-B", self.server_ip, "-p", str(f.port)],
                                   f"{f.id}-iperf3-server.log"))
        deadline = time.monotonic() + 5
        while not self._listening(f.port) and time.monotonic() < deadline:
            time.sleep(0.02)
        f.procs.append(self._spawn("client", ["iperf3", "-c", self.server_ip, "-p", str(f.port), "-R", "-C", cc,
                                              "-t", "86400", "-i", "0"], f"{f.id}-iperf3-client.log"))

    def _listening(self, port: int) -> bool:
        cp = subprocess.run(self.lab.cmd("server", ["ss", "-Htln", f"sport = :{port}"]), capture_output=True,
                            text=True, timeout=5)
        return bool(cp.stdout.strip())

    def _start_h3(self, f: Flow) -> None:
        t = self.target
        port = "" if t.port == 443 else f":{t.port}"
        path = t.content.path_template(BACKGROUND_OBJECT_BYTES).replace("{i}", "1")
        f.procs.append(self._spawn("client", [
            self.qb_load, "--proto", "h3", "--base-url", f"https://{t.hostname}{port}",
            "--connect", f"{t.address}:{t.port}", "--ca", str(t.tls.ca_cert), "--path-template", path,
            "--count", "1000000", "--parallel", "1", "--connections", "shared", "--bind-port", str(f.port),
            "--timeout", "86400s"], f"{f.id}-qb-load.log"))

    def _start_probe(self) -> None:
        ns = getattr(self.lab, "ns", None)
        if ns is None:
            raise QuicbenchError("latency probe: needs the netns backend (sender and receiver share one clock)")
        rx = udp_socket(ns("client"), (self.lab.address("client"), PROBE_PORT))
        tx = udp_socket(ns("server"))
        self._probe_socks = [rx, tx]
        self._probe_stop.clear()
        dst = (self.lab.address("client"), PROBE_PORT)

        def send() -> None:
            interval = 1e9 / PROBE_PPS
            start, seq = time.monotonic_ns(), 0
            while not self._probe_stop.is_set():
                due = start + seq * interval
                wait = due - time.monotonic_ns()
                if wait > 0:
                    self._probe_stop.wait(wait / 1e9)
                    continue
                try:
                    tx.sendto(make_packet(seq, time.time_ns(), PROBE_BYTES), dst)
                except OSError:
                    pass
                seq += 1
        self._probe_threads = [threading.Thread(target=receive, args=(rx, self._probe_stop, self._probe_records, 0.2),
                                                daemon=True),
                               threading.Thread(target=send, daemon=True)]
        for th in self._probe_threads:
            th.start()
