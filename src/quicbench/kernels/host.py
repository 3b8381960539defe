"""`host`: the kernel quicbench runs on (nothing to boot)."""

from __future__ import annotations

import os
from typing import Any

from quicbench.kernels.base import Kernel


class HostKernel(Kernel):
    name = "host"

    def available(self) -> tuple[bool, str]:
        return True, f"this machine's kernel {os.uname().release}"

    def version(self) -> dict[str, Any]:
        from quicbench.kernels.features import probe
        k = probe()
        return {"kernel": "host", "version": os.uname().release,
                "qdiscs": sorted(q for q in ("netem", "tbf", "htb") if k.get(q))}
