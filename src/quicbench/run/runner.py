"""The trial runner: plan -> lab -> link -> servers -> trials -> store.

Each trial's row is appended and fsynced, or nothing is written; a resumed run skips the
trials whose rows are there. Ctrl-C and SIGTERM stop after cleaning up (lab removed,
servers stopped) and leave the run resumable.
"""

from __future__ import annotations

import faulthandler
import json
import platform
import secrets
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table

from quicbench import __version__
from quicbench.clients import Target, client_class
from quicbench.content.objects import generate
from quicbench.errors import QuicbenchError
from quicbench.lab import LabSpec, make_lab
from quicbench.model.plan import Plan, TrialSpec, expand, plan_from_dict
from quicbench.servers import server_class
from quicbench.store import RunStore
from quicbench.tls import LAB_HOSTNAME, make_tls
from quicbench.run.trial import base_row, run_trial

TEARDOWN_WATCHDOG_S = 30     # servers and lab go down in a few seconds; past this, dump stacks


def host_facts() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os
    # kernel_driver: "uml" when the run executes inside User-Mode Linux (--kernel uml)
    return {"hostname": platform.node(), "kernel": platform.release(),
            "kernel_driver": os.environ.get("QUICBENCH_KERNEL", "host"), "cpu_model": cpu,
            "cpus": os.cpu_count(), "python": platform.python_version(), "quicbench": __version__}


def plan_fingerprint(plan: Plan) -> str:
    import hashlib
    return hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:16]


class Runner:
    def __init__(self, plan: Plan, store: RunStore, console: Console | None = None,
                 reps: int | None = None, only: dict[str, list[str]] | None = None,
                 retry_failed: bool = False):
        self.plan = plan
        self.store = store
        self.console = console or Console()
        self.trials = expand(plan, reps=reps, only=only)
        self.retry_failed = retry_failed

    # -- resume bookkeeping ------------------------------------------------------------
    def pending(self) -> list[TrialSpec]:
        done = set()
        for row in self.store.rows():
            if row.get("status") == "ok" or not self.retry_failed:
                done.add(row["key"])
        return [t for t in self.trials if t.key not in done]

    # -- the run -----------------------------------------------------------------------
    def run(self) -> list[dict[str, Any]]:
        todo = self.pending()
        plan = self.plan
        if not todo:
            self.console.print(f"nothing to do: all {len(self.trials)} trials of {self.store.dir} are recorded")
            return self.store.rows()
        clients = {name: client_class(name)() for name in {plan.client_for(t.workload) for t in todo}}
        content = generate(plan.content_objects(), seed=plan.seed, realistic_page=plan.needs_realistic_page)
        lab = make_lab(LabSpec(name=f"r{secrets.token_hex(3)}", hops=plan.hops, tcp_cc=plan.tcp_cc,
                               link=plan.link, offload=plan.offload, condition=todo[0].condition))
        servers: dict[str, Any] = {}
        self.store.update_meta(status="running", resumed_at=time.time() if self.store.rows() else None)
        try:
            lab.up(conditions=list(plan.conditions))
            tls_dir = self.store.dir / "tls"
            tls = make_tls(tls_dir, LAB_HOSTNAME, ips=[lab.address("server")])
            ports = {}
            for i, name in enumerate(sorted({t.server for t in todo})):
                ports[name] = 443 + 1000 * i
                srv = server_class(name)(lab, self.store.dir / "servers" / name, content, tls, port=ports[name])
                srv.start()
                servers[name] = srv
            self.store.update_meta(
                lab={"backend": lab.spec.backend, "hops": lab.spec.hops, "tcp_cc": lab.spec.tcp_cc,
                     "offload": lab.spec.offload,
                     "addresses": lab.state["addresses"]},
                link=lab.state.get("link"), content={"root": str(content.root), "key": content.root.name},
                tls={"hostname": tls.hostname, "spki_sha256": tls.spki_sha256_b64},
                versions={**{f"client_{n}": c.version() for n, c in clients.items()},
                          **{f"server_{n}": type(s).version() for n, s in servers.items()}},
                server_ports=ports)
            self._loop(todo, lab, servers, clients, content, tls, ports)
            self.store.update_meta(status="complete", finished_at=time.time())
        except (KeyboardInterrupt, SystemExit):
            self.store.update_meta(status="interrupted")
            self.console.print(f"[yellow]interrupted: resume with 'quicbench run PLAN --resume {self.store.dir}'[/]")
            raise
        finally:
            # teardown is bounded; should it still hang, the stacks on stderr say where
            faulthandler.dump_traceback_later(TEARDOWN_WATCHDOG_S)
            try:
                for s in servers.values():
                    s.stop()
                lab.down()
            finally:
                faulthandler.cancel_dump_traceback_later()
        return self.store.rows()

    def _loop(self, todo, lab, servers, clients, content, tls, ports) -> None:
        current = None
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
        with Progress(*columns, console=self.console, transient=False) as progress:
            task = progress.add_task("starting", total=len(todo))
            for spec in todo:
                if spec.condition != current:
                    lab.link.apply(spec.condition)
                    lab.spec.condition = spec.condition
                    current = spec.condition
                    if self.plan.calibrate:
                        progress.update(task, description=f"calibrating {spec.condition.name}")
                        self._calibrate(lab, spec.condition, progress.console)
                progress.update(task, description=f"{spec.condition.name} {spec.workload.label} {spec.protocol} "
                                                  f"r{spec.rep}")
                row = self._one(spec, lab, servers, clients[self.plan.client_for(spec.workload)], content, tls,
                                ports)
                self.store.append(row)
                if row["status"] != "ok":
                    progress.console.print(f"[red]failed[/] {spec.key}: {row['error']}")
                progress.advance(task)

    def _calibrate(self, lab, condition, console) -> None:
        """Measure the condition once per run (kept across resumes) and warn when it is off."""
        from quicbench.run.calibrate import calibrate
        done = self.store.read_meta().get("calibration", {})
        if condition.name in done:
            return
        res = calibrate(lab, condition, pings=200, iperf_seconds=2.0)
        res["link"] = (lab.state.get("link") or {}).get("name")
        self.store.update_meta(calibration={**done, condition.name: res})
        if not res["ok"]:
            bad = "; ".join(f"{k} {v}" for k, v in res["verdicts"].items() if v.startswith(("off", "fail")))
            console.print(f"[yellow]calibration of '{condition.name}' differs from its configuration: {bad}[/]")

    def _one(self, spec, lab, servers, client, content, tls, ports) -> dict[str, Any]:
        srv = servers[spec.server]
        row: dict[str, Any]
        try:
            if srv.proc is None or srv.proc.poll() is not None:
                srv.start()   # a crashed server is restarted; the previous trial recorded the crash
            target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"),
                            port=ports[spec.server], tls=tls, content=content)
            row = run_trial(spec, target, client, srv.pid, self.store.trial_dir(spec.seq),
                            self.plan.trial_timeout_s, self.plan.options)
        except QuicbenchError as e:
            row = {**base_row(spec, client.name), "status": "failed", "error": str(e)}
        row.update(run_id=self.store.run_id, link=(lab.state.get("link") or {}).get("name"),
                   tcp_cc=lab.spec.tcp_cc, hops=lab.spec.hops)
        return row


