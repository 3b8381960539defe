"""Command-line condition flags shared by `lab up`, `lab set` and `link calibrate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, List, Optional

import typer
from pydantic import ValidationError

from quicbench.model.conditions import DIRECTION_FIELDS, Condition
from quicbench.errors import QuicbenchError, format_validation_error

Delay = Annotated[Optional[float], typer.Option("--delay", help="One-way delay in ms, each direction (RTT = 2x).")]
Jitter = Annotated[Optional[float], typer.Option("--jitter", help="Delay jitter in ms.")]
JitterDist = Annotated[Optional[str], typer.Option("--jitter-dist", help="uniform, normal, pareto, paretonormal.")]
Loss = Annotated[Optional[float], typer.Option("--loss", help="Random loss in %, each direction.")]
Rate = Annotated[Optional[float], typer.Option("--rate", help="Bottleneck rate in Mbit/s, each direction.")]
QueueMs = Annotated[Optional[float], typer.Option("--queue-ms", help="Drop-tail queue size in ms at the rate.")]
Spikes = Annotated[Optional[float], typer.Option("--spikes", help="Spike period in ms: the rate drops every period.")]
Trace = Annotated[Optional[Path], typer.Option("--trace", help="mahimahi trace file (replaces --rate).")]
Up = Annotated[List[str], typer.Option("--up", help="Client->server only: FIELD=VALUE (e.g. --up loss_pct=1).")]
Down = Annotated[List[str], typer.Option("--down", help="Server->client only: FIELD=VALUE (e.g. --down rate_mbit=5).")]


def _kv(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise QuicbenchError(f"{flag} '{item}': use FIELD=VALUE with FIELD one of {', '.join(DIRECTION_FIELDS)}")
        k, v = item.split("=", 1)
        if k not in DIRECTION_FIELDS:
            raise QuicbenchError(f"{flag} '{item}': unknown field '{k}', accepted: {', '.join(DIRECTION_FIELDS)}")
        out[k] = v
    return out


def condition_from_flags(name: str = "cli", delay: float | None = None, jitter: float | None = None,
                         jitter_dist: str | None = None, loss: float | None = None, rate: float | None = None,
                         queue_ms: float | None = None, spikes: float | None = None, trace: Path | None = None,
                         up: list[str] | None = None, down: list[str] | None = None) -> Condition:
    hop: dict[str, Any] = {}
    for key, val in (("delay_ms", delay), ("jitter_ms", jitter), ("jitter_dist", jitter_dist),
                     ("loss_pct", loss), ("rate_mbit", rate), ("trace", trace)):
        if val is not None:
            hop[key] = val
    if queue_ms is not None:
        hop["queue"] = {"ms": queue_ms}
    if spikes is not None:
        hop["spikes"] = {"period_ms": spikes}
    if up:
        hop["up"] = _kv(up, "--up")
    if down:
        hop["down"] = _kv(down, "--down")
    try:
        return Condition.model_validate({"name": name, "hops": [hop]})
    except ValidationError as e:
        raise QuicbenchError(format_validation_error(e, "condition")) from None
