"""--jobs: admission by measured CPU headroom and the 'concurrent' count, without labs."""

import threading
import time

import pytest

from quicbench.model.plan import expand, plan_from_dict
from quicbench.run.parallel import Admission, _Stopped, idle_cores, units


def test_units_are_cells_and_warmup_groups():
    p = plan_from_dict({"name": "u", "protocols": ["h1", "h2", "h3"], "repetitions": 2, "warmup": 1,
                        "workloads": [{"size": "10KB"}], "conditions": [{"name": "a"}, {"name": "b"}]})
    us = units(expand(p))
    assert [len(u) for u in us] == [3, 3, 3, 3, 3, 3]
    assert all(len({(t.condition.name, t.workload.label, t.rep, t.warmup) for t in u}) == 1 for u in us)
    assert [t for u in us for t in u] == expand(p)


def test_alone_a_trial_enters_without_measuring_and_counts_who_ran_beside_it():
    calls = []
    a = Admission(measure=lambda: calls.append(1) or 2.0)
    stop = threading.Event()
    t1 = a.enter(stop)
    assert calls == []                     # nothing ran: no measurement needed
    t2 = a.enter(stop)                     # headroom 2 cores >= 1: admitted beside t1
    assert len(calls) == 1
    assert a.leave(t1) == 1                # t2 started during t1
    t3 = a.enter(stop)
    assert a.leave(t2) == 2 and a.leave(t3) == 1


def test_no_headroom_waits_for_a_trial_to_end():
    a = Admission(measure=lambda: 0.2)     # the host is busy: never more than one at a time
    stop = threading.Event()
    first = a.enter(stop)
    entered = []
    th = threading.Thread(target=lambda: entered.append(a.enter(stop)))
    th.start()
    time.sleep(0.3)
    assert entered == []                   # refused while the first runs
    assert a.leave(first) == 0
    th.join(5)
    assert len(entered) == 1 and a.refused >= 1
    assert a.leave(entered[0]) == 0        # it ran alone


def test_a_stop_ends_the_wait():
    a = Admission(measure=lambda: 0.0)
    stop = threading.Event()
    a.enter(stop)
    stop.set()
    with pytest.raises(_Stopped):
        a.enter(stop)


def test_idle_cores_is_within_the_machine():
    import os
    v = idle_cores(0.1)
    assert 0 <= v <= (os.cpu_count() or 1) + 0.01
