"""The netty stack's program, shared by its server and client drivers: ``quicbench-netty``
(stacks/netty/, built by ``make netty``), one program for both ends (``server`` / ``client``),
what a node needs to run it, and its versions (Netty's, quiche's, Java's)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.paths import bin_dir

NETTY_BINARY = "quicbench-netty"
NETTY_INSTALL_HINT = ("run 'make netty' (Java 17 and Maven, then stacks/netty/ built into build/bin; "
                      "'make stacks' builds every optional HTTP/3 stack)")
NETTY_PROVISIONS = ("netty",)    # quicbench.provision: built on first use


def netty_binary_facts(root: bool) -> dict[str, dict[str, Any]]:
    """What a node needs to run it (a lab on other hosts checks and installs these): the launcher
    and its jar, both copied from this controller, and Java 17 from Debian."""
    return {NETTY_BINARY: {"package": None, "root": root, "version_args": ["--version"], "own": True},
            NETTY_BINARY + ".jar": {"package": None, "root": False, "version_args": [], "own": True},
            "java": {"package": "openjdk-17-jre-headless", "root": False, "version_args": ["-version"], "own": False}}


def netty_executable() -> str:
    """build/bin's launcher, with its jar beside it."""
    local = bin_dir() / NETTY_BINARY
    jar = local.with_name(NETTY_BINARY + ".jar")
    if local.is_file() and os.access(local, os.X_OK) and jar.is_file():
        return str(local)
    raise QuicbenchError(f"missing binary '{local}': {NETTY_INSTALL_HINT}")


def parse_versions(out: str) -> dict[str, str]:
    """``quicbench-netty --version``'s JSON line: {'quicbench_netty': '0.1.0', 'netty':
    '4.2.18.Final', 'quiche': '0.29.3', 'java': '17.0.15'}; else the line itself."""
    try:
        got = json.loads(out)
    except json.JSONDecodeError:
        return {"quicbench_netty": out.strip()} if out.strip() else {}
    return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}


def netty_versions() -> dict[str, str]:
    try:
        cp = subprocess.run([netty_executable(), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise QuicbenchError(f"{NETTY_BINARY} --version: {e}") from e
    return parse_versions(cp.stdout)
