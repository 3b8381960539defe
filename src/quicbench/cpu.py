"""CPU time of processes (precise per-thread scheduler time where the kernel exposes it), and
the rule that says whether the CPU, rather than the network, set a trial's pace."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_sched_seconds(pid: int) -> tuple[float, float] | None:
    """(on-CPU seconds, run-queue wait seconds) of a process so far, summed over its threads.

    From the scheduler's nanosecond counters (/proc/PID/task/*/schedstat: run time, time spent
    runnable but waiting for a CPU). None when the process or schedstat is gone.
    """
    run = wait = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    seen = False
    for t in tasks:
        try:
            fields = (t / "schedstat").read_text().split()
            run += int(fields[0])
            wait += int(fields[1])
            seen = True
        except (OSError, IndexError, ValueError):
            continue
    return (run / 1e9, wait / 1e9) if seen else None


def process_cpu_seconds(pid: int) -> float | None:
    """On-CPU seconds of a process so far.

    Sums the scheduler's nanosecond run time of every thread (/proc/PID/task/*/schedstat);
    falls back to utime+stime (clock ticks) when schedstat is missing.
    """
    sched = process_sched_seconds(pid)
    if sched and sched[0]:
        return sched[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except OSError:
        return None


MACHINE_MIN_TICKS_PER_CPU = 20  # a shorter span (0.2 s at 100 Hz) is too coarse to judge


def machine_cpu_ticks() -> tuple[int, int, int]:
    """(busy ticks, total ticks, CPUs) of this machine so far, from /proc/stat: busy is everything
    but idle and iowait (user, system, interrupts, softirq: the kernel's packet work and a link
    emulator's count too)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    total = sum(fields[:8])
    return total - (fields[3] + fields[4]), total, os.cpu_count() or 1


def machine_busy_share(t0: tuple[int, int, int], t1: tuple[int, int, int]) -> float | None:
    """Busy share (0…1) of all CPUs between two readings of one machine (busy, total, CPUs);
    None when the span is too short to judge."""
    total = t1[1] - t0[1]
    if total < MACHINE_MIN_TICKS_PER_CPU * t0[2]:
        return None
    return (t1[0] - t0[0]) / total


def per_cpu_ticks() -> list[tuple[int, int]]:
    """(softirq ticks, steal ticks) of each of this machine's CPUs so far, from /proc/stat's cpuN
    lines: the kernel's packet work done in softirq context on that core, and the time the
    hypervisor ran something else while this virtual CPU wanted to run (steal)."""
    out = []
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3:4].isdigit():
                fields = [int(x) for x in line.split()[1:9]]
                out.append((fields[6], fields[7]))
    return out


def ticks_ms(ticks: int) -> float:
    return 1000.0 * ticks / CLK_TCK


def last_cpus(pid: int) -> list[int]:
    """The CPUs a process's threads last ran on (field 39 of /proc/PID/task/*/stat), sorted,
    without repeats; [] when the process is gone."""
    cpus = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    for t in tasks:
        try:
            cpus.add(int((t / "stat").read_text().rsplit(")", 1)[1].split()[36]))
        except (OSError, IndexError, ValueError):
            continue
    return sorted(cpus)


_SOFTIRQ_PIDS: list[int] = []      # found once: kernel threads stay while their CPU does


def softirq_thread_wait_seconds() -> float | None:
    """Run-queue wait so far of this machine's softirq threads (ksoftirqd/N), summed over CPUs.

    The kernel processes packets in softirq context, mostly in whichever task sent or received
    them (its time counts as that task's); under load it defers the rest to ksoftirqd/N, a
    kernel thread at plain priority that waits for a CPU like any other. None when unreadable."""
    global _SOFTIRQ_PIDS
    if not _SOFTIRQ_PIDS:
        _SOFTIRQ_PIDS = [int(d.name) for d in os.scandir("/proc") if d.name.isdigit()
                         and _comm(d.name).startswith("ksoftirqd/")]
    try:
        return sum(int(Path(f"/proc/{p}/schedstat").read_text().split()[1]) for p in _SOFTIRQ_PIDS) / 1e9 \
            if _SOFTIRQ_PIDS else None
    except (OSError, IndexError, ValueError):
        _SOFTIRQ_PIDS = []      # a CPU went offline: look the threads up again next time
        return None


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


# -- was the CPU what set a trial's pace? ---------------------------------------------------------

