"""`quinn`: quicbench's HTTP/3 load client on quinn + h3 + rustls, the crates of the quinn server.

``make quinn`` (on first use, or ``make stacks`` / ``make setup-all``) builds it from h3server/ (the server's
pinned crates, one Cargo.lock) into build/bin as ``quicbench-quinn-client``. It takes qb-load's
command line and writes qb-load's per-request records and summary (stacks/qbfetch), so the
runner reads it as it reads qb-load: goodput, TTFB (the response headers decoded), the client's
own CPU (rusage) and run-queue wait (schedstat) over the transfer, every body checked against
the content manifest (size and sha256), the negotiated protocol read back from the TLS handshake
(ALPN h3 only). Tokio on every core; ``shared`` puts ``parallel`` requests at once on one
connection, ``per-object`` opens a connection per object, ``parallel`` at once, each closed when
its response is in (Go-Quick's getFiles). The server's certificate is verified against the lab's
CA. With ``qlog = true`` each connection writes quinn's qlog into the trial's qlog/
(``<odcid>_client.sqlog``). The row's ``client_stack`` names quinn, quinn-proto, h3, h3-quinn
and rustls with their versions."""

from __future__ import annotations

from quicbench.clients.loadclient import LoadCompatibleClient


class QuinnClient(LoadCompatibleClient):
    name = "quinn"
    quic_stack = "quinn"
    binaries = ("quicbench-quinn-client",)
    provisions = ("quinn",)
    install_hint = "run 'make quinn' (builds quicbench-quinn-client from h3server/ into build/bin)"
