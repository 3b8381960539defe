"""`ngtcp2`: the HTTP/3 example client of ngtcp2 + nghttp3 (GnuTLS), Debian's ``ngtcp2-client``.

``/usr/bin/gtlsclient ADDRESS PORT URL...`` opens one QUIC connection and sends every URL's GET
on it at once, one bidirectional stream each in the order given (stream 0, 4, 8, ...; past the
server's stream limit it waits for credit), and with ``--exit-on-all-streams-close`` exits when
every stream is closed. It has no option to hold fewer requests in flight, so a ``shared``
trial needs ``parallel = "all"``; ``per-object`` runs one client process per object (Go-Quick's
getFiles), at most ``parallel`` at once. It offers ALPN ``h3`` only and has no CA option: it
does *not* verify the server's certificate (the lab is closed; qb-load does verify).

What it tells, and how the row is made of it:

- **Bodies**: ``--download DIR`` saves each body under its URL's last path segment (the lab's
  object names are unique); each is checked against the content manifest (size and sha256),
  then deleted.
- **Per-request times** from the client's own qlog (``--qlog-file``; qlog 0.3, times in whole
  milliseconds from the connection's start): ``connect_start_ns`` = its first event,
  ``tls_done_ns`` (= ``connect_done_ns``, as qb-load's h3) = its first 1-RTT packet sent (the
  client has the server's Finished), ``start_ns`` = the connection's start for every request on
  it (they are all issued at once, as qb-load's queue behind the handshake), ``first_byte_ns`` /
  ``last_byte_ns`` = the first STREAM frame / the frame with FIN received on the request's
  stream. The qlog's clock is pinned to the process's exit (its last event is the
  CONNECTION_CLOSE sent just before), so start-up is not counted. Body stalls (``stall_ns``)
  are not reported: the qlog has packet arrivals, not deliveries to the application.
- **Protocol**: h3 by construction (QUIC v1 with ALPN h3, the only one it offers); a request is
  recorded as ``h3`` only when its stream carried the response in the qlog and its body is the
  object's bytes. The HTTP status is not reported with ``-q`` (the body check stands for it).
- **CPU**: the process's rusage (several processes summed), start-up included; it includes
  writing the qlog (always on: it is the only per-request clock the client has).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicbench.clients.base import Client, ClientResult, FetchRequest, run_measured
from quicbench.endpoints.debian import ngtcp2_stack
from quicbench.errors import QuicbenchError

CLIENT_BINARY = "/usr/bin/gtlsclient"
PACKAGE = "ngtcp2-client"
INSTALL_HINT = ("run 'make ngtcp2' (installs ngtcp2-client 1.11 from bookworm-backports; "
                "or: apt-get install -t bookworm-backports ngtcp2-client)")
MAX_URLS = 5000           # one argument per URL: beyond this the command line gets too long
MAX_PROCESSES = 64        # per-object: client processes at once


@dataclass
class ConnTimes:
    """One connection's times from the client's qlog, in ms from its start."""
    last_ms: int
    tls_done_ms: int | None
    first_ms: dict[int, int]       # stream id -> first STREAM frame received
    fin_ms: dict[int, int]         # stream id -> STREAM frame with FIN received
    group_id: str


def read_client_qlog(path: Path) -> ConnTimes | None:
    """The handshake and per-stream times of one ngtcp2 client connection (JSON-SEQ qlog)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    group, last, tls_done = "", 0, None
    first: dict[int, int] = {}
    fin: dict[int, int] = {}
    for rec in data.split(b"\x1e"):
        rec = rec.strip()
        if not rec:
            continue
        try:
            ev = json.loads(rec)
        except json.JSONDecodeError:
            continue
        if "trace" in ev:
            group = str(((ev["trace"].get("common_fields") or {}).get("group_id")) or "")
            continue
        t = ev.get("time")
        if not isinstance(t, (int, float)):
            continue
        t = int(t)
        last = max(last, t)
        name, d = ev.get("name"), ev.get("data") or {}
        header = d.get("header") or {}
        if name == "transport:packet_sent" and header.get("packet_type") == "1RTT" and tls_done is None:
            tls_done = t
        elif name == "transport:packet_received":
            for f in d.get("frames") or ():
                if f.get("frame_type") != "stream" or not isinstance(f.get("stream_id"), int):
                    continue
                sid = f["stream_id"]
                if sid % 4 != 0:           # client-initiated bidirectional: the requests
                    continue
                first.setdefault(sid, t)
                if f.get("fin"):
                    fin.setdefault(sid, t)
    if not group and not first:
        return None
    return ConnTimes(last_ms=last, tls_done_ms=tls_done, first_ms=first, fin_ms=fin, group_id=group or path.stem)


