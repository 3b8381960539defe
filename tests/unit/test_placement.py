"""Where a trial ran and what the host took from it: per-CPU steal and softirq time, the link
emulator's CPUs and preemptions, and the host_steal verdict on a link-late trial (pure logic; the
readings of /proc are checked against this machine's own files)."""

import os

import pytest

from quicbench.cpu import CLK_TCK, last_cpus, per_cpu_ticks, ticks_ms
from quicbench.lab.base import CpuCounters
from quicbench.link.fidelity import LinkReading, link_window
from quicbench.run.trial import placement_columns


def reply(late_ns: int, frames: int, nivcsw: int | None, cpus: list[int]):
    d = {"le_ns": [late_ns], "counts": [frames], "released": frames, "max_ns": late_ns}
    out = {"t_s": 0.0, "cpu_run_s": 1.0, "cpu_wait_s": 0.0, "up": d, "down": {}, "cpus": cpus}
    if nivcsw is not None:
        out["nivcsw"] = nivcsw
    return out


def window(p99_ns: int, nivcsw=(10, 14), cpus=(1,)):
    before = LinkReading({"router": reply(20_480, 100, nivcsw[0], list(cpus))})
    after = LinkReading({"router": {**reply(20_480, 100, nivcsw[1], list(cpus)),
                                    "up": {"le_ns": [20_480, p99_ns], "counts": [100, 100], "max_ns": p99_ns}}})
    return link_window(before, after)


def counters(steal: list[int], softirq: list[int], server_cpus=()):
    return CpuCounters(per_cpu={"": list(zip(softirq, steal))}, server_cpus=list(server_cpus))


def tick(ms: float) -> int:
    return round(ms * CLK_TCK / 1000)


def test_steal_on_the_link_emulators_cpu_covering_its_lateness_is_the_hosts():
    w = window(3_145_728)                                  # p99 lateness 3.1 ms, forwarding on CPU 1
    out = placement_columns(counters([0, 0], [0, 0]), counters([0, tick(10)], [tick(20), tick(40)], [0]), w, True)
    assert out["host_steal"] is True
    assert out["host_steal_ms"] == pytest.approx(10)
    assert out["softirq_cpu_ms"] == pytest.approx([20, 40])
    assert out["link_cpus"] == [1] and out["server_cpus"] == [0]
    assert out["link_nivcsw"] == 4


def test_steal_on_another_cpu_does_not_excuse_the_emulator():
    w = window(3_145_728, cpus=(1,))
    out = placement_columns(counters([0, 0], [0, 0]), counters([tick(50), 0], [0, 0]), w, True)
    assert out["host_steal"] is False


def test_steal_below_the_lateness_does_not_excuse_it():
    w = window(30_000_000, cpus=(0,))                      # 30 ms late, 10 ms stolen
    out = placement_columns(counters([0, 0], [0, 0]), counters([tick(10), 0], [0, 0]), w, True)
    assert out["host_steal"] is False


def test_no_verdict_on_a_trial_that_was_not_late_without_counters_or_elsewhere():
    w = window(3_145_728)
    assert placement_columns(counters([0, 0], [0, 0]), counters([0, tick(100)], [0, 0]), w, False)["host_steal"] is None
    out = placement_columns(CpuCounters(), CpuCounters(), None, None)
    assert all(v is None for v in out.values())
    # an older linkem without the counters: no preemption count, no CPUs
    old = window(3_145_728, nivcsw=(None, None), cpus=())
    out = placement_columns(CpuCounters(), CpuCounters(), old, True)
    # over SSH the steal read is the server host's, and linkem runs on the router's: not judged
    remote = CpuCounters(per_cpu={"10.0.0.2": [(0, 0), (0, 0)]})
    far = placement_columns(remote, CpuCounters(per_cpu={"10.0.0.2": [(0, 0), (0, tick(100))]}), w, True)
    assert far["host_steal"] is None and far["host_steal_ms"] == pytest.approx(100)
    assert out["link_nivcsw"] is None and out["link_cpus"] is None and out["host_steal"] is None


def test_this_machines_readings():
    cpus = per_cpu_ticks()
    assert len(cpus) == os.cpu_count()
    assert all(s >= 0 and t >= 0 for s, t in cpus)
    assert ticks_ms(CLK_TCK) == 1000.0
    mine = last_cpus(os.getpid())
    assert mine and all(0 <= c < os.cpu_count() for c in mine)
    assert last_cpus(2 ** 22 + 12345) == []


def test_hosts_md_lists_what_differs_by_backend_from_the_columns_table():
    from conftest import REPO
    from quicbench.model.columns import backend_table
    text = (REPO / "docs" / "hosts.md").read_text()
    start, end = "<!-- backend-table: generated from model/columns.py -->\n", "\n<!-- /backend-table -->"
    assert text[text.index(start) + len(start):text.index(end)] == backend_table()
