"""`quicbench run --jobs N`: up to N trials at once on one machine, each in its own lab.

Concurrent trials share the machine's CPUs, so they are admitted by measured headroom: a
trial starts beside running ones only while the host has at least ``MIN_IDLE_CORES`` idle
(from /proc/stat over ``WINDOW_S``), else it waits for a trial to end. Every row records in
``concurrent`` how many other trials ran beside it (at its start or started during it), so
the analysis can tell contended trials from lone ones. The unit of work is still the cell:
a cell's protocols run back to back in one lab, in their interleaved order; warm-ups of a
condition run once, in whichever lab reaches them first. A plan that calibrates measures each
of its conditions first, in the first lab, while no trial runs: calibration sees the link alone.
"""

from __future__ import annotations

import collections
import contextlib
import secrets
import threading
import time
from typing import Any

from quicbench.cpu import machine_cpu_ticks
from quicbench.lab import LabSpec, make_lab
from quicbench.model.plan import TrialSpec
from quicbench.model.shard import cell_of

MIN_IDLE_CORES = 1.0   # a core's worth of idle CPU: what one more trial's client and server roughly need
WINDOW_S = 0.5         # how long idle CPU is measured before admitting a trial
RETRY_S = 0.5          # how long a refused trial waits before measuring again (or a trial ends first)


def idle_cores(window_s: float = WINDOW_S, cpus: int | None = None) -> float:
    """How many CPUs' worth were idle over the next window_s seconds."""
    b0, t0, n = machine_cpu_ticks()
    time.sleep(window_s)
    b1, t1, _ = machine_cpu_ticks()
    total = max(t1 - t0, 1)
    return (total - (b1 - b0)) / total * (cpus or n)


class _Stopped(Exception):
    pass


class Admission:
    """Who runs now: a trial enters when nothing runs or the host has headroom; each running
    trial counts the trials that ran beside it."""

    def __init__(self, min_idle: float = MIN_IDLE_CORES, measure=idle_cores):
        self.min_idle = min_idle
        self.measure = measure
        self.cond = threading.Condition()
        self.admit = threading.Lock()          # one admission decision at a time
        self.active: dict[int, list[int]] = {}  # token -> [trials beside it]
        self.next = 0
        self.refused = 0

    def enter(self, stop: threading.Event) -> int:
        with self.admit:
            while True:
                if stop.is_set():
                    raise _Stopped
                with self.cond:
                    busy = len(self.active)
                if busy == 0 or self.measure() >= self.min_idle:
                    break
                self.refused += 1
                with self.cond:   # wait for a trial to end, or measure again
                    self.cond.wait(RETRY_S)
            with self.cond:
                token, self.next = self.next, self.next + 1
                for other in self.active.values():
                    other[0] += 1
                self.active[token] = [len(self.active)]
                return token

    def leave(self, token: int) -> int:
        """End a trial: how many trials ran beside it."""
        with self.cond:
            beside = self.active.pop(token)[0]
            self.cond.notify_all()
            return beside


def units(todo: list[TrialSpec]) -> list[list[TrialSpec]]:
    """The todo list cut into units of work: a cell's trials, or a condition's warm-ups."""
    out: list[list[TrialSpec]] = []
    last = None
    for t in todo:
        key = ("warmup", t.condition.name) if t.warmup else cell_of(t)
        if key != last:
            out.append([])
            last = key
        out[-1].append(t)
    return out


