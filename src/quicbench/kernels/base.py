"""The kernel driver interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class Kernel(ABC):
    name: str = ""
    provisions: tuple[str, ...] = ()    # what provides it on first use (quicbench.provision)

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """(usable here, why / what it is)."""

    @abstractmethod
    def version(self) -> dict[str, Any]:
        """What this kernel is: version, and for uml the module directory and its qdiscs."""