PATH_PROCESSES = ("client", "server", "link")   # the link: the lab's linkem process(es)
RAN_SHARE = 0.9      # of one core over the transfer: the process itself was the bottleneck
WAIT_SHARE = 0.2     # the path's processes together waited this share of the transfer for a CPU ...
MACHINE_BUSY = 0.9   # ... while all of the machine's CPUs were at least this busy (load off the path)
WAITED_NAMED = 0.01  # cpu_bound_by names the processes that waited at least this share
LINK_LIMITED_SHARE = 0.8   # of the configured rate: at or above it the link, not the CPU, set the pace


@dataclass(frozen=True)
class PathCpu:
    """The CPU evidence of one trial: what each process on its path (client, server, link
    emulator) ran and waited for a CPU (run-queue time) over the transfer, the machine's busy
    share, and the goodput against the link's configured download rate."""
    duration_s: float | None
    ran: Mapping[str, float | None]
    waited: Mapping[str, float | None]
    machine_busy: float | None = None
    goodput_mbps: float | None = None
    link_mbit: float | None = None
    softirq_wait: float | None = None     # the kernel's softirq threads' run-queue wait, s

    @classmethod
    def from_row(cls, row: Mapping[str, Any], link_mbit: float | None) -> "PathCpu":
        """The evidence a stored trial row holds (as the trial judged it)."""
        busy = row.get("machine_cpu_pct")
        return cls(transfer_seconds(row), {p: row.get(f"{p}_cpu_s") for p in PATH_PROCESSES},
                   {p: row.get(f"{p}_cpu_wait_s") for p in PATH_PROCESSES},
                   busy / 100 if busy is not None else None, row.get("goodput_mbps"), link_mbit,
                   row.get("softirq_wait_s"))

    def softirq_wait_share(self) -> float | None:
        return self._share(self.softirq_wait)

    def _share(self, seconds: float | None) -> float | None:
        if seconds is None or not self.duration_s or self.duration_s <= 0:
            return None
        return seconds / self.duration_s

    def ran_share(self, who: str) -> float | None:
        return self._share(self.ran.get(who))

    def wait_share(self, who: str) -> float | None:
        return self._share(self.waited.get(who))

    def path_wait_share(self) -> float | None:
        """The path's processes' run-queue waits together, as a share of the transfer: how much
        longer the transfer could have taken because they waited for a CPU."""
        shares = [x for x in (self.wait_share(p) for p in PATH_PROCESSES) if x is not None]
        return sum(shares) if shares else None

    @property
    def link_limited(self) -> bool:
        """The transfer reached 80 % of the link's rate: the link set the pace."""
        return bool(self.link_mbit and self.goodput_mbps is not None
                    and self.goodput_mbps >= LINK_LIMITED_SHARE * self.link_mbit)

    def ran_at_least(self, share: float) -> list[str]:
        return [p for p in PATH_PROCESSES if (self.ran_share(p) or 0.0) >= share]

    def waiters(self) -> list[str]:
        """Path processes that waited at least WAITED_NAMED of the transfer, longest wait first."""
        shares = {p: self.wait_share(p) or 0.0 for p in PATH_PROCESSES}
        return sorted((p for p, x in shares.items() if x >= WAITED_NAMED), key=lambda p: -shares[p])


Rule = Callable[[PathCpu], list[str]]


def ran_or_waited(ran: float = RAN_SHARE, wait: float = WAIT_SHARE) -> Rule:
    """A path process ran ≥ `ran` of a core, or the path's processes together waited ≥ `wait` of
    the transfer for a CPU. Who: those that ran so much, and those that waited (≥ 1 %)."""
    def rule(e: PathCpu) -> list[str]:
        who = e.ran_at_least(ran)
        if (e.path_wait_share() or 0.0) >= wait:
            who += [p for p in e.waiters() if p not in who]
        return who
    return rule


def ran_or_waited_on_busy(ran: float = RAN_SHARE, wait: float = WAIT_SHARE, busy: float = MACHINE_BUSY) -> Rule:
    """A path process ran ≥ `ran` of a core, or — while every CPU of the machine was ≥ `busy`
    busy and the transfer stayed below 80 % of the link's rate — the path's processes together
    waited ≥ `wait` of the transfer for a CPU. On a small
    machine the path's own processes (client, server, link emulator) always wait for each other
    a little, which a quiet run shows and which does not move goodput; waiting counts when
    something off the path kept every CPU busy (docs/results/cpu-rule.md)."""
    waited = ran_or_waited(ran, wait)

    def rule(e: PathCpu) -> list[str]:
        who = e.ran_at_least(ran)
        if (e.machine_busy or 0.0) >= busy and not e.link_limited:
            who += [p for p in waited(e) if p not in who]
        return who
    return rule


