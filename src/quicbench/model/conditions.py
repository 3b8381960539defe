"""The network condition model: what the link emulator applies on each router hop.

Values given at the top level of a hop apply to each direction ("symmetric", as netem on
both router interfaces does: delay 50 ms gives 100 ms RTT, loss 2 % drops 2 % each way);
``up`` (client -> server) and ``down`` (server -> client) override per direction.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError,
                      create_model, field_validator, model_validator)

from quicbench.model.impairments import REQUIRED, TABLE, Impairment, Table, check_rules


class KnownKeys(BaseModel):
    """Unknown keys are an error that lists the accepted ones."""

    @classmethod
    def accepted_keys(cls) -> list[str]:
        return list(cls.model_fields)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            accepted = cls.accepted_keys()
            unknown = [k for k in data if k not in accepted]
            if unknown:
                raise ValueError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                                 f"accepted: {', '.join(accepted)}")
        return data


class _Strict(KnownKeys):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Impairments(_Strict):
    """A model built from the impairment table: after the fields' own types and bounds, the
    table's needs and excludes (model.impairments.check_rules)."""
    table: ClassVar[Table] = TABLE
    group: ClassVar[str | None] = None

    @model_validator(mode="after")
    def _table_rules(self) -> "_Impairments":
        check_rules(self.table, self.group, {k: getattr(self, k) for k in type(self).model_fields})
        return self


class _QueueRules(_Impairments):
    @model_validator(mode="after")
    def _exactly_one(self) -> "_QueueRules":
        given = [k for k in type(self).model_fields if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(type(self).model_fields)}")
        return self


class _SpikesRules(_Impairments):
    @model_validator(mode="after")
    def _fits(self) -> "_SpikesRules":
        if self.duration_ms >= self.period_ms:
            raise ValueError(f"duration_ms ({self.duration_ms}) must be shorter than period_ms ({self.period_ms})")
        return self


MAX_TRACE_BYTES = 50_000_000
TRACE_PACKET_BYTES = 1500    # a mahimahi trace line is an opportunity for one packet of this size


@functools.lru_cache(maxsize=64)
def trace_mean_mbit(path: Path) -> float:
    """A mahimahi trace's mean capacity: its packets of 1500 bytes over its period (the last
    timestamp, after which it repeats)."""
    stamps = path.read_bytes().split()
    period_ms = max(int(stamps[-1]), 1)
    return len(stamps) * TRACE_PACKET_BYTES * 8 / (period_ms / 1000) / 1e6
TRIAL_KEY_SEPARATOR = "|"

CODEL_TARGET_MS = 5.0        # RFC 8289's defaults
CODEL_INTERVAL_MS = 100.0


def _path(v: Any) -> Any:
    if isinstance(v, (str, Path)):
        return Path(v)
    raise ValueError(f"expected a file path, got {type(v).__name__}")


def _annotation(row: Impairment, objects: dict[str, type[BaseModel]]) -> Any:
    """The pydantic type of one table row: strict (no bool from a string, no int from a float),
    bounded with the row's range."""
    if row.kind == "object":
        return objects[row.name]
    if row.kind == "enum":
        return Literal[row.choices]          # type: ignore[valid-type]
    if row.kind == "path":
        return Annotated[Path, BeforeValidator(_path)]
    base = {"number": float, "integer": int, "boolean": bool}[row.kind]
    return Annotated[base, Field(strict=True), AfterValidator(row.check)]


