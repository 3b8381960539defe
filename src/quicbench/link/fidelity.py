"""Was the link the condition a row claims? How late the link emulator released packets in one trial.

linkem keeps, per direction, a cumulative histogram of how late it sent each frame against the
time its condition scheduled it (log-spaced buckets, at most 1/8 wide), the frames its overload
guard dropped because it had fallen more than ``--max-late-ms`` (10 ms) behind, the frames its
receive rings overflowed with, and its own scheduler times (``linkem ctl ... lateness``). A trial
reads them before and after its transfer (:class:`LinkReading`); the difference is the trial's
window (:func:`link_window`). A trial is ``link_late`` when the window's p99 lateness exceeds
max(0.5 ms, 5 % of the condition's one-way delay): then the emulated path added delay of its own
that a reader of the row would not expect.

The same reply carries what the bottleneck queue did: per direction the packets CoDel dropped
and a histogram of the sojourn time of every packet that left the queue (arrival to the start
of its serialisation); the window keeps CoDel's drops of both directions and the sojourn
quantiles of the server -> client direction, which carries the downloads.

The kernel's netem (and plain forwarding) have no such counters: their columns stay empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from quicbench.model.conditions import Condition

LATE_FLOOR_MS = 0.5        # lateness below this is scheduling noise at any delay
LATE_DELAY_SHARE = 0.05    # of the condition's one-way delay


@dataclass(frozen=True)
class LinkReading:
    """The link emulator's cumulative counters at one moment: each router's linkem reply to
    ``lateness`` (see linkem/README.md), by router node."""
    processes: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class LinkWindow:
    """What the link emulator did between two readings, over all its processes and directions.

    Quantiles are the upper bounds of their histogram buckets (at most 12.5 % above the true
    value); so is the maximum, which is exact when the window holds the largest lateness since
    linkem started. late_drops: arrivals the overload guard dropped plus receive-ring overflows.
    cpu_s / cpu_wait_s: the linkem processes' on-CPU and run-queue wait seconds, summed.
    codel_drops: packets CoDel dropped, both directions, every router (None: a linkem without
    CoDel's counter). sojourn_p50_ms / sojourn_p99_ms: of the packets that left a bottleneck
    queue server -> client, every router (None: no packet did, e.g. no rate). nivcsw: the linkem
    processes' involuntary context switches (None: a linkem that does not count them). cpus: the
    CPUs their forwarding threads last ran on, at the window's end."""
    packets: int
    late_p50_ms: float | None
    late_p99_ms: float | None
    late_max_ms: float | None
    late_drops: int
    cpu_s: float | None
    cpu_wait_s: float | None
    codel_drops: int | None = None
    sojourn_p50_ms: float | None = None
    sojourn_p99_ms: float | None = None
    nivcsw: int | None = None
    cpus: tuple[int, ...] = ()


def _hist(direction: dict[str, Any]) -> dict[int, int]:
    return dict(zip(direction.get("le_ns") or [], direction.get("counts") or []))


def _add_window(merged: dict[int, int], before: dict[str, Any], after: dict[str, Any]) -> None:
    """Add the counts of histogram `after` minus `before` (both {le_ns, counts}) to merged."""
    hb = _hist(before)
    for le, n in _hist(after).items():
        k = n - hb.get(le, 0)
        if k > 0:
            merged[le] = merged.get(le, 0) + k


def _quantile(buckets: list[tuple[int, int]], q: float) -> int | None:
    total = sum(n for _, n in buckets)
    if total == 0:
        return None
    target = max(1, math.ceil(q * total))
    seen = 0
    for le, n in buckets:
        seen += n
        if seen >= target:
            return le
    return buckets[-1][0]


def link_window(before: LinkReading, after: LinkReading) -> LinkWindow | None:
    """The trial's window between two readings; None when no process answered both times."""
    merged: dict[int, int] = {}
    sojourn: dict[int, int] = {}
    late_drops = 0
    codel_drops: int | None = None
    top = 0            # the largest lateness since linkem started, ns
    cpu = wait = 0.0
    cpu_known = wait_known = False
    nivcsw: int | None = None
    cpus: set[int] = set()
    nodes = [n for n in after.processes if n in before.processes]
    if not nodes:
        return None
    for node in nodes:
        b, a = before.processes[node], after.processes[node]
        for d in ("up", "down"):
            bd, ad = b.get(d) or {}, a.get(d) or {}
            _add_window(merged, bd, ad)
            if d == "down":
                _add_window(sojourn, bd.get("sojourn") or {}, ad.get("sojourn") or {})
            if "codel_dropped" in ad:
                codel_drops = (codel_drops or 0) + max(0, ad["codel_dropped"] - (bd.get("codel_dropped") or 0))
            late_drops += max(0, (ad.get("late_dropped") or 0) - (bd.get("late_dropped") or 0))
            late_drops += max(0, (ad.get("ring_drops") or 0) - (bd.get("ring_drops") or 0))
            top = max(top, ad.get("max_ns") or 0)
        if a.get("cpu_run_s") is not None and b.get("cpu_run_s") is not None:
            cpu, cpu_known = cpu + max(0.0, a["cpu_run_s"] - b["cpu_run_s"]), True
        if a.get("cpu_wait_s") is not None and b.get("cpu_wait_s") is not None:
            wait, wait_known = wait + max(0.0, a["cpu_wait_s"] - b["cpu_wait_s"]), True
        if a.get("nivcsw") is not None and b.get("nivcsw") is not None:
            nivcsw = (nivcsw or 0) + max(0, a["nivcsw"] - b["nivcsw"])
        cpus.update(a.get("cpus") or [])
    buckets = sorted(merged.items())
    packets = sum(n for _, n in buckets)
    ms = (lambda ns: ns / 1e6 if ns is not None else None)
    # the window's largest lies in its highest bucket and is at most the largest since start
    # (exact when the window holds that one)
    late_max = min(buckets[-1][0], top or buckets[-1][0]) if buckets else None
    stay = sorted(sojourn.items())
    return LinkWindow(packets=packets, late_p50_ms=ms(_quantile(buckets, 0.5)), late_p99_ms=ms(_quantile(buckets, 0.99)),
                      late_max_ms=ms(late_max), late_drops=late_drops,
                      cpu_s=cpu if cpu_known else None, cpu_wait_s=wait if wait_known else None,
                      codel_drops=codel_drops, sojourn_p50_ms=ms(_quantile(stay, 0.5)),
                      sojourn_p99_ms=ms(_quantile(stay, 0.99)), nivcsw=nivcsw, cpus=tuple(sorted(cpus)))


def one_way_delay_ms(condition: Condition) -> float:
    """The condition's smaller one-way delay (summed over hops) of its two directions."""
    return min(sum(h.up.delay_ms for h in condition.hops), sum(h.down.delay_ms for h in condition.hops))


def late_threshold_ms(condition: Condition) -> float:
    """How late the link may release packets (p99) before the row no longer has the condition it names."""
    return max(LATE_FLOOR_MS, LATE_DELAY_SHARE * one_way_delay_ms(condition))


def link_late(window: LinkWindow | None, condition: Condition) -> bool | None:
    """p99 lateness above the condition's threshold; None when the link emulator says nothing."""
    if window is None or window.late_p99_ms is None:
        return None
    return window.late_p99_ms > late_threshold_ms(condition)
