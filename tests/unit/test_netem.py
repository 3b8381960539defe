"""What the netem driver would execute (this kernel has no sch_netem, real users' kernels do)."""

import pytest

from quicbench.model.conditions import Condition
from quicbench.errors import QuicbenchError
from quicbench.link.netem import netem_args, netem_commands

ROUTERS = [("router", "to-client", "to-server")]


def cmds(cond):
    """The add commands (each comes after a delete of the root qdisc)."""
    out = [" ".join(argv) for _, argv in netem_commands(Condition.model_validate(cond), ROUTERS)]
    assert out[0::2] == [f"tc qdisc del dev {dev} root" for dev in ("to-server", "to-client")]
    return out[1::2]


def test_go_quick_scenario_on_both_interfaces():
    out = cmds({"name": "50_2", "delay_ms": 50, "jitter_ms": 5, "jitter_dist": "pareto", "reorder": True,
                "loss_pct": 2})
    # netem's limit must hold the whole delay line: 1 Gbit/s x 100 ms = 8334 packets (the
    # default 1000 would cap a 50 ms path at 240 Mbit/s)
    expected = "netem delay 50ms 5ms distribution pareto loss random 2% limit 8334"
    assert out == [f"tc qdisc add dev to-server root handle 1: {expected}",
                   f"tc qdisc add dev to-client root handle 1: {expected}"]


def test_rate_queue_limit_counts_the_delay_line():
    # netem's limit holds the delay line too: 200 queued + 40 Mbit/s x 11 ms of 1500-byte packets
    out = cmds({"name": "x", "rate_mbit": 40, "delay_ms": 10, "jitter_ms": 1, "queue": {"packets": 200}})
    assert out[0] == "tc qdisc add dev to-server root handle 1: netem delay 10ms 1ms rate 40mbit -14 limit 237"
    assert len(out) == 2


def test_order_keeping_jitter_uses_rate_mode_not_a_pfifo_child():
    # netem's time-sorted queue reorders whatever child it has; its rate mode does not
    out = cmds({"name": "x", "delay_ms": 20, "jitter_ms": 5})
    assert out[0] == "tc qdisc add dev to-server root handle 1: netem delay 20ms 5ms rate 100gbit limit 3334"
    assert "rate" not in cmds({"name": "x", "delay_ms": 20, "jitter_ms": 5, "reorder": True})[0]


def test_rate_counts_ip_bytes_plus_the_configured_overhead():
    # netem counts the 14-byte Ethernet header itself: -14 leaves IP bytes, as linkem counts
    assert "rate 5mbit -14 " in cmds({"name": "x", "rate_mbit": 5})[0]
    assert "rate 5mbit 24 " in cmds({"name": "x", "rate_mbit": 5, "rate_overhead_bytes": 38})[0]


def test_per_direction_and_gilbert_elliott():
    out = cmds({"name": "x", "down": {"delay_ms": 50, "loss": {"model": "gilbert_elliott", "p_pct": 1,
                                                               "r_pct": 20, "h_pct": 30, "k_pct": 99}},
                "up": {"duplicate_pct": 1, "corrupt_pct": 0.1}})
    assert out[0] == "tc qdisc add dev to-server root handle 1: netem duplicate 1% corrupt 0.1% limit 1667"
    assert out[1] == ("tc qdisc add dev to-client root handle 1: netem delay 50ms loss gemodel 1% 20% 70% 1% "
                      "limit 8334")


def test_two_hops_each_their_own():
    routers = [("router", "to-client", "to-server"), ("router2", "to-client", "to-server")]
    c = Condition.model_validate({"name": "x", "hops": [{"delay_ms": 5}, {"loss_pct": 1}]})
    out = [(n, a) for n, a in netem_commands(c, routers) if a[2] == "add"]
    assert [(n, a[4]) for n, a in out] == [("router", "to-server"), ("router", "to-client"),
                                          ("router2", "to-server"), ("router2", "to-client")]
    assert "loss" in out[2][1] and "delay" in out[0][1]


