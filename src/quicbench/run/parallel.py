"""Scheduling trials over lab sessions: one, or with `quicbench run --jobs N` up to N at once on
one machine, each in its own lab (run/session.py).

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
import threading
import time
from typing import Any

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from quicbench.cpu import machine_cpu_ticks
from quicbench.model.specs import TrialSpec
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


def schedule(sessions: list[Any], todo: list[TrialSpec], store: Any, console: Any) -> None:
    """Run todo's units of work on the sessions: one session in this thread, several in one
    thread each, admitted by measured headroom. Every row records in ``concurrent`` how many
    trials ran beside it (0 with one session)."""
    work = collections.deque(units(todo))
    stop = threading.Event()
    errors: list[BaseException] = []
    lock = threading.Lock()
    admission = Admission() if len(sessions) > 1 else None
    columns_ = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
    with Progress(*columns_, console=console, transient=False) as progress:
        task = progress.add_task("starting" if admission is None else f"{len(sessions)} labs", total=len(todo))

        def worker(session) -> None:
            while not stop.is_set():
                with lock:
                    unit = work.popleft() if work else None
                if unit is None:
                    return
                for spec in unit:
                    if admission is None:
                        progress.update(task, description=f"{spec.condition.name} {spec.workload.label} "
                                                          f"{spec.protocol} r{spec.rep}")
                        token = None
                    else:
                        token = admission.enter(stop)
                    try:
                        row = session.run_one(spec, progress.console)
                    finally:
                        beside = admission.leave(token) if admission is not None else 0
                    if stop.is_set() and row.get("status") != "ok":
                        return   # stopped mid-trial: not recorded, a resume runs it
                    row["concurrent"] = beside
                    with lock:
                        store.append(row)
                        progress.advance(task)
                    if row["status"] != "ok":
                        progress.console.print(f"[red]failed[/] {spec.key}: {row['error']}")

        if admission is None:
            worker(sessions[0])
            return

        def guarded(session) -> None:
            try:
                worker(session)
            except _Stopped:
                return
            except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it
                errors.append(e)
                _stop_all(stop, sessions)

        threads = [threading.Thread(target=guarded, args=(s,), name=f"lab-{k + 1}", daemon=True)
                   for k, s in enumerate(sessions)]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
        except BaseException:
            _stop_all(stop, sessions)     # Ctrl-C: end every client, then wait for the workers
            for t in threads:
                t.join(30)
            raise
    store.update_meta(admission={"min_idle_cores": admission.min_idle, "refused": admission.refused})
    if errors:
        raise errors[0]


def _stop_all(stop: threading.Event, sessions: list[Any]) -> None:
    stop.set()
    for s in sessions:
        s.kill_clients()
