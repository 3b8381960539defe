"""Studies as data: a published experiment's reference values and the tables and figures that
set a run beside it, declared in a TOML file (docs/report.md, "Studies: declare your reference
values"). The analysis and the report know only the generic kinds of table and figure named here;
everything about one study (Go-Quick, CVart, DNCS-HTTP3, a user's own) is in its file.

A study file names its source (document, section, what its numbers are), its reference values
(a CSV beside it, ``reference = "reference.csv"``, or inline ``[[references]]`` rows: the
condition parameters and workload each number was measured at, the protocol, the metric, the
value and unit as printed, and where in the document the number is), how a run's cells match
them (``[match]``), when a run whose plan names no study uses it (``[applies]``), and the tables
(``[[tables]]``) and figures (``[[figures]]``) to draw.

Built-in studies live in ``quicbench/data/studies/<name>/study.toml``; a plan names one with
``study = "go-quick"`` or names a file (``study = "my-study.toml"``, relative to the plan).
"""

from __future__ import annotations

import csv
import io
import os
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from quicbench.errors import QuicbenchError, format_validation_error
from quicbench.model import columns
from quicbench.model.conditions import KnownKeys

MAX_STUDY_BYTES = 1_000_000
# condition parameters a reference row can give and a study can match on (the headline values of
# model/conditions.py: delay and loss server->client, the bottleneck rate)
CONDITION_PARAMS = ("delay_ms", "loss_pct", "rate_mbit", "jitter_ms", "spikes")
# workload attributes a reference row can give and a study can match on (model/plan.py's Workload)
WORKLOAD_ATTRS = ("kind", "size_bytes", "count", "connections", "page", "player", "mode")
# the columns of a reference CSV (or the keys of an inline [[references]] row)
REFERENCE_FIELDS = ("protocol", "seed_protocol", "condition", *CONDITION_PARAMS, "size", *WORKLOAD_ATTRS,
                    "metric", "quantity", "value", "unit", "where", "note")
# the per-trial metrics a study can name: the numeric row columns and those derived from a row's own
METRIC_NAMES = columns.metric_names()


def _known_metric(v: str) -> str:
    if v not in METRIC_NAMES:
        raise ValueError(f"unknown metric {v!r}: a numeric column of docs/data.md")
    return v


# a numeric row column (docs/data.md), refused by name otherwise
MetricName = Annotated[str, AfterValidator(_known_metric)]
TABLE_KINDS = ("reference_columns", "reference_vs_ours", "claims", "variants", "explained")
FIGURE_KINDS = ("metric_vs_condition", "relative_to_best", "metric_vs_parameter", "timeseries")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,47}$")

# units a reference value can be converted from to a metric's unit (the columns table's): factor
# to a base unit per dimension. A unit not here (or of another dimension) is shown as printed.
_UNIT_BASE: dict[str, tuple[str, float]] = {
    "s": ("time", 1.0), "sec": ("time", 1.0), "ms": ("time", 1e-3), "msec": ("time", 1e-3),
    "Mbit/s": ("rate", 1e6), "Mb/s": ("rate", 1e6), "Mbps": ("rate", 1e6), "kbit/s": ("rate", 1e3),
    "kbps": ("rate", 1e3), "Gbit/s": ("rate", 1e9),
    "B": ("bytes", 1.0), "kB": ("bytes", 1e3), "KB": ("bytes", 1e3), "MB": ("bytes", 1e6), "GB": ("bytes", 1e9),
    "": ("count", 1.0), "count": ("count", 1.0), "requests": ("count", 1.0), "frames": ("count", 1.0),
    "%": ("percent", 1.0),
}
METRIC_UNITS = {c.name: c.unit for c in (*columns.COLUMNS, *columns.derived("row"))}


def convert(value: float | None, unit: str, metric: str) -> float | None:
    """A reference value in the metric's unit (the columns table's), or None when the units are of
    different dimensions or unknown (then the report shows the value as printed)."""
    if value is None or not metric:
        return None
    target = METRIC_UNITS.get(metric)
    src, dst = _UNIT_BASE.get(unit.strip()), _UNIT_BASE.get(target) if target is not None else None
    if src is None or dst is None or src[0] != dst[0]:
        return None
    return value * src[1] / dst[1]