def run_parallel(runner, todo: list[TrialSpec], clients: dict[str, Any], content, jobs: int,
                 teardown_guard=contextlib.nullcontext) -> None:
    """Run todo on min(jobs, units) labs at once; the caller marks the run complete or interrupted.
    teardown_guard wraps the teardown (the runner's: a second Ctrl-C waits until every lab is down)."""
    from quicbench.servers import server_class
    from quicbench.tls import LAB_HOSTNAME, load_or_make_tls
    plan, store = runner.plan, runner.store
    work = collections.deque(units(todo))
    n = min(jobs, len(work))
    labs: list[Any] = []
    servers: list[dict[str, Any]] = []
    stop = threading.Event()
    errors: list[BaseException] = []
    append_lock = threading.Lock()
    admission = Admission()
    try:
        for k in range(n):
            lab = make_lab(LabSpec(name=f"r{secrets.token_hex(3)}", hops=plan.hops, tcp_cc=plan.tcp_cc,
                                   link=plan.link, offload=plan.offload, condition=todo[0].condition,
                                   run_dir=str(store.dir.resolve())))
            labs.append(lab)
            servers.append({})
            lab.up(conditions=list(plan.conditions))
        # clients reach the server by the lab's hostname; one certificate serves every lab
        tls = load_or_make_tls(store.layout.tls, LAB_HOSTNAME, ips=[lab.address("server") for lab in labs])
        names = sorted({t.server for t in todo})
        ports = {name: 443 + 1000 * i for i, name in enumerate(names)}
        for k, lab in enumerate(labs):
            for name in names:
                # each lab's servers keep their config and logs apart: servers/<name> (lab 1), servers/<name>.lab<k>
                d = store.layout.server(name if k == 0 else f"{name}.lab{k + 1}")
                srv = server_class(name, plan.server_commands)(lab, d, content, tls, port=ports[name])
                srv.start()
                servers[k][name] = srv
        store.update_meta(
            lab={"backend": labs[0].spec.backend, "hops": labs[0].spec.hops, "tcp_cc": labs[0].spec.tcp_cc,
                 "offload": labs[0].spec.offload, "addresses": labs[0].state["addresses"], "labs": n,
                 "jobs": jobs},
            link=labs[0].link.describe(), content={"root": str(content.root), "key": content.root.name},
            tls={"hostname": tls.hostname, "spki_sha256": tls.spki_sha256_b64},
            versions={**{f"client_{c}": cl.version() for c, cl in clients.items()},
                      **{f"server_{s}": type(v).version() for s, v in servers[0].items()}},
            server_ports=ports)
        if plan.calibrate:
            _calibrate_alone(runner, labs[0], todo)
        runner._measure_ceiling(labs[0], servers[0], clients, content, tls, ports, todo)

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=runner.console, transient=False) as progress:
            task = progress.add_task(f"{n} labs", total=len(todo))

            def worker(k: int) -> None:
                lab, srv = labs[k], servers[k]
                current = None
                try:
                    while not stop.is_set():
                        with append_lock:
                            unit = work.popleft() if work else None
                        if unit is None:
                            return
                        for spec in unit:
                            if spec.condition != current:
                                lab.set_condition(spec.condition)
                                current = spec.condition
                            token = admission.enter(stop)
                            try:
                                while True:
                                    runner._ensure_link(lab, spec.condition, progress.console)
                                    row = runner._one(spec, lab, srv, clients[spec.client],
                                                      content, tls, ports)
                                    if lab.link_fault() is None:
                                        break
                                    progress.console.print(f"[yellow]link fault during {spec.key}: runs again[/]")
                            finally:
                                beside = admission.leave(token)
                            if stop.is_set() and row.get("status") != "ok":
                                return   # stopped mid-trial: not recorded, a resume runs it
                            row["concurrent"] = beside
                            with append_lock:
                                store.append(row)
                                progress.advance(task)
                            if row["status"] != "ok":
                                progress.console.print(f"[red]failed[/] {spec.key}: {row['error']}")
                except _Stopped:
                    return
                except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it
                    errors.append(e)
                    _stop_all(stop, labs)

            threads = [threading.Thread(target=worker, args=(k,), name=f"lab-{k + 1}", daemon=True)
                       for k in range(n)]
            for t in threads:
                t.start()
            try:
                while any(t.is_alive() for t in threads):
                    for t in threads:
                        t.join(0.2)
            except BaseException:
                _stop_all(stop, labs)     # Ctrl-C: end every client, then wait for the workers
                for t in threads:
                    t.join(30)
                raise
        store.update_meta(admission={"min_idle_cores": admission.min_idle, "refused": admission.refused})
        if errors:
            raise errors[0]
    finally:
        with teardown_guard():
            _teardown(servers, labs)


def _calibrate_alone(runner, lab, todo: list[TrialSpec]) -> None:
    """Every condition of todo measured in lab before any trial starts (the runner's calibration,
    kept across resumes); the lab is set back to todo's first condition by the first worker."""
    for cond in {spec.condition.name: spec.condition for spec in todo}.values():
        runner.console.print(f"calibrating {cond.name} (alone, before the concurrent trials)")
        lab.set_condition(cond)
        runner._calibrate(lab, cond, runner.console)


def _teardown(servers: list[dict[str, Any]], labs: list[Any]) -> None:
    """Every server stopped and every lab down, whatever one of them raises."""
    for srv_map in servers:
        for s in srv_map.values():
            try:
                s.stop()
            except Exception:  # noqa: BLE001 - every lab must still go down
                pass
    for lab in labs:
        try:
            lab.down()
        except Exception:  # noqa: BLE001
            pass


def _stop_all(stop: threading.Event, labs: list[Any]) -> None:
    stop.set()
    for lab in labs:
        try:
            lab.kill_node_processes("client")
        except Exception:  # noqa: BLE001 - best effort: the lab goes down anyway
            pass
