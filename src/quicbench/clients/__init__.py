"""Client drivers: what fetches a workload from the lab's server. Register a new one in ``CLIENTS``."""

from __future__ import annotations

from quicbench.clients.base import Client, ClientResult, FetchRequest, Target
from quicbench.clients.browser.driver import BrowserClient
from quicbench.clients.browser.video import VideoClient
from quicbench.clients.loadclient import LoadClient
from quicbench.registry import Registry

CLIENTS: Registry[type[Client]] = Registry("client", [LoadClient, BrowserClient, VideoClient])

__all__ = ["Client", "ClientResult", "FetchRequest", "Target", "CLIENTS", "BrowserClient", "LoadClient", "VideoClient"]