class _Strict(KnownKeys):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Reference(_Strict):
    """One number of the study (a row of its reference CSV). Empty fields are None: an empty
    condition parameter or workload attribute matches any value."""
    protocol: str
    seed_protocol: str | None = None       # the document's own name for the protocol (https, quic...)
    condition: str | None = None           # the document's label of the condition (12.5_0.5)
    delay_ms: float | None = None
    loss_pct: float | None = None
    rate_mbit: float | None = None
    jitter_ms: float | None = None
    spikes: bool | None = None
    size: str | None = None                # the document's label of the object size (1MB)
    kind: str | None = None
    size_bytes: int | None = None
    count: int | None = None
    connections: str | None = None
    page: str | None = None
    player: str | None = None
    mode: str | None = None
    metric: str | None = None              # the row column it is set beside (None: quicbench has none)
    quantity: str                          # the document's name for the quantity
    value: float | None = None             # None: the document gives no number (note says why)
    unit: str = ""                         # as printed
    where: str                             # table / figure / page / section of the document
    note: str = ""

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str | None) -> str | None:
        if v is not None and v not in METRIC_NAMES:
            raise ValueError(f"unknown metric {v!r}: a numeric column of docs/data.md (e.g. goodput_mbps, "
                             f"page_load_ms, startup_s), or empty when quicbench measures nothing like it")
        return v

    @model_validator(mode="after")
    def _explained(self) -> "Reference":
        if self.value is None and not self.note:
            raise ValueError(f"{self.quantity} ({self.protocol}, {self.where}): no value and no note saying why; "
                             f"a number the document does not give is said so in 'note'")
        return self

    @property
    def value_in_metric_unit(self) -> float | None:
        return convert(self.value, self.unit, self.metric or "")

    def value_text(self) -> str:
        if self.value is None:
            return "–"
        return f"{self.value:g}" + (f" {self.unit}" if self.unit else "")


class Applies(_Strict):
    """When a run whose plan names no study uses this one."""
    plan_names: list[str] = Field(default_factory=list, description="the plan's name contains one of these")
    condition_names: bool = Field(False, description="a condition's name matches match.condition_name")


class Match(_Strict):
    """How a run's cells are matched with reference values."""
    condition: list[Literal["delay_ms", "loss_pct", "rate_mbit", "jitter_ms", "spikes"]] = Field(
        default_factory=list, description="condition parameters compared (an empty reference field matches any)")
    condition_name: str | None = Field(None, description="a regular expression whose named groups give a "
                                                         "condition's parameters from its name (tried first)")
    tolerance: dict[str, float] = Field(default_factory=dict, description="absolute tolerance per parameter")
    workload: list[Literal["kind", "size_bytes", "count", "connections", "page", "player", "mode"]] = Field(
        default_factory=lambda: ["kind"], description="workload attributes compared")
    size_tolerance_pct: float = Field(0.0, ge=0, lt=100, description="size_bytes within this % of the reference's")

    @field_validator("condition_name")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            rx = re.compile(v)
        except re.error as e:
            raise ValueError(f"condition_name is not a regular expression: {e}") from None
        unknown = set(rx.groupindex) - set(CONDITION_PARAMS)
        if unknown:
            raise ValueError(f"condition_name: unknown group(s) {', '.join(sorted(unknown))}; "
                             f"accepted: {', '.join(CONDITION_PARAMS)}")
        return v

    @field_validator("tolerance")
    @classmethod
    def _tolerance(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k in v if k not in CONDITION_PARAMS]
        if bad:
            raise ValueError(f"tolerance: unknown parameter {bad[0]!r}; accepted: {', '.join(CONDITION_PARAMS)}")
        return v


