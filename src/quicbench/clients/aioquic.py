"""`aioquic`: an HTTP/3 receiver on a pure-Python QUIC stack (PyPI ``aioquic``).

The driver and the client program are this one file: ``fetch()`` runs quicbench's Python with
``main()`` below in the client node, once per trial. aioquic is the quicbench package's extra
``aioquic`` (pyproject.toml), installed into ``.venv`` by ``make aioquic`` on first use; nothing
is built.

The program fetches the workload's objects over HTTP/3 and verifies each body against the content
manifest (size and sha256, hashed as it arrives: nothing is saved). Connection policies:
``shared`` (one connection, at most ``parallel`` requests in flight) and ``per-object`` (Go-Quick's
getFiles: a new connection and handshake per object, at most ``parallel`` at once; a connection
is closed in the background once its response is in, so its closing period, aioquic's three
PTOs, never holds the next object back). It verifies the server's certificate against the lab's
CA and offers ALPN h3 only. Its flow-control windows are aioquic's defaults (1 MiB per stream and
per connection, as its example client): a receiver is measured as it ships.

Per request it records, in qb-load's format: ``connect_start_ns`` (the connection's start),
``tls_done_ns`` = ``connect_done_ns`` (the handshake completed: a QUIC handshake is one phase),
``start_ns`` (the request's HEADERS sent), ``first_byte_ns`` (the response's HEADERS),
``last_byte_ns`` (its end of stream), the status, the bytes, the protocol (``h3`` when ALPN
negotiated h3 and the response arrived) and the connection. Its CPU over the transfer (user, system
and run-queue wait of its threads, from /proc/self) is measured by the program itself, start-up
excluded; the process's whole CPU is its rusage. With ``qlog`` it writes one JSON qlog per
connection into the trial's ``qlog/`` (aioquic's ``QuicFileLogger``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from quicbench.clients.base import Client, ClientResult, FetchRequest, run_measured
from quicbench.endpoints.aioquic import INSTALL_HINT, check_aioquic, python_facts, stack_versions
from quicbench.store import read_jsonl

# the client program, run with quicbench's interpreter (python -m would import this module twice)
CHILD = "import sys; from quicbench.clients.aioquic import main; sys.exit(main())"


class AioquicClient(Client):
    name = "aioquic"
    protocols = frozenset({"h3"})
    quic_stack = "aioquic"
    provisions = ("aioquic",)
    connection_policies = ("shared", "per-object")
    resumption_modes = ("none",)
    binaries = ("python3",)       # quicbench's own interpreter with its packages; on another host, its Python

    @classmethod
    def executable(cls) -> str:
        check_aioquic(INSTALL_HINT)
        return sys.executable

    @classmethod
    def binary_facts(cls) -> dict[str, Any]:
        return {"python3": python_facts("quicbench.clients.aioquic", root=False)}

    @classmethod
    def version(cls) -> dict[str, str]:
        return stack_versions()

    def fetch(self, req: FetchRequest) -> ClientResult:
        t, w = req.target, req.workload
        req.trial_dir.mkdir(parents=True, exist_ok=True)
        port = "" if t.port == 443 else f":{t.port}"
        qlog = bool(req.options is not None and req.options.qlog)
        args = {"address": t.address, "port": t.port, "host": t.hostname, "authority": f"{t.hostname}{port}",
                "ca": str(t.tls.ca_cert), "manifest": str(t.content.manifest_path),
                "paths": [t.content.path_template(w.size_bytes).replace("{i}", str(i)) for i in range(1, w.count + 1)],
                "parallel": w.parallelism, "connections": w.connections, "timeout_s": req.timeout_s,
                "qlog_dir": str(req.trial_dir / "qlog") if qlog else None,
                "requests": str(req.trial_dir / "requests.jsonl"), "summary": str(req.trial_dir / "summary.json")}
        argv = t.lab.cmd("client", [self.executable(), "-c", CHILD, "--args-json", json.dumps(args)])
        with open(req.trial_dir / "client.log", "wb") as log:
            rc, cpu, wall, struck = run_measured(argv, req.timeout_s + 10, stdout=log, stderr=log)
        requests = read_jsonl(req.trial_dir / "requests.jsonl")
        try:
            summary = json.loads((req.trial_dir / "summary.json").read_text() or "{}")
        except (OSError, json.JSONDecodeError):
            summary = {}
        bad = [r for r in requests if r.get("error")]
        error = None
        if bad:
            error = f"{len(bad)} request(s) failed, first: {bad[0]['path']}: {bad[0]['error']}"
        elif struck:
            error = f"aioquic client still running at the trial's deadline ({req.timeout_s:g} s): killed"
        elif rc != 0 or len(requests) != w.count:
            tail = (req.trial_dir / "client.log").read_text(errors="replace").strip().splitlines()[-1:]
            error = f"aioquic client exit code {rc}" + (f": {tail[0][:300]}" if tail else "")
        return ClientResult(requests=requests, summary=summary, process_cpu_s=None if t.lab.remote else cpu,
                            wall_s=wall, returncode=rc, error=error)


# -- the client program (runs in the client node) --------------------------------------------------
def thread_times() -> tuple[float, float, float]:
    """(user s, system s, run-queue wait s) of this process's threads so far."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    wait_ns = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            wait_ns += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return ru.ru_utime, ru.ru_stime, wait_ns / 1e9