def check_body(path: Path, want: dict[str, Any] | None) -> tuple[int, str | None]:
    """(bytes, error) of a saved body against its manifest entry."""
    if not path.is_file():
        return 0, "no body saved (the response did not complete)"
    size = path.stat().st_size
    if want is None:
        return size, "no manifest entry for this path"
    if size != want["size"]:
        return size, f"body of {size} bytes, the object has {want['size']}"
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    if h.hexdigest() != want["sha256"]:
        return size, "body differs from the object (sha256)"
    return size, None


class Ngtcp2Client(Client):
    name = "ngtcp2"
    provisions = ("ngtcp2",)
    protocols = frozenset({"h3"})
    connection_policies = ("shared", "per-object")
    resumption_modes = ("none",)
    binaries = ("gtlsclient",)
    quic_stack = "ngtcp2"
    package = PACKAGE
    version_args = ("--help",)       # no version option; the package says the version

    @staticmethod
    def executable() -> str:
        if os.access(CLIENT_BINARY, os.X_OK):
            return CLIENT_BINARY
        found = shutil.which("gtlsclient")
        if found:
            return found
        raise QuicbenchError(f"missing binary '{CLIENT_BINARY}': {INSTALL_HINT}")

    @classmethod
    def binary_facts(cls) -> dict[str, Any]:
        # bookworm's own ngtcp2 is 0.12: a host installs 1.11 from bookworm-backports, as this one does
        return {b: {**f, "release": "bookworm-backports"} for b, f in super().binary_facts().items()}

    @classmethod
    def version(cls) -> dict[str, str]:
        return ngtcp2_stack(PACKAGE)

    @classmethod
    def workload_problem(cls, workload: Any) -> str | None:
        if workload.count > MAX_URLS:
            return f"count = {workload.count}: the ngtcp2 client takes one argument per URL; accepted: count <= {MAX_URLS}"
        if workload.connections == "shared" and workload.parallelism != workload.count:
            return (f"parallel = {workload.parallel}: the ngtcp2 client sends every request of its connection at "
                    f"once; accepted: parallel = \"all\" (or connections = \"per-object\")")
        if workload.connections == "per-object" and workload.parallelism > MAX_PROCESSES:
            return (f"parallel = {workload.parallel}: per-object runs one ngtcp2 client process per object in "
                    f"flight; accepted: parallel <= {MAX_PROCESSES}")
        return None

    # -- a trial -----------------------------------------------------------------------
    def fetch(self, req: FetchRequest) -> ClientResult:
        t, w = req.target, req.workload
        problem = self.workload_problem(w)
        if problem:
            return ClientResult(requests=[], summary={}, process_cpu_s=None, wall_s=0.0, returncode=2, error=problem)
        req.trial_dir.mkdir(parents=True, exist_ok=True)
        port = "" if t.port == 443 else f":{t.port}"
        paths = [t.content.path_template(w.size_bytes).replace("{i}", str(i)) for i in range(1, w.count + 1)]
        urls = [f"https://{t.hostname}{port}{p}" for p in paths]
        keep_qlog = bool(req.options is not None and req.options.qlog)
        qlog_dir = req.trial_dir / ("qlog" if keep_qlog else "client-qlog")
        bodies = req.trial_dir / "bodies"
        qlog_dir.mkdir(parents=True, exist_ok=True)
        if w.connections == "per-object":
            groups = [[i] for i in range(len(urls))]
        else:
            groups = [list(range(len(urls)))]
        deadline = time.monotonic() + req.timeout_s
        results: dict[int, tuple[int, float, float, bool, int]] = {}
        lock = threading.Lock()

        def one(k: int) -> None:
            argv = [self.executable(), "-q", "--exit-on-all-streams-close", f"--sni={t.hostname}",
                    f"--download={bodies / str(k)}", f"--qlog-file={qlog_dir / f'conn-{k}.sqlog'}",
                    t.address, str(t.port), *(urls[i] for i in groups[k])]
            (bodies / str(k)).mkdir(parents=True, exist_ok=True)
            left = max(1.0, deadline - time.monotonic())
            with open(req.trial_dir / f"client-{k}.log", "wb") as log:
                rc, cpu, wall, struck = run_measured(t.lab.cmd("client", argv), left, stdout=log, stderr=log)
            with lock:
                results[k] = (rc, cpu, wall, struck, time.time_ns())

        (req.trial_dir / "command.json").write_text(json.dumps(
            [self.executable(), "-q", "--exit-on-all-streams-close", f"--sni={t.hostname}", "--download=DIR",
             "--qlog-file=FILE", t.address, str(t.port), "URL..."]))
        t0 = time.monotonic()
        if len(groups) == 1:
            one(0)
        else:
            with ThreadPoolExecutor(max_workers=w.parallelism, thread_name_prefix="ngtcp2-client") as pool:
                list(pool.map(one, range(len(groups))))
        wall = time.monotonic() - t0
        records, errors = self._records(req, groups, paths, results, qlog_dir, bodies)
        shutil.rmtree(bodies, ignore_errors=True)
        for k in range(len(groups)):           # -q: a log only says something when it went wrong
            log = req.trial_dir / f"client-{k}.log"
            if log.is_file() and log.stat().st_size == 0:
                log.unlink()
        if not keep_qlog:
            shutil.rmtree(qlog_dir, ignore_errors=True)
        with open(req.trial_dir / "requests.jsonl", "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        cpu = None if t.lab.remote else sum(r[1] for r in results.values())
        rc = max((r[0] for r in results.values()), default=1, key=abs)
        return ClientResult(requests=records, summary={}, process_cpu_s=cpu, wall_s=wall, returncode=rc,
                            error=errors[0] if errors else None)

    def _records(self, req: FetchRequest, groups: list[list[int]], paths: list[str],
                 results: dict[int, tuple[int, float, float, bool, int]], qlog_dir: Path,
                 bodies: Path) -> tuple[list[dict[str, Any]], list[str]]:
        manifest = {"/" + f["path"].lstrip("/"): f for f in req.target.content.manifest.get("files", [])}
        records: list[dict[str, Any]] = []
        errors: list[str] = []
        for k, idx in enumerate(groups):
            rc, _, _, struck, end_ns = results.get(k, (1, 0.0, 0.0, False, time.time_ns()))
            conn = read_client_qlog(qlog_dir / f"conn-{k}.sqlog")
            proc_error = None
            if struck:
                proc_error = f"ngtcp2 client still running at the trial's deadline ({req.timeout_s:g} s): killed"
            elif rc != 0:
                tail = (req.trial_dir / f"client-{k}.log").read_text(errors="replace").strip().splitlines()[-1:]
                proc_error = f"ngtcp2 client exit code {rc}" + (f": {tail[0][:300]}" if tail else "")

            def at(ms: int | None) -> int | None:
                # the qlog's last event is the process's end (its CONNECTION_CLOSE, then exit)
                return None if ms is None or conn is None else end_ns - (conn.last_ms - ms) * 1_000_000
            for n, i in enumerate(idx):
                sid = 4 * n
                path = paths[i]
                size, body_error = check_body(bodies / str(k) / Path(path).name, manifest.get(path))
                got = conn is not None and sid in conn.fin_ms
                error = proc_error or body_error or (None if got else "no response on its stream in the client's qlog")
                rec = {"i": i + 1, "path": path, "start_ns": at(0), "first_byte_ns": at(conn.first_ms.get(sid) if conn else None),
                       "last_byte_ns": at(conn.fin_ms.get(sid) if conn else None), "bytes": size if error is None else 0,
                       "status": None, "proto": "h3" if got and body_error is None else None,
                       "conn_id": k + 1 if conn is not None else None, "conn_reused": n > 0,
                       "sha256_ok": body_error is None, "error": error}
                first = n == 0
                rec.update(connect_start_ns=at(0) if first else None,
                           connect_done_ns=at(conn.tls_done_ms if conn else None) if first else None,
                           tls_done_ns=at(conn.tls_done_ms if conn else None) if first else None)
                if error and not errors:
                    errors.append(f"{path}: {error}")
                records.append(rec)
        bad = sum(1 for r in records if r["error"])
        if bad:
            errors[0] = f"{bad} request(s) failed, first: {errors[0]}"
        return records, errors
