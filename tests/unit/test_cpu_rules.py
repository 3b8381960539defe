"""The CPU-bound rules: per endpoint and for the whole machine (pure logic on measured numbers)."""

import os

from quicbench.cpu import cpu_bound, machine_bound, machine_busy_share, machine_cpu_ticks


def test_endpoint_rules():
    assert cpu_bound(0.95, 1.0)                              # ran 95 % of a core
    assert not cpu_bound(0.5, 1.0)
    assert cpu_bound(0.5, 1.0, wait_s=0.45)                  # wanted 95 %, no rate
    assert cpu_bound(0.5, 1.0, 0.45, goodput_mbps=10, link_mbit=20)
    assert not cpu_bound(0.5, 1.0, 0.45, goodput_mbps=17, link_mbit=20)   # the link set the pace
    assert not cpu_bound(None, 1.0) and not cpu_bound(0.5, 0)


def test_machine_busy_share_of_all_cpus():
    # two CPUs at 100 Hz over one second: 200 ticks, 190 busy
    assert machine_busy_share((1000, 5000, 2), (1190, 5200, 2)) == 0.95
    # a span under 0.2 s per CPU is too coarse to judge
    assert machine_busy_share((1000, 5000, 2), (1030, 5030, 2)) is None


def test_machine_rule():
    assert machine_bound(0.95)                               # busy, no rate: the CPU was the limit
    assert machine_bound(0.95, goodput_mbps=3.0, link_mbit=10)
    assert not machine_bound(0.95, goodput_mbps=9.0, link_mbit=10)   # the link set the pace
    assert not machine_bound(0.85) and not machine_bound(None)


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
    group, machine = parse_cpu_script(out)
    assert group is not None and local is not None, out
    assert group[0] >= 0.8 and abs(group[0] - local[0]) < 0.05, (group, local)   # two processes, 0.5 s each
    assert machine is not None and machine[2] == os.cpu_count() and 0 < machine[0] < machine[1], out
    # no group file (a server not started through the lab): the machine alone
    group, machine = parse_cpu_script(subprocess.run(["sh", "-c", cpu_script(None)], capture_output=True,
                                                     text=True).stdout)
    assert group is None and machine is not None
