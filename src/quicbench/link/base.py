"""The link-emulator driver interface.

A driver shapes the traffic crossing the lab's router hop(s) according to a
:class:`~quicbench.model.conditions.Condition`. It must be reconstructible from what
``describe()`` returns, so that another process (``quicbench lab set``) can change a
running lab's condition.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from quicbench.model.conditions import Condition, Hop
from quicbench.errors import QuicbenchError

if TYPE_CHECKING:
    from quicbench.lab.base import Lab


class LinkEmulator(ABC):
    name: ClassVar[str]
    # Why this driver cannot shape a lab whose endpoints send GSO super-frames (offload = true);
    # None if it can.
    no_offload: ClassVar[str | None] = None

    def __init__(self, lab: "Lab"):
        self.lab = lab

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]:
        """(usable here?, why not / version)."""

    @classmethod
    def supports(cls, condition: Condition) -> str | None:
        """None if this driver can apply the condition, else why not."""
        return None

    @abstractmethod
    def apply(self, condition: Condition) -> None:
        """Start shaping with this condition, or change the running condition."""

    def stats(self) -> dict[str, Any]:
        """Counters per hop and direction, where the driver has them."""
        return {}

    def stop(self) -> None:
        """Stop shaping (the lab removes its namespaces afterwards)."""

    def describe(self) -> dict[str, Any]:
        ok, detail = self.available()
        return {"name": self.name, "detail": detail}


def per_router(condition: Condition, n_routers: int) -> list[Hop]:
    """Condition.per_router, with a mismatch as a user-facing error."""
    try:
        return condition.per_router(n_routers)
    except ValueError as e:
        raise QuicbenchError(str(e)) from None
