"""Server drivers. Register a new one in ``SERVERS``."""

from __future__ import annotations

from quicbench.errors import QuicbenchError
from quicbench.servers.base import NO_CACHE_HEADERS, Server
from quicbench.servers.apache import ApachePreforkServer, ApacheServer
from quicbench.servers.caddy import CaddyServer
from quicbench.servers.nginx import NginxServer

SERVERS: dict[str, type[Server]] = {
    "caddy": CaddyServer,
    "nginx": NginxServer,
    "apache": ApacheServer,
    "apache-prefork": ApachePreforkServer,
}


def server_class(name: str) -> type[Server]:
    try:
        return SERVERS[name]
    except KeyError:
        raise QuicbenchError(f"unknown server '{name}': accepted: {', '.join(sorted(SERVERS))}") from None


def servers_for(proto: str) -> list[str]:
    return sorted(n for n, c in SERVERS.items() if proto in c.protocols)


__all__ = ["Server", "SERVERS", "NO_CACHE_HEADERS", "server_class", "servers_for"]
