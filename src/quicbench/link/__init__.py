"""Link emulators: `plain` forwarding, `linkem` (user space) and `netem` (kernel).

Register a new driver in ``LINKS``; ``auto`` picks netem where the kernel has it, else linkem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quicbench.errors import QuicbenchError
from quicbench.link.base import LinkEmulator
from quicbench.link.linkem import LinkemLink
from quicbench.link.netem import NetemLink
from quicbench.link.plain import PlainForwarding

if TYPE_CHECKING:
    from quicbench.model.conditions import Condition
    from quicbench.lab.base import Lab

LINKS: dict[str, type[LinkEmulator]] = {
    "plain": PlainForwarding,
    "linkem": LinkemLink,
    "netem": NetemLink,
}

AUTO_ORDER = ("netem", "linkem")


def resolve_link(name: str, conditions: "list[Condition] | None" = None,
                 offload: bool = False) -> type[LinkEmulator]:
    """The driver class for a name; `auto` takes the first usable of netem, linkem that
    supports every condition (netem lacks spikes, on/off, traces and reordering under a rate)
    and, in a lab with offloads on, GSO super-frames; else plain."""
    if name == "auto":
        for candidate in AUTO_ORDER:
            cls = LINKS.get(candidate)
            if cls is None or not cls.available()[0]:
                continue
            if any(cls.supports(c) for c in conditions or []) or (offload and cls.no_offload):
                continue
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
    if offload and cls.no_offload:
        raise QuicbenchError(f"offload = true: link emulator '{name}' cannot shape GSO super-frames "
                             f"({cls.no_offload}); use link linkem or turn offload off")
    return cls


def attach_link(lab: "Lab", conditions: "list[Condition] | None" = None) -> LinkEmulator:
    return resolve_link(lab.spec.link, conditions or [lab.spec.condition], lab.spec.offload)(lab)


def reattach_link(lab: "Lab", described: dict[str, Any]) -> LinkEmulator:
    return LINKS[described["name"]](lab)


__all__ = ["LinkEmulator", "LINKS", "resolve_link", "attach_link", "reattach_link"]
