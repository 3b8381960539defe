"""The lab interface, its specification and the registry of live labs.

A lab is a client, one or two routers and a server joined in a line. Every lab records
itself in ``STATE_DIR/labs/<name>.json`` before it creates anything, so that a lab left
behind by a killed process is found and reaped by the next quicbench command.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from quicbench.model.conditions import Condition
from quicbench.errors import QuicbenchError
from quicbench.paths import STATE_DIR

NODE_NAMES = ("client", "router", "router2", "server")
LAB_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,15}$")


class LabSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    backend: str = "netns"
    hops: Literal[1, 2] = 1
    tcp_cc: str = "cubic"
    mtu: int = Field(1500, ge=1280, le=9000)
    link: str = "auto"
    # TSO/GSO/GRO on at every lab interface: endpoints hand 64 KB super-frames to the path, as
    # production hosts do; only linkem cuts them into wire packets (docs/link.md, "Offloads")
    offload: bool = False
    condition: Condition = Condition()
    persistent: bool = False  # a lab from `lab up` lives until `lab down`; others die with their owner

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not LAB_NAME_RE.match(v):
            raise ValueError(f"lab name '{v}' must be 1-16 characters of a-z, 0-9 and '-'")
        return v


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


def labs_dir() -> Path:
    d = STATE_DIR / "labs"
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def state_lock() -> Iterator[None]:
    """Serialize lab creation and reaping across processes."""
    d = labs_dir()
    with open(d / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _proc_start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def owner_token() -> dict[str, int]:
    pid = os.getpid()
    return {"pid": pid, "start": _proc_start_time(pid) or 0}


def owner_alive(owner: dict[str, int] | None) -> bool:
    if not owner:
        return False
    return _proc_start_time(owner["pid"]) == owner["start"]


def list_lab_states() -> list[dict[str, Any]]:
    out = []
    for p in sorted(labs_dir().glob("*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return out


class Lab(ABC):
    """A client, router(s) and server; commands run inside any node."""

    def __init__(self, spec: LabSpec):
        self.spec = spec
        self.name = spec.name
        self.state: dict[str, Any] = {}
        self.link = None  # a quicbench.link.LinkEmulator once up

    # -- lifecycle -------------------------------------------------------------------
    @abstractmethod
    def up(self, conditions: list | None = None) -> None: ...

    @abstractmethod
    def down(self) -> None: ...

    @classmethod
    @abstractmethod
    def from_state(cls, state: dict[str, Any]) -> "Lab": ...

    def __enter__(self) -> "Lab":
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- nodes -----------------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        return ["client", "router", *(["router2"] if self.spec.hops == 2 else []), "server"]

    @abstractmethod
    def cmd(self, node: str, argv: Sequence[str]) -> list[str]:
        """The argv that runs argv inside node."""

    @abstractmethod
    def address(self, node: str) -> str:
        """The node's address that the other end uses (client and server)."""

    @abstractmethod
    def routers(self) -> list[RouterPorts]: ...

    @property
    def run_dir(self) -> Path:
        d = labs_dir() / self.name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def check_node(self, node: str) -> None:
        if node not in self.nodes:
            raise QuicbenchError(f"unknown node '{node}' in lab '{self.name}': accepted: {', '.join(self.nodes)}")

    # -- state -----------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return labs_dir() / f"{self.name}.json"

    def save_state(self) -> None:
        self.state.update(spec=json.loads(self.spec.model_dump_json()), backend=self.spec.backend,
                          name=self.name, updated=time.time())
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        os.replace(tmp, self.state_path)


def load_lab(name: str) -> Lab:
    from quicbench.lab import BACKENDS
    path = labs_dir() / f"{name}.json"
    if not path.exists():
        known = [s["name"] for s in list_lab_states()]
        raise QuicbenchError(f"no lab named '{name}': running labs: {', '.join(known) or 'none'}")
    state = json.loads(path.read_text())
    return BACKENDS[state["backend"]].from_state(state)


def reap_dead_labs() -> list[str]:
    """Remove labs whose owning process is gone (killed with SIGKILL, say)."""
    reaped = []
    for st in list_lab_states():
        if st.get("spec", {}).get("persistent"):
            continue
        if owner_alive(st.get("owner")):
            continue
        try:
            load_lab(st["name"]).down()
            reaped.append(st["name"])
        except Exception:  # noqa: BLE001 - reaping is best effort, but say so
            continue
    return reaped
