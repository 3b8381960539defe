"""The server driver interface: serve a content set over TLS inside a lab node."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicbench.cpu import group_members
from quicbench.errors import QuicbenchError
from quicbench.paths import bin_dir, find_binary
from quicbench.proc import run

if TYPE_CHECKING:
    from quicbench.content.objects import ContentSet
    from quicbench.lab.base import Lab
    from quicbench.tls import TlsMaterial

NO_CACHE_HEADERS = {
    # as Go-Quick's Apache: every response fetched anew
    "Cache-Control": "no-cache, no-store, must-revalidate",
    "Pragma": "no-cache",
    "Expires": "0",
}


def listen_address(address: str, port: int) -> str:
    """ADDRESS:PORT as server configs write it (IPv6 in brackets)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def reap_process_group(pgid: int, grace_s: float = 2.0) -> None:
    """Make sure no process of the server's session survives its master (forked workers).

    The base class starts each server as a session and process-group leader and terminates
    that leader; a master that exited (or was killed) before its workers would orphan
    them. Wait briefly for the group to empty, then SIGKILL whatever is left.
    """
    deadline = time.monotonic() + grace_s
    while group_members(pgid):
        if time.monotonic() >= deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                return
            break
        time.sleep(0.02)
    deadline = time.monotonic() + 5
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)