def start_run(plan: Plan, out: Path, console: Console, resume: Path | None = None, reps: int | None = None,
              only: dict[str, list[str]] | None = None, retry_failed: bool = False) -> RunStore:
    if resume:
        store = RunStore.open(resume)
        meta = store.read_meta()
        stored = plan_from_dict(meta["plan"], source=str(store.dir / "meta.json"))
        if plan_fingerprint(stored) != plan_fingerprint(plan):
            raise QuicbenchError(f"--resume {resume}: the run was made from a different plan "
                                 f"('{stored.name}'); pass the same plan file")
        reps = reps or meta.get("reps")
        only = only or meta.get("only")
    else:
        store = RunStore.create(out)
        store.write_meta({"run_id": store.run_id, "created": time.time(), "status": "created",
                          "plan": json.loads(plan.model_dump_json()), "plan_fingerprint": plan_fingerprint(plan),
                          "reps": reps, "only": only, "host": host_facts()})
    Runner(plan, store, console, reps=reps, only=only, retry_failed=retry_failed).run()
    return store


def summary_table(rows: list[dict[str, Any]]) -> Table:
    """Protocol x workload x condition: median goodput, median total time, CPU seconds."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if not r.get("warmup"):
            groups[(r.get("condition"), r.get("workload"), r.get("protocol"), r.get("server"))].append(r)
    t = Table(title="quicbench results (medians over repetitions)")
    for col in ("condition", "workload", "protocol", "server", "ok/n", "goodput Mbit/s", "total time s",
                "client CPU s", "server CPU s", "CPU-bound"):
        t.add_column(col, justify="right" if col not in ("condition", "workload", "protocol", "server") else "left")

    def med(rs, k):
        vals = [r[k] for r in rs if r.get(k) is not None and r.get("status") == "ok"]
        return statistics.median(vals) if vals else None

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    for (cond, wl, proto, server), rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        ok = sum(r.get("status") == "ok" for r in rs)
        t.add_row(str(cond), str(wl), str(proto), str(server), f"{ok}/{len(rs)}", fmt(med(rs, "goodput_mbps"), ".1f"),
                  fmt(med(rs, "total_time_s"), ".3f"), fmt(med(rs, "client_cpu_s"), ".3f"),
                  fmt(med(rs, "server_cpu_s"), ".3f"), str(sum(bool(r.get("cpu_bound")) for r in rs)))
    return t
