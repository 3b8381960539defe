"""The CPU-bound rules: per endpoint and for the whole machine (pure logic on measured numbers)."""

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
    assert machine_busy_share((1000, 5000), (1190, 5200), cpus=2) == 0.95
    # a span under 0.2 s per CPU is too coarse to judge
    assert machine_busy_share((1000, 5000), (1030, 5030), cpus=2) is None
    assert machine_busy_share(None, (1, 2)) is None


def test_machine_rule():
    assert machine_bound(0.95)                               # busy, no rate: the CPU was the limit
    assert machine_bound(0.95, goodput_mbps=3.0, link_mbit=10)
    assert not machine_bound(0.95, goodput_mbps=9.0, link_mbit=10)   # the link set the pace
    assert not machine_bound(0.85) and not machine_bound(None)


def test_machine_ticks_are_this_machines():
    b0, t0 = machine_cpu_ticks()
    x = 0
    for i in range(2_000_000):   # some CPU time passes
        x += i
    b1, t1 = machine_cpu_ticks()
    assert 0 <= b0 <= t0 and t1 > t0 and b1 > b0 and b1 - b0 <= t1 - t0
