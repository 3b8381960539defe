"""Lab backend `netns`: client, router(s) and server as Linux network namespaces on this host.

Topology (hops=1):   client[eth0] --- [to-client]router[to-server] --- [eth0]server
With hops=2 a second router (`router2`) sits between router and server.

Every segment is a veth pair created directly inside the two namespaces, so nothing of a
lab lives in the host's namespace and there is no route out of the lab. Addresses come
from 198.18.0.0/15 (RFC 2544, set aside for benchmarking): each lab takes a slot of four
/24 segments. Offloads (TSO/GSO/GRO) are off so that each wire packet is one real frame.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from collections.abc import Mapping, Sequence

from quicbench.errors import QuicbenchError
from quicbench.proc import run, wait_ended
from quicbench.lab.base import Lab, list_lab_states, owner_alive, owner_token, state_lock
from quicbench.link import RouterPorts

MAX_SLOTS = 128
PREFIX = "qb-"

# Per-namespace sysctls. TCP buffers large enough for 1 Gbit/s x 200 ms; IPv6 off so that
# router solicitations and DAD do not put frames on the wire; no saved TCP metrics, so one
# trial's ssthresh does not leak into the next.
TCP_SYSCTLS = {
    "net.ipv4.tcp_rmem": "4096 131072 33554432",
    "net.ipv4.tcp_wmem": "4096 16384 33554432",
    "net.ipv4.tcp_no_metrics_save": "1",
    "net.ipv4.tcp_slow_start_after_idle": "0",
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
}


def segment_net(slot: int, seg: int) -> str:
    """The /24 prefix (first three octets) of segment seg of lab slot slot."""
    n = 4 * slot + seg
    return f"198.{18 + n // 256}.{n % 256}"


class NetnsLab(Lab):
    name = "netns"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if os.geteuid() != 0:
            return False, "network namespaces need root: run as root or with sudo"
        return True, "Linux network namespaces and veth pairs on this host"

    # -- naming and addressing --------------------------------------------------------
    def ns(self, node: str) -> str:
        return f"{PREFIX}{self.name}-{node}"

    def interface(self, node: str, towards: str) -> str:
        self.check_node(node)
        if node in ("client", "server"):
            return "eth0"
        return "to-client" if towards == "client" else "to-server"

    def _segments(self) -> list[tuple[str, str, str, str]]:
        """(left node, left ifname, right node, right ifname) for each segment, client first."""
        chain = self.nodes
        return [(left, self.interface(left, "server"), right, self.interface(right, "client"))
                for left, right in zip(chain, chain[1:])]

    def _plan_addresses(self, slot: int) -> dict[str, dict[str, str]]:
        addrs: dict[str, dict[str, str]] = {n: {} for n in self.nodes}
        for i, (left, lif, right, rif) in enumerate(self._segments()):
            net = segment_net(slot, i)
            addrs[left][lif] = f"{net}.1"
            addrs[right][rif] = f"{net}.2"
        return addrs

    def address(self, node: str) -> str:
        self.check_node(node)
        return next(iter(self.state["addresses"][node].values())) if node in ("client", "server") \
            else self.state["addresses"][node]["to-client"]

    def cmd(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        self.check_node(node)
        extra = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        return ["ip", "netns", "exec", self.ns(node), *extra, *argv]

    def routers(self) -> list[RouterPorts]:
        out = []
        nodes = self.nodes
        for idx, node in enumerate(nodes):
            if not node.startswith("router"):
                continue
            left, right = nodes[idx - 1], nodes[idx + 1]
            lif, rif = self.interface(left, "server"), self.interface(right, "client")
            out.append(RouterPorts(
                node=node, netns=self.ns(node), if_client=self.interface(node, "client"),
                if_server=self.interface(node, "server"),
                peer_mac_client=self.state["macs"][left][lif], peer_mac_server=self.state["macs"][right][rif],
                ip_client=self.state["addresses"][node]["to-client"],
                ip_server=self.state["addresses"][node]["to-server"]))
        return out

    # -- lifecycle --------------------------------------------------------------------
    def _claim(self) -> None:
        """Reserve the name and an address slot, recording the lab before creating anything."""
        ok, why = self.available()
        if not ok:
            raise QuicbenchError(f"lab backend netns: {why}")
        self._check_cc()
        with state_lock():
            slots = set()
            for st in list_lab_states():
                if st["name"] == self.name:
                    if st.get("spec", {}).get("persistent") or owner_alive(st.get("owner")):
                        raise QuicbenchError(
                            f"lab '{self.name}' already exists: pick another --name or run "
                            f"'quicbench lab down {self.name}'")
                    type(self).from_state(st).down()   # left by a killed process: reap it
                    continue
                if "slot" in st:
                    slots.add(st["slot"])
            free = [s for s in range(MAX_SLOTS) if s not in slots]
            if not free:
                raise QuicbenchError(f"all {MAX_SLOTS} lab slots are in use: 'quicbench lab down --all'")
            slot = free[0]
            self.state = {"slot": slot, "owner": owner_token(), "status": "creating",
                          "created": time.time(),
                          "namespaces": {n: self.ns(n) for n in self.nodes},
                          "addresses": self._plan_addresses(slot)}
            self.save_state()


    def _check_cc(self) -> None:
        avail = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
        allowed = open("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read().split()
        if self.spec.tcp_cc not in avail:
            raise QuicbenchError(
                f"TCP congestion control '{self.spec.tcp_cc}' is not available in this kernel: "
                f"accepted: {', '.join(avail)}")
        if self.spec.tcp_cc not in allowed:
            # namespaces may only pick allowed algorithms; allowing one is harmless
            run(["sysctl", "-q", "-w",
                 f"net.ipv4.tcp_allowed_congestion_control={' '.join(allowed + [self.spec.tcp_cc])}"])

    def _create(self) -> None:
        addrs = self.state["addresses"]
        for node in self.nodes:
            run(["ip", "netns", "add", self.ns(node)])
        for left, lif, right, rif in self._segments():
            run(["ip", "-n", self.ns(left), "link", "add", lif, "mtu", str(self.spec.mtu), "type", "veth",
                 "peer", "name", rif, "netns", self.ns(right)])
        last_router = [n for n in self.nodes if n.startswith("router")][-1]
        for node in self.nodes:
            script = ["set -e", "ip link set lo up"]
            sysctls = {**TCP_SYSCTLS, "net.ipv4.tcp_congestion_control": self.spec.tcp_cc}
            if node.startswith("router"):
                sysctls["net.ipv4.ip_forward"] = "1"
            script.append("sysctl -q -w " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sysctls.items()))
            for ifname, ip in addrs[node].items():
                script += [f"ip link set {ifname} mtu {self.spec.mtu}",
                           self._offload_cmd(ifname),
                           f"ip addr add {ip}/24 dev {ifname}",
                           f"ip link set {ifname} up"]
            if node == "client":
                script.append(f"ip route add default via {addrs['router']['to-client']}{self.initcwnd_option()}")
            elif node == "server":
                script.append(f"ip route add default via {addrs[last_router]['to-server']}{self.initcwnd_option()}")
            elif self.spec.hops == 2:
                # routers know the far segment only through each other; there is no default route
                if node == "router":
                    server_net = addrs["server"]["eth0"].rsplit(".", 1)[0] + ".0/24"
                    script.append(f"ip route add {server_net} via {addrs['router2']['to-client']}")
                else:
                    client_net = addrs["client"]["eth0"].rsplit(".", 1)[0] + ".0/24"
                    script.append(f"ip route add {client_net} via {addrs['router']['to-server']}")
            run(self.cmd(node, ["sh", "-c", "\n".join(script)]))
        self.state["macs"] = {node: self._macs(node) for node in self.nodes}
        self.state["tcp_cc"] = self.spec.tcp_cc
        self.save_state()

    def _offload_cmd(self, ifname: str) -> str:
        """Offloads off (default): every frame is one wire packet. On: TCP and UDP segmentation
        offload and GRO, so endpoints send and receive GSO super-frames.

        UDP segmentation (tx-udp-segmentation) is a feature of its own: with `gso off` alone a
        veth still passes a QUIC sender's UDP_SEGMENT super-frame (quic-go >= 0.39 sends them)
        to its peer whole, and a link emulator that takes every frame for one packet forwards a
        fraction of it: Caddy 2.11's h3 fell to 0.8 Mbit/s on a clean link before it was off."""
        if self.spec.offload:
            return (f"ethtool -K {ifname} tso on gso on gro on tx-udp-segmentation on 2>/dev/null || "
                    f"ethtool -K {ifname} tso on gso on gro on")
        return (f"ethtool -K {ifname} tso off gso off gro off tx-udp-segmentation off 2>/dev/null || "
                f"ethtool -K {ifname} tso off gso off gro off 2>/dev/null || "
                f"ethtool -K {ifname} gso off gro off")

    def _macs(self, node: str) -> dict[str, str]:
        links = json.loads(run(["ip", "-n", self.ns(node), "-j", "link", "show"]).stdout)
        return {l["ifname"]: l["address"] for l in links if l["ifname"] != "lo"}

    def pids(self, nodes: Sequence[str] | None = None) -> list[int]:
        pids: list[int] = []
        for node in nodes or self.nodes:
            cp = run(["ip", "netns", "pids", self.ns(node)], check=False)
            pids += [int(p) for p in cp.stdout.split()]
        return pids

    def node_fault(self) -> str | None:
        existing = set(run(["ip", "netns", "list"], check=False).stdout.split())
        gone = [self.ns(n) for n in self.nodes if self.ns(n) not in existing]
        return f"lab '{self.name}' lost its namespace(s) {', '.join(gone)} (removed by another process)" if gone \
            else None

    def kill_node_processes(self, node: str) -> None:
        for pid in self.pids([node]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _destroy(self) -> None:
        for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 1.0)):
            pids = self.pids()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            wait_ended(pids, wait)
        existing = set(run(["ip", "netns", "list"], check=False).stdout.split())
        for node in self.nodes:
            if self.ns(node) in existing:
                run(["ip", "netns", "del", self.ns(node)], check=False)


def orphan_namespaces() -> list[str]:
    """qb-* namespaces of labs that no state file describes (e.g. state lost with /run)."""
    known = {ns for st in list_lab_states() for ns in st.get("namespaces", {}).values()}
    out = run(["ip", "netns", "list"], check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(PREFIX) and n not in known
            and n.rsplit("-", 1)[-1] in ("client", "router", "router2", "server")]
