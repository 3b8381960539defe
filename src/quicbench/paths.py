"""Where quicbench finds its binaries and keeps its state and caches."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from quicbench.errors import QuicbenchError

# src/quicbench/paths.py -> repository root (when run from a checkout)
REPO_ROOT = Path(__file__).resolve().parents[2]

# Labs record themselves here so that `lab status` and the reaper find them.
STATE_DIR = Path(os.environ.get("QUICBENCH_STATE", "/run/quicbench"))


def bin_dir() -> Path:
    return Path(os.environ.get("QUICBENCH_BIN", REPO_ROOT / "build" / "bin"))


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quicbench"
    return Path(os.environ.get("QUICBENCH_CACHE", default))


def find_binary(name: str, fix: str) -> str:
    """Absolute path of a binary from build/bin or PATH, else a clear error with the fix."""
    local = bin_dir() / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which(name)
    if found:
        return found
    raise QuicbenchError(f"missing binary '{name}': {fix}")


def publish_cache_dir(tmp: Path, root: Path) -> None:
    """Move a finished cache directory into place, readable by every user (servers may run as
    nobody); if another process published the same one first, keep theirs."""
    import shutil
    for p in [tmp, *tmp.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    try:
        os.rename(tmp, root)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
