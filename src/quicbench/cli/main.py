"""The quicbench command line (typer + rich): the entry point and its exit codes.

Exit codes: 0 success; 1 a run or check that completed with failures, or the environment
failed (a dead link emulator that would not restart, a full disk); 2 bad input (a plan, a
flag, a missing binary: one line naming the field and what is accepted); 130 interrupted.
"""

from __future__ import annotations

import faulthandler
import signal
import sys

import typer
from pydantic import ValidationError
from rich.markup import escape      # a message's own [brackets] are text, not markup
from typer.exceptions import TyperException

from quicbench.cli import doctor, lab, page, report, results, run, scale  # noqa: F401 - the commands register themselves
from quicbench.cli.app import app, err
from quicbench.errors import EnvironmentFault, QuicbenchError, format_validation_error


def _sigterm_as_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    """Entry point: every QuicbenchError becomes one line on stderr and exit code 2 (1 for the
    environment's faults)."""
    signal.signal(signal.SIGTERM, _sigterm_as_exit)
    # a shell starts background jobs with SIGINT ignored: take it back, so Ctrl-C (or kill -INT)
    # always stops a run cleanly
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # 'kill -USR1 PID' prints every thread's stack to stderr: where a stuck run is stuck
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        from quicbench.store import reap_stale_temporaries
        try:
            reap_stale_temporaries()    # what killed processes left in the caches and merges' parents
        except OSError:
            pass                        # a cache it may not read: nothing of its own to reap there
        rc = app(standalone_mode=False)
    except EnvironmentFault as e:
        err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
        sys.exit(1)
    except QuicbenchError as e:
        err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
        sys.exit(2)
    except ValidationError as e:
        err.print(f"[bold red]error:[/] {escape(format_validation_error(e))}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except typer.Abort:
        sys.exit(130)
    except TyperException as e:   # usage errors: bad option, missing argument, ...: one line, the option named
        fmt = getattr(e, "format_message", None)
        msg = " ".join((fmt() if fmt else str(e)).split())
        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        err.print(f"[bold red]error:[/] {escape(msg)}{escape(hint)}", highlight=False, soft_wrap=True)
        sys.exit(getattr(e, "exit_code", 2) or 2)
    sys.exit(rc if isinstance(rc, int) else 0)


@app.command("version")
def version() -> None:
    """Print the quicbench version."""
    from quicbench import __version__
    from quicbench.cli.app import console
    console.print(f"quicbench {__version__}")


if __name__ == "__main__":
    main()
