"""NAT rebinding's pure parts: the ports of a trial and the stall across the rebinding."""

from quicbench.run.rebind import NEW_PORT_OFFSET, ports_for, stall_across


def test_each_trial_has_its_own_port_and_a_different_one_after():
    assert ports_for(0) == (20000, 30000) and ports_for(9999) == (29999, 39999) and ports_for(10000) == (20000, 30000)
    assert all(b - a == NEW_PORT_OFFSET for a, b in map(ports_for, range(50)))


def test_stall_across_takes_the_longest_gap_in_the_second_after():
    ms = 1_000_000
    at = 1000 * ms
    reqs = [{"gaps_ns": [[100 * ms, 180 * ms], [1010 * ms, 1070 * ms], [2500 * ms, 2900 * ms]]},
            {"gaps_ns": [[990 * ms, 1020 * ms]]}, {"gaps_ns": None}]
    # the 80 ms gap is before, the 400 ms gap starts more than a second after: 60 ms
    assert stall_across(reqs, at) == 60.0
    assert stall_across([{"gaps_ns": []}], at) == 0.0
    assert stall_across(reqs, None) is None
