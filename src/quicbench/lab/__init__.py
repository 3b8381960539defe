"""Lab backends: where the client, router(s) and server of a lab live.

A backend implements :class:`quicbench.lab.base.Lab`; register it in ``BACKENDS``.
"""

from __future__ import annotations

from quicbench.lab.base import NODE_NAMES, Lab, LabSpec, list_lab_states, load_lab, reap_dead_labs
from quicbench.lab.netns import NetnsLab
from quicbench.lab.ssh import SshLab
from quicbench.registry import Registry

BACKENDS: Registry[type[Lab]] = Registry("lab backend", [NetnsLab, SshLab])


def make_lab(spec: LabSpec) -> Lab:
    return BACKENDS.get(spec.backend)(spec)


__all__ = ["Lab", "LabSpec", "NODE_NAMES", "BACKENDS", "make_lab", "load_lab", "reap_dead_labs", "list_lab_states"]
