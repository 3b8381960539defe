"""The impairment table and what is derived from it: the condition model and its validation, the
CLI flags, each emulator's support check, linkem's JSON and schema, docs/link.md's table."""

import json
import math
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from quicbench.link import LINKS
from quicbench.link.linkem import direction_config
from quicbench.link.netem import unsupported
from quicbench.model.conditions import DIRECTION_FIELDS, Condition, Direction
from quicbench.model.impairments import (DOCS_BEGIN, DOCS_END, EMULATORS, LINKEM, NETEM_HOST, NETEM_SSH, NETEM_UML,
                                         SCHEMA_FILE, TABLE, docs_table, emulator_problem, schema_text)

ROOT = Path(__file__).resolve().parents[2]


def test_committed_schema_is_the_tables():
    """linkem embeds linkem/schema.json (include_str!) and takes its bounds from it: the file
    must be what the table generates (`python -m quicbench.model.impairments write`)."""
    assert SCHEMA_FILE.read_text() == schema_text(), \
        "linkem/schema.json differs from the impairment table: run `python -m quicbench.model.impairments write`"


def test_docs_table_is_the_tables():
    text = (ROOT / "docs" / "link.md").read_text()
    section = text[text.index(DOCS_BEGIN):text.index(DOCS_END) + len(DOCS_END)]
    assert section == docs_table(), \
        "docs/link.md's impairment table differs: run `python -m quicbench.model.impairments write`"


def test_model_fields_are_the_tables():
    assert tuple(Direction.model_fields) == DIRECTION_FIELDS == TABLE.direction_fields
    for group, model in Direction.objects.items():
        assert list(model.model_fields) == [r.key for r in TABLE.fields(group)]
    assert set(json.loads(schema_text())["$defs"]["direction"]["properties"]) == \
        {r.name for r in TABLE.fields() if r.linkem}


@pytest.mark.parametrize("data,needle", [
    # numbers finite and bounded, the range stated with the emulators
    ({"rate_mbit": 10, "queue": {"ms": math.inf}}, "queue.ms: inf is out of range; accepted: > 0 and ≤ 60000 ms"),
    ({"rate_mbit": 10, "spikes": {"period_ms": math.inf}}, "spikes.period_ms: inf is out of range"),
    ({"onoff": {"on_ms": math.inf, "off_ms": 10}}, "onoff.on_ms: inf is out of range"),
    ({"onoff": {"on_ms": 10, "off_ms": 1e300}}, "onoff.off_ms: 1e+300 is out of range; accepted: 1 to 3600000 ms"),
    ({"rate_mbit": 1e-300}, "rate_mbit: 1e-300 is out of range; accepted: 0.001 to 100000 Mbit/s (linkem, netem)"),
    ({"jitter_ms": 3000}, "jitter_ms: 3000 is out of range; accepted: 0 to 2000 ms (linkem, netem)"),
    ({"delay_ms": math.nan}, "delay_ms: nan is out of range"),
    # types strict
    ({"delay_ms": "5"}, "delay_ms: Input should be a valid number"),
    ({"delay_ms": True}, "delay_ms: Input should be a valid number"),
    ({"rate_mbit": 10, "rate_overhead_bytes": 14.0}, "rate_overhead_bytes: Input should be a valid integer"),
    ({"jitter_ms": 5, "reorder": "true"}, "reorder: Input should be a valid boolean"),
    ({"rate_mbit": 10, "queue": {"packets": 10.0}}, "queue.packets: Input should be a valid integer"),
    ({"latency_probe": "true"}, "latency_probe: Input should be a valid boolean"),
    ({"rebind_at_s": "5"}, "rebind_at_s: Input should be a valid number"),
    ({"background": [{"protocol": "tcp", "flows": 2.0}]}, "background.0.flows: Input should be a valid integer"),
    # a field that would be ignored is refused
    ({"loss": {"model": "random", "pct": 1, "p_pct": 5}}, "p_pct needs model = 'gilbert_elliott'"),
    ({"loss": {"model": "gilbert_elliott", "p_pct": 1, "pct": 5}}, "pct needs model = 'random'"),
    ({"loss": {"model": "gilbert_elliott", "p_pct": 1, "correlation_pct": 5}}, "correlation_pct needs model = 'random'"),
    ({"reorder": True}, "reorder needs jitter_ms"),
    ({"jitter_dist": "pareto"}, "jitter_dist 'pareto' needs jitter_ms"),
    ({"rate_mbit": 10, "codel_interval_ms": 50}, "codel_interval_ms needs queue_discipline = 'codel'"),
    ({"rate_mbit": 5, "trace": None, "loss_pct": 1, "loss": {"pct": 1}}, "give loss_pct or loss, not both"),
    # CoDel's target above its interval (given, or the interval's default of 100 ms)
    ({"rate_mbit": 10, "queue_discipline": "codel", "codel_target_ms": 50, "codel_interval_ms": 40},
     "codel_target_ms (50) must not be above codel_interval_ms (40)"),
    ({"rate_mbit": 10, "queue_discipline": "codel", "codel_target_ms": 200},
     "codel_target_ms (200) must not be above codel_interval_ms (100)"),
])
def test_strict_condition_fields(data, needle):
    with pytest.raises(ValidationError) as e:
        Condition.model_validate({"name": "x", **data})
    from quicbench.errors import format_validation_error
    assert needle in format_validation_error(e.value)