class Way(_Strict):
    """A way of measuring (a column group of a reference_vs_ours table): the run's workloads
    with these attributes; per protocol when the document measured protocols differently."""
    name: str
    workload: dict[str, str | int | float] = Field(default_factory=dict)
    protocols: dict[str, dict[str, str | int | float]] = Field(
        default_factory=dict, description="protocol -> workload attributes for that protocol (replace workload)")

    @field_validator("workload")
    @classmethod
    def _attrs(cls, v: dict) -> dict:
        bad = [k for k in v if k not in WORKLOAD_ATTRS]
        if bad:
            raise ValueError(f"workload: unknown attribute {bad[0]!r}; accepted: {', '.join(WORKLOAD_ATTRS)}")
        return v


def _known_keys(v: dict, accepted, where: str, what: str) -> dict:
    """v itself, or the error naming its first key that is not accepted, with the accepted ones."""
    bad = [k for k in v if k not in accepted]
    if bad:
        raise ValueError(f"{where}: unknown {what} {bad[0]!r}; accepted: {', '.join(accepted)}")
    return v


class Check(_Strict):
    """One machine-checkable part of a claim: protocol a's metric is higher (or lower) than b's, or
    the two are equivalent. A magnitude word of the claim is a stated threshold: ``ratio`` (a/b at
    least this for "higher", at most this for "lower": "much higher" = 1.25, shown by a one-sided
    test at that bound) or ``margin_pct`` (the equivalence margin of "very close"; default: the
    report's), with ``threshold_source`` saying where the number comes from. Each protocol's trials
    come from the run's workloads with ``workload``'s attributes, or a protocol's own in
    ``protocols`` (the seed's method: its h2 from Chrome page loads, its h1 from getFiles); ``label``
    names that way of measuring ("the seed's pairing", "like for like")."""
    metric: MetricName
    a: str
    b: str
    expect: Literal["higher", "lower", "equivalent"]
    conditions: dict[str, list[float | bool] | Literal["nonzero"]] = Field(
        default_factory=dict, description="condition parameter -> the values the claim is about, or \"nonzero\" "
                                          "(none: every cell)")
    ratio: float | None = Field(None, gt=0, description="the claim's magnitude as a bound on a/b")
    margin_pct: float | None = Field(None, gt=0, lt=100, description="equivalence margin of this check, %")
    threshold_source: str = Field("", description="where the ratio or margin comes from")
    label: str = Field("", description="the way of measuring: \"the seed's pairing\", \"like for like\"")
    workload: dict[str, str | int | float] = Field(default_factory=dict)
    protocols: dict[str, dict[str, str | int | float]] = Field(
        default_factory=dict, description="protocol -> workload attributes for that protocol (replace workload)")

    @field_validator("conditions")
    @classmethod
    def _conds(cls, v: dict) -> dict:
        return _known_keys(v, CONDITION_PARAMS, "conditions", "parameter")

    @field_validator("workload")
    @classmethod
    def _attrs(cls, v: dict) -> dict:
        return _known_keys(v, WORKLOAD_ATTRS, "workload", "attribute")

    @field_validator("protocols")
    @classmethod
    def _proto_attrs(cls, v: dict) -> dict:
        for proto, attrs in v.items():
            _known_keys(attrs, WORKLOAD_ATTRS, f"protocols.{proto}", "attribute")
        return v

    @model_validator(mode="after")
    def _threshold(self) -> "Check":
        if self.ratio is not None:
            if self.expect == "equivalent":
                raise ValueError("ratio: a bound for \"higher\" or \"lower\"; an equivalence claim takes margin_pct")
            if self.expect == "higher" and self.ratio <= 1:
                raise ValueError(f"ratio {self.ratio:g}: \"higher\" takes a bound above 1 (\"much higher\": 1.25)")
            if self.expect == "lower" and self.ratio >= 1:
                raise ValueError(f"ratio {self.ratio:g}: \"lower\" takes a bound below 1 (\"much lower\": 0.8)")
        if self.margin_pct is not None and self.expect != "equivalent":
            raise ValueError("margin_pct: only for expect = \"equivalent\"; a higher/lower claim takes ratio")
        if (self.ratio is not None or self.margin_pct is not None) and not self.threshold_source:
            raise ValueError("threshold_source: say where the ratio or margin comes from (the claim's word and "
                             "whose reading it is)")
        return self

    def workload_for(self, protocol: str) -> dict[str, str | int | float]:
        """The workload attributes this check takes the protocol's trials from."""
        return self.protocols.get(protocol, self.workload)

    def threshold_text(self) -> str:
        if self.ratio is not None:
            return f"{'≥' if self.expect == 'higher' else '≤'} ×{self.ratio:g}"
        if self.margin_pct is not None:
            return f"within ±{self.margin_pct:g} %"
        return ""


