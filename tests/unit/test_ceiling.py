"""The kernel's ceiling (run/ceiling.py): which fetches measure it, how it is kept, which rows it flags."""

from quicbench.model.plan import Plan, expand
from quicbench.run import ceiling


def plan() -> Plan:
    return Plan.model_validate({
        "name": "c", "protocols": ["h1", "h3"], "repetitions": 2,
        "conditions": [{"name": "a", "delay_ms": 5}, {"name": "b", "delay_ms": 50, "loss_pct": 1}],
        "workloads": [{"size": "10KB", "count": 10}, {"size": "1MB", "count": 2}, {"size": "100KB", "count": 4}]})


def test_one_unimpaired_fetch_of_the_largest_payload_per_protocol():
    specs = ceiling.ceiling_specs(expand(plan()))
    assert sorted(s.protocol for s in specs) == ["h1", "h3"]
    for s in specs:
        assert s.workload.payload_bytes == 2 * 1000 ** 2 or s.workload.payload_bytes == 2 * 1024 ** 2
        c = s.condition
        assert c.name == "ceiling" and c.base_rtt_ms == 0 and all(
            d.loss_pct == 0 and d.jitter_ms == 0 and d.rate_mbit is None for h in c.hops for d in (h.up, h.down))


def test_no_object_workload_no_ceiling():
    p = Plan.model_validate({"name": "v", "protocols": ["h2"], "workloads": [{"kind": "page", "size": "10KB"}]})
    assert ceiling.ceiling_specs(expand(p)) == []


def test_the_best_ok_fetch_counts():
    specs = ceiling.ceiling_specs(expand(plan()))
    got = {("h1", 0): {"status": "ok", "goodput_mbps": 20.0}, ("h1", 1): {"status": "ok", "goodput_mbps": 30.0},
           ("h3", 0): {"status": "failed", "goodput_mbps": 99.0, "error": "timeout"},
           ("h3", 1): {"status": "ok", "goodput_mbps": 8.0}}
    res = ceiling.measure(specs, lambda s, k: got[(s.protocol, k)])
    assert res["goodput_mbps"] == {"h1": 30.0, "h3": 8.0}
    assert len(res["fetches"]) == 4 and res["near"] == ceiling.NEAR


def test_rows_near_the_ceiling_are_flagged():
    top = {"near": 0.8, "goodput_mbps": {"h1": 30.0}}
    assert ceiling.near_ceiling({"protocol": "h1", "goodput_mbps": 24.0}, top) is True
    assert ceiling.near_ceiling({"protocol": "h1", "goodput_mbps": 23.9}, top) is False
    assert ceiling.near_ceiling({"protocol": "h3", "goodput_mbps": 50.0}, top) is None   # not measured
    assert ceiling.near_ceiling({"protocol": "h1", "goodput_mbps": None}, top) is None
    assert ceiling.near_ceiling({"protocol": "h1", "goodput_mbps": 24.0}, None) is None
