"""Server drivers: web servers started in the lab's server node. Register a new one in ``SERVERS``."""

from __future__ import annotations

from quicbench.registry import Registry
from quicbench.servers.aioquic import AioquicServer
from quicbench.servers.apache import ApachePreforkServer, ApacheServer
from quicbench.servers.base import NO_CACHE_HEADERS, Server
from quicbench.servers.caddy import Caddy26Server, CaddyServer
from quicbench.servers.command import CommandServer, resolve_server
from quicbench.servers.netty import NettyServer
from quicbench.servers.nginx import NginxServer
from quicbench.servers.ngtcp2 import Ngtcp2Server
from quicbench.servers.quiche import QuicheServer
from quicbench.servers.quinn import QuinnServer
from quicbench.servers.replay import ReplayServer

SERVERS: Registry[type[Server]] = Registry("server", [CaddyServer, Caddy26Server, NginxServer, ApacheServer,
                                                     ApachePreforkServer, Ngtcp2Server, QuinnServer, AioquicServer, NettyServer,
                                                     QuicheServer,
                                                     ReplayServer, CommandServer])


def server_class(name: str, commands: dict | None = None) -> type[Server]:
    """A plan's server by name: its [server_commands.NAME] definition, else a registered driver."""
    return resolve_server(name, commands or {}, SERVERS)


__all__ = ["Server", "SERVERS", "NO_CACHE_HEADERS", "CommandServer", "server_class"]
