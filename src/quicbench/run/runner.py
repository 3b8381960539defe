"""The trial runner: plan -> lab -> link -> servers -> trials -> store.

Each trial's row is appended and fsynced, or nothing is written; a resumed run skips the
trials whose rows are there. Ctrl-C and SIGTERM stop after cleaning up (lab removed,
servers stopped) and leave the run resumable.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import math
import platform
import secrets
import signal
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from quicbench import __version__
from quicbench.clients import Target, client_class
from quicbench.content.objects import generate
from quicbench.errors import EnvironmentFault, QuicbenchError
from quicbench.lab import LabSpec, make_lab
from quicbench.model import columns
from quicbench.model.plan import Plan, TrialSpec, expand, plan_from_dict
from quicbench.model.shard import Shard, select
from quicbench.run import ceiling
from quicbench.run.preflight import check_plan
from quicbench.registry import driver_stack
from quicbench.run.trial import base_row, run_trial
from quicbench.servers import server_class
from quicbench.store import RunStore, new_run_id
from quicbench.tls import LAB_HOSTNAME, load_or_make_tls

TEARDOWN_WATCHDOG_S = 30     # servers and lab go down in a few seconds; past this, dump stacks
LINK_RESTARTS = 2            # a dead link emulator is restarted this often per run, then the run stops
LINK_WATCH_S = 0.5           # how often a running trial checks that the link emulator lives


def _json_number(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def condition_headlines(plan: Plan) -> dict[str, dict[str, Any]]:
    """Each condition's headline values (delay, loss, rate, jitter, RTT), for meta.json."""
    return {c.name: {k: _json_number(v) for k, v in c.headline().items()} | {"desc": c.short()}
            for c in plan.conditions}


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
                 retry_failed: bool = False, resume_hint: str = "PLAN", backend: str = "netns",
                 inventory: str | None = None, shard: Shard | None = None, jobs: int = 1):
        self.plan = plan
        self.jobs = jobs
        self.ceiling: dict[str, Any] | None = None   # the kernel's ceiling (run/ceiling.py), once measured
        self.store = store
        self.console = console or Console()
        # a shard runs its share of the plan's trials, each with its plan-wide seq and key
        self.trials = select(expand(plan, reps=reps, only=only), shard)
        self.retry_failed = retry_failed
        self.resume_hint = resume_hint
        self.link_restarts = 0
        self.backend = backend
        self.inventory = inventory

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
            # every trial is recorded (or a shard of more shards than cells got none): the run is complete
            self.console.print(f"nothing to do: all {len(self.trials)} trials of {self.store.dir} are recorded")
            if self.store.read_meta().get("status") != "complete":
                self.store.update_meta(status="complete", finished_at=time.time())
            return self.store.rows()
        clients = {name: client_class(name, plan.client_commands)() for name in {t.client for t in todo}}
        content = generate(plan.content_objects(), seed=plan.seed, realistic_page=plan.needs_realistic_page,
                           videos=plan.video_specs())
        from quicbench.run.parallel import units
        if self.jobs > 1 and len(units(todo)) > 1:
            return self._run_jobs(todo, clients, content)
        lab = make_lab(LabSpec(name=f"r{secrets.token_hex(3)}", hops=plan.hops, tcp_cc=plan.tcp_cc,
                               link=plan.link, offload=plan.offload, condition=todo[0].condition,
                               run_dir=str(self.store.dir.resolve()), backend=self.backend,
                               inventory=self.inventory, binaries=needed_binaries(plan, todo)))
        servers: dict[str, Any] = {}
        publishers: list[Any] = []
        try:
            with self._run_status():
                self._run_in_lab(lab, servers, publishers, todo, clients, content)
        finally:
            # teardown is bounded; should it still hang, the stacks on stderr say where. A second
            # Ctrl-C during it must not leave the lab behind: SIGINT waits until the lab is down.
            faulthandler.dump_traceback_later(TEARDOWN_WATCHDOG_S)
            with _sigint_deferred():
                try:
                    for p in publishers:
                        p.stop()
                    for s in servers.values():
                        s.stop()
                    lab.down()
                finally:
                    faulthandler.cancel_dump_traceback_later()
        return self.store.rows()

    def _run_in_lab(self, lab, servers, publishers, todo, clients, content) -> None:
        """Lab up, servers and publishers started (recorded in the caller's lists for teardown), trials."""
        plan = self.plan
        lab.up(conditions=list(plan.conditions))
        tls = load_or_make_tls(self.store.layout.tls, LAB_HOSTNAME, ips=[lab.address("server")])
        ports = {}
        for i, name in enumerate(sorted({t.server for t in todo})):
            ports[name] = 443 + 1000 * i
            srv = server_class(name, plan.server_commands)(lab, self.store.layout.server(name), content, tls,
                                                           port=ports[name])
            srv.start()
            servers[name] = srv
        live_keys = {t.workload.video_spec().key for t in todo
                     if t.workload.kind == "video" and t.workload.mode == "live"}
        for key in sorted(live_keys):
            from quicbench.content.video import LivePublisher
            info = content.manifest["videos"][key]
            pub = LivePublisher(lab, Path(info["vod"]), Path(info["live_dir"]),
                                self.store.dir / "live" / f"{key}.log")
            pub.start()
            publishers.append(pub)
        hosts = lab.host_facts()
        self.store.update_meta(
            lab={"backend": lab.spec.backend, "hops": lab.spec.hops, "tcp_cc": lab.spec.tcp_cc,
                 "offload": lab.spec.offload, "addresses": lab.state["addresses"],
                 **({"hosts": hosts} if hosts else {})},
            link=lab.link.describe(), content={"root": str(content.root), "key": content.root.name},
            tls={"hostname": tls.hostname, "spki_sha256": tls.spki_sha256_b64},
            versions={**{f"client_{n}": c.version() for n, c in clients.items()},
                      **{f"server_{n}": type(s).version() for n, s in servers.items()}},
            server_ports=ports)
        self._measure_ceiling(lab, servers, clients, content, tls, ports, todo)
        self._loop(todo, lab, servers, clients, content, tls, ports)

    @contextlib.contextmanager
    def _run_status(self):
        """meta.json says running, then complete, or interrupted (resumable) with the hint to resume."""
        self.store.update_meta(status="running", resumed_at=time.time() if self.store.rows() else None)
        self.store.reserve_space()
        try:
            yield
            self.store.free_reserve()
            self.store.update_meta(status="complete", finished_at=time.time())
        except (KeyboardInterrupt, SystemExit, EnvironmentFault) as e:
            self.store.free_reserve()
            try:
                self.store.update_meta(status="interrupted", interrupted_by=type(e).__name__,
                                       interrupted_at=time.time())
            except EnvironmentFault:
                pass   # no space even after the reserve: meta.json keeps 'running', which a resume treats alike
            self.console.print(f"[yellow]interrupted: resume with "
                               f"'quicbench run {self.resume_hint} --resume {self.store.dir}'[/]")
            raise

    def _run_jobs(self, todo, clients, content) -> list[dict[str, Any]]:
        """--jobs N: up to N labs at once (run/parallel.py), marked complete or interrupted as run() does."""
        from quicbench.run.parallel import run_parallel
        with self._run_status():
            run_parallel(self, todo, clients, content, self.jobs, teardown_guard=_sigint_deferred)
        return self.store.rows()

    def _loop(self, todo, lab, servers, clients, content, tls, ports) -> None:
        current = None
        columns_ = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
        with Progress(*columns_, console=self.console, transient=False) as progress:
            task = progress.add_task("starting", total=len(todo))
            for spec in todo:
                if spec.condition != current:
                    lab.set_condition(spec.condition)
                    current = spec.condition
                    if self.plan.calibrate:
                        progress.update(task, description=f"calibrating {spec.condition.name}")
                        self._calibrate(lab, spec.condition, progress.console)
                progress.update(task, description=f"{spec.condition.name} {spec.workload.label} {spec.protocol} "
                                                  f"r{spec.rep}")
                while True:
                    self._ensure_link(lab, spec.condition, progress.console)
                    row = self._one(spec, lab, servers, clients[spec.client], content, tls, ports)
                    gone = lab.node_fault()
                    if gone:   # the trial's failure was the lab's: not recorded
                        raise EnvironmentFault(f"{gone} during {spec.key}: the run stops; resume it to run "
                                               f"the remaining trials")
                    fault = lab.link_fault()
                    if fault is None:
                        break
                    # the lab failed, not the protocol: the trial's row is not recorded, it runs again
                    progress.console.print(f"[yellow]{fault} during {spec.key}: the trial runs again[/]")
                row["concurrent"] = 0    # one trial at a time
                self.store.append(row)
                if row["status"] != "ok":
                    progress.console.print(f"[red]failed[/] {spec.key}: {row['error']}")
                progress.advance(task)

    def _ensure_link(self, lab, condition, console) -> None:
        """Restart a dead link emulator (at most LINK_RESTARTS times a run), else stop the run. A lab
        whose nodes are gone cannot be repaired: the run stops and can be resumed."""
        gone = lab.node_fault()
        if gone:
            raise EnvironmentFault(f"{gone}: the run stops; resume it to run the remaining trials")
        fault = lab.link_fault()
        if fault is None:
            return
        if self.link_restarts >= LINK_RESTARTS:
            raise EnvironmentFault(f"{fault}; restarted {self.link_restarts} times already, the run stops "
                                   f"(see {lab.run_dir})")
        self.link_restarts += 1
        console.print(f"[yellow]{fault}: restarting it ({self.link_restarts}/{LINK_RESTARTS})[/]")
        lab.set_condition(condition)

    def _calibrate(self, lab, condition, console) -> None:
        """Measure the condition once per run (kept across resumes) and warn when it is off."""
        from quicbench.run.calibrate import calibrate
        done = self.store.read_meta().get("calibration", {})
        if condition.name in done:
            return
        res = calibrate(lab, condition, pings=200, iperf_seconds=2.0)
        res["link"] = lab.link_name
        self.store.update_meta(calibration={**done, condition.name: res})
        if not res["ok"]:
            bad = "; ".join(f"{k} {v}" for k, v in res["verdicts"].items() if v.startswith(("off", "fail")))
            console.print(f"[yellow]calibration of '{condition.name}' differs from its configuration: {bad}[/]")

    def _measure_ceiling(self, lab, servers, clients, content, tls, ports, todo) -> None:
        """Inside UML: each protocol's goodput on an unimpaired link, once per run (run/ceiling.py)."""
        meta = self.store.read_meta()
        if "ceiling" in meta or not ceiling.wanted():
            self.ceiling = meta.get("ceiling")
            return
        specs = ceiling.ceiling_specs(todo)
        if not specs:
            return
        self.console.print(f"measuring this kernel's ceiling: {', '.join(s.protocol for s in specs)} "
                           f"on an unimpaired link ({specs[0].workload.label}, best of {ceiling.REPS})")
        lab.set_condition(specs[0].condition)

        def fetch(spec, attempt):
            d = self.store.layout.ceiling(f"{spec.protocol}-{spec.client}-{spec.server}-{attempt + 1}")
            d.mkdir(parents=True, exist_ok=True)
            return self._one(spec, lab, servers, clients[spec.client], content, tls, ports, trial_dir=d)

        self.ceiling = ceiling.measure(specs, fetch)
        self.store.update_meta(ceiling=self.ceiling)
        top = ", ".join(f"{p} {g:.1f}" for p, g in self.ceiling["goodput_mbps"].items())
        self.console.print(f"ceiling (Mbit/s): {top or 'not measured: every fetch failed'}; trials at "
                           f">= {100 * ceiling.NEAR:.0f} % of it are flagged near_ceiling")

    def _one(self, spec, lab, servers, client, content, tls, ports, trial_dir=None) -> dict[str, Any]:
        srv = servers[spec.server]
        row: dict[str, Any]
        watch = _LinkWatch(lab)
        try:
            if srv.proc is None or srv.proc.poll() is not None:
                srv.start()   # a crashed server is restarted; the previous trial recorded the crash
            target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"),
                            port=ports[spec.server], tls=tls, content=content)
            watch.start()
            row = run_trial(spec, target, client, srv.pid, trial_dir or self.store.trial_dir(spec.seq),
                            self.plan.trial_timeout_s, self.plan.options)
            row.update(server_stack=driver_stack(type(srv)), client_stack=driver_stack(type(client)))
        except QuicbenchError as e:
            if isinstance(e, EnvironmentFault):
                raise
            row = {**base_row(spec, client.name), "status": "failed", "error": str(e)}
        finally:
            watch.stop()
        # the host is kept per row: a merged run of shards from several machines can show a per-host effect
        row.update(run_id=self.store.run_id, link=lab.link_name, tcp_cc=lab.spec.tcp_cc, hops=lab.spec.hops,
                   host=platform.node(), near_ceiling=ceiling.near_ceiling(row, self.ceiling), **lab.row_hosts())
        return row


