"""Command-line condition flags shared by `lab up`, `lab set`, `link calibrate` and `link
crosscheck`, derived from the impairment table (model.impairments): a row with a `flag` is a
flag that sets that field in both directions; `--up`/`--down FIELD=VALUE` set any direction
field of the table in one direction."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Annotated, Any, Callable, List, Optional

import typer
from pydantic import ValidationError

from quicbench.errors import QuicbenchError, format_validation_error
from quicbench.model.conditions import Condition
from quicbench.model.impairments import TABLE, Impairment, Table, cli_value

Flags = dict[str, Any]      # what a command decorated with condition_options receives as `flags`


def _dest(row: Impairment) -> str:
    assert row.flag
    return row.flag.removeprefix("--").replace("-", "_")


def _help(row: Impairment) -> str:
    accepted = row.bounds_text
    unit = "" if row.kind == "enum" or not row.unit or row.unit in accepted else f" in {row.unit}"
    return f"{row.meaning[0].upper()}{row.meaning[1:]}{unit}, each direction" + (f" ({accepted})." if accepted else ".")


def _option_type(row: Impairment) -> Any:
    return {"number": float, "integer": int, "boolean": bool, "path": Path}.get(row.kind, str)


def flag_parameters(table: Table = TABLE) -> list[inspect.Parameter]:
    """One typer option per table row with a flag, then --up and --down."""
    params = [inspect.Parameter(_dest(r), inspect.Parameter.KEYWORD_ONLY, default=None,
                                annotation=Annotated[Optional[_option_type(r)], typer.Option(r.flag, help=_help(r))])
              for r in table.rows if r.flag]
    fields = ", ".join(table.direction_fields)
    for d, who in (("up", "Client->server"), ("down", "Server->client")):
        params.append(inspect.Parameter(d, inspect.Parameter.KEYWORD_ONLY, default=[], annotation=Annotated[
            List[str], typer.Option(f"--{d}", help=f"{who} only: FIELD=VALUE (e.g. --{d} loss_pct=1); FIELD one of "
                                                   f"{fields}.")]))
    return params


def condition_options(func: Callable[..., Any] | None = None, *, table: Table = TABLE) -> Any:
    """Give a typer command the table's condition flags: the command declares a parameter
    `flags` (left out of its options) and receives them there, for condition_from_flags."""
    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func)
        own = [p for p in sig.parameters.values() if p.name != "flags"]
        extra = flag_parameters(table)
        names = {p.name for p in extra}

        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            flags = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            return func(*args, flags=flags, **kwargs)

        kw_only = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        command.__signature__ = sig.replace(parameters=[*kw_only, *extra])    # type: ignore[attr-defined]
        command.__annotations__ = {**{p.name: p.annotation for p in own if p.annotation is not p.empty},
                                   **{p.name: p.annotation for p in extra}}
        del command.__wrapped__        # typer reads the signature above, not the function's own
        return command
    return wrap(func) if func is not None else wrap


def _kv(items: list[str], flag: str, table: Table) -> dict[str, Any]:
    fields = table.direction_fields
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise QuicbenchError(f"{flag} '{item}': use FIELD=VALUE with FIELD one of {', '.join(fields)}")
        k, v = item.split("=", 1)
        if k not in fields:
            raise QuicbenchError(f"{flag} '{item}': unknown field '{k}', accepted: {', '.join(fields)}")
        try:
            out[k] = cli_value(table[k], v)
        except ValueError as e:
            raise QuicbenchError(f"{flag} {e}") from None
    return out


def hop_from_flags(flags: Flags | None, table: Table = TABLE) -> dict[str, Any]:
    """The hop the flags give, as a plan would write it (not yet validated)."""
    flags = flags or {}
    hop: dict[str, Any] = {}
    for row in table.rows:
        val = flags.get(_dest(row)) if row.flag else None
        if val is None:
            continue
        if row.group is None:
            hop[row.name] = val
        else:
            hop.setdefault(row.group, {})[row.key] = val
    for d in ("up", "down"):
        if flags.get(d):
            hop[d] = _kv(flags[d], f"--{d}", table)
    return hop


def condition_from_flags(name: str = "cli", flags: Flags | None = None) -> Condition:
    """The condition the flags give (one hop; no flag: no impairment)."""
    try:
        return Condition.model_validate({"name": name, "hops": [hop_from_flags(flags)]})
    except ValidationError as e:
        raise QuicbenchError(format_validation_error(e, "condition")) from None
