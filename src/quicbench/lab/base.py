"""The lab interface and the registry of live labs (its specification, ``LabSpec``, is the plan's
hand-off: model/specs.py).

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
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, ClassVar


from quicbench.cpu import (group_members, group_sched_seconds, last_cpus, machine_cpu_ticks, per_cpu_ticks,
                           softirq_thread_wait_seconds)
from quicbench.errors import QuicbenchError
from quicbench.link import LINKS, LinkEmulator, RouterPorts, auto_choice, resolve_link
from quicbench.model.conditions import Condition
from quicbench.model.specs import LabSpec
from quicbench.paths import STATE_DIR
from quicbench.proc import process_alive, run

# Linux's initial congestion window when a route sets none (RFC 6928; TCP_INIT_CWND)
KERNEL_INITCWND = 10

NODE_NAMES = ("client", "router", "router2", "server")


@dataclass(frozen=True)
class CpuCounters:
    """A trial's endpoints' CPU counters at one moment (a trial takes them before and after).

    server: the server's process group, (on-CPU s, run-queue wait s); None when not readable.
    machines: each endpoint machine, (busy ticks, total ticks, CPUs) from its /proc/stat.
    softirq_wait: each endpoint machine, its softirq threads' run-queue wait so far (seconds).
    per_cpu: each endpoint machine, (softirq ticks, steal ticks) of each of its CPUs so far.
    server_cpus: the CPUs the server's processes last ran on.
    """
    server: tuple[float, float] | None = None
    machines: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    softirq_wait: dict[str, float] = field(default_factory=dict)
    per_cpu: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    server_cpus: list[int] = field(default_factory=list)


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
    """The process that created the lab still runs (the same process, not a reused pid; a zombie
    has exited)."""
    if not owner:
        return False
    return _proc_start_time(owner["pid"]) == owner["start"] and process_alive(owner["pid"])


def list_lab_states() -> list[dict[str, Any]]:
    out = []
    for p in sorted(labs_dir().glob("*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return out


class Lab(ABC):
    """A client, router(s) and server; commands run inside any node.

    The base class owns the life cycle and the link: a backend creates and removes its nodes
    (``_create``, ``_destroy``) and says how to reach them (``cmd``, ``address``, ``routers``,
    ``interface``); the base attaches the link emulator to the routers, applies conditions and
    keeps the state file that other processes (``lab set``, the reaper) read.
    """
    name: ClassVar[str]                       # the backend's name in BACKENDS
    protocols: ClassVar[frozenset[str]] = frozenset({"h1", "h2", "h3"})
    # the nodes are other hosts: local pids and /proc say nothing about their processes
    remote: ClassVar[bool] = False
    # several labs of this backend can run at once (quicbench run --jobs N); else why not
    concurrent_labs: ClassVar[str | None] = None
    # the workload kinds its nodes can run (model/workload_kinds.py); None: every kind
    workload_kinds: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, spec: LabSpec):
        self.spec = spec
        self.name = spec.name
        self.state: dict[str, Any] = {}
        self.link: LinkEmulator | None = None
        self.link_passed_over: dict[str, str] = {}     # link 'auto': driver -> why it was not chosen

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    @classmethod
    def version(cls) -> dict[str, str]:
        return {}

    # -- what a backend writes --------------------------------------------------------
    @abstractmethod
    def _claim(self) -> None:
        """Reserve the lab's name and addresses and record the state file, before creating anything."""

    @abstractmethod
    def _create(self) -> None:
        """Create the nodes and the links between them (the state file exists already)."""

    @abstractmethod
    def _destroy(self) -> None:
        """Stop everything inside the nodes and remove them; safe on a half-created lab."""

    # -- lifecycle -------------------------------------------------------------------
    def up(self, conditions: list[Condition] | None = None) -> None:
        """Create the lab and start its link with the spec's condition; conditions (default: the
        spec's) let link 'auto' pick one driver for all of them."""
        self._claim()
        try:
            self._create()
            if self.spec.tcp_initcwnd is not None:
                self.check_initial_windows()
            cls = self.link_class(conditions or [self.spec.condition])
            self.link = cls(self.routers(), self, self.run_dir, self.spec.offload)
            self.set_condition(self.spec.condition, status="up")
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Stop the link and everything in the lab, remove it; safe to call more than once."""
        if self.link is not None:
            try:
                self.link.stop()
            except Exception:  # noqa: BLE001 - the nodes go below anyway
                pass
        self._destroy()
        for p in (self.state_path, self.state_path.with_suffix(".tmp")):
            p.unlink(missing_ok=True)
        if (self.state_path.parent / self.name).exists():
            import shutil
            shutil.rmtree(self.state_path.parent / self.name, ignore_errors=True)

    def link_class(self, conditions: list[Condition]) -> type[LinkEmulator]:
        """The link driver for these conditions (a backend whose routers are other hosts asks them).
        With `auto`, why each driver before the chosen one was passed over is kept in
        ``link_passed_over`` (meta.json's link.auto_passed_over, and a line on the terminal)."""
        if self.spec.link == "auto":
            cls, self.link_passed_over = auto_choice(conditions, self.spec.offload)
            return cls
        return resolve_link(self.spec.link, conditions, self.spec.offload)

    def endpoint_cpu(self, server_pid: int | None) -> CpuCounters:
        """The server's and the endpoint machines' CPU counters now. Here every node is on this
        machine: the server's group and /proc/stat are read locally (inside User-Mode Linux, its)."""
        softirq = softirq_thread_wait_seconds()
        members = group_members(server_pid) if server_pid else []     # one scan of /proc per reading
        cpus = sorted({c for p in members for c in last_cpus(p)})
        return CpuCounters(group_sched_seconds(server_pid, members) if server_pid else None, {"": machine_cpu_ticks()},
                           {"": softirq} if softirq is not None else {}, {"": per_cpu_ticks()}, cpus)

    def initcwnd_option(self) -> str:
        """The option of the client's and the server's route to each other that sets TCP's initial
        window, when the spec sets one (backends append it to those routes)."""
        return f" initcwnd {self.spec.tcp_initcwnd}" if self.spec.tcp_initcwnd is not None else ""

    def initial_windows(self) -> dict[str, int]:
        """TCP's initial congestion window (segments) the client and the server use towards each
        other, read back from the kernel (`ip route get PEER`: its route's initcwnd metric)."""
        out = {}
        for node, peer in (("client", "server"), ("server", "client")):
            text = run(self.cmd(node, ["ip", "route", "get", self.address(peer)])).stdout
            m = re.search(r"\binitcwnd (\d+)", text)
            out[node] = int(m.group(1)) if m else KERNEL_INITCWND
        return out

    def check_initial_windows(self) -> None:
        """The spec's initial window is what both endpoints' kernels will use, or the lab fails."""
        seen = self.initial_windows()
        wrong = {n: w for n, w in seen.items() if w != self.spec.tcp_initcwnd}
        if wrong:
            raise QuicbenchError(f"tcp_initcwnd: set {self.spec.tcp_initcwnd} segments, the kernel reports "
                                 + ", ".join(f"{w} at the {n}" for n, w in wrong.items()))
        self.state["tcp_initcwnd"] = self.spec.tcp_initcwnd

    def row_hosts(self) -> dict[str, Any]:
        """Row columns that name the hosts a trial was measured on (none for a one-host lab)."""
        return {}

    def host_facts(self) -> dict[str, Any] | None:
        """What the lab found on its hosts (versions, kernel, clock offset), for meta.json."""
        return None

    def set_condition(self, condition: Condition, status: str | None = None) -> None:
        """Apply a condition on the running link and record it (and what the link keeps)."""
        assert self.link is not None, "the lab is not up"
        self.link.apply(condition)
        self.spec.condition = condition
        self.state["link"] = self.link.describe()
        if status:
            self.state["status"] = status
        self.save_state()

    @property
    def link_name(self) -> str | None:
        return self.link.name if self.link is not None else (self.state.get("link") or {}).get("name")

    def kill_node_processes(self, node: str) -> None:
        """SIGKILL every process running inside node (the trial's client, when the lab failed)."""

    def link_fault(self) -> str | None:
        """None while the link emulation runs, else what is wrong with it."""
        return self.link.alive() if self.link is not None else None

    def node_fault(self) -> str | None:
        """None while every node of the lab exists, else which are gone (removed from outside)."""
        return None

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Lab":
        lab = cls(LabSpec.model_validate(state["spec"]))
        lab.state = state
        if state.get("link"):
            lab.link = LINKS.get(state["link"]["name"])(lab.routers(), lab, lab.run_dir, lab.spec.offload,
                                                       described=state["link"])
        return lab

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
    def cmd(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """The argv that runs argv inside node, with env added to its environment (a value that
        is a local path names that path as the node sees it)."""

    def collect(self, node: str, local_dir: Path) -> None:
        """Bring back the files a node's long-running process wrote into local_dir (a directory it
        was told by its argv or env) and has closed: a backend whose nodes write elsewhere moves
        them here. Here the nodes share this machine's files: nothing to do."""

    @abstractmethod
    def address(self, node: str) -> str:
        """The node's address that the other end uses (client and server)."""

    @abstractmethod
    def routers(self) -> list[RouterPorts]: ...

    @abstractmethod
    def interface(self, node: str, towards: str) -> str:
        """The name of node's interface that faces its neighbour towards 'client' or 'server'."""

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
    from quicbench.lab import BACKENDS   # the registry lists the backends defined beside this module
    path = labs_dir() / f"{name}.json"
    if not path.exists():
        known = [s["name"] for s in list_lab_states()]
        raise QuicbenchError(f"no lab named '{name}': running labs: {', '.join(known) or 'none'}")
    state = json.loads(path.read_text())
    return BACKENDS.get(state["backend"]).from_state(state)


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
