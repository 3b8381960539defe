"""The CPU-bound rule over the path's processes, and the machine's busy share (pure logic on
measured numbers; the machine's and a process group's counters read for real)."""

import os

import pytest

from quicbench.cpu import PathCpu, cpu_bound_by, machine_busy_share, machine_cpu_ticks, transfer_seconds


def evidence(duration=1.0, ran=None, waited=None, **kw):
    return PathCpu(duration, ran or {}, waited or {}, **kw)


def test_a_process_that_ran_a_core_is_the_bottleneck():
    assert cpu_bound_by(evidence(ran={"client": 0.95, "server": 0.3})) == ["client"]
    assert cpu_bound_by(evidence(ran={"link": 0.92})) == ["link"]
    assert cpu_bound_by(evidence(2.0, ran={"client": 0.95})) == []      # 48 % of a core over 2 s


def test_waiting_for_a_cpu_counts_over_the_whole_path_when_every_cpu_was_busy():
    busy = {"machine_busy": 0.95}
    # 8 % + 8 % + 5 %: no one process waited 20 %, the path did; named longest wait first
    e = evidence(waited={"client": 0.08, "server": 0.08, "link": 0.05}, **busy)
    assert e.path_wait_share() == pytest.approx(0.21)
    assert cpu_bound_by(e) == ["client", "server", "link"]
    # waits under 1 % are not named
    assert cpu_bound_by(evidence(waited={"client": 0.195, "server": 0.005, "link": 0.005}, **busy)) == ["client"]
    assert cpu_bound_by(evidence(waited={"client": 0.1, "server": 0.09}, **busy)) == []
    # both: the one that ran first, then the waiters
    assert cpu_bound_by(evidence(ran={"server": 0.9}, waited={"client": 0.3}, **busy)) == ["server", "client"]
    # the same waits on a machine with idle CPUs: the path's processes waited for each other
    # (a quiet 2-core machine shows 10-20 %, docs/results/cpu-rule.md), which does not move goodput
    assert cpu_bound_by(evidence(waited={"client": 0.15, "server": 0.12}, machine_busy=0.6)) == []
    assert cpu_bound_by(evidence(waited={"client": 0.15, "server": 0.12})) == []


def test_the_busy_machine_alone_is_not_judged():
    # the satellite case: every CPU busy, the client waited 1 % of a 3 s transfer
    e = evidence(3.0, ran={"client": 0.05, "server": 0.03}, waited={"client": 0.03}, machine_busy=0.98,
                 goodput_mbps=1.28, link_mbit=20)
    assert cpu_bound_by(e) == []


def test_missing_measurements_judge_nothing():
    assert cpu_bound_by(evidence(None, ran={"client": 5.0}, waited={"client": 5.0})) == []
    assert cpu_bound_by(evidence(0.0, ran={"client": 5.0})) == []
    assert evidence(waited={"client": None}).path_wait_share() is None


def test_the_rule_reads_a_stored_row_as_the_trial_did():
    row = {"total_time_s": 2.0, "client_cpu_s": 0.2, "client_cpu_wait_s": 0.3, "server_cpu_s": 0.1,
           "server_cpu_wait_s": 0.2, "link_cpu_s": None, "link_cpu_wait_s": None, "machine_cpu_pct": 95.0,
           "goodput_mbps": 4.0}
    e = PathCpu.from_row(row, link_mbit=10)
    assert e.wait_share("client") == 0.15 and e.machine_busy == 0.95 and not e.link_limited
    assert cpu_bound_by(e) == ["client", "server"]
    # a video's CPU is judged over its playback
    assert transfer_seconds({"total_time_s": 1.0, "watched_s": 20.0, "startup_s": 1.5}) == 21.5
    assert PathCpu.from_row({"goodput_mbps": 9.0}, 10).link_limited


def test_machine_busy_share_of_all_cpus():
    # two CPUs at 100 Hz over one second: 200 ticks, 190 busy
    assert machine_busy_share((1000, 5000, 2), (1190, 5200, 2)) == 0.95
    # a span under 0.2 s per CPU is too coarse to judge
    assert machine_busy_share((1000, 5000, 2), (1030, 5030, 2)) is None


def test_machine_ticks_are_this_machines():
    b0, t0, cpus = machine_cpu_ticks()
    x = 0
    for i in range(2_000_000):   # some CPU time passes
        x += i
    b1, t1, _ = machine_cpu_ticks()
    assert cpus == os.cpu_count() and 0 <= b0 <= t0 and t1 > t0 and b1 > b0 and b1 - b0 <= t1 - t0


def test_the_hosts_cpu_script_reads_what_the_local_reader_reads(tmp_path):
    """The sh/awk reading the ssh backend runs on a host, run here on a process group of two
    busy processes: the same counters as the local reader, and this machine's /proc/stat."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from quicbench.cpu import group_sched_seconds
    from quicbench.lab.ssh import cpu_script, parse_cpu_script
    # 0.5 s of CPU each (process time, not wall time: a busy machine only makes it take longer)
    busy = "import os, time\nos.fork()\nwhile time.process_time() < 0.5: pass\ntime.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (group_sched_seconds(p.pid) or (0.0,))[0] < 1.0:
            time.sleep(0.1)
        time.sleep(0.1)
        (tmp_path / "pg").write_text(str(p.pid))
        out = subprocess.run(["sh", "-c", cpu_script(str(tmp_path / "pg"))], capture_output=True, text=True).stdout
        local = group_sched_seconds(p.pid)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    group, machine, softirq, per_cpu, server_cpus = parse_cpu_script(out)
    assert group is not None and local is not None, out
    # each CPU's softirq and steal ticks, and the CPUs the group's processes last ran on
    assert len(per_cpu) == os.cpu_count() and all(s >= 0 and t >= 0 for s, t in per_cpu), out
    assert server_cpus and all(0 <= c < os.cpu_count() for c in server_cpus), out
    assert softirq is not None and softirq >= 0, out       # every Linux has a ksoftirqd per CPU
    assert group[0] >= 0.8 and abs(group[0] - local[0]) < 0.05, (group, local)   # two processes, 0.5 s each
    assert machine is not None and machine[2] == os.cpu_count() and 0 < machine[0] < machine[1], out
    # no group file (a server not started through the lab): the machine alone
    group, machine, _, per_cpu, server_cpus = parse_cpu_script(
        subprocess.run(["sh", "-c", cpu_script(None)], capture_output=True, text=True).stdout)
    assert group is None and machine is not None and per_cpu and server_cpus == []
