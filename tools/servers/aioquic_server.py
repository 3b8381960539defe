#!/usr/bin/env python3
"""qb-aioquic-server: serve a directory over HTTP/3 with aioquic (pure Python QUIC + HTTP/3).

A second HTTP/3 server stack for quicbench's `command` server driver (docs/endpoints.md):

    aioquic_server.py --listen 198.18.1.2:443 --cert cert.pem --key key.pem --root DIR

Every GET of a file under DIR answers 200 with the whole body (a directory: its index.html),
anything else 404, with the no-cache headers the other servers send. It runs in the foreground
until SIGTERM. Being pure Python, it is CPU-bound far sooner than Caddy: keep rates modest and
read the cpu_bound column.
"""

from __future__ import annotations

import argparse
import asyncio
import mimetypes
import os
import sys
from pathlib import Path

NO_CACHE = [(b"cache-control", b"no-cache, no-store, must-revalidate"), (b"pragma", b"no-cache"), (b"expires", b"0")]


def main(argv: list[str] | None = None) -> int:
    from aioquic.asyncio import QuicConnectionProtocol, serve
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ProtocolNegotiated

    p = argparse.ArgumentParser(prog="aioquic_server.py", description="Serve a directory over HTTP/3 (aioquic).")
    p.add_argument("--listen", required=True, help="ADDRESS:PORT (UDP)")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--root", required=True, type=Path)
    a = p.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    if not host or not port.isdigit():
        print(f"--listen '{a.listen}': use ADDRESS:PORT", file=sys.stderr)
        return 2
    root = a.root.resolve()

    class H3Server(QuicConnectionProtocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.http: H3Connection | None = None

        def quic_event_received(self, event) -> None:
            if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
                self.http = H3Connection(self._quic)
            if self.http is None:
                return
            for ev in self.http.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    self.respond(ev.stream_id, dict(ev.headers))

        def respond(self, stream_id: int, headers: dict[bytes, bytes]) -> None:
            assert self.http is not None
            path = headers.get(b":path", b"/").decode(errors="replace").split("?", 1)[0]
            target = (root / path.lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            ok = headers.get(b":method") == b"GET" and target.is_file() and (
                target == root or root in target.parents)
            body = target.read_bytes() if ok else b"not found\n"
            ctype = (mimetypes.guess_type(str(target))[0] or "application/octet-stream") if ok else "text/plain"
            self.http.send_headers(stream_id, [(b":status", b"200" if ok else b"404"),
                                               (b"content-length", str(len(body)).encode()),
                                               (b"content-type", ctype.encode()), *NO_CACHE])
            self.http.send_data(stream_id, body, end_stream=True)
            self.transmit()

    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(a.cert, a.key)

    async def run() -> None:
        await serve(host.strip("[]"), int(port), configuration=config, create_protocol=H3Server)
        print(f"serving {root} over HTTP/3 on {a.listen}", file=sys.stderr, flush=True)
        await asyncio.Future()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
