"""Every field of the condition model reaches linkem in a form its own parser accepts."""

from __future__ import annotations

import json
import subprocess

import pytest

from quicbench.model.conditions import Condition
from quicbench.link.linkem import FIX, direction_config, hop_config
from quicbench.model.impairments import TABLE
from quicbench.paths import find_binary


def check(cfg: dict, tmp_path) -> subprocess.CompletedProcess:
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps(cfg))
    return subprocess.run([find_binary("linkem", FIX), "--check", "--config", str(f)], capture_output=True, text=True)


@pytest.mark.parallel_safe
@pytest.mark.parametrize("data", [
    {"delay_ms": 12.5, "jitter_ms": 1.25, "jitter_dist": "pareto", "reorder": True, "loss_pct": 0.5},
    {"rate_mbit": 40, "rate_overhead_bytes": 14, "queue": {"ms": 50}, "spikes": {"period_ms": 1000}},
    {"rate_mbit": 5, "queue": {"bytes": 30000}, "onoff": {"on_ms": 100, "off_ms": 50},
     "jitter_ms": 2, "jitter_dist": "normal", "jitter_correlation_pct": 25},
    {"down": {"loss": {"model": "gilbert_elliott", "p_pct": 1, "r_pct": 20}}, "up": {"duplicate_pct": 1,
                                                                                  "corrupt_pct": 0.1}},
])
def test_linkem_accepts_what_the_condition_model_sends(data, tmp_path):
    cond = Condition.model_validate({"name": "x", **data})
    res = check(hop_config(cond.hops[0]), tmp_path)
    assert res.returncode == 0, res.stderr


@pytest.mark.parallel_safe
def test_trace_condition_reaches_linkem(tmp_path):
    trace = tmp_path / "12mbit.trace"
    trace.write_text("".join(f"{i}\n" for i in range(1, 13)))
    cond = Condition.model_validate({"name": "t", "trace": str(trace)})
    assert check(hop_config(cond.hops[0]), tmp_path).returncode == 0


@pytest.mark.parallel_safe
def test_linkem_names_the_field_it_refuses(tmp_path):
    res = check({"up": {"rate_mbit": 5, "rate_overhead_bytes": 2000}}, tmp_path)
    assert res.returncode != 0
    assert "up.rate_overhead_bytes" in res.stderr


@pytest.mark.parallel_safe
def test_linkem_accepts_the_tables_bounds_and_refuses_beyond(tmp_path):
    """The running linkem takes its bounds from the schema it embeds: each number row's lowest
    and highest value, as the model sends them, pass; just beyond fails naming the field."""
    base = {"delay_ms": 5, "jitter_ms": 1, "rate_mbit": 10}
    for row in TABLE.rows:
        if row.kind not in ("number", "integer") or not row.linkem:
            continue
        top = dict(base)
        group, key = (row.group, row.key) if row.group else (None, row.name)
        edge = row.hi if row.name != "spikes.duration_ms" else row.hi - 1     # shorter than the period
        inner: dict = {key: edge}
        if group == "loss":
            inner["model"] = "random" if "model=random" in row.needs else "gilbert_elliott"
            if inner["model"] == "gilbert_elliott" and key != "p_pct":
                inner["p_pct"] = 1
        if group == "spikes" and key != "period_ms":
            inner["period_ms"] = TABLE["spikes.period_ms"].hi
        if group == "onoff":
            inner = {"on_ms": 1, "off_ms": 1, key: edge}
        if row.name.startswith("codel"):
            top["queue_discipline"] = "codel"
            top["codel_target_ms" if key == "codel_interval_ms" else "codel_interval_ms"] = 10_000
        top.update({group: inner} if group else inner)
        d = Condition.model_validate({"name": "x", **top}).hops[0].up
        assert check({"up": direction_config(d)}, tmp_path).returncode == 0, row.name
        beyond = json.loads(json.dumps({"up": direction_config(d)}))
        target = beyond["up"][group] if group else beyond["up"]
        target[key] = edge * 1.5 + 1 if row.kind == "number" else int(edge) + 1
        cp = check(beyond, tmp_path)
        assert cp.returncode == 2 and f"up.{row.name}: must be" in cp.stderr, (row.name, cp.stderr)


@pytest.mark.parallel_safe
def test_hop_config_round_trips_through_linkem(tmp_path):
    c = Condition.model_validate({"name": "x", "delay_ms": 20, "jitter_ms": 5, "jitter_dist": "pareto",
                                  "reorder": True, "rate_mbit": 10, "queue": {"packets": 100},
                                  "queue_discipline": "codel", "codel_target_ms": 2,
                                  "spikes": {"period_ms": 1000}, "duplicate_pct": 1, "corrupt_pct": 1,
                                  "up": {"loss": {"model": "gilbert_elliott", "p_pct": 1}},
                                  "down": {"onoff": {"on_ms": 100, "off_ms": 10}}})
    cp = check(hop_config(c.hops[0]), tmp_path)
    assert cp.returncode == 0, cp.stderr
