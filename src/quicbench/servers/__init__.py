"""Server drivers. Register a new one in ``SERVERS``."""

from __future__ import annotations

from ..errors import QuicbenchError
from .base import NO_CACHE_HEADERS, Server
from .apache import ApachePreforkServer, ApacheServer
from .caddy import CaddyServer
from .nginx import NginxServer

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
