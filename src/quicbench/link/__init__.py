"""Link emulators: `plain` forwarding, `linkem` (user space) and `netem` (kernel).

Register a new driver in ``LINKS``; ``auto`` picks netem where the kernel has it, else linkem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import QuicbenchError
from .base import LinkEmulator
from .plain import PlainForwarding

if TYPE_CHECKING:
    from ..lab.base import Lab

LINKS: dict[str, type[LinkEmulator]] = {
    "plain": PlainForwarding,
}

AUTO_ORDER = ("netem", "linkem")


def resolve_link(name: str) -> type[LinkEmulator]:
    if name == "auto":
        for candidate in AUTO_ORDER:
            cls = LINKS.get(candidate)
            if cls is not None and cls.available()[0]:
                return cls
        return PlainForwarding
    try:
        cls = LINKS[name]
    except KeyError:
        raise QuicbenchError(
            f"unknown link emulator '{name}': accepted: auto, {', '.join(sorted(LINKS))}") from None
    ok, why = cls.available()
    if not ok:
        raise QuicbenchError(f"link emulator '{name}' is not usable here: {why}")
    return cls


def attach_link(lab: "Lab") -> LinkEmulator:
    return resolve_link(lab.spec.link)(lab)


def reattach_link(lab: "Lab", described: dict[str, Any]) -> LinkEmulator:
    return LINKS[described["name"]](lab)


__all__ = ["LinkEmulator", "LINKS", "resolve_link", "attach_link", "reattach_link"]