def _fields(table: Table, group: str | None, objects: dict[str, type[BaseModel]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in table.fields(group):
        ann = _annotation(row, objects)
        default = ... if row.default == REQUIRED else row.default
        out[row.key] = ((ann | None) if row.default is None else ann, Field(default, description=row.meaning))
    return out


OBJECT_RULES: dict[str, type[_Impairments]] = {"queue": _QueueRules, "spikes": _SpikesRules}
OBJECT_NAMES = {"loss": "LossModel", "queue": "Queue", "spikes": "Spikes", "onoff": "OnOff"}


def direction_model(table: Table, base: "type[_Impairments] | None" = None, name: str = "Direction") -> Any:
    """The model of one direction, built from an impairment table (its objects' models first)."""
    objects: dict[str, type[BaseModel]] = {}
    for row in table.fields():
        if row.kind == "object":
            objects[row.name] = create_model(
                OBJECT_NAMES.get(row.name, row.name.title().replace("_", "")),
                __base__=OBJECT_RULES.get(row.name, _Impairments), __module__=__name__,
                **_fields(table, row.name, objects))
            objects[row.name].table, objects[row.name].group = table, row.name
    model = create_model(name, __base__=base or DirectionRules, __module__=__name__,
                         **_fields(table, None, objects))
    model.table = table
    model.objects = objects
    return model


class DirectionRules(_Impairments):
    """What one direction of one hop does to packets: the fields come from the impairment table
    (model.impairments), the rules beyond the table's needs and excludes are here."""
    objects: ClassVar[dict[str, type[BaseModel]]] = {}

    @field_validator("trace", check_fields=False)
    @classmethod
    def _trace_readable(cls, v: Path | None) -> Path | None:
        """A mahimahi trace: a regular text file of ascending millisecond timestamps, one a line.
        Errors name the file and the line, never its content (it may be any file)."""
        if v is None:
            return v
        p = Path(v)
        if not p.is_file():
            raise ValueError(f"trace file '{v}' not found (or not a regular file)")
        if p.stat().st_size > MAX_TRACE_BYTES:
            raise ValueError(f"trace file '{v}' is larger than {MAX_TRACE_BYTES} bytes: not a mahimahi trace")
        try:
            text = p.read_bytes().decode("ascii")
        except OSError as e:
            raise ValueError(f"cannot read trace file '{v}': {e.strerror}") from None
        except UnicodeDecodeError:
            raise ValueError(f"trace file '{v}' is not a mahimahi trace (not ASCII digits)") from None
        lines = text.split()
        if not lines:
            raise ValueError(f"trace file '{v}' is empty")
        for n, tok in enumerate(lines, 1):
            if not tok.isdigit():
                raise ValueError(f"trace file '{v}': line {n} is not a millisecond timestamp "
                                 f"(a mahimahi trace has one integer per line)")
        return p.resolve()

    @model_validator(mode="after")
    def _codel_target_within_interval(self) -> "DirectionRules":
        codel = self.codel
        if codel is not None and codel[0] > codel[1]:
            raise ValueError(f"codel_target_ms ({codel[0]:g}) must not be above codel_interval_ms ({codel[1]:g})")
        return self

    @property
    def codel(self) -> tuple[float, float] | None:
        """CoDel's (target, interval) in ms when the queue discipline is CoDel."""
        if self.queue_discipline != "codel":
            return None
        return (self.codel_target_ms if self.codel_target_ms is not None else CODEL_TARGET_MS,
                self.codel_interval_ms if self.codel_interval_ms is not None else CODEL_INTERVAL_MS)

    @property
    def effective_loss(self) -> Any:
        """The loss model, with loss_pct as random loss (None without loss)."""
        if self.loss is not None:
            return self.loss
        if self.loss_pct:
            return self.objects["loss"](model="random", pct=self.loss_pct)
        return None

    @property
    def is_transparent(self) -> bool:
        return self == type(self)()

    def short(self) -> str:
        parts = []
        if self.delay_ms:
            parts.append(f"{self.delay_ms:g}ms")
        if self.jitter_ms:
            parts.append(f"±{self.jitter_ms:g}ms {self.jitter_dist}")
        loss = self.effective_loss
        if loss and loss.model == "random" and loss.pct:
            parts.append(f"{loss.pct:g}% loss")
        elif loss and loss.model == "gilbert_elliott":
            parts.append("GE loss")
        if self.rate_mbit:
            parts.append(f"{self.rate_mbit:g}Mbit/s")
        if self.codel:
            target, interval = self.codel
            parts.append("codel" + (f" {target:g}/{interval:g}ms" if (target, interval) != (CODEL_TARGET_MS, CODEL_INTERVAL_MS)
                                    else ""))
        if self.spikes:
            parts.append("spikes")
        if self.trace:
            parts.append(f"trace {self.trace.name}")
        return " ".join(parts) or "none"


Direction = direction_model(TABLE)
LossModel, Queue, Spikes, OnOff = (Direction.objects[g] for g in ("loss", "queue", "spikes", "onoff"))
DIRECTION_FIELDS = TABLE.direction_fields


@functools.cache
def _field_adapter(name: str) -> TypeAdapter:
    info = Direction.model_fields[name]
    return TypeAdapter(Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation)


def _check_field(name: str, value: Any) -> None:
    """One field given to both directions, checked once (its type, range and its object's own
    rules), so a bad value is reported once rather than for up and for down."""
    try:
        _field_adapter(name).validate_python(value)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in (name, *first["loc"]) if not str(x).startswith("function-"))
        got = first.get("input")
        tail = f" (got {got!r})" if got is not None and not isinstance(got, (dict, list)) else ""
        raise ValueError(f"{loc}: {first['msg'].removeprefix('Value error, ')}{tail}") from None


class Hop(_Strict):
    """One router hop: a condition for each direction."""
    up: Direction = Direction()
    down: Direction = Direction()

    @model_validator(mode="before")
    @classmethod
    def _symmetric(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in DIRECTION_FIELDS for k in data):
            return data
        data = dict(data)
        common = {k: data.pop(k) for k in list(data) if k in DIRECTION_FIELDS}
        for k, v in common.items():
            _check_field(k, v)
        for d in ("up", "down"):
            own = data.get(d) or {}
            if isinstance(own, BaseModel):
                own = own.model_dump(exclude_defaults=True)
            data[d] = {**common, **own}
        return data

    @classmethod
    def accepted_keys(cls) -> list[str]:
        return [*cls.model_fields, *DIRECTION_FIELDS]

    @property
    def symmetric(self) -> bool:
        return self.up == self.down

    def short(self) -> str:
        if self.symmetric:
            return self.up.short()
        return f"up {self.up.short()} / down {self.down.short()}"


MAX_BACKGROUND_FLOWS = 8       # all classes together: each is a process pair on a 2-core host
BACKGROUND_OBJECT_BYTES = 10_000_000   # background QUIC flows download this object again and again


class BackgroundFlow(_Strict):
    """Bulk downloads (server -> client) that share the bottleneck with every trial of the
    condition: started before the trial's transfer, measured during it (docs/plans.md,
    "Competing traffic")."""
    protocol: Literal["tcp", "h3"]
    cc: str | None = Field(None, description="tcp: the sender's congestion control (default: the plan's tcp_cc)")
    flows: int = Field(1, ge=1, le=MAX_BACKGROUND_FLOWS, strict=True)

    @model_validator(mode="after")
    def _cc_for_tcp(self) -> "BackgroundFlow":
        if self.cc is not None and self.protocol != "tcp":
            raise ValueError(f"cc: only tcp flows take a congestion control (quic-go's is its own); "
                             f"got cc = '{self.cc}' for {self.protocol}")
        return self

    def short(self) -> str:
        return f"{self.protocol}{':' + self.cc if self.cc else ''}x{self.flows}"


CONDITION_FIELDS = ("name", "background", "latency_probe", "rebind_at_s")    # of the condition, not of a hop


class Condition(_Strict):
    """A named network condition: one or two router hops (Go-Quick had two routers), and the
    traffic that competes with the trial on them."""
    name: str = Field("default", min_length=1, max_length=100)
    hops: list[Hop] = Field(default_factory=lambda: [Hop()], min_length=1, max_length=2)
    background: list[BackgroundFlow] = Field(default_factory=list, max_length=4)
    latency_probe: bool = Field(False, strict=True, description="one-way delay of a 100 pps probe during each transfer "
                                                   "(always on with background flows)")
    rebind_at_s: float | None = Field(None, gt=0, le=3600, strict=True, description="NAT rebinding: this long into each "
                                      "transfer the client's source port, as the server sees it, changes")

    @model_validator(mode="before")
    @classmethod
    def _single_hop_shorthand(cls, data: Any) -> Any:
        """Allow the fields of one hop at the top level: {name, delay_ms, loss_pct, ...}."""
        if isinstance(data, dict) and "hops" not in data:
            hop = {k: v for k, v in data.items() if k not in CONDITION_FIELDS}
            if hop:
                data = {**{k: v for k, v in data.items() if k in CONDITION_FIELDS}, "hops": [hop]}
        return data

    @field_validator("background")
    @classmethod
    def _background(cls, v: list[BackgroundFlow]) -> list[BackgroundFlow]:
        total = sum(b.flows for b in v)
        if total > MAX_BACKGROUND_FLOWS:
            raise ValueError(f"{total} background flows in all; accepted: at most {MAX_BACKGROUND_FLOWS}")
        return v

    @property
    def probes_latency(self) -> bool:
        return self.latency_probe or bool(self.background)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip() or TRIAL_KEY_SEPARATOR in v or not v.isprintable():
            raise ValueError(f"a condition name is printable text without '{TRIAL_KEY_SEPARATOR}' "
                             f"(it separates the parts of a trial key)")
        return v

    @classmethod
    def accepted_keys(cls) -> list[str]:
        return [*cls.model_fields, *Hop.accepted_keys()[len(Hop.model_fields):], "up", "down"]

    def short(self) -> str:
        link = " | ".join(h.short() for h in self.hops)
        link += " + bg " + ", ".join(b.short() for b in self.background) if self.background else ""
        return link + (f" + rebind@{self.rebind_at_s:g}s" if self.rebind_at_s else "")

    def per_router(self, n_routers: int) -> list[Hop]:
        """The hop each of n routers applies: one per router, or a one-hop condition on the
        first router with the others forwarding transparently."""
        if len(self.hops) == n_routers:
            return list(self.hops)
        if len(self.hops) == 1:
            return [self.hops[0]] + [Hop()] * (n_routers - 1)
        raise ValueError(f"condition '{self.name}' has {len(self.hops)} hops but the lab has {n_routers} router(s)")

    def headline(self) -> dict[str, Any]:
        """The numbers a reader sees for this condition, from the server -> client direction that
        carries the payload: one-way delay and jitter summed over hops, random loss combined over
        hops (NaN for a Gilbert-Elliott model), the bottleneck rate over both directions, whether
        the rate spikes, and the base round-trip time."""
        downs = [h.down for h in self.hops]
        losses = [d.effective_loss for d in downs]
        if any(l is not None and l.model != "random" for l in losses):
            loss = math.nan
        else:
            loss = 100.0 * (1 - math.prod(1 - (l.pct if l else 0.0) / 100 for l in losses))
        return {"delay_ms": sum(d.delay_ms for d in downs),
                "loss_pct": round(loss, 9) if not math.isnan(loss) else loss,
                "rate_mbit": self.bottleneck_mbit if self.bottleneck_mbit is not None else math.nan,
                "jitter_ms": sum(d.jitter_ms for d in downs),
                "spikes": any(d.spikes is not None for h in self.hops for d in (h.up, h.down)),
                "rtt_ms": self.base_rtt_ms}

    @property
    def impairs_packets(self) -> bool:
        """The path itself loses, duplicates, corrupts or reorders packets (a queue that overflows
        does not count: every bottleneck does that)."""
        return any(d.effective_loss is not None or d.duplicate_pct or d.corrupt_pct or d.jitter_ms
                   for h in self.hops for d in (h.up, h.down))

    @property
    def base_rtt_ms(self) -> float:
        return sum(h.up.delay_ms + h.down.delay_ms for h in self.hops)

    @property
    def bottleneck_mbit(self) -> float | None:
        rates = [d.rate_mbit for h in self.hops for d in (h.up, h.down) if d.rate_mbit]
        return min(rates) if rates else None

    @property
    def down_trace_mbit(self) -> float | None:
        """The lowest mean capacity of the downlink traces over the hops (None without a trace)."""
        rates = [trace_mean_mbit(h.down.trace) for h in self.hops if h.down.trace is not None]
        return min(rates) if rates else None

    @property
    def down_rate_mbit(self) -> float | None:
        """The mean rate a download (server -> client) can get: the lowest over the hops of the
        configured rate, less what spikes and off periods take. None without a rate (or with a trace)."""
        rates = []
        for h in self.hops:
            d = h.down
            if not d.rate_mbit:
                continue
            share = 1.0
            if d.spikes:
                share -= d.spikes.duration_ms / d.spikes.period_ms * (1 - d.spikes.rate_pct / 100)
            if d.onoff:
                share *= d.onoff.on_ms / (d.onoff.on_ms + d.onoff.off_ms)
            rates.append(d.rate_mbit * share)
        return min(rates) if rates else None


def default_queue_packets(d: Direction, mtu: int = 1500) -> int:
    """Queue size when none is given: one BDP at the rate over max(2*delay, 20 ms), at least 64 packets."""
    if d.queue is not None:
        if d.queue.packets:
            return d.queue.packets
        if d.queue.bytes:
            return max(1, d.queue.bytes // mtu)
    rate = d.rate_mbit or 1000.0
    window_ms = d.queue.ms if (d.queue and d.queue.ms) else max(2 * d.delay_ms, 20.0)
    return max(64, math.ceil(rate * 1e6 / 8 * window_ms / 1000 / mtu))
