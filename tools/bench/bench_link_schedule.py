"""Part of `make bench` (bench_link writes it into bench/results/linkem.json under "schedule"):
up to which download rate linkem keeps its schedule with both endpoints busy.

Real trials, as a run makes them (quicbench's lab and trial code): one namespace lab with linkem
(offloads off, as a plan's default), Caddy serving one object, qb-load fetching it over h1 (TCP
CUBIC, the kernel's default) and h3 (quic-go), 10 ms one way, at each rate of RATES and without a
rate limit. Each transfer's row carries linkem's lateness over it and the `link_late` verdict of
every trial (p99 above max(0.5 ms, 5 % of the one-way delay): link/fidelity.py); the figure is
link/schedule.highest_on_schedule's rule over those verdicts. The object is the matrix plan's fast
path's 20 MB (where runs were link-late), so each transfer is 0.2-1.7 s of both endpoints at work
on this machine's CPUs beside linkem.
"""

from __future__ import annotations

import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from rich.table import Table

from quicbench.clients import LoadClient, Target
from quicbench.content.objects import generate
from quicbench.lab import LabSpec, make_lab
from quicbench.link.schedule import RULE, ScheduleLimit, highest_on_schedule, reached_on_schedule
from quicbench.model.conditions import Condition
from quicbench.model.plan import Workload
from quicbench.model.specs import TrialSpec
from quicbench.run.trial import run_trial
from quicbench.servers import CaddyServer
from quicbench.tls import make_tls

RATES: tuple[float | None, ...] = (100, 200, 400, 600, 800, None)     # Mbit/s down and up; None: no limit
DELAY_MS = 10
SIZE = "20MB"
REPS = 5
PROTOCOLS = ("h1", "h3")
TIMEOUT_S = 60


def _condition(rate: float | None) -> Condition:
    return Condition.model_validate({"name": f"r{rate:g}" if rate else "unlimited", "delay_ms": DELAY_MS,
                                     **({"rate_mbit": rate} if rate else {})})


def _transfer(row: dict) -> dict:
    keep = ("protocol", "status", "error", "goodput_mbps", "link_late_p50_ms", "link_late_p99_ms", "link_late_max_ms",
            "link_late_drops", "link_late", "host_steal", "host_steal_ms", "link_cpu_pct", "cpu_bound")
    return {k: row.get(k) for k in keep}


def _summary(transfers: list[dict]) -> dict:
    ok = [t for t in transfers if t["status"] == "ok" and t["link_late"] is not None]
    p99 = [t["link_late_p99_ms"] for t in ok]
    gp = [t["goodput_mbps"] for t in ok if t["goodput_mbps"] is not None]
    return {"transfers": len(transfers), "judged": len(ok), "link_late": sum(bool(t["link_late"]) for t in ok),
            "host_steal": sum(bool(t["host_steal"]) for t in ok),
            "late_p99_ms_median": statistics.median(p99) if p99 else None, "late_p99_ms_max": max(p99, default=None),
            "late_max_ms": max((t["link_late_max_ms"] for t in ok), default=None),
            "goodput_mbps_median": statistics.median(gp) if gp else None}


def schedule(rates: tuple[float | None, ...] = RATES, reps: int = REPS, protocols: tuple[str, ...] = PROTOCOLS,
             size: str = SIZE) -> dict:
    """Measure: per rate, each transfer's lateness and verdict, their summary per protocol and
    together, and the figure by the rule (link/schedule.py)."""
    t0 = time.time()
    workload = Workload(size=size, count=1)
    by_rate: dict[str, dict] = {}
    late_by_rate: dict[float | None, list[bool]] = {}
    with tempfile.TemporaryDirectory(prefix="qb-bench-") as tmp:
        wd = Path(tmp)
        content = generate({workload.size_bytes: 1})
        with make_lab(LabSpec(name=f"bs{secrets.token_hex(2)}", link="linkem", tcp_cc="cubic")) as lab:
            tls = make_tls(wd / "tls", ips=[lab.address("server")])
            server = CaddyServer(lab, wd / "caddy", content, tls)
            server.start()
            try:
                target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443, tls=tls,
                                content=content)
                transfers: dict[float | None, list[dict]] = {rate: [] for rate in rates}
                seq = 0
                # the rates take turns, one transfer per protocol each, so that a noisy moment on the
                # machine falls on several rates rather than on all of one; round -1 warms up, not kept
                for rep in range(-1, reps):
                    for rate in rates:
                        cond = _condition(rate)
                        lab.set_condition(cond)
                        for proto in protocols:
                            spec = TrialSpec(seq, cond, workload, proto, "caddy", max(rep, 0), warmup=rep < 0)
                            row = run_trial(spec, target, LoadClient(), server.pid, wd / f"t{seq}", TIMEOUT_S)
                            seq += 1
                            if rep >= 0:
                                transfers[rate].append(_transfer(row))
                for rate, runs in transfers.items():
                    by_rate[_condition(rate).name] = {
                        "rate_mbit": rate, **_summary(runs),
                        "per_protocol": {p: _summary([t for t in runs if t["protocol"] == p]) for p in protocols},
                        "runs": runs}
                    late_by_rate[rate] = [bool(t["link_late"]) for t in runs
                                          if t["status"] == "ok" and t["link_late"] is not None]
            finally:
                server.stop()
    highest, unlimited_ok = highest_on_schedule(late_by_rate)
    return {"rule": RULE, "highest_on_schedule_mbit": highest, "unlimited_on_schedule": unlimited_ok,
            "reached_on_schedule_mbit": reached_on_schedule(by_rate, highest),
            "lowest_mbit": min(r for r in rates if r is not None), "rates": by_rate, "delay_ms": DELAY_MS,
            "size": size, "reps": reps, "protocols": list(protocols), "cpus": os.cpu_count(),
            "seconds": time.time() - t0}


def table(res: dict) -> Table:
    t = Table("rate", "link-late", "p99 lateness, median / max (ms)", "max lateness (ms)", "goodput median",
              title=f"linkem's schedule vs rate ({'+'.join(res['protocols'])} {res['size']} downloads, "
                    f"{res['delay_ms']} ms one way, {res['reps']} each)")
    ms = (lambda v: f"{v:.2f}" if v is not None else "-")
    for key, r in res["rates"].items():
        t.add_row("no limit" if r["rate_mbit"] is None else f"{r['rate_mbit']:g} Mbit/s",
                  f"{r['link_late']} of {r['judged']}" + (f" ({r['host_steal']} host steal)" if r["host_steal"] else ""),
                  f"{ms(r['late_p99_ms_median'])} / {ms(r['late_p99_ms_max'])}", ms(r["late_max_ms"]),
                  f"{r['goodput_mbps_median']:.0f} Mbit/s" if r["goodput_mbps_median"] is not None else "-")
    return t


def figure_text(res: dict) -> str:
    return f"with both endpoints busy linkem {ScheduleLimit.from_result(res).kept} (the rule: {res['rule']})"
