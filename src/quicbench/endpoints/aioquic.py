"""The aioquic stack, shared by its server and client drivers: the PyPI package (the quicbench
package's extra ``aioquic``, installed by ``make aioquic``), the check that it is installed and new
enough, and the versions a row names."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from typing import Any

from quicbench.errors import QuicbenchError

PACKAGE = "aioquic"
MIN_VERSION = (1, 2)          # cubic came with aioquic 1.2.0
INSTALL_HINT = "run 'make aioquic' (installs the package's extra aioquic into .venv: pip install -e '.[aioquic]')"


def stack_versions() -> dict[str, str]:
    """aioquic, its QPACK (pylsqpack) and TLS (cryptography) packages, and the Python they run on."""
    out = {}
    for pkg in ("aioquic", "pylsqpack", "cryptography"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    out["python"] = ".".join(map(str, sys.version_info[:3]))
    return out


def python_facts(module: str, root: bool) -> dict[str, Any]:
    """What a host's Python must hold to run the module as quicbench's does: the controller's
    versions of the stack's packages (a lab on other hosts checks them there)."""
    return {"package": None, "root": root, "version_args": [], "own": False, "module": module,
            "python": {k: v for k, v in stack_versions().items() if k != "python"}}


def check_aioquic(hint: str = INSTALL_HINT) -> str:
    """aioquic's version if it is installed and new enough, else a QuicbenchError with the fix."""
    try:
        v = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        raise QuicbenchError(f"missing Python package '{PACKAGE}' in {sys.executable}: {hint}") from None
    parts = tuple(int(x) for x in re.findall(r"\d+", v)[:2])
    if parts < MIN_VERSION:
        raise QuicbenchError(f"Python package '{PACKAGE}' {v} is older than "
                             f"{'.'.join(map(str, MIN_VERSION))} (no cubic): {hint}")
    return v