@pytest.mark.parametrize("name", ["a\x7fb", "tab\there", "zero\u200bwidth", "line\nbreak"])
def test_condition_names_are_printable(name):
    with pytest.raises(ValidationError, match="printable text"):
        Condition.model_validate({"name": name})


def test_within_bounds_and_defaults_still_pass():
    c = Condition.model_validate({"name": "ok", "delay_ms": 60_000, "jitter_ms": 2000, "reorder": True,
                                  "rate_mbit": 0.001, "queue": {"ms": 60_000},
                                  "down": {"loss": {"model": "gilbert_elliott", "p_pct": 1, "r_pct": 20}}})
    assert c.hops[0].up.rate_mbit == 0.001 and c.hops[0].down.loss.r_pct == 20
    # a condition dumped whole (every default given) reads back the same
    again = Condition.model_validate(c.model_dump())
    assert again == c


def test_emulator_allowlist_names_the_field_the_emulator_and_who_implements_it():
    onoff = Condition.model_validate({"name": "x", "onoff": {"on_ms": 100, "off_ms": 50}})
    for emu in (NETEM_HOST, NETEM_UML, NETEM_SSH):
        why = emulator_problem(onoff, emu)
        assert why is not None and why.startswith("netem has no onoff: use link linkem"), why
        assert EMULATORS[emu] in why and "linkem does" in why
    assert emulator_problem(onoff, LINKEM) is None
    codel = Condition.model_validate({"name": "aqm", "rate_mbit": 10, "queue_discipline": "codel"})
    assert "queue_discipline 'codel'" in (emulator_problem(codel, NETEM_SSH) or "")
    # the netem driver's check is that allowlist plus what it cannot combine
    assert unsupported(onoff) == emulator_problem(onoff, NETEM_HOST)
    assert LINKS.get("linkem").supports(onoff) is None


@pytest.mark.parametrize("link,fields,needle", [
    ("netem", 'rate_mbit = 10\nqueue_discipline = "codel"',
     "conditions.c: netem has no queue_discipline 'codel': use link linkem (netem on this host's kernel does not "
     "implement it; linkem does)"),
    ("linkem", "jitter_ms = 3000", "jitter_ms: 3000 is out of range; accepted: 0 to 2000 ms (linkem, netem)"),
])
def test_bad_impairment_exits_2_before_a_run_directory(tmp_path, link, fields, needle):
    plan = tmp_path / "p.toml"
    plan.write_text(f'name = "p"\nlink = "{link}"\nprotocols = ["h1"]\n[[conditions]]\nname = "c"\n{fields}\n'
                    '[[workloads]]\nsize = "10KB"\ncount = 1\n')
    out = tmp_path / "out"
    import os
    import sys
    cp = subprocess.run([sys.executable, "-m", "quicbench.cli.main", "run", str(plan), "--out", str(out)],
                        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert needle in " ".join(cp.stderr.split()) and len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    assert not out.exists()


def test_linkem_config_is_the_tables_with_loss_folded():
    c = Condition.model_validate({"name": "x", "delay_ms": 5, "rate_mbit": 10, "up": {"loss_pct": 2},
                                  "down": {"loss": {"model": "gilbert_elliott", "p_pct": 1, "r_pct": 20}}})
    up, down = c.hops[0].up, c.hops[0].down
    assert direction_config(up) == {"delay_ms": 5.0, "rate_mbit": 10.0,
                                    "loss": {"model": "random", "pct": 2.0, "correlation_pct": 0.0}}
    assert direction_config(down)["loss"] == {"model": "gilbert_elliott", "p_pct": 1.0, "r_pct": 20.0,
                                              "h_pct": 0.0, "k_pct": 100.0}
    assert direction_config(Direction()) == {}


def test_without_a_field_drops_what_needs_it():
    from quicbench.cli.lab import _without_rate
    from quicbench.model.impairments import without
    d = {"delay_ms": 5, "rate_mbit": 10, "rate_overhead_bytes": 14, "queue": {"packets": 10},
         "queue_discipline": "codel", "codel_target_ms": 2, "spikes": {"period_ms": 1000}}
    assert without(TABLE, d, "rate_mbit") == {"delay_ms": 5}
    c = Condition.model_validate({"name": "x", "jitter_ms": 5, "reorder": True, "rate_mbit": 10,
                                  "queue_discipline": "codel", "codel_interval_ms": 50})
    assert _without_rate(c).hops[0].up == Condition.model_validate(
        {"name": "x", "jitter_ms": 5, "reorder": True}).hops[0].up


def test_a_bad_value_given_to_both_directions_is_reported_once():
    from quicbench.errors import format_validation_error
    with pytest.raises(ValidationError) as e:
        Condition.model_validate({"name": "x", "jitter_ms": 3000})
    assert format_validation_error(e.value) == \
        "hops.0: jitter_ms: 3000 is out of range; accepted: 0 to 2000 ms (linkem, netem) (got 3000)"
    with pytest.raises(ValidationError) as e:
        Condition.model_validate({"name": "x", "down": {"jitter_ms": 3000}})
    assert format_validation_error(e.value).startswith("hops.0.down.jitter_ms: 3000 is out of range")
