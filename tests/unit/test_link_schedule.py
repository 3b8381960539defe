"""Up to which rate linkem keeps its schedule: the bench's rule, the warning before a run, and
docs/link.md stating the figure the bench measured (pure logic; the measurement is `make bench`)."""

import json
import re

import pytest

from quicbench.link.schedule import (SCHEDULE_RESULT, ScheduleLimit, download_rate_mbit, highest_on_schedule,
                                     reached_on_schedule,
                                     load_limit, plan_schedule_warning, schedule_warning)
from quicbench.model.conditions import Condition
from quicbench.paths import REPO_ROOT


def cond(name, **kw):
    return Condition.model_validate({"name": name, "delay_ms": 5, **kw})


LIMIT = ScheduleLimit(highest_mbit=400, unlimited_ok=False, lowest_mbit=100, cpus=2)


def test_the_figure_is_the_top_of_the_ladder_climbed_without_a_late_transfer():
    ok, late = [False, False, False], [False, True, False]
    assert highest_on_schedule({100: ok, 200: ok, 400: ok, 600: late, 800: ok, None: ok}) == (400, False)
    # a late rate stops the climb even when a higher one happened to keep its schedule
    assert highest_on_schedule({100: ok, 200: late, 400: ok, None: ok}) == (100, False)
    assert highest_on_schedule({100: late, 200: ok, None: ok}) == (None, False)
    assert highest_on_schedule({100: ok, 200: ok, None: ok}) == (200, True)
    assert highest_on_schedule({100: ok, 200: ok, None: late}) == (200, False)
    # a rate with no judged transfer says nothing: the climb stops below it
    assert highest_on_schedule({100: ok, 200: [], 400: ok, None: ok}) == (100, False)
    assert highest_on_schedule({100: ok, 200: ok}) == (200, False)


def test_a_download_is_held_to_its_slowest_hop_of_the_down_direction():
    assert download_rate_mbit(cond("a", rate_mbit=50)) == 50
    assert download_rate_mbit(cond("b")) is None
    assert download_rate_mbit(Condition.model_validate(
        {"name": "asym", "up": {"delay_ms": 5, "rate_mbit": 10}, "down": {"delay_ms": 5, "rate_mbit": 900}})) == 900
    assert download_rate_mbit(Condition.model_validate(
        {"name": "up-only", "up": {"delay_ms": 5, "rate_mbit": 10}, "down": {"delay_ms": 5}})) is None
    two = Condition.model_validate({"name": "two", "hops": [{"delay_ms": 5, "rate_mbit": 1000},
                                                              {"delay_ms": 5, "rate_mbit": 300}]})
    assert download_rate_mbit(two) == 300
    trace = REPO_ROOT / "data" / "traces" / "cellular" / "TMobile-LTE-short.down"
    lte = Condition.model_validate({"name": "lte", "up": {"delay_ms": 20}, "down": {"delay_ms": 20, "trace": str(trace)}})
    assert 1 < download_rate_mbit(lte) < 100


def test_the_warning_names_each_condition_beyond_the_figure_and_where_it_comes_from():
    conds = [cond("broadband", rate_mbit=50), cond("at", rate_mbit=400), cond("fast"), cond("gig", rate_mbit=1000)]
    line = schedule_warning(conds, LIMIT)
    assert "\n" not in line
    assert line.startswith("warning: with both endpoints busy linkem kept its schedule up to 400 Mbit/s (make bench")
    assert "conditions fast (no rate limit), gig (1000 Mbit/s)" in line
    assert "broadband" not in line and "at (" not in line
    assert "bench/results/linkem.json" in line and "docs/link.md" in line and "2 CPUs" in line


def test_no_warning_within_the_figure_or_when_nothing_was_measured():
    assert schedule_warning([cond("broadband", rate_mbit=50), cond("at", rate_mbit=400)], LIMIT) is None
    assert schedule_warning([cond("fast")], None) is None
    every = ScheduleLimit(highest_mbit=800, unlimited_ok=True, lowest_mbit=100)
    assert schedule_warning([cond("fast"), cond("gig", rate_mbit=5000)], every) is None


def test_a_rate_is_judged_by_what_the_transfers_carried_on_schedule():
    """A 20 MB transfer need not fill its rate: what linkem carried on schedule is the bound."""
    rates = {"r400": {"rate_mbit": 400, "per_protocol": {"h1": {"goodput_mbps_median": 270},
                                                        "h3": {"goodput_mbps_median": 290}}},
             "r800": {"rate_mbit": 800, "per_protocol": {"h1": {"goodput_mbps_median": 400},
                                                        "h3": {"goodput_mbps_median": 360}}},
             "unlimited": {"rate_mbit": None, "per_protocol": {"h1": {"goodput_mbps_median": 540}}}}
    assert reached_on_schedule(rates, 800) == 400
    assert reached_on_schedule(rates, 400) == 290          # the rates above the figure do not count
    assert reached_on_schedule(rates, None) is None
    carried = ScheduleLimit(highest_mbit=800, unlimited_ok=False, lowest_mbit=100, reached_mbit=400)
    assert carried.kept == "kept its schedule at rates up to 800 Mbit/s, where its transfers carried at most 400 Mbit/s"
    assert not carried.exceeded_by(400) and carried.exceeded_by(600) and carried.exceeded_by(None)
    line = schedule_warning([cond("half", rate_mbit=500), cond("within", rate_mbit=300)], carried)
    assert "condition half (500 Mbit/s)" in line and "within" not in line


def test_late_at_the_lowest_rate_warns_from_that_rate_up():
    low = ScheduleLimit(highest_mbit=None, unlimited_ok=False, lowest_mbit=100)
    line = schedule_warning([cond("slow", rate_mbit=50), cond("mid", rate_mbit=100)], low)
    assert "was late already at 100 Mbit/s, the lowest rate tried" in line
    assert "condition mid (100 Mbit/s)" in line and "slow" not in line


def bench_result(tmp_path, **schedule):
    path = tmp_path / "linkem.json"
    path.write_text(json.dumps({"throughput": {}, "schedule": schedule}))
    return path


def test_the_warning_is_for_linkem_only(tmp_path):
    res = bench_result(tmp_path, highest_on_schedule_mbit=400, unlimited_on_schedule=False, lowest_mbit=100, cpus=2)
    fast = [cond("fast")]
    assert "condition fast (no rate limit)" in plan_schedule_warning("linkem", fast, result=res)
    assert plan_schedule_warning("netem", fast, result=res) is None
    assert plan_schedule_warning("plain", fast, result=res) is None
    # `auto` over ssh: the router hosts choose the driver, so nothing is said here
    assert plan_schedule_warning("auto", fast, resolve_auto=False, result=res) is None


def test_a_bench_result_without_the_schedule_gives_no_figure(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"throughput": {}}))
    assert load_limit(old) is None
    assert load_limit(tmp_path / "missing.json") is None
    assert plan_schedule_warning("linkem", [cond("fast")], result=old) is None


def test_docs_state_the_figure_the_bench_measured():
    limit = load_limit(SCHEDULE_RESULT)
    if limit is None:
        pytest.skip("make bench has not measured linkem's schedule yet (bench/results/linkem.json has no 'schedule')")
    text = (REPO_ROOT / "docs" / "link.md").read_text()
    section = text.split("### Up to which rate linkem keeps its schedule", 1)[1].split("\n#", 1)[0]
    assert f"linkem {limit.kept}" in re.sub(r"\s+", " ", section), \
        f"docs/link.md should say 'linkem {limit.kept}', as bench/results/linkem.json does"
