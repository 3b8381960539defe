"""The client driver interface: fetch a workload from the lab's server over one protocol."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..content import ContentSet
    from ..lab.base import Lab
    from ..plan import TrialOptions, Workload
    from ..tls import TlsMaterial


@dataclass(frozen=True)
class Target:
    """Where and what the client fetches."""
    lab: "Lab"
    hostname: str
    address: str
    port: int
    tls: "TlsMaterial"
    content: "ContentSet"


@dataclass
class ClientResult:
    requests: list[dict[str, Any]]
    summary: dict[str, Any]
    cpu_s: float | None
    wall_s: float
    returncode: int
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Client(ABC):
    name: ClassVar[str]
    protocols: ClassVar[frozenset[str]]

    @abstractmethod
    def fetch(self, target: Target, protocol: str, workload: "Workload", trial_dir: Path,
              timeout_s: float, options: "TrialOptions | None" = None) -> ClientResult:
        """Run one trial's transfer; never raise for a failed transfer, report it in .error."""

    @classmethod
    def version(cls) -> dict[str, str]:
        return {}