DEFAULT_RULE: Rule = ran_or_waited_on_busy()


def cpu_bound_by(e: PathCpu, rule: Rule = DEFAULT_RULE) -> list[str]:
    """Which processes on the trial's path let the CPU set its pace (empty: none).

    By default (checked by tools/experiments/cpu_rule.py: precision 0.91 and recall 1.00 on bulk
    transfers, docs/results/cpu-rule.md; not met on short ones, docs/results/runs/cpu-rule/short.md, and not reachable
    by any rule on this evidence on the default plan, docs/results/runs/cpu-rule/default-all.md): a path process
    ran at least 90 % of a core over the transfer (it was the bottleneck itself), or, while every
    CPU of the machine was at least 90 % busy and the transfer stayed below 80 % of the link's
    rate, the path's processes together were runnable but waited for a CPU at least 20 % of the
    transfer.
    """
    return rule(e)


# Judged after the run, against the trial's cell: a trial can not do this as it ends.
SLOWER_THAN_CELL = 0.05    # of its cell's median time in the same run: the trial lost time somewhere
WAITS_COVER = 1.0          # ... and the path's run-queue waits add up to at least this share of that extra time
CELL_MIN_TRIALS = 3        # a cell's median needs this many successful trials


def slowed_against_cell(e: PathCpu, cell_median_s: float | None, excess: float = SLOWER_THAN_CELL,
                        covered: float = WAITS_COVER) -> list[str]:
    """Which path processes the CPU slowed this trial through, judged against its cell in the same
    run (empty: not slowed, or no evidence). On a loss-free path a cell's repetitions take nearly
    the same time, so a trial `excess` slower than the cell's median lost time somewhere; the
    path's processes' run-queue waits say whether waiting for a CPU can account for all of it
    (`covered`). Who: the processes that waited (≥ 1 % of the transfer), else "path".

    Checked by tools/experiments/cpu_rule.py on the default plan (docs/results/runs/cpu-rule/default.md:
    no false flag in 504 trials, 6 of the 10 trials a CPU hog moved; the other 4 lost their time to
    a loss, not to waiting); on an unimpaired gigabit path, where the CPU paces even a quiet
    machine's transfers, it also flags trials whose slowness is the path's own CPU contention
    (docs/results/runs/cpu-rule/short-heldout.md)."""
    if not e.duration_s or not cell_median_s:
        return []
    extra = e.duration_s - cell_median_s
    if extra < excess * cell_median_s:
        return []
    waited = sum(w for w in (e.waited.get(p) for p in PATH_PROCESSES) if w is not None)
    return (e.waiters() or ["path"]) if waited >= covered * extra else []


def transfer_seconds(row: Mapping[str, Any]) -> float | None:
    """The span a trial's CPU is judged over: its requests' first start to last byte; for video,
    the playback (a player's CPU is spent decoding, not over its requests' span)."""
    if row.get("watched_s"):
        return row["watched_s"] + (row.get("startup_s") or 0.0)
    return row.get("total_time_s")


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group pgid."""
    pids = []
    for d in os.scandir("/proc"):
        if not d.name.isdigit():
            continue
        try:
            with open(f"/proc/{d.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(d.name))
    return pids


def group_sched_seconds(pgid: int, members: list[int] | None = None) -> tuple[float, float] | None:
    """(on-CPU seconds, run-queue wait seconds) of a server: every live process of its group (nginx
    and Apache do their work in forked workers; `members` when the caller has them already); on-CPU
    time includes the children the leader already reaped (their wait time is not kept by the kernel)."""
    members = group_members(pgid) if members is None else members
    if not members:
        return None
    run = wait = 0.0
    for p in members:
        sched = process_sched_seconds(p)
        if sched:
            run, wait = run + sched[0], wait + sched[1]
        else:
            run += process_cpu_seconds(p) or 0.0
    try:
        fields = Path(f"/proc/{pgid}/stat").read_text().rsplit(")", 1)[1].split()
        run += (int(fields[13]) + int(fields[14])) / CLK_TCK   # cutime + cstime
    except (OSError, IndexError, ValueError):
        pass
    return run, wait
