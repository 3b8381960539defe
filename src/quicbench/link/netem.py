"""`netem`: the kernel's emulator, as the seeds used it.

On each router, netem on both interfaces (Go-Quick's `tc qdisc add dev ens3 root netem loss 2%
delay 50ms 5ms distribution pareto`): traffic towards the server ("up") is shaped on the
router's `to-server` interface, traffic towards the client ("down") on `to-client`. Rate uses
netem's own `rate`, counting IP bytes like linkem. CVart's spikes are not a netem feature; CVart
built its links from "tc netem and tbf", and so do spikes here: netem (delay, loss, the rate's
serialization) with a tbf child at the same rate (a size table on the root makes it count IP
bytes), and a small process on the router that changes the tbf's rate to rate_pct % for the last
duration_ms of every period_ms, timed from when the condition is applied, as linkem's spikes.
(netem's own rate cannot make spikes: it schedules each packet when it is queued, so a 200 ms
dip delays everything queued during it by seconds, measured at 0.64 instead of 3.28 Mbit/s
under a flood.) A token bucket delays nothing while traffic stays below its rate, so during a
spike a packet of a light flow is serialized at the full rate (netem's), where linkem takes the
spike's: up to a packet time more per packet, at loads below the spike's rate only. A spike to
0 % uses 1 kbit/s. On/off periods and mahimahi traces are not netem features, and netem never
reorders when it also limits the rate: such conditions need linkem (`auto` chooses it), as does
the CoDel queue discipline (this driver does not build a codel qdisc).

Three things measured under User-Mode Linux (tests/integration/test_netem_uml.py, docs/link.md)
shape what is sent:
- a condition is applied by deleting the root qdisc and adding a new one: `tc qdisc replace`
  (netem's change) keeps the previous condition's corrupt, rate, slot and distribution table
  when the new one does not name them;
- reorder = false under jitter: netem's internal queue is sorted by send time whatever child
  qdisc it has (a pfifo child, as tc-netem(8) suggests, still reordered 57 % of packets), but
  with a rate netem times each packet from the previous one's departure; a rate of 100 Gbit/s
  (0.12 µs per 1500 bytes) keeps packets in order and costs nothing else;
- netem's `limit` counts the packets on the delay line as well as those queued at the rate, so
  it is the queue plus the delay line (rate x (delay + jitter) in 1500-byte packets): a 20-packet
  queue at 1 Mbit/s behind 100 ms then adds 240 ms, as linkem's, not 140 ms.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess

from quicbench.model.conditions import Condition, Direction, default_queue_packets
from quicbench.model.impairments import NETEM_HOST, NETEM_UML, emulator_problem
from quicbench.errors import QuicbenchError
from quicbench.kernels.features import probe
from quicbench.proc import process_alive, run, wait_ended
from quicbench.link.base import LinkEmulator, per_router


ETH_HEADER = 14
# keeps packets in order under jitter (netem's rate mode) and shapes nothing: 0.12 us per 1500 bytes
ORDER_RATE = "100gbit"
MTU = 1500


def _num(x: float) -> str:
    return f"{x:g}"


def where() -> str:
    """Which netem of the impairment table this process drives: User-Mode Linux's (a run
    re-executed inside it says so in QUICBENCH_KERNEL) or this host's."""
    return NETEM_UML if os.environ.get("QUICBENCH_KERNEL") == "uml" else NETEM_HOST


def unsupported(condition: Condition, emulator: str | None = None) -> str | None:
    """Why netem (on this host, in UML or on the SSH hosts) cannot apply the condition: a field
    the impairment table does not grant it (an allowlist), or a combination it cannot do."""
    why = emulator_problem(condition, emulator or where())
    if why:
        return why
    for h in condition.hops:
        for d in (h.up, h.down):
            if d.reorder and d.jitter_ms and d.rate_mbit:
                # with a rate, netem times each packet from the previous one's departure, so
                # jitter never reorders (sch_netem.c); reorder = true would silently not happen
                return "netem does not reorder packets when it also limits the rate: use link linkem"
    return None


