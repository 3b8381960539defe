"""`qb-load`, quicbench's Go load client (h1 via net/http, h2 via x/net/http2, h3 via quic-go)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from quicbench.model.units import go_duration
from quicbench.paths import find_binary
from quicbench.clients.base import Client, ClientResult, FetchRequest, Target, run_measured
from quicbench.store import read_jsonl

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
            return {"qb_load": out.strip()}

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

    def fetch(self, req: FetchRequest) -> ClientResult:
        target, protocol, workload, trial_dir, timeout_s, options = (
            req.target, req.protocol, req.workload, req.trial_dir, req.timeout_s, req.options)
        trial_dir.mkdir(parents=True, exist_ok=True)
        extra = []
        if req.local_port is not None:
            extra += ["--bind-port", str(req.local_port)]
        if options is not None and options.qlog and protocol == "h3":
            extra += ["--qlog-dir", str(trial_dir / "qlog")]
        if options is not None and options.keylog:
            extra += ["--keylog", str(trial_dir / "keys.log")]
        argv = target.lab.cmd("client", self.argv(target, protocol, workload, trial_dir, timeout_s) + extra)
        with open(trial_dir / "summary.json", "wb") as out, open(trial_dir / "client.log", "wb") as log:
            # hard stop a little after the client's own deadline
            returncode, cpu, wall, _ = run_measured(argv, timeout_s + 10, stdout=out, stderr=log)
        requests = read_jsonl(trial_dir / "requests.jsonl")
        try:
            summary = json.loads((trial_dir / "summary.json").read_text() or "{}")
        except json.JSONDecodeError:
            summary = {}
        error = None
        if returncode != 0:
            errs = summary.get("errors") or []
            if errs:
                error = f"{len(errs)} request(s) failed, first: {errs[0].get('error')}"
            else:
                tail = (trial_dir / "client.log").read_text(errors="replace").strip().splitlines()[-1:]
                error = f"qb-load exit code {returncode}" + (f": {tail[0]}" if tail else "")
        if target.lab.remote:
            # the rusage is the local SSH command's: qb-load's own on its host (older builds: none)
            cpu = summary.get("process_cpu_s")
        return ClientResult(requests=requests, summary=summary, process_cpu_s=cpu, wall_s=wall,
                            returncode=returncode, error=error)

