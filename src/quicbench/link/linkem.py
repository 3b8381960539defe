"""`linkem`: quicbench's user-space link emulator (Rust, linkem/), one process per router hop.

The router keeps its addresses (it still answers ARP and pings) but its kernel stops forwarding
(ip_forward=0); linkem reads frames from both router interfaces with AF_PACKET, applies the
condition of each direction and sends them on with the Ethernet header rewritten for the next
hop. Conditions change at run time through linkem's control socket, without a restart.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from quicbench.model.conditions import Condition, Direction, Hop
from quicbench.model.impairments import LINKEM, emulator_problem, linkem_direction
from quicbench.errors import QuicbenchError
from quicbench.paths import find_binary
from quicbench.proc import process_alive, wait_ended
from quicbench.link.base import LinkEmulator, per_router as _per_router
from quicbench.link.fidelity import LinkReading

FIX = "build it with 'make setup' (Rust crate in linkem/)"


def direction_config(d: Direction) -> dict[str, Any]:
    """linkem's JSON for one direction (linkem/README.md; checked by linkem against
    linkem/schema.json): the fields the direction gives, as the impairment table names them,
    with loss_pct folded into its loss model and CoDel's defaults made explicit."""
    table = type(d).table
    cfg = linkem_direction(table, d)
    loss = d.effective_loss
    if loss is not None:
        # the fields of its model, defaults included (linkem's own defaults are tc's)
        keys = [r.key for r in table.fields("loss") if f"model={loss.model}" in r.needs]
        cfg["loss"] = {"model": loss.model, **{k: getattr(loss, k) for k in keys}}
    if d.codel is not None:
        cfg["codel_target_ms"], cfg["codel_interval_ms"] = d.codel
    return cfg


def hop_config(h: Hop) -> dict[str, Any]:
    return {"up": direction_config(h.up), "down": direction_config(h.down)}


class LinkemLink(LinkEmulator):
    name = "linkem"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            path = find_binary("linkem", FIX)
        except QuicbenchError as e:
            return False, str(e)
        return True, path

    @classmethod
    def supports(cls, condition: Condition) -> str | None:
        return emulator_problem(condition, LINKEM)

    def _files(self, node: str) -> dict[str, Path]:
        return {k: self.workdir / f"linkem-{node}.{k}" for k in ("json", "sock", "out", "log", "stats")}

    def _running(self, node: str) -> int | None:
        pid = self.pids.get(node)
        if pid and process_alive(pid):
            return pid
        return None

    def alive(self) -> str | None:
        dead = [r.node for r in self.routers if r.node in self.pids and not self._running(r.node)]
        if dead:
            tail = []
            for node in dead:
                log = self._files(node)["log"]
                lines = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
                tail += lines
            return (f"linkem on {', '.join(dead)} is not running" + (f" (last log line: {tail[0]})" if tail else ""))
        return None

    def apply(self, condition: Condition) -> None:
        routers = self.routers
        for r, hop in zip(routers, _per_router(condition, len(routers))):
            cfg = hop_config(hop)
            files = self._files(r.node)
            if self._running(r.node):
                reply = self.control(r.node, "set " + json.dumps(cfg))
                if reply.strip() != "ok":
                    raise QuicbenchError(f"linkem on {r.node} refused the condition: {reply.strip()}")
                files["json"].write_text(json.dumps(cfg, indent=1))   # the running condition (reseed)
                continue
            files["json"].write_text(json.dumps(cfg, indent=1))
            self.sysctl(r.node, "net.ipv4.ip_forward=0")
            files["sock"].unlink(missing_ok=True)
            with open(files["out"], "wb") as out, open(files["log"], "ab") as log:
                proc = subprocess.Popen(self.nodes.cmd(r.node, [
                    find_binary("linkem", FIX), "--iface-a", r.if_client, "--a-peer-mac", r.peer_mac_client,
                    "--iface-b", r.if_server, "--b-peer-mac", r.peer_mac_server, "--config", str(files["json"]),
                    "--control", str(files["sock"]), "--stats-out", str(files["stats"]),
                    *(["--gso"] if self.offload else [])]),
                    stdout=out, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + 10
            while b"ready" not in files["out"].read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    tail = files["log"].read_text(errors="replace").strip().splitlines()[-2:]
                    raise QuicbenchError(f"linkem did not start on {r.node}: " + (" | ".join(tail) or "no output"))
                time.sleep(0.005)
            self.pids[r.node] = proc.pid
            forward = getattr(self.nodes, "forward_socket", None)
            if forward is not None:      # linkem runs on another host: its control socket comes here
                forward(r.node, files["sock"])

    def reseed(self, seed: int) -> None:
        """The running condition again, with its random draws restarted from `seed` (+ the
        router's position, so two routers do not drop alike)."""
        for i, r in enumerate(self.routers):
            if not self._running(r.node):
                raise QuicbenchError(f"linkem on {r.node} is not running: no random draws to seed")
            cfg = json.loads(self._files(r.node)["json"].read_text())
            reply = self.control(r.node, "set " + json.dumps({**cfg, "seed": (seed + i) % 2 ** 64}))
            if reply.strip() != "ok":
                raise QuicbenchError(f"linkem on {r.node} refused the seed: {reply.strip()}")

    def control(self, node: str, line: str, timeout: float = 5.0) -> str:
        path = str(self._files(node)["sock"])
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(line.encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return buf.decode()

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for r in self.routers:
            if self._running(r.node):
                out[r.node] = json.loads(self.control(r.node, "stats"))
        return out

    def reading(self) -> LinkReading:
        """Each running linkem's cumulative lateness histograms, late drops and scheduler times."""
        return LinkReading({r.node: json.loads(self.control(r.node, "lateness"))
                            for r in self.routers if self._running(r.node)})

    def reset(self) -> None:
        """Zero the counters that stats() reports (a measurement's start)."""
        for r in self.routers:
            if self._running(r.node):
                self.control(r.node, "reset")

    def stop(self) -> None:
        for r in self.routers:
            pid = self._running(r.node)
            if pid:
                os.kill(pid, signal.SIGTERM)
                wait_ended([pid], 2.0)
            self.pids.pop(r.node, None)
