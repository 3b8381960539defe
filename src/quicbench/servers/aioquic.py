"""aioquic: HTTP/3 on a pure-Python QUIC stack (PyPI ``aioquic``), served by this module.

The driver and the server program are this one file: ``argv()`` runs quicbench's Python with
``main()`` below in the server node. aioquic is the quicbench package's extra ``aioquic``
(pyproject.toml), installed into ``.venv`` by ``make aioquic`` on first use (or ``make
setup-all``); nothing is built. It serves h3 only (one UDP listener, no TCP): every GET of a file under the content root
answers 200 with the whole body and the no-cache headers the other servers send (a directory:
its index.html), anything else 404; a path that leaves the root (``..``, a link out of it) is
404 unless it lies in an ``--allow-dir`` (the driver passes none: the copy it serves has no links).

The sender is aioquic's: its congestion controller is the plan's ``quic_cc`` (aioquic 1.2+
registers ``reno``, its default, and ``cubic``), and the server says per connection which one
aioquic runs for it, read back from the connection's loss recovery, in a log line that
``reported_cc`` reads. With ``qlog`` it writes one JSON qlog per connection (aioquic's
``QuicFileLogger``: ``<odcid>.qlog``, written when the connection ends; a ``<odcid>.qlog.part``
marks it open until then, so that the trial waits for it). Being pure Python, it is CPU-bound
far sooner than the compiled stacks: read the cpu_bound column.
"""

from __future__ import annotations

import argparse
import asyncio
import mimetypes
import os
import re
import sys
from pathlib import Path
from typing import Any

from quicbench.endpoints.aioquic import INSTALL_HINT, check_aioquic, python_facts, stack_versions
from quicbench.servers.base import NO_CACHE_HEADERS, Server, cc_from_log

# the server program, run with quicbench's interpreter (python -m would import this module twice)
CHILD = "import sys; from quicbench.servers.aioquic import main; sys.exit(main())"
# one line per connection in the server's log: the controller aioquic runs for it
CC_LINE = re.compile(r"^connection ([0-9a-f]+) from \S+: congestion control (\S+)$")


class AioquicServer(Server):
    name = "aioquic"
    protocols = frozenset({"h3"})
    binary = "python3"
    # quicbench's own interpreter with its packages; on another host that host's Python (docs/hosts.md)
    binaries = ("python3",)
    install_hint = INSTALL_HINT
    provisions = ("aioquic",)
    quic_stack = "aioquic"
    quic_blocked_frames = False    # aioquic sends STREAMS_BLOCKED only, never (STREAM_)DATA_BLOCKED
    qlog_option = "--qlog-dir"
    quic_ccs = ("reno", "cubic")   # aioquic's registered controllers; reno its default

    @classmethod
    def executable(cls) -> str:
        check_aioquic()
        return sys.executable

    @classmethod
    def binary_facts(cls) -> dict[str, dict[str, Any]]:
        return {"python3": python_facts("quicbench.servers.aioquic", root=True)}   # root: it binds port 443

    @classmethod
    def version(cls) -> dict[str, str]:
        return stack_versions()

    @classmethod
    def version_text(cls) -> str:
        return check_aioquic()

    def argv(self) -> list[str]:
        return [self.executable(), "-c", CHILD, *self.file_server_args()]

    def reported_cc(self, qlogs: list[Path], trial_dir: Path) -> str | None:
        """The congestion controller aioquic ran for the trial's connections: the server's log line
        of each, found by the original destination connection ID that names its qlog
        (``<odcid>.qlog``); the lines are kept in trial_dir/server-cc.log. None without qlogs."""
        return cc_from_log(self.workdir / f"{self.name}.log", {p.name.split(".", 1)[0] for p in qlogs}, CC_LINE,
                           trial_dir)


