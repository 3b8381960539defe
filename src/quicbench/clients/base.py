"""The client driver interface: fetch a workload from the lab's server over one protocol."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicbench.errors import QuicbenchError
from quicbench.model.capabilities import ClientCapabilities

if TYPE_CHECKING:
    from quicbench.content.objects import ContentSet
    from quicbench.lab.base import Lab
    from quicbench.model.plan import TrialOptions, Workload
    from quicbench.tls import TlsMaterial


@dataclass(frozen=True)
class Target:
    """Where and what the client fetches."""
    lab: "Lab"
    hostname: str
    address: str
    port: int
    tls: "TlsMaterial"
    content: "ContentSet"


@dataclass(frozen=True)
class FetchRequest:
    """One trial's transfer, as the runner hands it to a client driver."""
    target: Target
    protocol: str
    workload: "Workload"
    trial_dir: Path
    timeout_s: float
    options: "TrialOptions | None" = None
    local_port: int | None = None      # the local port of the trial's one connection (NAT rebinding)


@dataclass
class ClientResult:
    """What a client reports of one transfer.

    cpu_s is the client's CPU over the transfer itself (process start-up excluded where the
    client measures its own), cpu_wait_s the time it was runnable but waited for a CPU, and
    process_cpu_s the whole client process's CPU (from its rusage).
    """
    requests: list[dict[str, Any]]
    summary: dict[str, Any]
    process_cpu_s: float | None
    wall_s: float
    returncode: int
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cpu_s: float | None = None
    cpu_wait_s: float | None = None

    def __post_init__(self) -> None:
        if self.cpu_s is None:
            s = self.summary or {}
            self.cpu_s = (s["cpu_user_s"] + s["cpu_sys_s"]) if "cpu_user_s" in s else self.process_cpu_s
            if self.cpu_wait_s is None:
                self.cpu_wait_s = s.get("cpu_wait_s")


class Client(ABC):
    """A client driver: name, protocols, available(), version(), fetch()."""
    name: ClassVar[str]
    protocols: ClassVar[frozenset[str]]
    # the workloads' `resumption` modes the client honours (docs/plans.md, "Session resumption")
    resumption_modes: ClassVar[tuple[str, ...]] = ("none",)
    # binds its one connection to FetchRequest.local_port (a NAT rebinding needs to know it)
    binds_local_port: ClassVar[bool] = False
    # the `connections` policies of objects workloads it honours (docs/plans.md)
    connection_policies: ClassVar[tuple[str, ...]] = ("shared",)
    # the executables the client node needs (a lab on other hosts checks them there)
    binaries: ClassVar[tuple[str, ...]] = ()
    package: ClassVar[str | None] = None      # the Debian package that provides them (None: built here)
    provisions: ClassVar[tuple[str, ...]] = ()  # what provides it on first use (quicbench.provision)
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    # the QUIC implementation behind its h3 (quic-go, ngtcp2, neqo, ...): what the stack matrix and
    # doctor name; None for a client without h3 (docs/stacks.md)
    quic_stack: ClassVar[str | None] = None
    # the application protocol it speaks over QUIC: "h3", or a transport-only one ("hq-interop",
    # "perf") that only a sender speaking the same can serve; preflight refuses other pairs
    quic_app: ClassVar[str] = "h3"
    # the workload kinds it can run (model/workload_kinds.py); None: any kind a non-browser client
    # fetches (objects and kinds like it), never one the browser manages (page, video)
    workload_kinds: ClassVar[tuple[str, ...] | None] = None
    # False for a driver that needs its plan's definition first (the command driver, unbound)
    configured: ClassVar[bool] = True

    @abstractmethod
    def fetch(self, req: FetchRequest) -> ClientResult:
        """Run one trial's transfer; never raise for a failed transfer, report it in .error."""

    @classmethod
    def executable(cls) -> str | None:
        """The client's program (a QuicbenchError says how to install it when missing); None for a
        driver with no program of its own."""
        return None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(True, the program) when the client can run here, else (False, why not)."""
        try:
            return True, cls.executable() or ""
        except QuicbenchError as e:
            return False, str(e)

    @classmethod
    def workload_problem(cls, workload: "Workload") -> str | None:
        """Why the client cannot fetch this workload as asked (one line naming the field and the
        accepted values), None if it can. The plan's preflight refuses the plan with it."""
        return None

    @classmethod
    def capabilities(cls) -> ClientCapabilities:
        """What it declares it can do, as the plan model is told when it registers."""
        return ClientCapabilities(protocols=frozenset(cls.protocols), workload_kinds=cls.workload_kinds,
                                  resumption_modes=cls.resumption_modes,
                                  connection_policies=cls.connection_policies, quic_app=cls.quic_app)

    @classmethod
    def playable_codecs(cls) -> tuple[tuple[str, ...], str] | None:
        """A player's (codecs it plays on this host, how to get the others); None: it plays no video
        or every codec a plan can name."""
        return None

    @classmethod
    def binary_facts(cls) -> dict[str, Any]:
        """Per binary: its Debian package (None: quicbench builds it), root or not, how it says its
        version. What a lab on other hosts checks and installs."""
        return {b: {"package": cls.package, "root": False, "version_args": list(cls.version_args),
                    "own": cls.package is None} for b in cls.binaries}

    @classmethod
    def version(cls) -> dict[str, str]:
        return {}


