"""`netty`: Go-Quick's getFiles over HTTP/3 on Netty's QUIC and HTTP/3 codecs (quiche inside).

The client half of ``quicbench-netty`` (stacks/netty/, built by ``make netty`` or on first use; see
servers/netty.py). One JVM per trial fetches ``count`` objects, ``parallel`` at once, on one
connection (``shared``) or a new QUIC connection each (``per-object``: Go-Quick's getFiles), with
full HTTP/3 (ALPN ``h3`` only). It verifies the server's certificate against the lab's CA and
host name, hashes every body as it arrives and checks it against the content manifest (size and
sha256), and writes qb-load's per-request records (requests.jsonl) and summary (stdout), so the
row is made as qb-load's:

- **Times**: ``start_ns`` when the request is started (a new connection's requests include its
  handshake), ``connect_start_ns`` / ``connect_done_ns`` = ``tls_done_ns`` (QUIC: one
  handshake) of a connection's first request, ``first_byte_ns`` when the response headers are
  decoded (as qb-load's h3), ``last_byte_ns`` at the stream's end; ``stall_ns`` and ``gaps_ns``
  between DATA frames, as qb-load's. The clock starts after the JVM has started and loaded its
  TLS context, but the first connection still pays for loading the QUIC classes (a JIT's cold path).
- **CPU**: ``cpu_user_s`` / ``cpu_sys_s`` from /proc/self/stat (10 ms ticks) and the run-queue
  wait of every thread from /proc/self/task/*/schedstat, over the transfer, less the thread that
  hashes the bodies (Java's SHA-256 costs several times Go's; the summary's ``cpu_verify_s``);
  the process's rusage (JVM start, warm-up and hashing included) is ``process_cpu_s``.
- **Receive windows**: quiche's own example client's initial 10 MB per connection and 1 MB per
  stream, which quiche grows (up to 24 / 16 MiB) when the transfer uses a window up within about
  two round trips: a receiver's own choice, part of what it is measured for.
- **qlog** (the plan's ``qlog = true``): quiche's, one per connection in the trial's qlog/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quicbench.clients.base import Client, ClientResult, FetchRequest, Target, run_summary_client
from quicbench.endpoints.netty import (NETTY_BINARY, NETTY_PROVISIONS, netty_binary_facts, netty_executable,
                                       netty_versions)

MAX_PARALLEL = 1000       # connections or streams in flight (the server's stream limit: 1000)


class NettyClient(Client):
    name = "netty"
    protocols = frozenset({"h3"})
    quic_stack = "quiche (netty)"     # Netty's QUIC codec holds Cloudflare's quiche
    connection_policies = ("shared", "per-object")
    resumption_modes = ("none",)
    workload_kinds = ("objects",)
    binaries = (NETTY_BINARY, NETTY_BINARY + ".jar", "java")
    provisions = NETTY_PROVISIONS

    @staticmethod
    def executable() -> str:
        return netty_executable()

    @classmethod
    def version(cls) -> dict[str, str]:
        return netty_versions()

    @classmethod
    def binary_facts(cls) -> dict[str, Any]:
        return netty_binary_facts(root=False)

    @classmethod
    def workload_problem(cls, workload: Any) -> str | None:
        if workload.connections not in cls.connection_policies:
            return (f"connections = {workload.connections!r}: the netty client opens one connection or one per "
                    f"object; accepted: {', '.join(cls.connection_policies)}")
        if workload.parallelism > MAX_PARALLEL:
            return f"parallel = {workload.parallel}: accepted for the netty client: parallel <= {MAX_PARALLEL}"
        return None

    @classmethod
    def fetch_argv(cls, target: Target, workload: Any, trial_dir: Path, timeout_s: float,
                   qlog: bool = False) -> list[str]:
        """The client's command line for one trial (qb-load's options, where it has them)."""
        argv = [cls.executable(), "client", "--connect", f"{target.address}:{target.port}",
                "--host", target.hostname, "--ca", str(target.tls.ca_cert),
                "--path-template", target.content.path_template(workload.size_bytes),
                "--count", str(workload.count), "--parallel", str(workload.parallelism),
                "--connections", workload.connections, "--manifest", str(target.content.manifest_path),
                "--requests", str(trial_dir / "requests.jsonl"), "--timeout", f"{timeout_s:g}s",
                # the JVM's warm-up: an in-process server on the loopback address with the lab's
                # certificate (never the lab's path), fetched before the measured transfer
                "--warmup-cert", str(target.tls.cert), "--warmup-key", str(target.tls.key)]
        if qlog:
            argv += ["--qlog-dir", str(trial_dir / "qlog")]
        return argv

    def fetch(self, req: FetchRequest) -> ClientResult:
        target, trial_dir = req.target, req.trial_dir
        problem = self.workload_problem(req.workload)
        if problem:
            return ClientResult(requests=[], summary={}, process_cpu_s=None, wall_s=0.0, returncode=2, error=problem)
        trial_dir.mkdir(parents=True, exist_ok=True)
        qlog = bool(req.options is not None and req.options.qlog)
        argv = self.fetch_argv(target, req.workload, trial_dir, req.timeout_s, qlog=qlog)
        # its own deadline ends the transfer; this one the JVM, a little later
        return run_summary_client(target.lab.cmd("client", argv), trial_dir, req.timeout_s + 15, "netty client",
                                  target.lab.remote)
