"""Client drivers: what fetches a workload from the lab's server. Register a new one in ``CLIENTS``."""

from __future__ import annotations

from quicbench.clients.aioquic import AioquicClient
from quicbench.clients.base import Client, ClientResult, FetchRequest, Target
from quicbench.clients.browser.driver import BrowserClient
from quicbench.clients.browser.firefox import FirefoxClient, FirefoxVideoClient
from quicbench.clients.browser.video import VideoClient
from quicbench.clients.command import CommandClient, resolve_client
from quicbench.clients.loadclient import LoadClient
from quicbench.clients.netty import NettyClient
from quicbench.clients.ngtcp2 import Ngtcp2Client
from quicbench.clients.quiche import QuicheClient
from quicbench.clients.quinn import QuinnClient
from quicbench.model.capabilities import declare_client
from quicbench.registry import Registry

CLIENTS: Registry[type[Client]] = Registry("client", [LoadClient, BrowserClient, VideoClient, FirefoxClient,
                                                      FirefoxVideoClient, Ngtcp2Client, AioquicClient, NettyClient, QuicheClient,
                                                      QuinnClient,
                                                      CommandClient],
                                         # the plan model expands a client's trials over what it declared
                                         on_register=lambda c: declare_client(c.name, c.capabilities()))


def client_class(name: str, commands: dict | None = None) -> type[Client]:
    """A plan's client by name: its [client_commands.NAME] definition, else a registered driver."""
    return resolve_client(name, commands or {}, CLIENTS)

__all__ = ["Client", "ClientResult", "FetchRequest", "Target", "CLIENTS", "BrowserClient", "LoadClient", "VideoClient",
           "FirefoxClient", "FirefoxVideoClient",
           "CommandClient", "client_class"]