def netem_args(d: Direction) -> list[str]:
    """The netem options for one direction."""
    args = ["netem"]
    if d.delay_ms or d.jitter_ms:
        args += ["delay", f"{_num(d.delay_ms)}ms"]
        if d.jitter_ms:
            args.append(f"{_num(d.jitter_ms)}ms")
            if d.jitter_correlation_pct:
                args.append(f"{_num(d.jitter_correlation_pct)}%")
            if d.jitter_dist != "uniform":     # netem's jitter is uniform unless a table is named
                args += ["distribution", d.jitter_dist]
    loss = d.effective_loss
    if loss is not None:
        if loss.model == "random":
            args += ["loss", "random", f"{_num(loss.pct)}%"]
            if loss.correlation_pct:
                args.append(f"{_num(loss.correlation_pct)}%")
        else:
            args += ["loss", "gemodel", f"{_num(loss.p_pct)}%", f"{_num(loss.r_pct)}%",
                     f"{_num(100 - loss.h_pct)}%", f"{_num(100 - loss.k_pct)}%"]
    if d.duplicate_pct:
        args += ["duplicate", f"{_num(d.duplicate_pct)}%"]
    if d.corrupt_pct:
        args += ["corrupt", f"{_num(d.corrupt_pct)}%"]
    if d.rate_mbit:
        # netem's rate counts the whole Ethernet frame (14 header bytes); its packet overhead
        # argument (which may be negative, tc-netem(8)) makes it count IP bytes as linkem does
        args += ["rate", f"{_num(d.rate_mbit)}mbit", str(d.rate_overhead_bytes - ETH_HEADER)]
    elif d.jitter_ms and not d.reorder:
        # in rate mode a packet never leaves before the previous one: jitter without reordering
        args += ["rate", ORDER_RATE]
    args += ["limit", str(netem_limit(d))]
    return args


def netem_limit(d: Direction) -> int:
    """netem's limit (packets, default 1000): the queue sized as linkem's, plus, with a rate,
    the packets on the delay line, which netem counts too (full-size packets)."""
    if not d.rate_mbit:
        return max(1000, default_queue_packets(d))
    line = math.ceil(d.rate_mbit * 1e6 / 8 * (d.delay_ms + d.jitter_ms) / 1000 / MTU)
    return default_queue_packets(d) + line


def netem_commands(condition: Condition, routers: list[tuple[str, str, str]]) -> list[tuple[str, list[str]]]:
    """(router node, tc argv) to apply condition; routers = [(node, if_client, if_server)] in hop order."""
    why = unsupported(condition)
    if why:
        raise QuicbenchError(f"condition '{condition.name}': {why}")
    hops = per_router(condition, len(routers))
    cmds: list[tuple[str, list[str]]] = []
    for (node, if_client, if_server), hop in zip(routers, hops):
        for dev, d in ((if_server, hop.up), (if_client, hop.down)):
            # a fresh qdisc: netem's change keeps corrupt, rate, slot and the delay distribution
            # of the previous condition when the new one does not name them
            cmds.append((node, ["tc", "qdisc", "del", "dev", dev, "root"]))
            cmds.append((node, ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", *spike_stab(d),
                                *netem_args(d)]))
            if d.spikes is not None:
                cmds.append((node, ["tc", "qdisc", "add", "dev", dev, *spike_tbf(d, spiking=False)]))
    return cmds


# The spike schedule, run on the router with the system's python3 (a remote router has no
# quicbench): argv dev period_s duration_s normal-args-json spike-args-json. It keeps to the
# clock (a change's own time does not shift the next spike) and ends when tc fails (the device
# or qdisc is gone: `tc -batch` stops at its first error).
SPIKER = r"""
import json, subprocess, sys, time
dev, period, duration = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
normal, spike = json.loads(sys.argv[4]), json.loads(sys.argv[5])
# one tc for every change: a tc process per change took 0.26 s to start inside UML
tc = subprocess.Popen(["tc", "-batch", "-"], stdin=subprocess.PIPE, text=True)
def change(args):
    if tc.poll() is not None:
        sys.exit(1)
    try:
        tc.stdin.write(" ".join(["qdisc", "change", "dev", dev, *args]) + "\n")
        tc.stdin.flush()
    except BrokenPipeError:
        sys.exit(1)
t0 = time.monotonic()
print("ready", flush=True)
k = 0
while True:
    t = t0 + k * period
    time.sleep(max(0.0, t + period - duration - time.monotonic()))
    change(spike)
    time.sleep(max(0.0, t + period - time.monotonic()))
    change(normal)
    k += 1
"""
SPIKE_FLOOR_KBIT = 1     # a spike to 0 %: netem's rate 0 would mean unlimited


