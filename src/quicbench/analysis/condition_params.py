"""Numbers behind condition names: delay, loss, rate, jitter, spikes, from the plan in meta.json.

Plan conditions come as ``{name, hops: [{up: {...}, down: {...}}]}`` (the stored plan), as a
single-hop shorthand ``{name, delay_ms, loss_pct, rate_mbit, spikes}``, or a hop given without
up/down (symmetric). Values are taken from the server -> client (down) direction, which carries
the payload: delays and jitter add over hops, losses combine, the rate is the bottleneck. A
name like ``12.5_0.5`` (Go-Quick's delay_loss) fills delay and loss when the plan is silent.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

import pandas as pd

PARAMS = ("delay_ms", "loss_pct", "rate_mbit", "jitter_ms", "spikes")
PARAM_LABELS = {
    "delay_ms": "one-way delay (ms, per direction)",
    "loss_pct": "packet loss (% per direction)",
    "rate_mbit": "bottleneck rate (Mbit/s)",
    "jitter_ms": "jitter (ms)",
    "spikes": "rate spikes",
}
DELAY_LOSS_NAME = re.compile(r"^\s*(\d+(?:\.\d+)?)_(\d+(?:\.\d+)?)\s*$")


def parse_delay_loss(name: str) -> tuple[float, float] | None:
    """'12.5_0.5' -> (12.5, 0.5); None for other names."""
    m = DELAY_LOSS_NAME.match(str(name))
    return (float(m.group(1)), float(m.group(2))) if m else None


def _direction(hop: dict[str, Any], which: str) -> dict[str, Any]:
    if not isinstance(hop, dict):
        return {}
    common = {k: v for k, v in hop.items() if k not in ("up", "down")}
    own = hop.get(which) or {}
    return {**common, **own} if isinstance(own, dict) else common


def _loss(d: dict[str, Any]) -> float | None:
    """Random loss in %, 0 when none; None for a loss model with no single percentage."""
    loss = d.get("loss")
    if isinstance(loss, dict) and loss:
        if loss.get("model", "random") == "random":
            return float(loss.get("pct") or 0.0)
        return None
    return float(d.get("loss_pct") or 0.0)


def params_of(cond: dict[str, Any]) -> dict[str, Any]:
    """delay_ms, loss_pct, rate_mbit, jitter_ms, spikes, rtt_ms of one plan condition dict."""
    hops = cond.get("hops")
    if not hops:
        hops = [{k: v for k, v in cond.items() if k != "name"}]
    downs = [_direction(h, "down") for h in hops]
    ups = [_direction(h, "up") for h in hops]
    delay = sum(float(d.get("delay_ms") or 0.0) for d in downs)
    delay_up = sum(float(d.get("delay_ms") or 0.0) for d in ups)
    losses = [_loss(d) for d in downs]
    loss = None if any(l is None for l in losses) else 100.0 * (1 - math.prod(1 - l / 100 for l in losses))
    rates = [float(d["rate_mbit"]) for d in downs + ups if d.get("rate_mbit")]
    return {
        "delay_ms": delay,
        "loss_pct": round(loss, 9) if loss is not None else math.nan,
        "rate_mbit": min(rates) if rates else math.nan,
        "jitter_ms": sum(float(d.get("jitter_ms") or 0.0) for d in downs),
        "spikes": any(bool(d.get("spikes")) for d in downs + ups),
        "rtt_ms": delay + delay_up,
    }


def condition_params(meta: dict[str, Any], names: Iterable[str]) -> pd.DataFrame:
    """One row per condition name (index), ordered as a reader expects.

    Order: by delay, then loss, then rate (fast first), then the plan's order; conditions the
    plan does not describe (and whose name does not parse) keep their first-seen order after.
    """
    plan_conds = {c.get("name"): c for c in ((meta.get("plan") or {}).get("conditions") or [])
                  if isinstance(c, dict)}
    plan_order = list(plan_conds)
    names = list(dict.fromkeys([*plan_order, *names]))
    rows = []
    for i, name in enumerate(names):
        row: dict[str, Any] = {"condition": name, "known": False, "plan_index": i}
        if name in plan_conds:
            row.update(params_of(plan_conds[name]), known=True)
        else:
            dl = parse_delay_loss(name)
            if dl:
                row.update(delay_ms=dl[0], loss_pct=dl[1], rate_mbit=math.nan, jitter_ms=0.0,
                           spikes=False, rtt_ms=2 * dl[0], known=True)
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in (*PARAMS, "rtt_ms"):
        if c not in df:
            df[c] = math.nan
    df["spikes"] = df["spikes"].astype("boolean")
    df["_rate_sort"] = -df["rate_mbit"].fillna(math.inf)
    df = df.sort_values(["known", "delay_ms", "loss_pct", "_rate_sort", "plan_index"],
                        ascending=[False, True, True, True, True], na_position="last", kind="stable")
    return df.drop(columns=["_rate_sort"]).set_index("condition")


def swept(params: pd.DataFrame, names: Iterable[str] | None = None) -> list[str]:
    """The numeric parameters (delay, loss, rate) that take more than one value."""
    p = params.loc[list(names)] if names is not None else params
    return [c for c in ("delay_ms", "loss_pct", "rate_mbit") if p[c].dropna().nunique() > 1]
