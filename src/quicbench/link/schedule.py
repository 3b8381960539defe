"""Up to which rate linkem keeps its schedule, and the warning for a plan that goes beyond it.

`make bench` measures it (tools/bench/bench_link_schedule.py): real 20 MB downloads through a
namespace lab, client and server both busy, at a ladder of download rates and without a rate
limit, each transfer judged link-late by the rule of every trial (:mod:`quicbench.link.fidelity`).
The rule for the figure (:func:`highest_on_schedule`): climbing the ladder from its lowest rate,
the highest rate at which no transfer was link-late, it and every rate below it; "unlimited" (no
rate limit) counts only when every rate kept its schedule too. The figure lives in one place,
the bench result (bench/results/linkem.json, key ``schedule``): the warning reads it, and
docs/link.md states it (a unit test checks the two agree).

The warning is for linkem only: the kernel's netem (and plain forwarding) keep no schedule of
their own that quicbench measures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from quicbench.model.conditions import Condition, trace_mean_mbit
from quicbench.paths import REPO_ROOT

SCHEDULE_RESULT = REPO_ROOT / "bench" / "results" / "linkem.json"
SCHEDULE_KEY = "schedule"
RULE = ("the highest rate at which no transfer was link-late, climbing from the lowest rate tried "
        "(every lower rate on schedule too); no rate limit counts only when every rate kept its schedule")


@dataclass(frozen=True)
class ScheduleLimit:
    """What make bench found: highest_mbit, the highest rate tried that kept its schedule (None:
    not even the lowest, lowest_mbit); reached_mbit, the most the transfers at the rates on
    schedule carried (a protocol's median goodput: a 20 MB transfer need not fill its rate);
    unlimited_ok, whether transfers without a rate limit kept it too; cpus, the machine's CPU count
    when measured."""
    highest_mbit: float | None
    unlimited_ok: bool
    lowest_mbit: float
    cpus: int | None = None
    reached_mbit: float | None = None

    @classmethod
    def from_result(cls, res: dict) -> "ScheduleLimit":
        """From the bench result's ``schedule`` section."""
        return cls(highest_mbit=res.get("highest_on_schedule_mbit"), unlimited_ok=bool(res.get("unlimited_on_schedule")),
                   lowest_mbit=res["lowest_mbit"], cpus=res.get("cpus"),
                   reached_mbit=res.get("reached_on_schedule_mbit"))

    @property
    def kept(self) -> str:
        """What linkem did, as the warning, the bench's output and docs/link.md say it."""
        if self.unlimited_ok:
            return "kept its schedule at every rate tried and without a rate limit"
        if self.highest_mbit is None:
            return f"was late already at {_mbit(self.lowest_mbit)}, the lowest rate tried"
        if self.reached_mbit is not None:
            return (f"kept its schedule at rates up to {_mbit(self.highest_mbit)}, where its transfers "
                    f"carried at most {_mbit(round(self.reached_mbit))}")
        return f"kept its schedule up to {_mbit(self.highest_mbit)}"

    def exceeded_by(self, rate_mbit: float | None) -> bool:
        """Would a download at this rate (None: no rate limit) go beyond what was measured on
        schedule? Beyond is above what the transfers carried on schedule, where that is known: a
        download filling a rate above it was not measured."""
        if self.unlimited_ok:
            return False
        if rate_mbit is None:
            return True
        if self.highest_mbit is None:
            return rate_mbit >= self.lowest_mbit
        return rate_mbit > (self.reached_mbit if self.reached_mbit is not None else self.highest_mbit)


def highest_on_schedule(late_by_rate: Mapping[float | None, Sequence[bool]]) -> tuple[float | None, bool]:
    """The rule (module docstring): late flags of the transfers at each rate tried (None: no rate
    limit) -> (the highest rate on schedule or None, whether no rate limit was on schedule too).
    A rate without a judged transfer stops the climb: nothing above it is said to be on schedule."""
    highest: float | None = None
    for rate in sorted(r for r in late_by_rate if r is not None):
        flags = late_by_rate[rate]
        if not flags or any(flags):
            return highest, False
        highest = rate
    unlimited = late_by_rate.get(None)
    return highest, bool(unlimited) and not any(unlimited)


def reached_on_schedule(rates: Mapping[str, dict], highest: float | None) -> float | None:
    """The most the transfers carried at the rates on schedule (bench result's ``rates``, those at
    or below ``highest``): the largest median goodput of one protocol at one such rate."""
    if highest is None:
        return None
    carried = [p["goodput_mbps_median"] for r in rates.values()
               if r.get("rate_mbit") is not None and r["rate_mbit"] <= highest
               for p in r.get("per_protocol", {}).values() if p.get("goodput_mbps_median") is not None]
    return max(carried, default=None)


def download_rate_mbit(condition: Condition) -> float | None:
    """The rate a download (server -> client) is held to: the lowest over the hops of the down
    direction's configured rate or trace mean; None when no hop limits it."""
    rates = [h.down.rate_mbit if h.down.rate_mbit else trace_mean_mbit(h.down.trace)
             for h in condition.hops if h.down.rate_mbit or h.down.trace is not None]
    return min(rates) if rates else None


def load_limit(path: Path = SCHEDULE_RESULT) -> ScheduleLimit | None:
    """The bench's figure, None when it was not measured (no file, or no ``schedule`` key)."""
    try:
        res = json.loads(path.read_text()).get(SCHEDULE_KEY)
    except (OSError, ValueError):
        return None
    if not isinstance(res, dict) or "lowest_mbit" not in res:
        return None
    return ScheduleLimit.from_result(res)


def _mbit(rate: float) -> str:
    return f"{rate:g} Mbit/s"


def schedule_warning(conditions: Iterable[Condition], limit: ScheduleLimit | None) -> str | None:
    """One line naming the conditions whose downloads linkem was not measured to keep on schedule
    (None: none, or nothing measured)."""
    if limit is None:
        return None
    beyond = []
    for c in conditions:
        rate = download_rate_mbit(c)
        if limit.exceeded_by(rate):
            beyond.append(f"{c.name} ({'no rate limit' if rate is None else _mbit(rate)})")
    if not beyond:
        return None
    machine = f" on {limit.cpus} CPUs" if limit.cpus else ""
    return (f"warning: with both endpoints busy linkem {limit.kept} (make bench{machine}: "
            f"{SCHEDULE_RESULT.relative_to(REPO_ROOT)}, docs/link.md); trials may be link-late under "
            f"condition{'s' if len(beyond) > 1 else ''} {', '.join(beyond)}")


def plan_schedule_warning(link: str, conditions: Sequence[Condition], offload: bool = False,
                          resolve_auto: bool = True, result: Path = SCHEDULE_RESULT) -> str | None:
    """The warning for a plan's link and conditions: only where linkem is the emulator (`auto`
    resolved on this host when resolve_auto, else not warned: the ssh backend's routers choose)."""
    if link == "auto":
        if not resolve_auto:
            return None
        from quicbench.link import auto_choice
        link = auto_choice(list(conditions), offload)[0].name
    if link != "linkem":
        return None
    return schedule_warning(conditions, load_limit(result))
