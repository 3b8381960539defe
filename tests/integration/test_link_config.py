"""Every field of the condition model reaches linkem in a form its own parser accepts."""

from __future__ import annotations

import json
import subprocess

import pytest

from quicbench.model.conditions import Condition
from quicbench.link.linkem import FIX, hop_config
from quicbench.paths import find_binary


def check(cfg: dict, tmp_path) -> subprocess.CompletedProcess:
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps(cfg))
    return subprocess.run([find_binary("linkem", FIX), "--check", "--config", str(f)], capture_output=True, text=True)


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


def test_trace_condition_reaches_linkem(tmp_path):
    trace = tmp_path / "12mbit.trace"
    trace.write_text("".join(f"{i}\n" for i in range(1, 13)))
    cond = Condition.model_validate({"name": "t", "trace": str(trace)})
    assert check(hop_config(cond.hops[0]), tmp_path).returncode == 0


def test_linkem_names_the_field_it_refuses(tmp_path):
    res = check({"up": {"rate_mbit": 5, "rate_overhead_bytes": 2000}}, tmp_path)
    assert res.returncode != 0
    assert "up.rate_overhead_bytes" in res.stderr
