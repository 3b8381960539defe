"""Kernels quicbench can run in: `host` (this machine's kernel) and `uml` (User-Mode Linux).

A kernel driver runs a quicbench command line in its kernel. `host` does nothing special; `uml`
boots Debian's user-mode-linux (a Linux 6.1 kernel as a user process) on the host's files and
runs the command inside, so that `sch_netem`, `tbf` and `htb` exist even where the host
kernel has none. Register a new driver in ``KERNELS``.
"""

from __future__ import annotations

from quicbench.kernels.base import Kernel
from quicbench.kernels.host import HostKernel
from quicbench.kernels.uml import UmlKernel
from quicbench.registry import Registry

KERNELS: Registry[type[Kernel]] = Registry("kernel", [HostKernel, UmlKernel])


def get_kernel(name: str) -> Kernel:
    return KERNELS.get(name)()


__all__ = ["Kernel", "KERNELS", "get_kernel", "HostKernel", "UmlKernel"]
