"""`quiche`: quicbench's HTTP/3 load client on Cloudflare's quiche (QUIC + HTTP/3, BoringSSL).

``make quiche`` (on first use, or ``make stacks`` / ``make setup-all``) builds stacks/quiche/ into build/bin as
``quicbench-quiche-client``. It takes qb-load's command line and writes qb-load's per-request
records and summary (stacks/qbfetch), so the runner reads it as it reads qb-load: goodput, TTFB
(the response headers decoded), the client's own CPU (rusage) and run-queue wait (schedstat)
over the transfer, every body checked against the content manifest (size and sha256), the
negotiated protocol read from the handshake (ALPN h3, the only one it offers). One thread drives
every connection; ``shared`` puts ``parallel`` requests at once on one connection, ``per-
object`` opens a connection per object, ``parallel`` at once, each closed when its response is
in (Go-Quick's getFiles). The server's certificate is verified against the lab's CA. With ``qlog
= true`` each connection writes quiche's qlog into the trial's qlog/ (``<odcid>_client.sqlog``).
The row's ``client_stack`` names quiche and boring-sys with their versions."""

from __future__ import annotations

from quicbench.clients.loadclient import LoadCompatibleClient


class QuicheClient(LoadCompatibleClient):
    name = "quiche"
    quic_stack = "quiche"
    binaries = ("quicbench-quiche-client",)
    provisions = ("quiche",)
    install_hint = "run 'make quiche' (builds stacks/quiche/ into build/bin; minutes: BoringSSL)"
