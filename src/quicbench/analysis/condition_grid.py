"""How a run's conditions are laid out, for the figures: which parameter is swept with the
others held fixed (CVart's views) and whether two parameters are crossed (the heatmaps' grid).

Reads only ``run.conditions`` (analysis/condition_params.py); never a condition's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from quicbench.analysis.condition_params import swept

AXES = ("delay_ms", "rate_mbit", "loss_pct")
HELD = ("delay_ms", "loss_pct", "rate_mbit", "jitter_ms", "spikes")

# param -> up to two slices (mildest and harshest): (the other parameters' values, conditions in order)
Sweeps = dict[str, list[tuple[dict, list[str]]]]


def _harshness(key: dict) -> tuple:
    rate = key.get("rate_mbit")
    rate = math.inf if rate is None or (isinstance(rate, float) and math.isnan(rate)) else rate
    return (bool(key.get("spikes")), key.get("jitter_ms") or 0, key.get("loss_pct") or 0, -rate,
            key.get("delay_ms") or 0)


def sweeps(params: pd.DataFrame) -> Sweeps:
    """param -> up to two slices (mildest and harshest) of conditions sweeping it with the rest fixed."""
    params = params[params["known"]] if not params.empty else params
    out: Sweeps = {}
    for p in AXES:
        if params.empty or params[p].dropna().nunique() < 2:
            continue
        others = [c for c in HELD if c != p]
        keyed = params[others].astype(object).where(params[others].notna(), None)
        slices = []
        for _, g in params.groupby([keyed[c].map(repr) for c in others], sort=False):
            if g[p].dropna().nunique() >= 2:
                key = {c: g.iloc[0][c] for c in others}
                slices.append((key, list(g.sort_values(p).index)))
        if slices:
            slices.sort(key=lambda s: _harshness(s[0]))
            out[p] = [slices[0]] + ([slices[-1]] if len(slices) > 1 else [])
    return out


def varying(params: pd.DataFrame) -> set[str]:
    """The held parameters (delay, loss, rate, jitter, spikes) that take more than one value."""
    if params.empty:
        return set()
    return {c for c in HELD if params[c].astype(object).nunique(dropna=False) > 1}


@dataclass(frozen=True)
class Layout:
    kind: str                  # "grid" or "list"
    x: str | None = None       # parameter on x (grid)
    y: str | None = None       # parameter on y (grid)
    panel_by: tuple[str, ...] = ()


def heatmap_layout(params: pd.DataFrame) -> Layout:
    """A delay x loss (or x rate) grid when two parameters are crossed, else condition x workload."""
    if params.empty or not params["known"].all():
        return Layout("list")
    sw = swept(params)
    if len(sw) < 2:
        return Layout("list")
    x, y = sw[0], sw[1]
    if params[[x, y]].drop_duplicates().shape[0] <= max(params[x].nunique(), params[y].nunique()):
        return Layout("list")  # not crossed: each x has a single y (a diagonal)
    rest = tuple(c for c in ("rate_mbit", "loss_pct", "delay_ms", "jitter_ms", "spikes")
                 if c not in (x, y) and params[c].astype(object).nunique(dropna=False) > 1)
    keys = params[[x, y, *rest]].astype(object).fillna("-")
    if keys.duplicated().any():
        return Layout("list")  # conditions differ in something not on the axes
    return Layout("grid", x, y, rest)