class Server(ABC):
    """A web server started in the lab's server node for the whole run."""

    name: ClassVar[str]
    protocols: ClassVar[frozenset[str]]   # subset of {"h1", "h2", "h3"}
    binary: ClassVar[str]
    install_hint: ClassVar[str]
    # the executables the server node needs (a lab on other hosts checks them there): the binary
    binaries: ClassVar[tuple[str, ...]] = ()
    package: ClassVar[str | None] = None          # the Debian package that provides the binary
    provisions: ClassVar[tuple[str, ...]] = ()    # what provides it on first use (quicbench.provision)
    # how the server is made to write a qlog per QUIC connection into a directory: an environment
    # variable (quic-go's QLOGDIR) or a command-line option that takes the directory (ngtcp2's
    # --qlog-dir, which argv() adds with qlog_args()); neither: it cannot. run/recovery.py counts
    # the sender's loss declarations from them
    qlog_env: ClassVar[str | None] = None
    qlog_option: ClassVar[str | None] = None
    # the congestion controllers the server's QUIC sender can be set to (the plan's quic_cc),
    # first = its default; empty: it cannot be set
    quic_ccs: ClassVar[tuple[str, ...]] = ()
    # the congestion controller a sender that cannot be set uses (its stack's, e.g. quic-go's
    # NewReno), for rows; None: not known
    quic_cc_builtin: ClassVar[str | None] = None
    version_args: ClassVar[tuple[str, ...]] = ("-v",)   # what makes the binary print its version
    # the QUIC implementation behind its h3 (quic-go, ngtcp2, quinn, aioquic, ...): what the stack
    # matrix and doctor name; None for a server without h3 (docs/stacks.md)
    quic_stack: ClassVar[str | None] = None
    # the application protocol it speaks over QUIC: "h3", or a transport-only one ("hq-interop",
    # "perf") that only a receiver speaking the same can fetch; preflight refuses other pairs
    quic_app: ClassVar[str] = "h3"
    # its QUIC sender sends DATA_BLOCKED / STREAM_DATA_BLOCKED when the receiver's flow control stops
    # it (False: never, so its qlog cannot show flow control: quic_fc_blocked stays empty)
    quic_blocked_frames: ClassVar[bool] = True
    # False for a driver that needs its plan's definition first (the command driver, unbound)
    configured: ClassVar[bool] = True

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "binaries" not in cls.__dict__:
            cls.binaries = (cls.binary,) if getattr(cls, "binary", "") else ()

    def __init__(self, lab: "Lab", workdir: Path, content: "ContentSet", tls: "TlsMaterial", port: int = 443,
                 quic_cc: str | None = None):
        self.lab = lab
        self.workdir = workdir
        self.content = content
        self.tls = tls
        self.port = port
        self.quic_cc = quic_cc     # one of quic_ccs (checked by the plan's preflight); None: the default
        self.proc: subprocess.Popen | None = None
        self.qlog_dir: Path | None = None      # set by enable_qlog()
        # the plan's verify_cc: the sender logs the congestion controller it runs, where that costs
        # something (ngtcp2's per-acknowledgement log); reported_cc reads it
        self.cc_log = False

    # -- what a driver writes ---------------------------------------------------------
    @abstractmethod
    def argv(self) -> list[str]:
        """Write the per-run config into workdir and return the command that serves it."""

    @classmethod
    def binary_facts(cls) -> dict[str, dict[str, Any]]:
        """Per binary: its Debian package, whether it needs root (servers bind port 443), how it
        says its version, whether quicbench builds it. What a lab on other hosts checks and installs."""
        return {b: {"package": cls.package, "root": True, "version_args": list(cls.version_args), "own": False}
                for b in cls.binaries}

    @classmethod
    def executable(cls) -> str:
        return find_binary(cls.binary, cls.install_hint)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            return True, cls.executable()
        except QuicbenchError as e:
            return False, str(e)

    @classmethod
    def version(cls) -> dict[str, str]:
        return {cls.name: cls.version_text()}

    @classmethod
    @abstractmethod
    def version_text(cls) -> str:
        """The server's version number, as its binary reports it."""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("QLOGDIR", None)    # a qlog only where the plan asks for one
        return env

    def node_env(self) -> dict[str, str]:
        """What the server's own environment on its node must hold: the qlog directory, for a
        stack told by a variable (the lab maps it to where the node writes, and brings the files
        back with ``collect``)."""
        if self.qlog_dir is not None and self.qlog_env:
            return {self.qlog_env: str(self.qlog_dir)}
        return {}

    def enable_qlog(self) -> bool:
        """Write a qlog per QUIC connection into workdir/qlog from the next start on, if the
        server can (False: it cannot)."""
        if not (self.qlog_env or self.qlog_option):
            return False
        self.qlog_dir = self.workdir / "qlog"
        self.qlog_dir.mkdir(parents=True, exist_ok=True)
        return True

    def file_server_args(self) -> list[str]:
        """The options of quicbench's own HTTP/3 file servers (quinn, quiche, aioquic): listen
        address, certificate and key, content root (the run's private copy: live video is
        published into it, so no link leaves it), controller and qlog."""
        return ["--listen", listen_address(self.lab.address("server"), self.port), "--cert", str(self.tls.cert),
                "--key", str(self.tls.key), "--root", str(self.content.root),
                "--cc", self.sender_cc or self.quic_ccs[0], *self.qlog_args()]

    def qlog_args(self) -> list[str]:
        """The command-line option that asks for qlog (a driver with qlog_option adds it in argv())."""
        if self.qlog_dir is None or not self.qlog_option:
            return []
        return [self.qlog_option, str(self.qlog_dir)]

    @property
    def sender_cc(self) -> str | None:
        """The congestion controller this server's QUIC sender runs: the one asked for, else its
        default (settable), else its stack's own (quic_cc_builtin)."""
        return self.quic_cc or (self.quic_ccs[0] if self.quic_ccs else self.quic_cc_builtin)

    def reported_cc(self, qlogs: list[Path], trial_dir: Path) -> str | None:
        """The congestion controller the sender reported for a trial's connections (its qlogs, now
        in trial_dir, or its own log), None when it reports none. The trial fails if it is not
        ``sender_cc``."""
        return None

    # -- shared lifecycle -------------------------------------------------------------
    def start(self, timeout: float = 10.0) -> None:
        # a master that died (the runner restarts crashed servers) may have left workers
        # holding the listening port: clear them first
        self.stop()
        if not self.content.private:
            # the server serves its own copy of the content's regular files, never the directory
            # itself: a link or mount made there later is not seen (ContentSet.isolated)
            self.content.check_served_files()          # refused before anything is written
            self.content = self.content.isolated(self.workdir / "served")
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / f"{self.name}.log", "ab")
        self.proc = subprocess.Popen(self.lab.cmd("server", self.argv(), env=self.node_env()), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env(), start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.workdir / f"{self.name}.log").read_text(errors="replace").strip().splitlines()[-3:]
                raise QuicbenchError(f"server {self.name} exited at start (code {self.proc.returncode}): "
                                     + " | ".join(tail))
            if self.ready():
                return
            time.sleep(0.02)
        self.stop()
        raise QuicbenchError(f"server {self.name} not listening on port {self.port} after {timeout:.0f}s; "
                             f"see {self.workdir / (self.name + '.log')}")

    def ready(self) -> bool:
        """TCP (and UDP for h3) port is listening in the server node."""
        cp = run(self.lab.cmd("server", ["ss", "-Hln", "-tu", f"sport = :{self.port}"]), check=False)
        kinds = {line.split()[0] for line in cp.stdout.splitlines() if line.strip()}
        want = ({"tcp"} if self.protocols & {"h1", "h2"} else set()) | ({"udp"} if "h3" in self.protocols else set())
        return want <= kinds

    def stop(self) -> None:
        """Stop the server and every process of its group (forked workers included)."""
        if self.proc is None:
            return
        pgid = self.proc.pid   # started as a session leader: its pid is the group id
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        reap_process_group(pgid)

    @property
    def pid(self) -> int | None:
        """The server's local process: its group leader, or on a remote host the wrapper whose
        remote group the lab reads (``lab.endpoint_cpu``)."""
        return self.proc.pid if self.proc else None

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BuiltServer(Server):
    """A server quicbench builds into build/bin (no Debian package): found there only, and a lab on
    other hosts runs the same build (copied by --provision; another build is refused)."""

    @classmethod
    def executable(cls) -> str:
        local = bin_dir() / cls.binary
        if local.is_file() and os.access(local, os.X_OK):
            return str(local)
        raise QuicbenchError(f"missing binary '{local}': {cls.install_hint}")

    @classmethod
    def binary_facts(cls) -> dict[str, dict[str, Any]]:
        # root: it binds port 443
        return {cls.binary: {"package": None, "root": True, "version_args": list(cls.version_args), "own": True}}


