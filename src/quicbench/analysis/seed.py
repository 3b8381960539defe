"""Seed 000's Table 1 (Go-Quick) and the cells of a run it can be set beside."""

from __future__ import annotations

import math
from importlib import resources

import pandas as pd

from quicbench.analysis.condition_params import parse_delay_loss
from quicbench.analysis.load import RunData

SOURCE = ("Go-Quick final report (Fed4FIRE+, Eight Bells), Table 1: goodput in Mbit/s; "
          "no repetition count, spread or significance given")


def seed_table1() -> pd.DataFrame:
    """The seed's Table 1, long format (see src/quicbench/data/SOURCES.md)."""
    with resources.files("quicbench").joinpath("data/seed000_table1.csv").open() as f:
        return pd.read_csv(f)


def _close(a: float, b: float) -> bool:
    return a is not None and b is not None and not (math.isnan(a) or math.isnan(b)) and abs(a - b) < 1e-6


def seed_matches(run: RunData) -> pd.DataFrame:
    """Seed goodput for each (condition, workload, protocol) of the run that has a seed twin.

    A condition matches a seed row when its name is delay_loss with the same numbers (the
    Go-Quick preset's names: 0_0, 12.5_0.5, ...), or, in a plan named go-quick/goquick,
    when its per-direction delay and loss equal the seed's; a workload matches by object
    size. Other runs (a plain 'none' condition, say) get no seed values.
    """
    seed = seed_table1()
    cols = ["condition", "workload", "protocol", "seed_condition", "seed_goodput_mbps"]
    rows = []
    params = run.conditions
    plan_name = str((run.meta.get("plan") or {}).get("name") or "").lower().replace("_", "-")
    goquick_plan = "go-quick" in plan_name or "goquick" in plan_name
    for c in run.condition_order:
        dl = parse_delay_loss(c)
        if dl is None and goquick_plan and c in params.index:
            dl = (params.at[c, "delay_ms"], params.at[c, "loss_pct"])
        if dl is None:
            continue
        sc = seed[seed["delay_ms"].map(lambda d: _close(d, dl[0])) & seed["loss_pct"].map(lambda l: _close(l, dl[1]))]
        if sc.empty:
            continue
        for w in run.workloads:
            if run.kind_of(w) != "objects":
                continue   # browser page loads and videos are not the seed's getFiles downloads
            size = run.workload_info.at[w, "size_bytes"]
            sw = sc[sc["size_bytes"] == size]
            for _, s in sw.iterrows():
                if s["protocol"] in run.protocols:
                    rows.append({"condition": c, "workload": w, "protocol": s["protocol"],
                                 "seed_condition": s["seed_condition"], "seed_goodput_mbps": float(s["goodput_mbps"])})
    return pd.DataFrame(rows, columns=cols)


def seed_best(matches: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(condition, workload) -> the protocol the seed found fastest."""
    if matches.empty:
        return {}
    idx = matches.groupby(["condition", "workload"])["seed_goodput_mbps"].idxmax()
    return {k: matches.at[i, "protocol"] for k, i in idx.items()}
