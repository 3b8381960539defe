"""The link-emulator driver interface and what a lab hands to it.

A driver shapes the traffic crossing the lab's router hop(s) according to a
:class:`~quicbench.model.conditions.Condition`. It gets the router ports (``RouterPorts``)
and a way to run commands in the lab's nodes (``NodeCommands``), never the lab itself: what
it must remember (processes it started) it returns from ``describe()``, and it is rebuilt from
that description by another process (``quicbench lab set``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from quicbench.errors import QuicbenchError
from quicbench.link.fidelity import LinkReading
from quicbench.model.conditions import Condition, Hop
from quicbench.proc import run


@dataclass(frozen=True)
class RouterPorts:
    """What a link emulator needs to know about one router hop."""
    node: str          # "router" or "router2"
    netns: str
    if_client: str     # interface towards the client (side A, "up" traffic enters here)
    if_server: str     # interface towards the server (side B)
    peer_mac_client: str
    peer_mac_server: str
    ip_client: str
    ip_server: str


class NodeCommands(Protocol):
    """Runs commands inside a lab's nodes (a lab backend provides it)."""

    def cmd(self, node: str, argv: Sequence[str]) -> list[str]: ...


class LinkEmulator(ABC):
    name: ClassVar[str]
    protocols: ClassVar[frozenset[str]] = frozenset({"h1", "h2", "h3"})
    # Why this driver cannot shape a lab whose endpoints send GSO super-frames (offload = true);
    # None if it can.
    no_offload: ClassVar[str | None] = None

    def __init__(self, routers: list[RouterPorts], nodes: NodeCommands, workdir: Path, offload: bool = False,
                 described: dict[str, Any] | None = None):
        self.routers = routers
        self.nodes = nodes
        self.workdir = workdir
        self.offload = offload
        # processes the driver started (name -> pid): kept in the lab's state through describe(),
        # so another quicbench process rebuilds the driver with them
        self.pids: dict[str, int] = {k: int(v) for k, v in ((described or {}).get("pids") or {}).items()}

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]:
        """(usable here?, why not / what it is)."""

    @classmethod
    def version(cls) -> dict[str, str]:
        return {}

    @classmethod
    def supports(cls, condition: Condition) -> str | None:
        """None if this driver can apply the condition, else why not."""
        return None

    @abstractmethod
    def apply(self, condition: Condition) -> None:
        """Start shaping with this condition, or change the running condition."""

    def alive(self) -> str | None:
        """None while the emulation runs as configured, else what is wrong with it."""
        return None

    def stats(self) -> dict[str, Any]:
        """Counters per hop and direction, where the driver has them."""
        return {}

    def reset(self) -> None:
        """Zero the counters that stats() reports, where the driver keeps any."""

    def reading(self) -> LinkReading | None:
        """The emulator's cumulative lateness and CPU counters now (a trial takes one before and
        one after its transfer, quicbench.link.fidelity); None where the driver has none."""
        return None

    def reseed(self, seed: int) -> None:
        """Restart the random draws (loss, jitter, reordering) of the running condition from `seed`
        (a trial's, Plan.link_seed); each router mixes in its position."""
        raise QuicbenchError(f"link {self.name}: cannot seed its random draws; link_seed needs link linkem")

    def stop(self) -> None:
        """Stop shaping (the lab removes its namespaces afterwards)."""

    def describe(self) -> dict[str, Any]:
        """What the driver is and what it must remember; enough to rebuild it in another process."""
        ok, detail = self.available()
        return {"name": self.name, "detail": detail, **({"pids": dict(self.pids)} if self.pids else {})}

    def sysctl(self, node: str, kv: str) -> None:
        run(self.nodes.cmd(node, ["sysctl", "-q", "-w", kv]))


def per_router(condition: Condition, n_routers: int) -> list[Hop]:
    """Condition.per_router, with a mismatch as a user-facing error."""
    try:
        return condition.per_router(n_routers)
    except ValueError as e:
        raise QuicbenchError(str(e)) from None
