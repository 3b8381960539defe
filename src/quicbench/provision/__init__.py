"""What quicbench installs or builds on first use, and how.

`make setup` (and so `make run`) installs only what the default plan needs. Every other stack,
browser and tool is provided by a Makefile target; a driver names its provision (a key of
PROVISIONS), and when a plan needs a driver that is not available here, ``ensure`` runs that
target once with one progress line saying what and about how long. `make setup-all` provides
them all at once (`make test` does). A provision that cannot be installed or built is one line
naming it and the fix (exit 2); each target installs whole packages or copies a finished binary
into place, so a failed try leaves nothing half-installed for the next one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from quicbench.errors import QuicbenchError
from quicbench.paths import REPO_ROOT, cache_dir


@dataclass(frozen=True)
class Provision:
    name: str        # the Makefile target that provides it
    what: str        # what it installs or builds, for the progress line
    seconds: int     # about how long on a 2-core machine with a fresh package cache


PROVISIONS: dict[str, Provision] = {p.name: p for p in (
    Provision("servers", "nginx, Apache and Debian's Caddy 2.6 (Debian packages)", 20),
    Provision("capture", "tcpdump (Debian package)", 5),
    Provision("browser", "Debian's Chromium and Playwright", 60),
    Provision("firefox", "Debian's Firefox ESR and puppeteer-core", 60),
    Provision("video", "ffmpeg, Chromium and the players hls.js and dash.js", 90),
    Provision("uml", "User-Mode Linux (the kernel's netem) and its FPU-state wrapper", 20),
    Provision("ssh", "the OpenSSH client and server (Debian packages)", 10),
    Provision("slurm", "Slurm and munge (Debian packages)", 10),
    Provision("ngtcp2", "ngtcp2's server and client 1.11 (bookworm-backports)", 15),
    Provision("quinn", "the quinn HTTP/3 server and client (Rust, crates.io)", 120),
    Provision("aioquic", "aioquic, a pure-Python QUIC and HTTP/3 stack (PyPI)", 15),
    Provision("replay", "the replay server of recorded pages (qb-replay, Go)", 30),
    Provision("netty", "Netty's HTTP/3 server and client (Java 17 and Maven from Debian, Maven Central)", 120),
    Provision("quiche", "the quiche HTTP/3 server and client (Rust, crates.io; BoringSSL built with cmake)", 300),
)}

NO_INSTALL_ENV = "QB_NO_INSTALL"     # =1: never install on first use; say what to run instead


def fix(name: str) -> str:
    """The command that provides it by hand."""
    return f"run 'make {name}' in {REPO_ROOT}" if (REPO_ROOT / "Makefile").is_file() else f"install '{name}'"


def ensure(name: str, log=None) -> None:
    """Provide `name` now (its Makefile target), saying so in one line; one line and exit 2 when
    that is not possible here."""
    prov = PROVISIONS.get(name)
    if prov is None:
        raise QuicbenchError(f"provision: unknown '{name}', accepted: {', '.join(PROVISIONS)}")
    if os.environ.get(NO_INSTALL_ENV) == "1":
        raise QuicbenchError(f"{prov.what} is needed and not installed ({NO_INSTALL_ENV}=1): {fix(name)}")
    if not (REPO_ROOT / "Makefile").is_file():
        raise QuicbenchError(f"{prov.what} is needed and not installed: install it (no quicbench checkout here "
                             f"to build it from)")
    if os.geteuid() != 0:
        raise QuicbenchError(f"{prov.what} is needed and not installed: {fix(name)} as root")
    out = log or sys.stderr
    logs = cache_dir() / "provision"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"
    print(f"quicbench: first use: installing {prov.what}, about {prov.seconds} s (make {name}; "
          f"log: {log_path})", file=out, flush=True)
    t0 = time.monotonic()
    with open(log_path, "w") as f:
        rc = subprocess.run(["make", "--no-print-directory", "-C", str(REPO_ROOT), name], stdout=f,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    if rc != 0:
        said = [l.strip() for l in Path(log_path).read_text(errors="replace").splitlines()
                if l.strip() and not l.startswith(("make:", "make["))]
        why = said[-1][:200] if said else f"exit {rc}"
        raise QuicbenchError(f"could not install {prov.what} (make {name}: {why}); see {log_path}, then {fix(name)}")
    print(f"quicbench: {name} ready in {time.monotonic() - t0:.0f} s", file=out, flush=True)


def ensure_available(driver: type, log=None) -> tuple[bool, str]:
    """A driver's (ok, why), after providing what it names (its `provisions`) when it is not."""
    ok, why = driver.available()
    names = getattr(driver, "provisions", ())
    if ok or not names:
        return ok, why
    for name in names:
        ensure(name, log)
    import importlib
    importlib.invalidate_caches()      # a Python package installed just now
    return driver.available()
