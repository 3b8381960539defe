import pytest
from pydantic import ValidationError

from quicbench.model.conditions import Condition, Direction, Hop, default_queue_packets


def test_symmetric_values_apply_to_each_direction():
    c = Condition.model_validate({"name": "50_2", "delay_ms": 50, "loss_pct": 2, "jitter_ms": 5,
                                  "jitter_dist": "pareto"})
    hop = c.hops[0]
    assert hop.up == hop.down and hop.up.delay_ms == 50 and hop.up.loss_pct == 2
    assert c.base_rtt_ms == 100


def test_per_direction_override():
    h = Hop.model_validate({"delay_ms": 10, "rate_mbit": 40, "down": {"rate_mbit": 5}})
    assert h.up.rate_mbit == 40 and h.down.rate_mbit == 5 and h.down.delay_ms == 10


def test_two_hops():
    c = Condition.model_validate({"name": "x", "hops": [{"delay_ms": 10}, {"delay_ms": 20, "loss_pct": 1}]})
    assert len(c.hops) == 2 and c.base_rtt_ms == 60


def test_down_rate_is_the_slowest_hop_less_spikes_and_off_periods():
    c = Condition.model_validate({"name": "x", "hops": [
        {"rate_mbit": 100, "down": {"rate_mbit": 40, "spikes": {"period_ms": 1000, "duration_ms": 200, "rate_pct": 0}}},
        {"rate_mbit": 50, "down": {"onoff": {"on_ms": 300, "off_ms": 100}}}]})
    assert c.down_rate_mbit == pytest.approx(min(40 * 0.8, 50 * 0.75))
    assert Condition.model_validate({"name": "y", "delay_ms": 5}).down_rate_mbit is None


@pytest.mark.parametrize("data,needle", [
    ({"delay_ms": -1}, "delay_ms"),
    ({"loss_pct": 120}, "loss_pct"),
    ({"jitter_dist": "lognormal"}, "jitter_dist"),
    ({"rate_mbit": 0}, "rate_mbit"),
    ({"spikes": {"period_ms": 1000}}, "spikes needs rate_mbit"),
    ({"rate_mbit": 10, "spikes": {"period_ms": 100, "duration_ms": 200}}, "shorter than period_ms"),
    ({"rate_mbit": 10, "queue": {"packets": 10, "bytes": 20000}}, "exactly one"),
    ({"rate_overhead_bytes": 14}, "rate_overhead_bytes needs rate_mbit"),
    ({"rate_mbit": 10, "rate_overhead_bytes": -14}, "rate_overhead_bytes"),
    ({"trace": "/nonexistent/file.trace"}, "trace file '/nonexistent/file.trace' not found"),
    ({"name": "a|b"}, "without '|'"),
    ({"name": ""}, "at least 1 character"),
    ({"delay_ms": 5, "colour": 1}, "unknown key 'colour'; accepted: up, down, delay_ms"),
    ({"delay": 5}, "delay"),
    ({"hops": [{}, {}, {}]}, "hops"),
    ({"rate_mbit": 10, "queue_discipline": "red"}, "queue_discipline"),
    ({"queue_discipline": "codel"}, "queue_discipline 'codel' needs rate_mbit or trace"),
    ({"rate_mbit": 10, "codel_target_ms": 5}, "codel_target_ms needs queue_discipline = 'codel'"),
    ({"rate_mbit": 10, "queue_discipline": "codel", "codel_interval_ms": 0}, "codel_interval_ms"),
])
def test_bad_conditions_name_the_field(data, needle):
    with pytest.raises(ValidationError) as e:
        Condition.model_validate(data)
    assert needle in str(e.value)


def test_trace_validation(tmp_path):
    good = tmp_path / "ok.trace"
    good.write_text("1\n1\n5\n9\n")
    assert Direction(trace=good).trace == good.resolve()
    bad = tmp_path / "bad.trace"
    bad.write_text("1\n2\nx\n")
    with pytest.raises(ValidationError, match="line 3 is not a millisecond timestamp"):
        Direction(trace=bad)


def test_trace_errors_never_echo_the_file(tmp_path):
    """A plan's trace may point at any file (../../etc/shadow): errors name it, never show its content."""
    secret = tmp_path / "secret"
    secret.write_text("root:*:19000:0:99999:7:::\n")
    with pytest.raises(ValidationError) as e:
        Direction(trace=secret)
    assert "root:" not in str(e.value) and "line 1 is not a millisecond timestamp" in str(e.value)
    binary = tmp_path / "binary"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ValidationError, match="not a mahimahi trace"):
        Direction(trace=binary)
    with pytest.raises(ValidationError, match="not found"):
        Direction(trace=tmp_path)


def test_default_queue_is_a_bdp():
    # 100 Mbit/s x max(2*50 ms, 20 ms) = 1.25 MB = 834 packets of 1500 B
    assert default_queue_packets(Direction(rate_mbit=100, delay_ms=50)) == 834
    assert default_queue_packets(Direction(rate_mbit=1)) == 64


def test_per_router_spreads_one_hop_to_the_first_router():
    one = Condition.model_validate({"name": "x", "delay_ms": 5})
    assert one.per_router(2) == [one.hops[0], Hop()]
    two = Condition.model_validate({"name": "y", "hops": [{"delay_ms": 1}, {"delay_ms": 2}]})
    assert two.per_router(2) == list(two.hops)
    with pytest.raises(ValueError, match="has 2 hops but the lab has 1 router"):
        two.per_router(1)


def test_codel_defaults_and_linkem_config():
    from quicbench.link.linkem import direction_config
    c = Condition.model_validate({"name": "aqm", "rate_mbit": 10, "queue": {"packets": 1000},
                                  "queue_discipline": "codel"})
    d = c.hops[0].down
    assert d.codel == (5.0, 100.0) and c.hops[0].up.codel == (5.0, 100.0)
    cfg = direction_config(d)
    assert (cfg["queue_discipline"], cfg["codel_target_ms"], cfg["codel_interval_ms"]) == ("codel", 5.0, 100.0)
    assert cfg["queue"] == {"packets": 1000}
    assert "codel" in c.short()
    own = Condition.model_validate({"name": "x", "rate_mbit": 10, "down": {"queue_discipline": "codel",
                                                                          "codel_target_ms": 2, "codel_interval_ms": 40}})
    assert own.hops[0].down.codel == (2.0, 40.0) and own.hops[0].up.codel is None
    assert "queue_discipline" not in direction_config(own.hops[0].up)
    assert "codel 2/40ms" in own.short()
