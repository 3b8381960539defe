"""What a driver declares it can do: the capabilities part of its contract (docs/stacks.md).

A client driver states them as class attributes (``clients.base.Client``) and tells them to
the model when it registers (``clients.CLIENTS``, a ``Registry`` with ``on_register``): the
plan model expands a client's trials over the protocols it declared, without importing a
driver. A client registered later is told the same way; a name no driver declared is a command
client (its plan's definition says its protocols) or unknown (preflight refuses it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientCapabilities:
    protocols: frozenset[str]
    # the workload kinds it runs (model/workload_kinds.py); None: any kind a non-browser client
    # fetches, never one the browser manages
    workload_kinds: tuple[str, ...] | None = None
    resumption_modes: tuple[str, ...] = ("none",)       # the workloads' `resumption` it honours
    connection_policies: tuple[str, ...] = ("shared",)  # the workloads' `connections` it honours
    quic_app: str = "h3"              # what it speaks over QUIC (a transport-only sender needs its own)


_CLIENTS: dict[str, ClientCapabilities] = {}


def declare_client(name: str, capabilities: ClientCapabilities) -> None:
    """A client driver's capabilities, told when it registers (a later registration replaces them)."""
    _CLIENTS[name] = capabilities


def client_capabilities(name: str) -> ClientCapabilities | None:
    """What the registered client driver `name` declared; None: no driver of that name registered."""
    return _CLIENTS.get(name)