def test_onoff_needs_linkem():
    with pytest.raises(QuicbenchError, match="netem has no onoff: use link linkem"):
        cmds({"name": "s", "rate_mbit": 10, "onoff": {"on_ms": 100, "off_ms": 100}})


def test_spikes_are_a_tbf_child_whose_rate_changes():
    from quicbench.link.netem import spike_tbf
    c = Condition.model_validate({"name": "s", "down": {"rate_mbit": 5, "loss_pct": 5, "delay_ms": 10,
                                                        "spikes": {"period_ms": 2000, "rate_pct": 10}}})
    d = c.hops[0].down
    add = [a for _, a in netem_commands(c, [("router", "to-client", "to-server")]) if a[2] == "add"]
    root, child = [a for a in add if a[4] == "to-client"]
    assert root[root.index("rate") + 1] == "5mbit" and "loss" in root and "delay" in root   # serialization
    assert child[5:9] == ["parent", "1:1", "handle", "10:"] and "tbf" in child
    normal, spike = spike_tbf(d, spiking=False), spike_tbf(d, spiking=True)
    i = normal.index("rate")
    assert normal[i + 1] == "5000kbit" and spike[i + 1] == "500kbit"
    assert normal[:i + 1] + normal[i + 2:] == spike[:i + 1] + spike[i + 2:]   # only the rate changes
    assert root[root.index("stab"):root.index("netem")] == ["stab", "linklayer", "ethernet", "overhead", "-14"]
    zero = Condition.model_validate({"name": "z", "down": {"rate_mbit": 5, "spikes": {"period_ms": 1000,
                                                                                       "rate_pct": 0}}})
    low = spike_tbf(zero.hops[0].down, spiking=True)
    assert low[low.index("rate") + 1] == "1kbit"

def test_reordering_jitter_with_a_rate_needs_linkem():
    # netem's rate mode keeps packets in order whatever the jitter: refuse rather than not reorder
    with pytest.raises(QuicbenchError, match="does not reorder packets when it also limits the rate"):
        cmds({"name": "gq", "rate_mbit": 1000, "delay_ms": 12.5, "jitter_ms": 1.25, "reorder": True})
    assert cmds({"name": "gq", "delay_ms": 12.5, "jitter_ms": 1.25, "reorder": True})      # no rate: netem reorders
    assert cmds({"name": "gq", "rate_mbit": 1000, "delay_ms": 12.5, "jitter_ms": 1.25})    # in order: fine


def test_offload_labs_never_get_netem(monkeypatch):
    # netem would draw one loss and one delay for a whole GSO super-frame
    from quicbench.link import NetemLink, resolve_link
    monkeypatch.setattr(NetemLink, "available", classmethod(lambda cls: (True, "kernel sch_netem")))
    c = [Condition.model_validate({"name": "c", "delay_ms": 10})]
    assert resolve_link("auto", c) is NetemLink
    assert resolve_link("auto", c, offload=True) is not NetemLink
    with pytest.raises(QuicbenchError, match="offload = true: link emulator 'netem' cannot shape GSO super-frames"):
        resolve_link("netem", c, offload=True)


def test_codel_needs_linkem_and_auto_picks_it(monkeypatch):
    # this host's kernel has no sch_codel and the driver builds no codel qdisc: netem refuses the
    # field by name, and auto picks linkem even where the kernel has netem
    from quicbench.link import LinkemLink, NetemLink, resolve_link
    with pytest.raises(QuicbenchError, match="netem has no queue_discipline 'codel': use link linkem"):
        cmds({"name": "aqm", "rate_mbit": 10, "queue_discipline": "codel"})
    monkeypatch.setattr(NetemLink, "available", classmethod(lambda cls: (True, "kernel sch_netem")))
    c = [Condition.model_validate({"name": "aqm", "rate_mbit": 10, "down": {"queue_discipline": "codel"}})]
    assert resolve_link("auto", c) is LinkemLink
    assert resolve_link("auto", [Condition.model_validate({"name": "fifo", "rate_mbit": 10})]) is NetemLink
