"""`netem`: the kernel's emulator, as the seeds used it.

On each router, netem on both interfaces (Go-Quick's `tc qdisc add dev ens3 root netem loss 2%
delay 50ms 5ms distribution pareto`): traffic towards the server ("up") is shaped on the
router's `to-server` interface, traffic towards the client ("down") on `to-client`. Rate uses
netem's own `rate` with a `limit` in packets (the drop-tail queue), counting IP bytes like linkem. With reorder = false a
pfifo child replaces netem's time-sorted queue so that jitter does not reorder packets (see
tc-netem(8)). Spikes, on/off periods and mahimahi traces are not netem features, and netem
never reorders when it also limits the rate: such conditions need linkem (`auto` chooses it).
"""

from __future__ import annotations

from quicbench.model.conditions import Condition, Direction, default_queue_packets
from quicbench.errors import QuicbenchError
from quicbench.kernel import probe
from quicbench.proc import run
from quicbench.link.base import LinkEmulator, per_router


ETH_HEADER = 14


def _num(x: float) -> str:
    return f"{x:g}"


def unsupported(condition: Condition) -> str | None:
    for h in condition.hops:
        for d in (h.up, h.down):
            for field in ("spikes", "onoff", "trace"):
                if getattr(d, field) is not None:
                    return f"netem has no {field}: use link linkem"
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
    # netem's limit is its queue in packets (default 1000): size it as linkem does
    args += ["limit", str(default_queue_packets(d) if d.rate_mbit else max(1000, default_queue_packets(d)))]
    return args


def netem_commands(condition: Condition, routers: list[tuple[str, str, str]]) -> list[tuple[str, list[str]]]:
    """(router node, tc argv) to apply condition; routers = [(node, if_client, if_server)] in hop order."""
    why = unsupported(condition)
    if why:
        raise QuicbenchError(f"condition '{condition.name}': {why}")
    hops = per_router(condition, len(routers))
    cmds: list[tuple[str, list[str]]] = []
    for (node, if_client, if_server), hop in zip(routers, hops):
        for dev, d in ((if_server, hop.up), (if_client, hop.down)):
            cmds.append((node, ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", *netem_args(d)]))
            if d.jitter_ms and not d.reorder:
                cmds.append((node, ["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "pfifo", "limit",
                                    str(max(1000, default_queue_packets(d)))]))
    return cmds


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
        return unsupported(condition)

    def apply(self, condition: Condition) -> None:
        routers = [(r.node, r.if_client, r.if_server) for r in self.routers]
        for node, argv in netem_commands(condition, routers):
            run(self.nodes.cmd(node, argv))
        for r in self.routers:
            self.sysctl(r.node, "net.ipv4.ip_forward=1")

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
        for r in self.routers:
            for dev in (r.if_client, r.if_server):
                run(self.nodes.cmd(r.node, ["tc", "qdisc", "del", "dev", dev, "root"]), check=False)
