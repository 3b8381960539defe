"""Link emulators: `plain` forwarding, `linkem` (user space) and `netem` (kernel).

Register a new driver in ``LINKS``; ``auto`` picks netem where the kernel has it, else linkem.
"""

from __future__ import annotations

from quicbench.errors import QuicbenchError
from quicbench.link.base import LinkEmulator, NodeCommands, RouterPorts
from quicbench.link.linkem import LinkemLink
from quicbench.link.netem import NetemLink
from quicbench.link.plain import PlainForwarding
from quicbench.model.conditions import Condition
from quicbench.registry import Registry

LINKS: Registry[type[LinkEmulator]] = Registry("link emulator", [PlainForwarding, LinkemLink, NetemLink])

AUTO_ORDER = ("netem", "linkem")


def link_names() -> list[str]:
    return ["auto", *LINKS.names()]


def auto_choice(conditions: "list[Condition] | None" = None,
                offload: bool = False) -> tuple[type[LinkEmulator], dict[str, str]]:
    """What `auto` picks: the first usable of netem, linkem that supports every condition (netem
    lacks on/off, traces and reordering under a rate) and, in a lab with offloads on, GSO
    super-frames; else plain. Also why each candidate before it was passed over."""
    skipped: dict[str, str] = {}
    for candidate in AUTO_ORDER:
        cls = LINKS.get(candidate)
        ok, why = cls.available()
        if not ok:
            skipped[candidate] = why
            continue
        unsupported = next((w for c in conditions or [] if (w := cls.supports(c))), None)
        if unsupported:
            skipped[candidate] = unsupported
            continue
        if offload and cls.no_offload:
            skipped[candidate] = f"offload = true: {cls.no_offload}"
            continue
        return cls, skipped
    return PlainForwarding, skipped


def resolve_link(name: str, conditions: "list[Condition] | None" = None,
                 offload: bool = False) -> type[LinkEmulator]:
    """The driver class for a name (`auto`: see auto_choice)."""
    if name == "auto":
        return auto_choice(conditions, offload)[0]
    if name not in LINKS:
        raise QuicbenchError(f"unknown link emulator '{name}': accepted: {', '.join(link_names())}")
    cls = LINKS.get(name)
    ok, why = cls.available()
    if not ok:
        raise QuicbenchError(f"link emulator '{name}' is not usable here: {why}")
    if offload and cls.no_offload:
        raise QuicbenchError(f"offload = true: link emulator '{name}' cannot shape GSO super-frames "
                             f"({cls.no_offload}); use link linkem or turn offload off")
    return cls


__all__ = ["LinkEmulator", "NodeCommands", "RouterPorts", "LINKS", "auto_choice", "link_names", "resolve_link"]
