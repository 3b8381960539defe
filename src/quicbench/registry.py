"""One registry shape for every kind of driver: lab backends, link emulators, servers, clients.

A driver is a class with a ``name``, the ``protocols`` it handles (empty where that means
nothing, as for lab backends), ``available() -> (ok, why)`` and ``version() -> dict``.
A package lists its drivers in one ``Registry``; ``get`` names the accepted values when a
name is unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from quicbench.errors import QuicbenchError


@runtime_checkable
class Driver(Protocol):
    name: ClassVar[str]
    protocols: ClassVar[frozenset[str]]

    @classmethod
    def available(cls) -> tuple[bool, str]: ...

    @classmethod
    def version(cls) -> dict[str, str]: ...


T = TypeVar("T")


class Registry(Generic[T]):
    """Drivers of one kind by name, in registration order. ``on_register``, given, is told each
    driver as it registers (the first ones included): how a layer below learns what a driver
    declares without importing the drivers."""

    def __init__(self, kind: str, drivers: Iterable[T] = (), on_register: Callable[[T], None] | None = None):
        self.kind = kind
        self._drivers: dict[str, T] = {}
        self._on_register = on_register
        for d in drivers:
            self.register(d)

    def register(self, driver: T) -> T:
        name = getattr(driver, "name")
        if name in self._drivers:
            raise ValueError(f"{self.kind} '{name}' registered twice")
        self._drivers[name] = driver
        if self._on_register is not None:
            self._on_register(driver)
        return driver

    def get(self, name: str) -> T:
        try:
            return self._drivers[name]
        except KeyError:
            raise QuicbenchError(f"unknown {self.kind} '{name}': accepted: {', '.join(self.names())}") from None

    __getitem__ = get

    def names(self) -> list[str]:
        return sorted(self._drivers)

    def __contains__(self, name: object) -> bool:
        return name in self._drivers

    def __iter__(self) -> Iterator[T]:
        return iter(self._drivers.values())

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._drivers.items())

    def for_protocol(self, proto: str) -> list[str]:
        return sorted(n for n, d in self._drivers.items() if proto in getattr(d, "protocols", ()))


def stack_text(name: str, versions: dict[str, str]) -> str:
    """A driver's stack in one line, as rows name it: 'caddy 2.11.9, quic-go v0.57.1, go1.25.5'.
    A result is the implementation's as much as the protocol's."""
    parts = [str(v) if k == "go" else f"{k.replace('_', '-')} {v}" for k, v in versions.items() if v]
    return ", ".join(parts) or name


@functools.cache
def driver_stack(driver: type) -> str:
    """stack_text of a driver class's version(), asked once per process (it may run its binary)."""
    try:
        versions = driver.version()     # type: ignore[attr-defined]
    except QuicbenchError:
        versions = {}
    return stack_text(driver.name, {str(k): str(v) for k, v in (versions or {}).items()})  # type: ignore[attr-defined]
