"""`qb-load`, quicbench's Go load client (h1 via net/http, h2 via x/net/http2, h3 via quic-go)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from quicbench.errors import QuicbenchError
from quicbench.model.units import go_duration
from quicbench.paths import bin_dir, find_binary
from quicbench.clients.base import Client, ClientResult, FetchRequest, Target, run_summary_client

FIX = "build it with 'make setup' (Go module in loadclient/)"


class LoadClient(Client):
    name = "qb-load"
    protocols = frozenset({"h1", "h2", "h3"})
    connection_policies = ("shared", "per-object", "pool")
    resumption_modes = ("none", "tickets", "0rtt", "0rtt-token")
    binds_local_port = True
    binaries = ("qb-load",)
    quic_stack = "quic-go"

    @staticmethod
    def executable() -> str:
        return find_binary("qb-load", FIX)

    @classmethod
    def version(cls) -> dict[str, str]:
        out = subprocess.run([cls.executable(), "--version"], capture_output=True, text=True, timeout=10).stdout
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            return {cls.name.replace("-", "_"): out.strip()}

    def argv(self, target: Target, protocol: str, workload, trial_dir: Path, timeout_s: float) -> list[str]:
        return self.fetch_argv(target, protocol, target.content.path_template(workload.size_bytes),
                               trial_dir / "requests.jsonl", timeout_s, count=workload.count,
                               parallel=workload.parallelism, connections=workload.connections,
                               resumption=workload.resumption)

    @classmethod
    def fetch_argv(cls, target: Target, protocol: str, path_template: str, requests_file: Path, timeout_s: float,
                   count: int = 1, parallel: int = 1, connections: str = "shared",
                   resumption: str = "none") -> list[str]:
        """qb-load's command line: `count` requests of path_template ({i} = 1..count) from the
        lab's server over `protocol`, every body checked against the content manifest."""
        port = "" if target.port == 443 else f":{target.port}"
        return [cls.executable(), "--proto", protocol,
                "--base-url", f"https://{target.hostname}{port}",
                "--connect", f"{target.address}:{target.port}",
                "--ca", str(target.tls.ca_cert),
                "--path-template", path_template,
                "--count", str(count), "--parallel", str(parallel),
                "--connections", connections,
                "--resumption", resumption,
                "--manifest", str(target.content.manifest_path),
                "--requests", str(requests_file),
                "--timeout", go_duration(timeout_s)]

    def extra_args(self, req: FetchRequest) -> list[str]:
        """The options a trial adds: the local port, the client's qlog, the TLS key log."""
        extra = []
        if req.local_port is not None:
            extra += ["--bind-port", str(req.local_port)]
        if req.options is not None and req.options.qlog and req.protocol == "h3":
            extra += ["--qlog-dir", str(req.trial_dir / "qlog")]
        if req.options is not None and req.options.keylog:
            extra += ["--keylog", str(req.trial_dir / "keys.log")]
        return extra

    def fetch(self, req: FetchRequest) -> ClientResult:
        target, trial_dir, timeout_s = req.target, req.trial_dir, req.timeout_s
        trial_dir.mkdir(parents=True, exist_ok=True)
        argv = target.lab.cmd("client", self.argv(target, req.protocol, req.workload, trial_dir, timeout_s)
                              + self.extra_args(req))
        # hard stop a little after the client's own deadline
        return run_summary_client(argv, trial_dir, timeout_s + 10, self.name, target.lab.remote)


class LoadCompatibleClient(LoadClient):
    """A client built here that speaks qb-load's command line, records and summary for h3 only
    (stacks/qbfetch): another QUIC stack under the same workload model. Connection policies
    shared and per-object; no session resumption, local port binding or TLS key log."""
    protocols = frozenset({"h3"})
    connection_policies = ("shared", "per-object")
    resumption_modes = ("none",)
    binds_local_port = False
    install_hint = "run 'make stacks'"      # each client names its own target

    @classmethod
    def executable(cls) -> str:
        local = bin_dir() / cls.binaries[0]
        if local.is_file() and os.access(local, os.X_OK):
            return str(local)
        raise QuicbenchError(f"missing binary '{local}': {cls.install_hint}")

    def extra_args(self, req: FetchRequest) -> list[str]:
        if req.options is not None and req.options.qlog and req.protocol == "h3":
            return ["--qlog-dir", str(req.trial_dir / "qlog")]
        return []
