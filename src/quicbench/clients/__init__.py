"""Client drivers. Register a new one in ``CLIENTS``."""

from __future__ import annotations

from quicbench.errors import QuicbenchError
from quicbench.clients.base import Client, ClientResult, Target
from quicbench.clients.browser.driver import BrowserClient
from quicbench.clients.browser.video import VideoClient
from quicbench.clients.loadclient import LoadClient

CLIENTS: dict[str, type[Client]] = {
    "qb-load": LoadClient,
    "browser": BrowserClient,
    "video": VideoClient,
}


def client_class(name: str) -> type[Client]:
    try:
        return CLIENTS[name]
    except KeyError:
        raise QuicbenchError(f"unknown client '{name}': accepted: {', '.join(sorted(CLIENTS))}") from None


__all__ = ["Client", "ClientResult", "Target", "CLIENTS", "client_class", "BrowserClient"]