def spike_stab(d: Direction) -> list[str]:
    """With spikes, the root's size table: the packet length its tbf child counts is the IP
    length plus rate_overhead_bytes, as netem's rate and linkem count (a size table may only sit
    on the root qdisc)."""
    if d.spikes is None:
        return []
    return ["stab", "linklayer", "ethernet", "overhead", str(d.rate_overhead_bytes - ETH_HEADER)]


def spike_tbf(d: Direction, spiking: bool) -> list[str]:
    """The tbf child of a direction with spikes (after `tc qdisc add|change dev X`), at the
    direction's rate or, spiking, at rate_pct % of it; burst is two full packets (tbf's minimum
    is one), limit the direction's queue."""
    assert d.spikes is not None and d.rate_mbit
    kbit = d.rate_mbit * 1000 * (d.spikes.rate_pct / 100 if spiking else 1)
    kbit = max(SPIKE_FLOOR_KBIT, kbit)
    return ["parent", "1:1", "handle", "10:", "tbf", "rate", f"{_num(kbit)}kbit",
            "burst", str(2 * (MTU + ETH_HEADER)), "limit", str(default_queue_packets(d) * MTU)]


class NetemLink(LinkEmulator):
    name = "netem"
    no_offload = ("netem would take a 64 KB GSO super-frame for one packet: one loss draw and one "
                  "delay for up to 44 wire packets")

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if probe().get("netem"):
            return True, "kernel sch_netem"
        return False, "this kernel has no sch_netem (CONFIG_NET_SCH_NETEM): use link linkem"

    @classmethod
    def supports(cls, condition: Condition) -> str | None:
        why = unsupported(condition)
        if why is None and any(d.spikes for h in condition.hops for d in (h.up, h.down)) and not probe().get("tbf"):
            return "this kernel has no sch_tbf, which netem's spikes need: use link linkem"
        return why

    def apply(self, condition: Condition) -> None:
        self._stop_spikers()
        routers = [(r.node, r.if_client, r.if_server) for r in self.routers]
        for node, argv in netem_commands(condition, routers):
            # deleting fails where no qdisc is yet (a new lab): that is fine
            run(self.nodes.cmd(node, argv), check=argv[2] != "del")
        for r in self.routers:
            self.sysctl(r.node, "net.ipv4.ip_forward=1")
        for r, hop in zip(self.routers, per_router(condition, len(self.routers))):
            for dev, d in ((r.if_server, hop.up), (r.if_client, hop.down)):
                if d.spikes is not None:
                    self._start_spiker(r.node, dev, d)

    def _start_spiker(self, node: str, dev: str, d: Direction) -> None:
        assert d.spikes is not None
        log = self.workdir / f"netem-spikes-{node}-{dev}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            proc = subprocess.Popen(self.nodes.cmd(node, [
                "python3", "-c", SPIKER, dev, str(d.spikes.period_ms / 1000), str(d.spikes.duration_ms / 1000),
                json.dumps(spike_tbf(d, spiking=False)), json.dumps(spike_tbf(d, spiking=True))]),
                stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        proc.stdout.close()
        if b"ready" not in line:
            proc.kill()
            raise QuicbenchError(f"netem spikes did not start on {node} {dev}: "
                                 f"{log.read_text(errors='replace').strip()[-300:] or 'no output'}")
        self.pids[f"{node}:{dev}"] = proc.pid   # the process making that interface's spikes

    def _stop_spikers(self) -> None:
        pids = [p for p in self.pids.values() if process_alive(p)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        wait_ended(pids, 2.0)
        self.pids.clear()

    def alive(self) -> str | None:
        dead = [k for k, pid in self.pids.items() if not process_alive(pid)]
        return f"netem spikes on {', '.join(dead)} stopped (see the lab's netem-spikes-*.log)" if dead else None

    def stats(self) -> dict:
        import json
        out = {}
        for r in self.routers:
            cp = run(self.nodes.cmd(r.node, ["tc", "-s", "-j", "qdisc", "show"]), check=False)
            try:
                out[r.node] = json.loads(cp.stdout or "[]")
            except json.JSONDecodeError:
                out[r.node] = cp.stdout
        return out

    def stop(self) -> None:
        self._stop_spikers()
        for r in self.routers:
            for dev in (r.if_client, r.if_server):
                run(self.nodes.cmd(r.node, ["tc", "qdisc", "del", "dev", dev, "root"]), check=False)