class Claim(_Strict):
    """A conclusion of the document, quoted, with the checks that test it on a run's cells."""
    text: str
    where: str
    checks: list[Check] = Field(default_factory=list)
    note: str = ""


class Variant(_Strict):
    """A variant of a condition that changes one factor: its name is the base condition's + suffix."""
    suffix: str = Field(min_length=1, max_length=40)
    name: str                                  # what it changes, in words

    @field_validator("suffix")
    @classmethod
    def _suffix(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", v):
            raise ValueError(f"suffix {v!r}: letters, digits and _ . + - (part of a condition's name)")
        return v


class Explanation(_Strict):
    """A measurement on the same loads that can explain a decided difference of an explained
    table's metrics: the row column, its words, which way of it makes a load faster (fewer
    connections, a shorter handshake, less stalling: ``lower``; more coalescing: ``higher``), the
    table metrics it can explain, and the mechanism in words. It explains a difference when its
    own comparison of the same two protocols on the same cell is decided (different, Holm over
    its own family) and points the same way: toward the protocol that was faster."""
    metric: MetricName
    name: str
    faster_when: Literal["lower", "higher"]
    explains: list[str] = Field(min_length=1)
    why: str = ""


class Table(_Strict):
    """A table the study draws. reference_columns: the reference beside the report's own table of
    `metric` (Table 1 for goodput). reference_vs_ours: per group and row (condition or metric), the
    reference per protocol with its ranking beside ours per way, with our ranking and verdict.
    claims: each of the study's claims checked on the run's cells. variants: what one factor does
    (needs no reference values): each cell of a variant condition (base name + suffix) over the
    same cell of its base condition, on each metric, with the ratio's CI and the verdict.
    explained (needs no reference values): per cell (condition x workload of `workload_kind`) and
    pair of protocols, each metric's verdict, and for every decided difference the `explanations`
    that explain it (Explanation), or "unexplained"."""
    kind: Literal["reference_columns", "reference_vs_ours", "claims", "variants", "explained"]
    id: str = ""
    title: str = ""
    note: str = ""
    metric: str | None = None                  # reference_columns
    metrics: list[str] = Field(default_factory=list)   # reference_vs_ours
    # reference_vs_ours with rows = "metric": the document's quantities quicbench has no metric for,
    # shown with ours empty
    quantities: list[str] = Field(default_factory=list)
    rows: Literal["condition", "metric"] = "condition"
    group_by: Literal["size", "quantity", "kind", "none"] = "none"
    group_title: str = "{group}"
    ways: list[Way] = Field(default_factory=lambda: [Way(name="ours")])
    variants: list[Variant] = Field(default_factory=list)   # variants
    # explained: the pairs compared, a vs b ([] : every pair of the run's protocols, the later in
    # the run's order against the earlier), the workloads (of this kind; none: all), the
    # measurements that may explain a difference
    pairs: list[tuple[str, str]] = Field(default_factory=list)
    workload_kind: str | None = None
    explanations: list[Explanation] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "Table":
        for m in ([self.metric] if self.metric else []) + list(self.metrics):
            if m not in METRIC_NAMES:
                raise ValueError(f"unknown metric {m!r}: a numeric column of docs/data.md")
        if self.kind == "reference_columns" and not self.metric:
            raise ValueError("reference_columns needs metric = \"...\"")
        if self.kind in ("reference_vs_ours", "variants", "explained") and not self.metrics:
            raise ValueError(f"{self.kind} needs metrics = [...]")
        if self.kind == "variants" and not self.variants:
            raise ValueError("variants needs variants = [{ suffix = \"_noreorder\", name = \"...\" }, ...]")
        if self.kind == "explained":
            if not self.explanations:
                raise ValueError("explained needs explanations = [{ metric = \"page_connections\", name = \"...\", "
                                 "faster_when = \"lower\", explains = [...] }, ...]")
            for e in self.explanations:
                bad = [m for m in e.explains if m not in self.metrics]
                if bad:
                    raise ValueError(f"explanation {e.metric}: explains {bad[0]!r}, not a metric of the table; "
                                     f"accepted: {', '.join(self.metrics)}")
            for pair in self.pairs:
                if pair[0] == pair[1]:
                    raise ValueError(f"pairs: {pair[0]} vs itself; a pair is two protocols")
        if self.kind != "reference_columns" and not NAME_RE.match(self.id or ""):
            raise ValueError(f"id {self.id!r}: 1-48 characters of a-z, 0-9, '-', '_', '.' (an HTML anchor)")
        return self


class Figure(_Strict):
    """A figure the study draws (a generic kind the report knows):
    metric_vs_condition: each metric's mean and 95 % CI vs condition, one panel per workload, one
    line per protocol, the reference as hollow markers; relative_to_best: the metric as % of the
    protocol's best workload in each condition, vs workload; metric_vs_parameter: metrics vs each
    condition parameter swept with the others held fixed; timeseries: the median trial's
    throughput over time."""
    kind: Literal["metric_vs_condition", "relative_to_best", "metric_vs_parameter", "timeseries"]
    id: str
    section: str
    heading: str
    title: str
    caption: str
    metrics: list[str] = Field(default_factory=lambda: ["goodput_mbps"])
    metric_labels: dict[str, str] = Field(default_factory=dict, description="axis labels in the study's words")
    workload_kinds: list[str] = Field(default_factory=lambda: ["objects"])
    reference: bool = False                    # draw the study's matching reference values
    reference_label: str = ""                  # their legend entry
    reference_note: str = ""                   # a caption sentence when they are drawn
    xlabel: str = ""                           # the condition axis when every condition matches condition_name
    log: bool = True
    # where it goes: main (before the heatmaps), views (after them), or kind (in the section of its
    # workload kind: section "video" or "pages"); default by kind of figure
    place: Literal["main", "views", "kind"] | None = None

    @model_validator(mode="after")
    def _check(self) -> "Figure":
        for m in self.metrics:
            if m not in METRIC_NAMES:
                raise ValueError(f"unknown metric {m!r}: a numeric column of docs/data.md")
        if not NAME_RE.match(self.section):
            raise ValueError(f"section {self.section!r}: 1-48 characters of a-z, 0-9, '-', '_', '.'")
        return self


class Study(_Strict):
    name: str
    title: str
    label: str = "reference"                   # the reference's columns: "seed h1"
    document: str
    section: str = ""
    source: str = ""                           # one sentence shown with the reference values
    reference: str | None = None               # a CSV beside this file
    references: list[Reference] = Field(default_factory=list)
    applies: Applies = Field(default_factory=Applies)
    match: Match = Field(default_factory=Match)
    tables: list[Table] = Field(default_factory=list)
    figures: list[Figure] = Field(default_factory=list)
    claims: list[Claim] = Field(default_factory=list)
    path: str = ""                             # the file it was read from (set by load_study)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"name {v!r}: 1-48 characters of a-z, 0-9, '-', '_', '.'")
        return v

    @property
    def figure_sections(self) -> list[str]:
        return list(dict.fromkeys(f.section for f in self.figures))


# -- reading ---------------------------------------------------------------------------------------
def _cell(field: str, text: str) -> Any:
    """A CSV cell as the Reference field wants it (empty: None)."""
    text = text.strip()
    if text == "":
        return None
    if field == "spikes":
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"spikes: {text!r}; accepted: true/false (1/0)")
    return text


