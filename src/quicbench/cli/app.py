"""The command-line application object, its consoles and helpers shared by the commands."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Compare HTTP/1.1, HTTP/2 and HTTP/3 under emulated network conditions.")
lab_app = typer.Typer(no_args_is_help=True, help="Create, inspect, use and remove labs.")
link_app = typer.Typer(no_args_is_help=True, help="Link emulation: calibrate a condition.")
plan_app = typer.Typer(no_args_is_help=True, help="Inspect plans.")
app.add_typer(lab_app, name="lab")
app.add_typer(link_app, name="link")
app.add_typer(plan_app, name="plan")


class LineConsole(Console):
    """A console whose every message is whole lines on its stream, in the order printed: before a
    message the other stream is flushed and after it its own, so that stdout and stderr sharing a
    terminal or a pipe never run two messages into one line (a warning on stderr right after a
    result on stdout, as 'lab up' printed with 'reaped lab ...')."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        kwargs.setdefault("end", "\n")
        super().print(*objects, **kwargs)
        try:
            self.file.flush()
        except (OSError, ValueError):
            pass


console = LineConsole(soft_wrap=True)
err = LineConsole(stderr=True, soft_wrap=True)


def require_root() -> None:
    from quicbench.errors import QuicbenchError
    if os.geteuid() != 0:
        raise QuicbenchError("quicbench needs root for network namespaces: run as root (or with sudo)")


def reap() -> None:
    """Remove labs left behind by killed processes, one line each."""
    if os.geteuid() != 0:
        return
    from quicbench.clients.browser.driver import reap_profiles
    from quicbench.lab import reap_dead_labs
    for name in reap_dead_labs():
        err.print(f"[yellow]reaped lab '{name}' left behind by a killed process[/]")
    for profile in reap_profiles():
        err.print(f"[yellow]removed browser profile '{profile}' left behind by a killed process[/]")


KernelOpt = typer.Option("host", "--kernel", help="Kernel to run in: host (this machine's) or uml "
                         "(User-Mode Linux: the kernel's netem, tbf and htb on any host; slow: tens of Mbit/s).")


def check_kernel(kernel: str) -> None:
    """An unknown kernel name fails before anything runs."""
    from quicbench.kernels import get_kernel
    get_kernel(kernel)


def _argv_without_kernel(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--kernel":
            skip = True
        elif not a.startswith("--kernel="):
            out.append(a)
    return out


def rerun_in_kernel(kernel: str) -> None:
    """With a kernel other than host: run this same command line inside it and exit with its exit
    code; with host, return and go on here."""
    import sys

    from quicbench.errors import QuicbenchError
    from quicbench.kernels import get_kernel
    k = get_kernel(kernel)
    if k.name == "host":
        return
    from quicbench.provision import ensure_available
    ok, why = ensure_available(k)          # installs User-Mode Linux on first use
    if not ok:
        raise QuicbenchError(f"--kernel {kernel}: not usable here: {why}")
    from quicbench.store import HOST_PID_ENV
    argv = [sys.executable, "-m", "quicbench.cli.main", *_argv_without_kernel(sys.argv[1:])]
    # a run inside names this process in its run.lock: the host refuses the directory while it lives
    raise SystemExit(k.run(argv, {**os.environ, HOST_PID_ENV: str(os.getpid())}, os.getcwd()))
