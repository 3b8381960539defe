"""A new impairment is its table row, its engine and its test: this file holds all three for a
toy one (drop every n-th packet, linkem only) and shows that the model, its validation, the CLI
flag, netem's allowlist, linkem's schema and docs/link.md's row follow without another edit."""

from types import SimpleNamespace

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from quicbench.cli.condflags import condition_options, hop_from_flags
from quicbench.errors import format_validation_error
from quicbench.model.conditions import direction_model
from quicbench.model.impairments import (LINKEM, NETEM_HOST, NETEM_SSH, NETEM_UML, TABLE, Impairment, docs_table,
                                         emulator_problem, json_schema, linkem_direction)

# 1. its table row
TOY = Impairment("toy_drop_every", "integer", "drop every n-th packet (0: none)", "packets", 0, 0, 1000,
                 emulators=frozenset({LINKEM}), needs=("delay_ms",), flag="--toy-drop-every")
TOY_TABLE = TABLE.with_rows(TOY)
ToyDirection = direction_model(TOY_TABLE)


# 2. its engine
def toy_engine(d, packets: list[int]) -> list[int]:
    n = d.toy_drop_every
    return [p for i, p in enumerate(packets, 1) if not n or i % n]


# 3. its test
def test_model_and_engine_follow_the_row():
    d = ToyDirection.model_validate({"delay_ms": 5, "toy_drop_every": 3})
    assert d.toy_drop_every == 3 and ToyDirection().toy_drop_every == 0
    assert toy_engine(d, list(range(1, 10))) == [1, 2, 4, 5, 7, 8]
    assert d.short() == "5ms"           # the rest of the direction is unchanged


@pytest.mark.parametrize("data,needle", [
    ({"delay_ms": 5, "toy_drop_every": 1001}, "toy_drop_every: 1001 is out of range; accepted: 0 to 1000 packets (linkem)"),
    ({"delay_ms": 5, "toy_drop_every": 3.0}, "toy_drop_every: Input should be a valid integer"),
    ({"toy_drop_every": 3}, "toy_drop_every needs delay_ms"),
])
def test_validation_follows_the_row(data, needle):
    with pytest.raises(ValidationError) as e:
        ToyDirection.model_validate(data)
    assert needle in format_validation_error(e.value)


def test_cli_flag_follows_the_row():
    app = typer.Typer()
    got = []

    @app.command()
    @condition_options(table=TOY_TABLE)
    def shape(flags=None) -> None:
        got.append(hop_from_flags(flags, TOY_TABLE))

    r = CliRunner().invoke(app, ["--delay", "5", "--toy-drop-every", "4", "--up", "toy_drop_every=2"])
    assert r.exit_code == 0, r.output
    assert got == [{"delay_ms": 5.0, "toy_drop_every": 4, "up": {"toy_drop_every": 2}}]
    up = ToyDirection.model_validate({k: v for k, v in got[0].items() if k != "up"} | got[0]["up"])
    assert up.toy_drop_every == 2
    assert "--toy-drop-every" in CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output


def test_netem_allowlist_follows_the_row():
    d = ToyDirection.model_validate({"delay_ms": 5, "toy_drop_every": 3})
    cond = SimpleNamespace(hops=[SimpleNamespace(up=d, down=ToyDirection())])
    for netem in (NETEM_HOST, NETEM_UML, NETEM_SSH):
        assert emulator_problem(cond, netem, TOY_TABLE).startswith("netem has no toy_drop_every: use link linkem")
    assert emulator_problem(cond, LINKEM, TOY_TABLE) is None


def test_linkem_schema_and_docs_follow_the_row():
    d = ToyDirection.model_validate({"delay_ms": 5, "toy_drop_every": 3})
    assert linkem_direction(TOY_TABLE, d) == {"delay_ms": 5.0, "toy_drop_every": 3}
    prop = json_schema(TOY_TABLE)["$defs"]["direction"]["properties"]["toy_drop_every"]
    assert (prop["type"], prop["minimum"], prop["maximum"]) == ("integer", 0, 1000)
    assert ("| `toy_drop_every` (`--toy-drop-every`) | integer | packets | 0 to 1000 packets | 0 | yes | no | "
            "drop every n-th packet (0: none); needs delay_ms |") in docs_table(TOY_TABLE)
    assert "toy_drop_every" not in docs_table()          # the project's own table is untouched