def read_reference_csv(text: str, source: str) -> list[Reference]:
    """The rows of a reference CSV (columns REFERENCE_FIELDS, any order, empty cells allowed;
    lines starting with # are comments)."""
    lines = [l for l in text.splitlines() if not l.lstrip().startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    unknown = [f for f in (reader.fieldnames or []) if f not in REFERENCE_FIELDS]
    if unknown:
        raise QuicbenchError(f"{source}: unknown column {unknown[0]!r}; accepted: {', '.join(REFERENCE_FIELDS)}")
    out = []
    for i, row in enumerate(reader, start=2):
        try:
            data = {k: _cell(k, v or "") for k, v in row.items() if k is not None}
            data = {k: v for k, v in data.items() if v is not None}
            out.append(Reference.model_validate(data))
        except (ValidationError, ValueError) as e:
            msg = format_validation_error(e, f"{source} line {i}") if isinstance(e, ValidationError) else \
                f"{source} line {i}: {e}"
            raise QuicbenchError(msg) from None
    return out


def load_study(path: Path | str) -> Study:
    """Read and check a study file (and its reference CSV); errors name the file and the field."""
    path = Path(path)
    try:
        if not path.is_file():
            raise FileNotFoundError
        if path.stat().st_size > MAX_STUDY_BYTES:
            raise QuicbenchError(f"{path}: a study file is at most {MAX_STUDY_BYTES} bytes")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise QuicbenchError(f"study file '{path}' not found") from None
    except (UnicodeDecodeError, PermissionError) as e:
        raise QuicbenchError(f"study file '{path}' cannot be read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise QuicbenchError(f"{path}: not valid TOML: {e}") from None
    data["path"] = str(path)
    ref = data.get("reference")
    if isinstance(ref, str):
        csv_path = path.parent / ref
        try:
            rows = read_reference_csv(csv_path.read_text(encoding="utf-8"), str(csv_path))
        except OSError as e:
            raise QuicbenchError(f"{path}: reference: cannot read '{csv_path}': {e.strerror}") from None
        data["references"] = [*rows, *data.get("references", [])]
    try:
        return Study.model_validate(data)
    except ValidationError as e:
        raise QuicbenchError(format_validation_error(e, str(path))) from None


def builtin_dir() -> Path:
    return Path(str(resources.files("quicbench").joinpath("data/studies")))


def search_dirs() -> list[Path]:
    """Where a study named in a plan is looked for: $QUICBENCH_STUDIES (':'-separated), then the
    studies that come with quicbench."""
    extra = [Path(p) for p in os.environ.get("QUICBENCH_STUDIES", "").split(":") if p]
    return [*extra, builtin_dir()]


def _candidates(name: str) -> list[Path]:
    return [p for d in search_dirs() for p in (d / name / "study.toml", d / f"{name}.toml")]


def is_path(ref: str) -> bool:
    return "/" in ref or ref.endswith(".toml")


def find_study(ref: str, base: Path | None = None) -> Study:
    """A study by name (a directory or NAME.toml in search_dirs()) or by path (relative to base)."""
    if is_path(ref):
        p = Path(ref)
        return load_study(p if p.is_absolute() or base is None else base / p)
    for p in _candidates(ref):
        if p.is_file():
            return load_study(p)
    raise QuicbenchError(f"study: unknown study '{ref}', accepted: {', '.join(available())} "
                         f"or a study file (docs/report.md, \"Studies\")")


def available() -> list[str]:
    """Names of the studies found in search_dirs()."""
    names: list[str] = []
    for d in search_dirs():
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if (p / "study.toml").is_file():
                names.append(p.name)
            elif p.suffix == ".toml" and p.is_file():
                names.append(p.stem)
    return list(dict.fromkeys(names))


def builtin_studies() -> list[Study]:
    """Every study found by name, in search order (for [applies] when a plan names none)."""
    return [find_study(n) for n in available()]

