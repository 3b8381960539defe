"""netty: HTTP/3 on Netty's QUIC codec (quiche inside) and its HTTP/3 codec: the JVM's HTTP/3.

``make netty`` (also ``make stacks`` and ``make setup-all``; a plan that uses it, on first use:
quicbench.provision) installs Java 17 and Maven and builds stacks/netty/ (Maven Central:
``io.netty:netty-codec-http3`` and ``io.netty:netty-codec-native-quic`` 4.2.18.Final with its
``linux-x86_64`` native, pinned in its pom.xml) into ``build/bin/quicbench-netty.jar`` and its
launcher ``build/bin/quicbench-netty``. It is not part of ``make setup``. One program holds both ends: ``quicbench-netty
server`` here, ``quicbench-netty client`` for the client 'netty' (clients/netty.py).

The server is full HTTP/3 (RFC 9114, ALPN ``h3`` only; Netty also knows the drafts' h3-29..32,
not offered here), UDP only, no Retry. It answers GET and HEAD of the files under the content
root (a directory: its index.html, never a listing; ``..`` refused; a symbolic link only into
the root or an ``--allow-dir``, which the driver never passes: the served copy has no links), with quicbench's no-cache headers,
streaming each file as DATA frames as fast as its stream takes them. One event-loop thread,
epoll with UDP GSO where the kernel has it. Its loss recovery and congestion control are
quiche's (Rust), so the row's ``server_stack`` names quiche with its version beside Netty's and
Java's. The congestion controller is the plan's ``quic_cc``: quiche's cubic (its default), reno,
or bbr, which in quiche 0.29 is its BBRv2 ("bbr2_gcongestion": Netty's BBR is that algorithm).
quiche does not report which controller a connection runs, so ``quic_cc_seen`` stays empty; with
the plan's ``qlog = true`` quiche writes one qlog per connection (JSON-SEQ, the ``quic:`` event
names of its qlog 0.16; description ``congestion control <cc>``), which run/recovery.py reads.
"""

from __future__ import annotations

from typing import Any

from quicbench.endpoints.netty import (NETTY_BINARY, NETTY_INSTALL_HINT, NETTY_PROVISIONS, netty_binary_facts,
                                       netty_executable, netty_versions)
from quicbench.servers.base import Server

class NettyServer(Server):
    name = "netty"
    protocols = frozenset({"h3"})
    quic_stack = "quiche (netty)"     # Netty's QUIC codec holds Cloudflare's quiche
    binary = NETTY_BINARY
    binaries = (NETTY_BINARY, NETTY_BINARY + ".jar", "java")
    version_args = ("--version",)
    qlog_option = "--qlog-dir"
    # quiche's controllers as Netty names them (QuicCongestionControlAlgorithm), cubic its default
    quic_ccs = ("cubic", "reno", "bbr")
    install_hint = NETTY_INSTALL_HINT
    provisions = NETTY_PROVISIONS

    @classmethod
    def executable(cls) -> str:
        return netty_executable()

    @classmethod
    def binary_facts(cls) -> dict[str, dict[str, Any]]:
        return netty_binary_facts(root=True)     # root: it binds port 443

    def argv(self) -> list[str]:
        return [self.executable(), "server", *self.file_server_args()]

    def start(self, timeout: float = 10.0) -> None:
        # a JVM takes a second or two to listen, more on a busy machine
        super().start(timeout=max(timeout, 30.0))

    @classmethod
    def version(cls) -> dict[str, str]:
        """Netty's, quiche's and Java's versions: 'quicbench-netty 0.1.0, netty 4.2.18.Final,
        quiche 0.29.3, java 17.0.15' in a row's server_stack."""
        return netty_versions()

    @classmethod
    def version_text(cls) -> str:
        v = netty_versions()
        return v.get("netty") or v.get("quicbench_netty") or "unknown"
