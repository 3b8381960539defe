"""`command`: a client by contract — any command line a plan names, run in the client node per trial.

A plan defines one in ``[client_commands.NAME]`` (``command``, ``protocols``, ``version``) and
names it as its ``client``. The command's placeholders ({url}, {urls}, {proto}, {ca},
{connect}, ..., model.plan.CLIENT_PLACEHOLDERS) are filled per trial, each word of the command
line on its own (no shell). quicbench times the process and takes its CPU from its rusage
(``run_measured``). Two ways to report, chosen by whether the command uses {out}:

- with {out}: the command writes one JSON line per request to {out} in qb-load's format
  (loadclient/README.md); the metrics, protocol and byte checks are those of qb-load's
  records. A JSON object on stdout with ``cpu_user_s``/``cpu_sys_s`` (and ``cpu_wait_s``) is
  taken as the CPU of its transfer, as qb-load's summary;
- without: its exit code and the bytes it wrote to stdout (the bodies) are the result; the time
  is the process's wall time (start-up included) and the protocol is recorded as
  ``unverified``. See docs/endpoints.md.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar

from quicbench.clients.base import Client, ClientResult, FetchRequest, run_measured
from quicbench.endpoints.command import expand_command, program, run_version
from quicbench.store import read_jsonl

if TYPE_CHECKING:
    from quicbench.model.plan import ClientCommand


class CommandClient(Client):
    """The driver; ``bind`` makes the class of one [client_commands.NAME] definition."""
    name = "command"
    protocols = frozenset({"h1", "h2", "h3"})
    connection_policies = ("shared",)       # the command decides; quicbench cannot force another policy
    spec: ClassVar["ClientCommand | None"] = None
    configured = False     # until bind() gives it a command

    @classmethod
    def bind(cls, name: str, spec: "ClientCommand") -> type["CommandClient"]:
        return type(f"CommandClient_{name}", (cls,), {"name": name, "protocols": frozenset(spec.protocols),
                                                      "spec": spec, "configured": True})

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if cls.spec is None:
            return False, (f"client '{cls.name}' needs a [client_commands.{cls.name}] table with "
                           f"command = \"...\" (docs/endpoints.md)")
        if not program(cls.spec.command):
            first = shlex.split(cls.spec.command)[0]
            return False, f"client_commands.{cls.name}.command: program '{first}' not found (not on PATH or not executable)"
        return True, program(cls.spec.command)

    @classmethod
    def version(cls) -> dict[str, str]:
        return run_version(cls.spec.version if cls.spec else None, cls.name)

    def values(self, req: FetchRequest) -> dict[str, Any]:
        t, w = req.target, req.workload
        port = "" if t.port == 443 else f":{t.port}"
        base = f"https://{t.hostname}{port}"
        template = t.content.path_template(w.size_bytes)
        paths = [template.replace("{i}", str(i)) for i in range(1, w.count + 1)]
        connect = f"[{t.address}]:{t.port}" if ":" in t.address else f"{t.address}:{t.port}"
        return {"url": base + paths[0], "urls": [base + p for p in paths], "base": base, "host": t.hostname,
                "port": t.port, "path": paths[0], "address": t.address, "connect": connect, "proto": req.protocol,
                "ca": str(t.tls.ca_cert), "spki": t.tls.spki_sha256_b64, "count": w.count,
                "parallel": w.parallelism, "out": str(req.trial_dir / "requests.jsonl"), "dir": str(req.trial_dir),
                "manifest": str(t.content.manifest_path), "timeout": f"{req.timeout_s:g}",
                "python": sys.executable, "plan_dir": os.getcwd()}

    def fetch(self, req: FetchRequest) -> ClientResult:
        assert self.spec is not None, "bind() the driver to a [client_commands.NAME] definition"
        req.trial_dir.mkdir(parents=True, exist_ok=True)
        argv = expand_command(self.spec.command, self.values(req))
        (req.trial_dir / "command.json").write_text(json.dumps(argv))
        full = req.target.lab.cmd("client", argv)
        if self.spec.writes_requests:
            return self._with_records(req, full)
        return self._exit_and_bytes(req, full)

    def _error(self, req: FetchRequest, returncode: int) -> str:
        tail = (req.trial_dir / "client.log").read_text(errors="replace").strip().splitlines()[-1:]
        return f"{self.name} exit code {returncode}" + (f": {tail[0][:300]}" if tail else "")

    def _with_records(self, req: FetchRequest, argv: list[str]) -> ClientResult:
        out_path = req.trial_dir / "client.out"
        with open(out_path, "wb") as out, open(req.trial_dir / "client.log", "wb") as log:
            returncode, cpu, wall, struck = run_measured(argv, req.timeout_s + 10, stdout=out, stderr=log)
        requests = read_jsonl(req.trial_dir / "requests.jsonl")
        summary: dict[str, Any] = {}
        try:
            parsed = json.loads(out_path.read_text(errors="replace") or "{}")
            summary = parsed if isinstance(parsed, dict) else {}
        except json.JSONDecodeError:
            pass
        error = None
        if struck:
            error = f"{self.name} still running after the trial's deadline ({req.timeout_s:g} s + 10 s): killed"
        elif returncode != 0:
            bad = [r for r in requests if r.get("error")]
            error = (f"{len(bad)} request(s) failed, first: {bad[0]['error']}" if bad
                     else self._error(req, returncode))
        elif not requests:
            error = f"{self.name} wrote no request lines to {{out}} ({req.trial_dir / 'requests.jsonl'})"
        if "cpu_user_s" not in summary:
            summary = {}          # the process's rusage stands for the transfer's CPU
        return ClientResult(requests=requests, summary=summary, process_cpu_s=cpu, wall_s=wall,
                            returncode=returncode, error=error)

    def _exit_and_bytes(self, req: FetchRequest, argv: list[str]) -> ClientResult:
        rfd, wfd = os.pipe()
        counted = [0]

        def drain() -> None:
            # count the bodies the command writes to stdout; nothing is stored
            with os.fdopen(rfd, "rb", buffering=0) as r:
                while chunk := r.read(1 << 16):
                    counted[0] += len(chunk)

        reader = threading.Thread(target=drain, daemon=True, name="command-stdout")
        reader.start()
        start_ns = time.time_ns()
        try:
            with open(req.trial_dir / "client.log", "wb") as log:
                returncode, cpu, wall, struck = run_measured(argv, req.timeout_s + 10, stdout=wfd, stderr=log)
        finally:
            end_ns = time.time_ns()
            os.close(wfd)
            reader.join(10)
        w = req.workload
        ok = returncode == 0 and not struck
        seconds = (end_ns - start_ns) / 1e9
        metrics = {"requests": w.count, "requests_ok": w.count if ok else 0, "bytes": counted[0],
                   "start_ns": start_ns, "end_ns": end_ns, "total_time_s": seconds,
                   "goodput_mbps": counted[0] * 8 / seconds / 1e6 if ok and seconds > 0 else None,
                   # the command reports no protocol: the row says so, the check of it is skipped
                   "protocols": f"unverified:{w.count}", "connections": None}
        error = None
        if struck:
            error = f"{self.name} still running after the trial's deadline ({req.timeout_s:g} s + 10 s): killed"
        elif returncode != 0:
            error = self._error(req, returncode)
        return ClientResult(requests=[], summary={}, process_cpu_s=cpu, wall_s=wall, returncode=returncode,
                            error=error, extra=metrics)


def resolve_client(name: str, commands: dict[str, "ClientCommand"], registry) -> type[Client]:
    """The class of a plan's client: a [client_commands.NAME] definition, else a registered driver."""
    if name in commands:
        return CommandClient.bind(name, commands[name])
    return registry.get(name)


__all__ = ["CommandClient", "resolve_client"]
