"""`plain`: the routers forward with the kernel and add nothing (no impairment)."""

from __future__ import annotations

from quicbench.model.conditions import Condition
from quicbench.errors import QuicbenchError
from quicbench.link.base import LinkEmulator


class PlainForwarding(LinkEmulator):
    name = "plain"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, "kernel IP forwarding, no impairment"

    @classmethod
    def supports(cls, condition: Condition) -> str | None:
        if any(not (h.up.is_transparent and h.down.is_transparent) for h in condition.hops):
            return "plain forwarding adds no impairment"
        return None

    def apply(self, condition: Condition) -> None:
        if self.supports(condition):
            raise QuicbenchError(
                f"condition '{condition.name}' ({condition.short()}) needs a link emulator, "
                "but link 'plain' only forwards: use --link linkem or --link netem")
        for r in self.routers:
            self.sysctl(r.node, "net.ipv4.ip_forward=1")
