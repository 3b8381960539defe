"""Lab backends: where the client, router(s) and server of a lab live.

A backend implements :class:`quicbench.lab.base.Lab`; register it in ``BACKENDS``.
"""

from __future__ import annotations

from quicbench.lab.base import Lab, LabSpec, NODE_NAMES, reap_dead_labs, list_lab_states
from quicbench.lab.netns import NetnsLab

BACKENDS: dict[str, type[Lab]] = {
    "netns": NetnsLab,
}


def make_lab(spec: LabSpec) -> Lab:
    try:
        cls = BACKENDS[spec.backend]
    except KeyError:
        from quicbench.errors import QuicbenchError
        raise QuicbenchError(
            f"unknown lab backend '{spec.backend}': accepted: {', '.join(sorted(BACKENDS))}") from None
    return cls(spec)


__all__ = ["Lab", "LabSpec", "NODE_NAMES", "BACKENDS", "make_lab", "reap_dead_labs", "list_lab_states"]