# -- the server program (runs in the server node) --------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    from aioquic.asyncio import QuicConnectionProtocol, serve
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.congestion import base as cc_base
    from aioquic.quic.events import HandshakeCompleted, ProtocolNegotiated
    from aioquic.quic.logger import QuicFileLogger

    p = argparse.ArgumentParser(prog="quicbench-aioquic-server", description="Serve a directory over HTTP/3 (aioquic).")
    p.add_argument("--listen", required=True, help="ADDRESS:PORT (UDP)")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--root", required=True, type=Path)
    p.add_argument("--cc", default="reno", help="congestion control: " + ", ".join(sorted(cc_base._factories)))
    p.add_argument("--qlog-dir", type=Path, help="one JSON qlog per connection here")
    p.add_argument("--allow-dir", action="append", default=[], type=Path,
                   help="a directory outside the root that links under it may point into")
    a = p.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    if not host or not port.isdigit():
        print(f"--listen '{a.listen}': use ADDRESS:PORT", file=sys.stderr)
        return 2
    if a.cc not in cc_base._factories:
        print(f"--cc '{a.cc}': accepted: {', '.join(sorted(cc_base._factories))}", file=sys.stderr)
        return 2
    root = a.root.resolve()
    allowed = [root, *(d.resolve() for d in a.allow_dir)]
    cc_names = {factory: name for name, factory in cc_base._factories.items()}
    no_cache = [(k.lower().encode(), v.encode()) for k, v in NO_CACHE_HEADERS.items()]

    class OpenMarkingLogger(QuicFileLogger):
        """aioquic's file logger, with <odcid>.qlog.part present while the connection is open. A
        trace whose mark was taken away (the trial moved it on: the connection outlived it) is
        dropped, never handed to the next trial."""

        def start_trace(self, is_client: bool, odcid: bytes):
            (Path(self.path) / f"{odcid.hex()}.qlog.part").touch()
            return super().start_trace(is_client, odcid)

        def end_trace(self, trace) -> None:
            mark = Path(self.path) / f"{trace.to_dict()['common_fields']['ODCID']}.qlog.part"
            if not mark.exists():
                self._traces.remove(trace)
                return
            super().end_trace(trace)
            mark.unlink(missing_ok=True)

    def target_of(path: str) -> Path | None:
        target = (root / path.lstrip("/")).resolve()
        if target.is_dir():
            target = target / "index.html"
        inside = any(target == d or d in target.parents for d in allowed)
        return target if inside and target.is_file() else None

    class H3Server(QuicConnectionProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.http: H3Connection | None = None

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
                self.http = H3Connection(self._quic)
            if isinstance(event, HandshakeCompleted):
                quic = self._quic
                cc = cc_names.get(type(quic._loss._cc), type(quic._loss._cc).__name__)
                peer = quic._network_paths[0].addr if quic._network_paths else ("?", 0)
                print(f"connection {quic.original_destination_connection_id.hex()} from {peer[0]}:{peer[1]}: "
                      f"congestion control {cc}", file=sys.stderr, flush=True)
            if self.http is None:
                return
            for ev in self.http.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    self.respond(ev.stream_id, dict(ev.headers))

        def respond(self, stream_id: int, headers: dict[bytes, bytes]) -> None:
            assert self.http is not None
            path = headers.get(b":path", b"/").decode(errors="replace").split("?", 1)[0]
            target = target_of(path) if headers.get(b":method") == b"GET" else None
            body = target.read_bytes() if target else b"not found\n"
            ctype = (mimetypes.guess_type(str(target))[0] or "application/octet-stream") if target else "text/plain"
            self.http.send_headers(stream_id, [(b":status", b"200" if target else b"404"),
                                               (b"content-length", str(len(body)).encode()),
                                               (b"content-type", ctype.encode()), *no_cache])
            self.http.send_data(stream_id, body, end_stream=True)
            self.transmit()

    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN, congestion_control_algorithm=a.cc,
                               quic_logger=OpenMarkingLogger(str(a.qlog_dir)) if a.qlog_dir else None)
    config.load_cert_chain(a.cert, a.key)

    async def run() -> None:
        await serve(host.strip("[]"), int(port), configuration=config, create_protocol=H3Server)
        print(f"serving {root} over HTTP/3 on {a.listen} (aioquic, {a.cc})", file=sys.stderr, flush=True)
        await asyncio.Future()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
