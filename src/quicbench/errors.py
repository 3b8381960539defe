"""Errors that the CLI turns into one clear line, and the formatter for pydantic's errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class QuicbenchError(Exception):
    """A user-facing error: bad input, missing binary, not root, ...

    The message names what is wrong and what is accepted; the CLI prints it on one
    line and exits with code 2.
    """


class EnvironmentFault(QuicbenchError):
    """The host or the lab failed, not the user's input (a link emulator died, a disk is full):
    the CLI exits with code 1."""

    exit_code = 1


def format_validation_error(e: "ValidationError", source: str | None = None) -> str:
    """pydantic's errors as one line: 'source: field.path: message (got value); ...'."""
    parts = []
    for d in e.errors():
        loc = ".".join(str(x) for x in d["loc"] if not str(x).startswith("function-"))
        msg = d["msg"].removeprefix("Value error, ")
        got = d.get("input")
        tail = f" (got {got!r})" if got is not None and not isinstance(got, (dict, list)) else ""
        parts.append(f"{loc}: {msg}{tail}" if loc else f"{msg}{tail}")
    prefix = f"{source}: " if source else ""
    return prefix + "; ".join(parts)
