"""CPU time of processes: precise per-thread scheduler time where the kernel exposes it."""

from __future__ import annotations

import os
from pathlib import Path

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


CPU_BOUND_THRESHOLD = 0.9  # of one core, during the transfer
LINK_LIMITED_SHARE = 0.8   # of the configured rate: at or above it the link, not the CPU, set the pace
MACHINE_BUSY_THRESHOLD = 0.9  # of all the machine's CPUs, during the transfer
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


def _link_limited(goodput_mbps: float | None, link_mbit: float | None) -> bool:
    return bool(link_mbit and goodput_mbps is not None and goodput_mbps >= LINK_LIMITED_SHARE * link_mbit)


def cpu_bound(cpu_s: float | None, duration_s: float | None, wait_s: float | None = None,
              goodput_mbps: float | None = None, link_mbit: float | None = None) -> bool:
    """Was an endpoint's CPU what limited the transfer?

    Yes when it ran at least 90 % of a core. Also when it *wanted* that much, the time it ran plus
    the time it was runnable but waited for a CPU (on a busy host, with client, server and link
    emulator sharing few cores, the second replaces the first), unless the transfer reached 80 %
    of the link's configured rate: then the link set the pace and the CPU kept up.
    """
    if not cpu_s or not duration_s or duration_s <= 0:
        return False
    if cpu_s / duration_s >= CPU_BOUND_THRESHOLD:
        return True
    wanted = (cpu_s + (wait_s or 0.0)) / duration_s
    return wanted >= CPU_BOUND_THRESHOLD and not _link_limited(goodput_mbps, link_mbit)


def machine_bound(busy_share: float | None, goodput_mbps: float | None = None,
                  link_mbit: float | None = None) -> bool:
    """Was the machine's CPU what limited the transfer, though no one endpoint shows it?

    Yes when all its CPUs together were at least 90 % busy over the transfer and the goodput
    stayed below 80 % of the link's rate. This is the rule for a kernel with one CPU (User-Mode
    Linux): there client, server, the kernel's packet work and netem share that CPU, and none of
    them alone reaches 90 % of it; and for concurrent labs, whose neighbours share the machine.
    """
    return (busy_share is not None and busy_share >= MACHINE_BUSY_THRESHOLD
            and not _link_limited(goodput_mbps, link_mbit))


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


def group_sched_seconds(pgid: int) -> tuple[float, float] | None:
    """(on-CPU seconds, run-queue wait seconds) of a server: every live process of its group (nginx
    and Apache do their work in forked workers); on-CPU time includes the children the leader
    already reaped (their wait time is not kept by the kernel)."""
    members = group_members(pgid)
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
