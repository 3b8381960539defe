"""The cellular traces shipped in data/traces/cellular/ parse as plan traces, and the mean
capacities their README states are what the files hold."""

import re
from pathlib import Path

import pytest

from conftest import REPO
from quicbench.model.conditions import Condition, trace_mean_mbit
from quicbench.model.plan import load_plan

TRACES = REPO / "data" / "traces" / "cellular"


def readme_means() -> dict[str, tuple[float, float]]:
    rows = re.findall(r"^\| (\S+) \|[^|]+\|[^|]+\| ([\d.]+) / ([\d.]+) Mbit/s \|$",
                      (TRACES / "README.md").read_text(), re.M)
    return {name: (float(down), float(up)) for name, down, up in rows}


def test_every_trace_is_listed_with_its_mean_capacity():
    means = readme_means()
    names = sorted({p.stem for p in TRACES.glob("*.down")})
    assert sorted(means) == names and len(names) == 6
    for name, (down, up) in means.items():
        assert trace_mean_mbit(TRACES / f"{name}.down") == pytest.approx(down, abs=0.006), name
        assert trace_mean_mbit(TRACES / f"{name}.up") == pytest.approx(up, abs=0.006), name


@pytest.mark.parametrize("path", sorted(TRACES.glob("*.down")) + sorted(TRACES.glob("*.up")), ids=lambda p: p.name)
def test_trace_is_a_valid_condition_trace(path: Path):
    c = Condition.model_validate({"name": "cell", "down": {"trace": str(path), "delay_ms": 20}})
    assert c.hops[0].down.trace == path.resolve()


@pytest.mark.parametrize("plan", ["cellular.toml", "cellular-video.toml"])
def test_presets_use_the_shipped_traces_both_ways(plan):
    p = load_plan(REPO / "plans" / plan)
    assert p.repetitions >= 10 and p.link == "linkem"
    for c in p.conditions:
        down, up = c.hops[0].down.trace, c.hops[0].up.trace
        assert down.parent == up.parent == TRACES.resolve()
        assert down.stem == up.stem and (down.suffix, up.suffix) == (".down", ".up")
        assert c.down_trace_mbit == pytest.approx(trace_mean_mbit(down))