def run_measured(argv: Sequence[str], deadline_s: float, on_deadline: Callable[[subprocess.Popen], None] | None = None,
                 **popen: object) -> tuple[int, float, float, bool]:
    """Run a client process to its end: (exit code, CPU seconds from its rusage, wall seconds,
    whether the deadline struck). At the deadline on_deadline(proc) runs (default: kill).

    If the wait is interrupted (Ctrl-C, SIGTERM) on_deadline(proc) runs too and the client is
    reaped before the exception goes on: nothing keeps loading the lab while it is torn down."""
    t0 = time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, **popen)  # type: ignore[call-overload]
    struck = threading.Event()

    stop = on_deadline or (lambda p: p.kill())

    def strike() -> None:
        struck.set()
        stop(proc)

    killer = threading.Timer(deadline_s, strike)
    killer.daemon = True      # never keeps the interpreter from exiting
    try:
        killer.start()
        _, status, ru = os.wait4(proc.pid, 0)   # wait4: the child's own rusage, exact
    except BaseException:
        killer.cancel()
        stop(proc)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        raise
    killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, ru.ru_utime + ru.ru_stime, time.monotonic() - t0, struck.is_set()


def run_summary_client(argv: Sequence[str], trial_dir: Path, deadline_s: float, who: str,
                       remote: bool) -> ClientResult:
    """Run a client that follows qb-load's contract (docs/stacks.md): its summary as JSON on
    stdout (into summary.json), one record per request in requests.jsonl, its log on stderr (into
    client.log). A failed run's error names the first failed request, else the log's last line.
    Over SSH the process's rusage is the local ssh's: the client's own `process_cpu_s` from its
    summary is used instead (None when it reports none)."""
    import json

    from quicbench.store import read_jsonl
    with open(trial_dir / "summary.json", "wb") as out, open(trial_dir / "client.log", "wb") as log:
        returncode, cpu, wall, _ = run_measured(argv, deadline_s, stdout=out, stderr=log)
    requests = read_jsonl(trial_dir / "requests.jsonl")
    try:
        summary = json.loads((trial_dir / "summary.json").read_text() or "{}")
    except json.JSONDecodeError:
        summary = {}
    error = None
    if returncode != 0:
        errs = summary.get("errors") or []
        if errs:
            error = f"{summary.get('failed', len(errs))} request(s) failed, first: {errs[0].get('error')}"
        else:
            tail = (trial_dir / "client.log").read_text(errors="replace").strip().splitlines()[-1:]
            error = f"{who} exit code {returncode}" + (f": {tail[0][:300]}" if tail else "")
    if remote:
        cpu = summary.get("process_cpu_s")
    return ClientResult(requests=requests, summary=summary, process_cpu_s=cpu, wall_s=wall,
                        returncode=returncode, error=error)
