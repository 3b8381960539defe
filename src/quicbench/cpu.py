"""CPU time of processes: precise per-thread scheduler time where the kernel exposes it."""

from __future__ import annotations

import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float | None:
    """On-CPU seconds of a process so far.

    Sums the scheduler's nanosecond run time of every thread (/proc/PID/task/*/schedstat);
    falls back to utime+stime (clock ticks) when schedstat is missing.
    """
    base = Path(f"/proc/{pid}")
    total_ns = 0
    try:
        tasks = list((base / "task").iterdir())
        for t in tasks:
            try:
                total_ns += int((t / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                continue
        if total_ns:
            return total_ns / 1e9
        fields = (base / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except OSError:
        return None


CPU_BOUND_THRESHOLD = 0.9  # of one core, during the transfer


def cpu_bound(cpu_s: float | None, duration_s: float | None) -> bool:
    if not cpu_s or not duration_s or duration_s <= 0:
        return False
    return cpu_s / duration_s >= CPU_BOUND_THRESHOLD


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


def group_cpu_seconds(pgid: int) -> float | None:
    """On-CPU seconds of a server: every live process of its group (nginx and Apache do their
    work in forked workers) plus the children the leader already reaped."""
    members = group_members(pgid)
    if not members:
        return None
    total = sum(process_cpu_seconds(p) or 0.0 for p in members)
    try:
        fields = Path(f"/proc/{pgid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[13]) + int(fields[14])) / CLK_TCK   # cutime + cstime
    except (OSError, IndexError, ValueError):
        pass
    return total
