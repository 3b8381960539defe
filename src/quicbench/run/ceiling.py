"""The kernel's own ceiling: what each protocol reaches on an unimpaired link in this kernel.

Inside User-Mode Linux (`--kernel uml`) the whole lab shares one slow virtual CPU: a transfer
tops out at tens of Mbit/s whatever the condition allows. A trial whose goodput comes near
that ceiling measured the kernel, not the condition — as a CPU-bound trial measured the CPU.
So a run inside UML first measures, per protocol, the goodput of the plan's largest object
workload over an unimpaired link (same hops, no delay, loss or rate), keeps the best of
``REPS`` fetches in meta.json (``ceiling``), and flags each row whose goodput reaches
``NEAR`` of its protocol's ceiling (column ``near_ceiling``). The report counts them.

On the host kernel the ceiling is not measured (``near_ceiling`` stays empty): there the
machine's limit is its CPU, which ``cpu_bound`` already flags.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Callable

from quicbench.model.conditions import Condition
from quicbench.model.specs import TrialSpec

NEAR = 0.8     # a trial at >= 80 % of its protocol's ceiling is flagged
REPS = 2       # fetches per protocol; the best counts (the ceiling is a maximum)


def wanted() -> bool:
    """The run executes inside User-Mode Linux."""
    return os.environ.get("QUICBENCH_KERNEL") == "uml"


def unimpaired(hops: int) -> Condition:
    return Condition.model_validate({"name": "ceiling", "hops": [{} for _ in range(hops)]})


def ceiling_specs(todo: list[TrialSpec]) -> list[TrialSpec]:
    """One spec per (protocol, client, server) of todo's workloads whose kind measures goodput (object
    downloads): the largest payload, over an unimpaired link."""
    objects = [t for t in todo if t.workload.workload_kind.measures("goodput_mbps") and not t.warmup]
    if not objects:
        return []
    best: dict[tuple[str, str, str, str], TrialSpec] = {}
    for t in objects:
        k = (t.protocol, t.client, t.server_instance, t.tcp_cc or "")
        if k not in best or t.workload.payload_bytes > best[k].workload.payload_bytes:
            best[k] = t
    cond = unimpaired(len(objects[0].condition.hops))
    # the same server instance (server/quic_cc) and TCP congestion control as the trials
    return [replace(t, seq=0, condition=cond, rep=0, warmup=False) for _, t in sorted(best.items())]


def measure(specs: list[TrialSpec], fetch: Callable[[TrialSpec, int], dict[str, Any]]) -> dict[str, Any]:
    """fetch(spec, attempt) -> row; the best goodput of REPS ok fetches per protocol."""
    goodput: dict[str, float] = {}
    detail: list[dict[str, Any]] = []
    for spec in specs:
        for attempt in range(REPS):
            row = fetch(spec, attempt)
            g = row.get("goodput_mbps") if row.get("status") == "ok" else None
            detail.append({"protocol": spec.protocol, "client": spec.client, "server": spec.server,
                           "workload": spec.workload.label, "goodput_mbps": g, "error": row.get("error"),
                           "cpu_bound": row.get("cpu_bound")})
            if g is not None:
                goodput[spec.protocol] = max(goodput.get(spec.protocol, 0.0), g)
    return {"kernel": os.environ.get("QUICBENCH_KERNEL", "host"), "kernel_release": os.uname().release,
            "near": NEAR, "goodput_mbps": goodput, "fetches": detail}


def near_ceiling(row: dict[str, Any], ceiling: dict[str, Any] | None) -> bool | None:
    """The row's goodput reached NEAR of its protocol's ceiling (None: no ceiling or no goodput)."""
    if not ceiling:
        return None
    top = (ceiling.get("goodput_mbps") or {}).get(row.get("protocol"))
    g = row.get("goodput_mbps")
    if not top or g is None:
        return None
    return bool(g >= ceiling.get("near", NEAR) * top)
