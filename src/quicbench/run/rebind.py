"""NAT rebinding in the middle of a transfer (issue 28.4).

A condition's ``rebind_at_s`` makes the client's source port, as the server sees it, change
that many seconds into each trial's transfer, as when a NAT on the path drops its mapping and
makes a new one. The client (qb-load) binds its one connection to a known port P; at the
moment, nftables rules in the client node (raw priority, no connection tracking) rewrite P to
P' on every packet to the server and P' back to P on every packet from it, and drop what the
server still sends to P (the old mapping is gone), so the client's socket never notices while
the server sees a new address: TCP has no way to continue (the
server answers the unknown 4-tuple with a reset), QUIC can (the connection ID still matches;
the server validates the new path). A counter in the server node shows the server received
packets from P'; the trial's row says whether it survived (its status), and how long the body
stood still across the rebinding.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

from quicbench.errors import QuicbenchError

NFT_TABLE = "qb_rebind"
PORT_BASE = 20000        # the client binds PORT_BASE + seq % PORT_SPAN ...
PORT_SPAN = 10000
NEW_PORT_OFFSET = 10000  # ... and the server then sees it + NEW_PORT_OFFSET


def ports_for(seq: int) -> tuple[int, int]:
    """The client's local port for a trial and the port the server sees after the rebinding
    (a port of its own per trial: a closing connection's TIME_WAIT never blocks the next)."""
    port = PORT_BASE + seq % PORT_SPAN
    return port, port + NEW_PORT_OFFSET


STALL_WINDOW_NS = 1_000_000_000   # a stall the rebinding caused starts within a second of it


def stall_across(requests: list[dict[str, Any]], at_ns: int | None) -> float | None:
    """The longest gap (ms) in a response body that overlaps the second after at_ns: packets
    already on their way still arrive for a round trip, then the server must accept the new
    path, so the stall begins a little after the rewrite (0: none of 1 ms or more)."""
    if at_ns is None:
        return None
    spans = [(b - a) / 1e6 for r in requests for a, b in (r.get("gaps_ns") or ())
             if b >= at_ns and a <= at_ns + STALL_WINDOW_NS]
    return max(spans, default=0.0)


class Rebinding:
    """The rewrite rules of one trial, installed rebind_at_s after start() is armed."""

    def __init__(self, lab: Any, protocol: str, port: int, new_port: int, at_s: float):
        self.lab, self.port, self.new_port, self.at_s = lab, port, new_port, at_s
        self.l4 = "udp" if protocol == "h3" else "tcp"
        self.server_ip, self.client_ip = lab.address("server"), lab.address("client")
        self.installed_ns: int | None = None
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._error: str | None = None

    def __enter__(self) -> "Rebinding":
        try:
            self._nft("client", f"table inet {NFT_TABLE} {{\n"
                                "  chain out { type filter hook output priority -300; policy accept; }\n"
                                "  chain in { type filter hook prerouting priority -300; policy accept; }\n}\n")
            self._nft("server", f"table inet {NFT_TABLE} {{\n  chain in {{\n"
                                "    type filter hook prerouting priority -300; policy accept;\n"
                                f"    ip saddr {self.client_ip} {self.l4} sport {self.new_port} counter\n  }}\n}}\n")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.join(10)
        for node in ("client", "server"):
            subprocess.run(self.lab.cmd(node, ["nft", "delete", "table", "inet", NFT_TABLE]), capture_output=True,
                           timeout=10)

    def arm(self) -> None:
        """Install the rewrite rebind_at_s from now (the transfer starts now)."""
        start = time.monotonic()

        def fire() -> None:
            if self._stop.wait(max(0.0, start + self.at_s - time.monotonic())):
                return
            p, q, l4, srv = self.port, self.new_port, self.l4, self.server_ip
            try:
                # the old mapping is gone: what the server still sends to P is dropped (first rule);
                # what it sends to P' reaches the socket as P
                self._nft("client", f"add rule inet {NFT_TABLE} out ip daddr {srv} {l4} sport {p} notrack {l4} sport set {q}\n"
                                    f"add rule inet {NFT_TABLE} in ip saddr {srv} {l4} dport {p} drop\n"
                                    f"add rule inet {NFT_TABLE} in ip saddr {srv} {l4} dport {q} notrack {l4} dport set {p}\n")
                self.installed_ns = time.time_ns()
            except QuicbenchError as e:
                self._error = str(e)
        self._timer = threading.Thread(target=fire, daemon=True)
        self._timer.start()

    def metrics(self, requests: list[dict[str, Any]]) -> dict[str, Any]:
        return {"rebind_at_s": self.at_s, "rebound": self.installed_ns is not None,
                "rebind_seen_by_server": self._server_saw_new_port(),
                "rebind_stall_ms": stall_across(requests, self.installed_ns)}

    @property
    def error(self) -> str | None:
        return self._error

    def _server_saw_new_port(self) -> bool | None:
        cp = subprocess.run(self.lab.cmd("server", ["nft", "-j", "list", "table", "inet", NFT_TABLE]),
                            capture_output=True, text=True, timeout=10)
        if cp.returncode != 0:
            return None
        for item in json.loads(cp.stdout).get("nftables", []):
            for e in (item.get("rule") or {}).get("expr", []):
                if "counter" in e:
                    return e["counter"]["packets"] > 0
        return None

    def _nft(self, node: str, script: str) -> None:
        cp = subprocess.run(self.lab.cmd(node, ["nft", "-f", "-"]), input=script, capture_output=True, text=True,
                            timeout=10)
        if cp.returncode != 0:
            raise QuicbenchError(f"rebinding: nft in the {node} node: {cp.stderr.strip()}")