def needed_binaries(plan: Plan, trials: list[TrialSpec]) -> dict[str, list[str]]:
    """The binaries the client and server nodes need for these trials (a lab on other hosts
    checks them there before anything starts)."""
    client = sorted({"qb-load" for t in trials if t.client == "qb-load"})
    server = sorted({b for t in trials if (b := getattr(server_class(t.server, plan.server_commands), "binary", None))})
    return {"client": client, "server": server}


class _LinkWatch:
    """While a trial runs, check the link emulator; if it dies, end the trial's client at once
    instead of letting it run into its timeout."""

    def __init__(self, lab):
        self.lab = lab
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._watch, daemon=True, name="link-watch")
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(LINK_WATCH_S):
            if self.lab.link_fault() is not None or self.lab.node_fault() is not None:
                self.lab.kill_node_processes("client")
                return

    def stop(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join(2)


@contextlib.contextmanager
def _sigint_deferred():
    """Hold SIGINT (a second Ctrl-C) until the block ends, then deliver it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if got:
        raise KeyboardInterrupt


def start_run(plan: Plan, out: Path, console: Console, resume: Path | None = None, reps: int | None = None,
              only: dict[str, list[str]] | None = None, retry_failed: bool = False,
              plan_source: str = "PLAN", backend: str = "netns", inventory: str | None = None,
              shard: Shard | None = None, jobs: int = 1) -> RunStore:
    check_plan(plan, plan_source or "default plan", installed=True)
    if resume:
        store = RunStore.open(resume)
        store.acquire()
        meta = store.read_meta()
        stored = plan_from_dict(meta["plan"], source=str(store.dir / "meta.json"))
        if plan_fingerprint(stored) != plan_fingerprint(plan):
            raise QuicbenchError(f"--resume {resume}: the run was made from a different plan "
                                 f"('{stored.name}'); pass the same plan file")
        if reps and reps != (meta.get("reps") or stored.repetitions):
            store.update_meta(reps=reps, reps_changed=[*meta.get("reps_changed", []),
                                                         {"from": meta.get("reps") or stored.repetitions,
                                                          "to": reps, "at": time.time()}])
            console.print(f"[yellow]--reps {reps}: the run's repetitions change from "
                          f"{meta.get('reps') or stored.repetitions} (recorded in meta.json)[/]")
        reps = reps or meta.get("reps")
        only = only or meta.get("only")
        was = meta.get("shard")
        stored_shard = Shard(int(was["index"]), int(was["count"])) if was else None
        if shard is not None and shard != stored_shard:
            store.release()
            what = f"shard {stored_shard}" if stored_shard else "not a shard"
            raise QuicbenchError(f"--shard {shard}: the run {resume} is {what}; resume it without --shard")
        shard = stored_shard
    else:
        store = RunStore.create(out, run_id=new_run_id(f"shard{shard.index}of{shard.count}") if shard else None)
        store.write_meta({"run_id": store.run_id, "format_version": columns.FORMAT_VERSION,
                          "created": time.time(), "status": "created",
                          "plan": json.loads(plan.model_dump_json()), "plan_fingerprint": plan_fingerprint(plan),
                          "quicbench_version": __version__, "conditions": condition_headlines(plan),
                          "reps": reps, "only": only, "host": host_facts(), "columns": columns.describe(),
                          # a shard's measured trials: what its own report expects
                          "shard": {**shard.as_meta(), "trials": sum(
                              not t.warmup for t in select(expand(plan, reps=reps, only=only), shard))}
                          if shard else None})
    try:
        Runner(plan, store, console, reps=reps, only=only, retry_failed=retry_failed,
               resume_hint=plan_source, backend=backend, inventory=inventory, shard=shard, jobs=jobs).run()
    except KeyboardInterrupt as e:
        # the caller says what an interrupt after the last trial left undone (the report)
        e.run_dir = store.dir                      # type: ignore[attr-defined]
        e.run_complete = store.read_meta().get("status") == "complete"  # type: ignore[attr-defined]
        raise
    finally:
        store.release()
    return store