def main(argv: list[str] | None = None) -> int:
    import argparse
    import asyncio
    import hashlib

    from aioquic.asyncio import QuicConnectionProtocol, connect
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted
    from aioquic.quic.logger import QuicFileLogger

    p = argparse.ArgumentParser(prog="quicbench-aioquic-client")
    p.add_argument("--args-json", required=True)
    a = json.loads(p.parse_args(argv).args_json)
    manifest = {"/" + f["path"].lstrip("/"): f for f in json.loads(Path(a["manifest"]).read_text()).get("files", [])}
    logger = None
    if a["qlog_dir"]:
        Path(a["qlog_dir"]).mkdir(parents=True, exist_ok=True)
        logger = QuicFileLogger(a["qlog_dir"])

    class Request:
        def __init__(self, i: int, path: str) -> None:
            self.rec: dict[str, Any] = {"i": i, "path": path, "start_ns": None, "first_byte_ns": None,
                                        "last_byte_ns": None, "bytes": 0, "status": None, "proto": None,
                                        "conn_id": None, "conn_reused": False, "sha256_ok": False, "error": None}
            self.sha = hashlib.sha256()
            self.done: asyncio.Future = asyncio.get_running_loop().create_future()

        def finish(self, error: str | None = None) -> None:
            if self.done.done():
                return
            r = self.rec
            want = manifest.get(r["path"])
            if error is None:
                if r["status"] != 200:
                    error = f"HTTP status {r['status']}"
                elif want is None:
                    error = "no manifest entry for this path"
                elif r["bytes"] != want["size"]:
                    error = f"body of {r['bytes']} bytes, the object has {want['size']}"
                elif self.sha.hexdigest() != want["sha256"]:
                    error = "body differs from the object (sha256)"
            r["sha256_ok"] = error is None
            r["error"] = error
            if error is not None:
                r["proto"] = None
            self.done.set_result(None)

    class H3Client(QuicConnectionProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.http = H3Connection(self._quic)
            self.streams: dict[int, Request] = {}
            self.tls_done_ns: int | None = None
            self.alpn: str | None = None

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, HandshakeCompleted):
                self.tls_done_ns, self.alpn = time.time_ns(), event.alpn_protocol
            elif isinstance(event, ConnectionTerminated):
                for r in self.streams.values():
                    r.finish(f"connection closed: {event.reason_phrase or event.error_code}")
            for ev in self.http.handle_event(event):
                r = self.streams.get(getattr(ev, "stream_id", -1))
                if r is None:
                    continue
                if isinstance(ev, HeadersReceived):
                    r.rec["first_byte_ns"] = r.rec["first_byte_ns"] or time.time_ns()
                    r.rec["status"] = int(dict(ev.headers).get(b":status", b"0"))
                elif isinstance(ev, DataReceived):
                    r.sha.update(ev.data)
                    r.rec["bytes"] += len(ev.data)
                if getattr(ev, "stream_ended", False):
                    r.rec["last_byte_ns"] = time.time_ns()
                    r.rec["proto"] = "h3" if self.alpn == "h3" else self.alpn
                    r.finish()

        async def get(self, r: Request) -> None:
            sid = self._quic.get_next_available_stream_id()
            self.streams[sid] = r
            self.http.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                         (b":authority", a["authority"].encode()), (b":path", r.rec["path"].encode()),
                                         (b"user-agent", b"quicbench-aioquic")], end_stream=True)
            r.rec["start_ns"] = time.time_ns()
            self.transmit()
            await r.done

    def config() -> QuicConfiguration:
        c = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=a["host"], quic_logger=logger)
        c.load_verify_locations(cafile=a["ca"])
        return c

    async def connection(conn_id: int, reqs: list[Request], parallel: int, closing: list) -> None:
        """One connection: its requests, at most `parallel` in flight; its closing left to `closing`."""
        start = time.time_ns()
        try:
            cm = connect(a["address"], a["port"], configuration=config(), create_protocol=H3Client)
            proto = await cm.__aenter__()
        except Exception as e:  # noqa: BLE001 - a failed handshake fails its requests, with why
            for r in reqs:
                r.rec["conn_id"] = conn_id
                r.finish(f"connection failed: {type(e).__name__}: {e}")
            return
        gate = asyncio.Semaphore(parallel)

        async def one(n: int, r: Request) -> None:
            async with gate:
                r.rec.update(conn_id=conn_id, conn_reused=n > 0)
                if n == 0:
                    r.rec.update(connect_start_ns=start, connect_done_ns=proto.tls_done_ns,
                                 tls_done_ns=proto.tls_done_ns)
                await proto.get(r)
        await asyncio.gather(*(one(n, r) for n, r in enumerate(reqs)))
        closing.append(asyncio.ensure_future(cm.__aexit__(None, None, None)))

    async def run() -> list[Request]:
        reqs = [Request(i + 1, path) for i, path in enumerate(a["paths"])]
        closing: list = []
        try:
            if a["connections"] == "per-object":
                gate = asyncio.Semaphore(a["parallel"])

                async def alone(k: int, r: Request) -> None:
                    async with gate:
                        await connection(k + 1, [r], 1, closing)
                work = asyncio.gather(*(alone(k, r) for k, r in enumerate(reqs)))
            else:
                work = connection(1, reqs, a["parallel"], closing)
            await asyncio.wait_for(work, a["timeout_s"])
        except asyncio.TimeoutError:
            for r in reqs:
                r.finish(f"still running at the trial's deadline ({a['timeout_s']:g} s)")
        finally:
            if closing:       # the qlogs are written when their connections have closed
                await asyncio.wait(closing, timeout=5)
        return reqs

    t0 = thread_times()
    reqs = asyncio.run(run())
    t1 = thread_times()
    with open(a["requests"], "w") as f:
        for r in reqs:
            f.write(json.dumps(r.rec) + "\n")
    Path(a["summary"]).write_text(json.dumps({
        "cpu_user_s": t1[0] - t0[0], "cpu_sys_s": t1[1] - t0[1], "cpu_wait_s": t1[2] - t0[2],
        "requests": len(reqs),
        "errors": [{"path": r.rec["path"], "error": r.rec["error"]} for r in reqs if r.rec["error"]],
        "stack": stack_versions()}))
    return 0 if all(not r.rec["error"] for r in reqs) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
