"""Numbers behind condition names: delay, loss, rate, jitter, spikes.

They are the condition model's headline values (``Condition.headline``), which the runner
stores in meta.json["conditions"]. Runs written before that (format 1) have only the plan:
its conditions are read back through the same model. A name like ``12.5_0.5`` (Go-Quick's
delay_loss) fills delay and loss when neither says anything.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

import pandas as pd
from pydantic import ValidationError

from quicbench.model.conditions import Condition

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


def _headlines(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Condition name -> headline values, from meta.json (format 2) or from its plan (format 1)."""
    stored = meta.get("conditions")
    if isinstance(stored, dict) and stored:
        return {name: {k: (math.nan if v is None and k in PARAMS + ("rtt_ms",) else v) for k, v in h.items()}
                for name, h in stored.items() if isinstance(h, dict)}
    out = {}
    for c in ((meta.get("plan") or {}).get("conditions") or []):
        if not isinstance(c, dict):
            continue
        try:
            out[c.get("name")] = Condition.model_validate(_without_trace(c)).headline()
        except ValidationError:
            continue
    return out


def _without_trace(c: dict[str, Any]) -> dict[str, Any]:
    """A stored condition whose trace file is gone still has headline values: drop the path."""
    def strip(d: Any) -> Any:
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k != "trace"}
        if isinstance(d, list):
            return [strip(v) for v in d]
        return d
    return strip(c)


def condition_params(meta: dict[str, Any], names: Iterable[str]) -> pd.DataFrame:
    """One row per condition name (index), ordered as a reader expects.

    Order: by delay, then loss, then rate (fast first), then the plan's order; conditions the
    plan does not describe (and whose name does not parse) keep their first-seen order after.
    """
    heads = _headlines(meta)
    plan_order = [c.get("name") for c in ((meta.get("plan") or {}).get("conditions") or [])
                  if isinstance(c, dict)] or list(heads)
    names = list(dict.fromkeys([*plan_order, *names]))
    rows = []
    for i, name in enumerate(names):
        row: dict[str, Any] = {"condition": name, "known": False, "plan_index": i}
        if name in heads:
            row.update({k: heads[name].get(k) for k in (*PARAMS, "rtt_ms")}, known=True)
        else:
            dl = parse_delay_loss(name)
            if dl:
                row.update(delay_ms=dl[0], loss_pct=dl[1], rate_mbit=math.nan, jitter_ms=0.0,
                           spikes=False, rtt_ms=2 * dl[0], known=True)
        rows.append(row)
    df = pd.DataFrame(rows, columns=["condition", "known", "plan_index"]) if not rows else pd.DataFrame(rows)
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