class RustServer(BuiltServer):
    """A server of quicbench's Rust crates, whose ``--version`` says 'PROGRAM VERSION (crate version,
    ...)': its rows name the program and every crate of its stack."""
    version_args = ("--version",)
    VERSION_LINE: ClassVar[re.Pattern[str]] = re.compile(r"^(\S+) (\S+) \((.*)\)\s*$")

    @classmethod
    def version_line(cls) -> str:
        try:
            cp = subprocess.run([cls.executable(), *cls.version_args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise QuicbenchError(f"{cls.binary} --version: {e}") from e
        return cp.stdout.strip()

    @classmethod
    def version(cls) -> dict[str, str]:
        """'quicbench-quiche-server 0.1.0 (quiche 0.30.0, boring-sys 5.4.0)' -> {quicbench_quiche_server:
        0.1.0, quiche: 0.30.0, boring_sys: 5.4.0}; the line itself when it says otherwise."""
        line = cls.version_line()
        m = cls.VERSION_LINE.match(line)
        if not m:
            return {cls.name: line}
        versions = {m.group(1).replace("-", "_"): m.group(2)}
        for part in m.group(3).split(","):
            crate, _, ver = part.strip().partition(" ")
            if crate and ver:
                versions[crate.replace("-", "_")] = ver
        return versions

    @classmethod
    def version_text(cls) -> str:
        line = cls.version_line()
        m = cls.VERSION_LINE.match(line)
        return m.group(2) if m else line


def cc_from_log(log: Path, conns: set[str], line: re.Pattern[str], trial_dir: Path) -> str | None:
    """The congestion controller a sender logged for the trial's connections: the lines of its log
    that `line` matches (group 1: the connection ID, group 2: the controller) for the connections
    whose qlogs the trial took. They are kept in trial_dir/server-cc.log; several controllers
    (never expected) are all named. None without such lines."""
    if not conns or not log.is_file():
        return None
    found = [(text, m.group(2)) for text in log.read_text(errors="replace").splitlines()
             if (m := line.match(text)) and m.group(1) in conns]
    if not found:
        return None
    (trial_dir / "server-cc.log").write_text("".join(text + "\n" for text, _ in found))
    return ",".join(sorted({cc for _, cc in found}))
