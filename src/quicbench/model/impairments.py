"""The impairment table: every field a condition can set on one direction of a router hop.

One row per field: its name (``group.field`` inside the objects ``loss``, ``queue``, ``spikes``,
``onoff``), type, unit, bounds, default, meaning, the emulators that implement it, and the
fields it needs or excludes. Everything else is derived from this table:

- the pydantic model of a direction (``model.conditions.Direction`` and its objects), with its
  types (strict: no bool from a string, no int from a float), bounds (finite, stated in the
  error) and the rules "needs" and "excludes" (a field that would be ignored is refused);
- the CLI's condition flags (``cli/condflags.py``) and ``--up/--down FIELD=VALUE``;
- each emulator's support check, an allowlist (``emulator_problem``);
- linkem's JSON (``linkem_direction``) and the JSON schema linkem validates it against
  (``json_schema``, committed as ``linkem/schema.json``; a unit test keeps them equal);
- the table of docs/link.md (``docs_table``; a unit test keeps it equal).

A field counts as *given* when its value differs from its default, so a condition dumped with
every default and read back means the same.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# The emulators a row can name. The netem rows differ by where the kernel runs: this host's,
# User-Mode Linux's (`--kernel uml`) or an SSH host's (lab backend ssh); one driver builds the
# same qdiscs in each.
LINKEM, NETEM_HOST, NETEM_UML, NETEM_SSH = "linkem", "netem-host", "netem-uml", "netem-ssh"
EMULATORS: dict[str, str] = {LINKEM: "linkem", NETEM_HOST: "netem on this host's kernel",
                             NETEM_UML: "netem in User-Mode Linux", NETEM_SSH: "netem on the SSH hosts"}
NETEM = frozenset({NETEM_HOST, NETEM_UML, NETEM_SSH})
ALL = frozenset(EMULATORS)
LINKEM_ONLY = frozenset({LINKEM})

GROUPS = ("loss", "queue", "spikes", "onoff")      # the object-valued fields
REQUIRED = "required"                               # a group member without a default

Kind = Literal["number", "integer", "boolean", "enum", "path", "object"]


@dataclass(frozen=True)
class Impairment:
    """One row of the table."""
    name: str                          # "delay_ms", or "group.field" inside an object
    kind: Kind
    meaning: str
    unit: str = ""
    default: Any = None                # None: optional (absent); REQUIRED inside a group
    lo: float | None = None            # bounds, inclusive unless lo_open
    hi: float | None = None
    lo_open: bool = False
    choices: tuple[str, ...] = ()      # kind enum
    emulators: frozenset[str] = ALL    # which emulators implement a non-default value
    needs: tuple[str, ...] = ()        # sibling fields, any of which must be given ("queue_discipline=codel": that value)
    excludes: tuple[str, ...] = ()     # sibling fields that must not be given with it
    flag: str | None = None            # its CLI option (both directions), if it has one
    linkem: bool = True                # sent to linkem under this name (False: folded into another field)

    @property
    def group(self) -> str | None:
        return self.name.split(".")[0] if "." in self.name else None

    @property
    def key(self) -> str:
        """Its name inside its object."""
        return self.name.rsplit(".", 1)[-1]

    @property
    def bounds_text(self) -> str:
        if self.kind == "enum":
            return ", ".join(self.choices)
        if self.kind == "boolean":
            return "true, false"
        if self.lo is None and self.hi is None:
            return ""
        unit = f" {self.unit}" if self.unit and self.unit != "%" else self.unit
        lo = f"{_num(self.lo)}" if self.lo is not None else ""
        hi = f"{_num(self.hi)}" if self.hi is not None else ""
        if self.lo_open:
            return f"> {lo} and ≤ {hi}{unit}"
        return f"{lo} to {hi}{unit}"

    def check(self, v: Any) -> Any:
        """The value if within bounds, else a ValueError naming the accepted range."""
        if self.kind in ("number", "integer") and v is not None:
            if not math.isfinite(v) or (self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo)) \
                    or (self.hi is not None and v > self.hi):
                raise ValueError(f"{_num(v)} is out of range; accepted: {self.bounds_text} "
                                 f"({emulator_names(self.emulators)})")
        return v


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def emulator_names(emulators: frozenset[str]) -> str:
    names = ["linkem"] if LINKEM in emulators else []
    if NETEM <= emulators:
        names.append("netem")
    else:
        names += [EMULATORS[e] for e in sorted(emulators & NETEM)]
    return ", ".join(names) or "no emulator"


HOUR_MS = 3_600_000
PCT = dict(kind="number", unit="%", default=0.0, lo=0, hi=100)

IMPAIRMENTS: tuple[Impairment, ...] = (
    Impairment("delay_ms", "number", "one-way delay added to every packet (RTT = 2 x delay)", "ms", 0.0, 0, 60_000, flag="--delay"),
    Impairment("jitter_ms", "number", "delay variation: the spread of jitter_dist around delay_ms (netem keeps it "
               "in 32-bit nanoseconds)", "ms", 0.0, 0, 2_000, flag="--jitter"),
    Impairment("jitter_dist", "enum", "the jitter's distribution (netem's tables)", default="uniform",
               choices=("uniform", "normal", "pareto", "paretonormal"), needs=("jitter_ms",), flag="--jitter-dist"),
    Impairment("jitter_correlation_pct", needs=("jitter_ms",), meaning="correlation of each packet's jitter with "
               "the previous one's", **PCT),
    Impairment("reorder", "boolean", "let jitter reorder packets (false: a packet never leaves before the one sent "
               "before it)", default=False, needs=("jitter_ms",)),
    Impairment("loss_pct", meaning="random loss (shorthand for loss = {model = \"random\", pct})", excludes=("loss",),
               flag="--loss", linkem=False, **PCT),
    Impairment("loss", "object", "a loss model: random (optionally correlated) or Gilbert-Elliott"),
    Impairment("loss.model", "enum", "random or gilbert_elliott (netem's `loss gemodel p r 1-h 1-k`)",
               default="random", choices=("random", "gilbert_elliott")),
    Impairment("loss.pct", meaning="random loss", needs=("model=random",), **PCT),
    Impairment("loss.correlation_pct", meaning="correlation of each loss with the previous packet's",
               needs=("model=random",), **PCT),
    Impairment("loss.p_pct", meaning="Gilbert-Elliott: good to bad transition probability",
               needs=("model=gilbert_elliott",), **PCT),
    Impairment("loss.r_pct", **{**PCT, "default": 100.0}, meaning="Gilbert-Elliott: bad to good transition "
               "probability", needs=("model=gilbert_elliott",)),
    Impairment("loss.h_pct", meaning="Gilbert-Elliott: h, the loss probability in the bad state is 100 - h",
               needs=("model=gilbert_elliott",), **PCT),
    Impairment("loss.k_pct", **{**PCT, "default": 100.0}, meaning="Gilbert-Elliott: k, the loss probability in "
               "the good state is 100 - k", needs=("model=gilbert_elliott",)),
    Impairment("duplicate_pct", meaning="packets sent twice", **PCT),
    Impairment("corrupt_pct", meaning="packets with one bit flipped (their checksums drop them)", **PCT),
    Impairment("rate_mbit", "number", "bottleneck rate in IP bytes (plus rate_overhead_bytes a packet)", "Mbit/s",
               None, 0.001, 100_000, excludes=("trace",), flag="--rate"),
    Impairment("rate_overhead_bytes", "integer", "bytes the rate counts per packet beyond its IP length (14: the "
               "Ethernet header, as tbf/htb; 38: the whole Ethernet wire)", "bytes", 0, 0, 1_000,
               needs=("rate_mbit",)),
    Impairment("queue", "object", "the bottleneck queue's size, one of packets, bytes, ms (default one BDP at the "
               "rate over max(2 x delay, 20 ms), at least 64 packets)", needs=("rate_mbit", "trace")),
    Impairment("queue.packets", "integer", "queue size in packets", "packets", None, 1, 1_000_000),
    Impairment("queue.bytes", "integer", "queue size in bytes", "bytes", None, 1_500, 1_000_000_000),
    Impairment("queue.ms", "number", "queue size in ms at the rate", "ms", None, 0, 60_000, lo_open=True,
               flag="--queue-ms"),
    Impairment("queue_discipline", "enum", "how the bottleneck queue drops: drop-tail at its limit, or CoDel "
               "(RFC 8289) within it", default="fifo", choices=("fifo", "codel"), emulators=LINKEM_ONLY,
               needs=("rate_mbit", "trace")),
    Impairment("codel_target_ms", "number", "CoDel's target sojourn time (default 5)", "ms", None, 0, 10_000,
               lo_open=True, emulators=LINKEM_ONLY, needs=("queue_discipline=codel",)),
    Impairment("codel_interval_ms", "number", "CoDel's interval (default 100)", "ms", None, 0, 10_000,
               lo_open=True, emulators=LINKEM_ONLY, needs=("queue_discipline=codel",)),
    Impairment("spikes", "object", "CVart's spikes: every period_ms the rate falls to rate_pct % for the last "
               "duration_ms (netem: a tbf child whose rate a schedule changes)", needs=("rate_mbit",)),
    Impairment("spikes.period_ms", "number", "the spikes' period (netem's schedule changes its tbf twice a period: "
               "not faster than every 5 ms)", "ms", REQUIRED, 10, HOUR_MS, flag="--spikes"),
    Impairment("spikes.duration_ms", "number", "how long each spike lasts (shorter than period_ms)", "ms", 200.0,
               1, HOUR_MS),
    Impairment("spikes.rate_pct", **{**PCT, "default": 10.0}, meaning="the rate during a spike, in % of rate_mbit"),
    Impairment("onoff", "object", "on/off periods: during off nothing leaves the bottleneck", emulators=LINKEM_ONLY),
    Impairment("onoff.on_ms", "number", "how long the link is on (linkem keeps time to a fraction of a ms)", "ms",
               REQUIRED, 1, HOUR_MS, emulators=LINKEM_ONLY),
    Impairment("onoff.off_ms", "number", "how long the link is off", "ms", REQUIRED, 1, HOUR_MS,
               emulators=LINKEM_ONLY),
    Impairment("trace", "path", "a mahimahi trace: one millisecond timestamp a line, each an opportunity for one "
               "1500-byte packet; replaces rate_mbit", emulators=LINKEM_ONLY, flag="--trace"),
)


@dataclass(frozen=True)
class Table:
    """A table of impairments (the project's is ``TABLE``; a test may extend one with ``with_rows``)."""
    rows: tuple[Impairment, ...]
    by_name: dict[str, Impairment] = field(init=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {r.name: r for r in self.rows})
        for r in self.rows:
            if r.group is not None and self.by_name.get(r.group, r).kind != "object":
                raise ValueError(f"impairment {r.name}: no object row '{r.group}'")

    def with_rows(self, *rows: Impairment) -> "Table":
        return Table((*self.rows, *rows))

    def fields(self, group: str | None = None) -> list[Impairment]:
        """The rows of the direction itself (group None) or of one object."""
        return [r for r in self.rows if r.group == group]

    @property
    def direction_fields(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.fields())

    def __getitem__(self, name: str) -> Impairment:
        return self.by_name[name]


TABLE = Table(IMPAIRMENTS)


# -- rules ------------------------------------------------------------------------------------

def is_given(row: Impairment, value: Any) -> bool:
    return value is not None and (row.default in (None, REQUIRED) or value != row.default)


def _need_met(need: str, values: dict[str, Any], rows: dict[str, Impairment]) -> bool:
    name, _, want = need.partition("=")
    v = values.get(name)
    if want:
        return v == want
    return is_given(rows[name], v)


def _need_text(need: str) -> str:
    name, _, want = need.partition("=")
    return f"{name} = '{want}'" if want else name


def check_rules(table: Table, group: str | None, values: dict[str, Any]) -> None:
    """The needs and excludes of one direction or one object's fields (values by key): a field
    given without what it needs would be ignored, so it is refused."""
    rows = {r.key: r for r in table.fields(group)}
    for key, row in rows.items():
        v = values.get(key)
        if not is_given(row, v):
            continue
        label = f"{key} '{v}'" if row.kind == "enum" else key
        if row.needs and not any(_need_met(n, values, rows) for n in row.needs):
            raise ValueError(f"{label} needs {' or '.join(_need_text(n) for n in row.needs)} "
                             f"(without it, it would be ignored)")
        for other in row.excludes:
            if is_given(rows[other], values.get(other)):
                raise ValueError(f"give {key} or {other}, not both")


def without(table: Table, values: dict[str, Any], name: str) -> dict[str, Any]:
    """A direction's fields (as a plan writes them) without `name` and without every field that
    then lacks what it needs (it would be ignored)."""
    out = {k: v for k, v in values.items() if k != name}
    rows = {r.key: r for r in table.fields()}
    while True:
        drop = [k for k, v in out.items() if k in rows and rows[k].needs and is_given(rows[k], v)
                and not any(_need_met(n, out, rows) for n in rows[k].needs)]
        if not drop:
            return out
        out = {k: v for k, v in out.items() if k not in drop}


def given_fields(table: Table, direction: Any) -> list[tuple[Impairment, Any]]:
    """(row, value) of every field a direction gives, objects' members included."""
    out = []
    for row in table.fields():
        v = getattr(direction, row.key, None)
        if not is_given(row, v):
            continue
        out.append((row, v))
        if row.kind == "object":
            out += [(sub, getattr(v, sub.key)) for sub in table.fields(row.name) if is_given(sub, getattr(v, sub.key))]
    return out


def emulator_problem(condition: Any, emulator: str, table: Table = TABLE) -> str | None:
    """None if the emulator implements every field the condition gives (an allowlist: a field a
    row does not grant it is refused), else why not, naming the field and the emulators that do."""
    for hop in condition.hops:
        for d in (hop.up, hop.down):
            for row, v in given_fields(table, d):
                if emulator not in row.emulators:
                    what = f"{row.name} '{v}'" if row.kind == "enum" else row.name
                    driver = "netem" if emulator in NETEM else emulator
                    alt = sorted({"netem" if e in NETEM else e for e in row.emulators} - {driver})
                    return (f"{driver} has no {what}: use link {' or '.join(alt) or '(none)'} "
                            f"({EMULATORS[emulator]} does not implement it; {emulator_names(row.emulators)} does)")
    return None


# -- linkem -----------------------------------------------------------------------------------

def linkem_value(row: Impairment, v: Any) -> Any:
    if row.kind == "path":
        return str(v)
    if row.kind == "object":
        return {k: x for k, x in v.model_dump().items() if x is not None}
    return v


def linkem_direction(table: Table, direction: Any) -> dict[str, Any]:
    """linkem's JSON for one direction: every field the direction gives, under its table name
    (those folded into another, such as loss_pct into loss, are the model's to fold)."""
    return {row.name: linkem_value(row, v) for row, v in given_fields(table, direction)
            if row.group is None and row.linkem}


def _schema_of(table: Table, row: Impairment) -> dict[str, Any]:
    s: dict[str, Any]
    if row.kind == "object":
        members = table.fields(row.name)
        s = {"type": "object", "additionalProperties": False,
             "properties": {m.key: _schema_of(table, m) for m in members}}
        if required := [m.key for m in members if m.default == REQUIRED]:
            s["required"] = required
    elif row.kind == "enum":
        s = {"type": "string", "enum": list(row.choices)}
    elif row.kind == "boolean":
        s = {"type": "boolean"}
    elif row.kind == "path":
        s = {"type": "string"}
    else:
        s = {"type": row.kind}
        if row.lo is not None:
            s["exclusiveMinimum" if row.lo_open else "minimum"] = row.lo
        if row.hi is not None:
            s["maximum"] = row.hi
    if row.default is None:
        s["type"] = [s["type"], "null"]
    s["description"] = row.meaning + (f" ({row.unit})" if row.unit else "")
    return s


def json_schema(table: Table = TABLE) -> dict[str, Any]:
    """The JSON schema of linkem's configuration (`--config` and the control socket's `set`):
    the directions' fields, types and bounds of the table."""
    direction = {"type": "object", "additionalProperties": False,
                 "properties": {r.name: _schema_of(table, r) for r in table.fields() if r.linkem}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": "generated from src/quicbench/model/impairments.py by "
                        "`python -m quicbench.model.impairments schema`: do not edit",
            "title": "linkem configuration", "type": "object", "additionalProperties": False,
            "properties": {"up": {"$ref": "#/$defs/direction"}, "down": {"$ref": "#/$defs/direction"},
                           "seed": {"type": "integer", "minimum": 0, "maximum": 2 ** 64 - 1,
                                    "description": "restart both directions' random draws from this seed"}},
            "$defs": {"direction": direction}}


def schema_text(table: Table = TABLE) -> str:
    return json.dumps(json_schema(table), indent=1, ensure_ascii=False) + "\n"


SCHEMA_FILE = Path(__file__).resolve().parents[3] / "linkem" / "schema.json"


# -- docs and CLI -----------------------------------------------------------------------------

DOCS_BEGIN = "<!-- impairments: generated from src/quicbench/model/impairments.py; do not edit -->"
DOCS_END = "<!-- /impairments -->"


def _mark(row: Impairment, emulators: frozenset[str]) -> str:
    return "yes" if emulators <= row.emulators else "no"


def docs_table(table: Table = TABLE) -> str:
    """The table of docs/link.md, between its markers."""
    lines = [DOCS_BEGIN, "",
             "| field | type | unit | accepted | default | linkem | netem (host, UML, SSH hosts) | meaning |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table.rows:
        default = "" if r.default is None else ("required" if r.default == REQUIRED else
                                               json.dumps(r.default) if not isinstance(r.default, float) else _num(r.default))
        netem = ", ".join(_mark(r, frozenset({e})) for e in (NETEM_HOST, NETEM_UML, NETEM_SSH))
        netem = netem.split(", ")[0] if len(set(netem.split(", "))) == 1 else netem
        flag = f" (`{r.flag}`)" if r.flag else ""
        needs = f"; needs {' or '.join(_need_text(n) for n in r.needs)}" if r.needs else ""
        needs += f"; not with {', '.join(r.excludes)}" if r.excludes else ""
        lines.append(f"| `{r.name}`{flag} | {r.kind} | {r.unit} | {r.bounds_text} | {default} | "
                     f"{_mark(r, LINKEM_ONLY)} | {netem} | {r.meaning}{needs} |")
    return "\n".join([*lines, "", DOCS_END])


def cli_value(row: Impairment, text: str) -> Any:
    """A FIELD=VALUE of --up/--down as the row's type (the model takes no string for a number)."""
    try:
        if row.kind == "number":
            return float(text)
        if row.kind == "integer":
            return int(text)
    except ValueError:
        raise ValueError(f"{row.name}: '{text}' is not {'an integer' if row.kind == 'integer' else 'a number'}") \
            from None
    if row.kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{row.name}: '{text}' is not true or false")
        return text.lower() == "true"
    if row.kind == "object":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"{row.name}: give a JSON object, e.g. {row.name}='{{\"...\": 1}}'") from None
    return text


DOCS_FILE = SCHEMA_FILE.parents[1] / "docs" / "link.md"


def with_docs_table(text: str, table: Table = TABLE) -> str:
    """docs/link.md's text with its generated table replaced by the table's."""
    head, _, rest = text.partition(DOCS_BEGIN)
    _, _, tail = rest.partition(DOCS_END)
    return head + docs_table(table) + tail


def _main(argv: list[str]) -> int:
    if argv == ["schema"]:
        print(schema_text(), end="")
        return 0
    if argv == ["docs"]:
        print(docs_table())
        return 0
    if argv == ["write"]:
        SCHEMA_FILE.write_text(schema_text())
        DOCS_FILE.write_text(with_docs_table(DOCS_FILE.read_text()))
        print(f"wrote {SCHEMA_FILE} and the table of {DOCS_FILE}")
        return 0
    print("usage: python -m quicbench.model.impairments schema|docs|write (write: linkem/schema.json and "
          "docs/link.md's table, from this table)")
    return 2


if __name__ == "__main__":
    import sys
    raise SystemExit(_main(sys.argv[1:]))


__all__ = ["ALL", "EMULATORS", "IMPAIRMENTS", "Impairment", "LINKEM", "NETEM", "NETEM_HOST", "NETEM_SSH",
           "NETEM_UML", "REQUIRED", "TABLE", "Table", "check_rules", "docs_table", "emulator_problem",
           "json_schema", "linkem_direction", "without"]
