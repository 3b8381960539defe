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
