"""Running commands, on the host or inside a lab node's network namespace."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Sequence

from quicbench.errors import QuicbenchError


def process_alive(pid: int) -> bool:
    """The process still runs (a zombie has exited; it only waits for its parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_ended(pids: Sequence[int], timeout: float) -> list[int]:
    """Wait up to timeout for the processes to end; return those still running."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if process_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.01)
        alive = [p for p in alive if process_alive(p)]
    return alive


def run(cmd: Sequence[str], *, check: bool = True, timeout: float | None = 30,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command, capture its output; raise QuicbenchError naming it on failure."""
    try:
        cp = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, input=input)
    except FileNotFoundError as e:
        raise QuicbenchError(f"missing binary '{cmd[0]}': run 'make setup-all'") from e
    except subprocess.TimeoutExpired as e:
        raise QuicbenchError(f"command timed out after {timeout}s: {shlex.join(cmd)}") from e
    if check and cp.returncode != 0:
        msg = (cp.stderr or cp.stdout).strip().splitlines()
        detail = msg[-1] if msg else f"exit code {cp.returncode}"
        raise QuicbenchError(f"command failed: {shlex.join(cmd)}: {detail}")
    return cp
