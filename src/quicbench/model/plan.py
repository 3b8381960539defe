"""Experiment plans: protocols x workloads x conditions x repetitions, from TOML files.

The plan model is pydantic; errors name the file, the field and what is accepted.
``expand`` turns a plan into the ordered list of trials the runner executes.
"""

from __future__ import annotations

import random
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from quicbench.model.conditions import Condition, KnownKeys
from quicbench.errors import QuicbenchError, format_validation_error
from quicbench.model.units import parse_size, size_label
from quicbench.model.video import DEFAULT_LADDER, VideoSpec, validate

PROTOCOLS = ("h1", "h2", "h3")
CONNECTION_POLICIES = ("shared", "per-object")
# Streams in flight on one h2 connection: Caddy's (Go's) 250; nginx and Apache are configured to
# the same, so that a workload's `parallel` means the same on every server.
H2_MAX_STREAMS = 250
LIVE_SOURCE_SEGMENTS = 4   # a live stream loops a VOD of this many segments (16 s at 4 s)
Protocol = Literal["h1", "h2", "h3"]


class _Strict(KnownKeys):
    model_config = ConfigDict(extra="forbid")


class Workload(_Strict):
    """What one trial transfers.

    kind = "objects": Go-Quick's getFiles — `count` copies of an object of `size`, at most
    `parallel` in flight, fetched by the load client.
    kind = "page": a page load in a browser — `page = "gallery"` is Go-Quick's
    `<size>/index<count>.html` (count images of size); `page = "realistic"` is a generated
    page of HTML, CSS, JS, fonts and images like DNCS's (about 10 MB in 125 requests).
    kind = "video": adaptive streaming in a browser (docs/video.md) — `player` hls (hls.js) or
    dashjs (dash.js), `mode` vod (the whole `duration_s` VOD, played to its end) or live
    (watched for `duration_s` from a real-time live publisher), `segment_s` seconds per
    segment, `ladder` [[height, kbit/s], ...] and `codec`.
    """
    kind: Literal["objects", "page", "video"] = "objects"
    size: str = "100KB"
    count: int = Field(1, ge=1, le=100_000)
    parallel: int | Literal["all"] = "all"
    page: Literal["gallery", "realistic"] = "gallery"
    # connection policy: "shared" (h2/h3 one multiplexed connection, h1 up to `parallel` reused
    # ones), "per-object" (a new connection and handshake per object, Go-Quick's getFiles) or
    # "pool:N" (at most N connections, requests spread over them)
    connections: str = "shared"

    @field_validator("connections")
    @classmethod
    def _connections(cls, v: str) -> str:
        if v in CONNECTION_POLICIES:
            return v
        if v.startswith("pool:"):
            n = v[5:]
            if n.isdigit() and int(n) >= 1:
                return f"pool:{int(n)}"
        raise ValueError(f"connections must be one of {', '.join(CONNECTION_POLICIES)} or pool:N with N >= 1, "
                         f"got {v!r}")

    @model_validator(mode="after")
    def _page_connections(self) -> "Workload":
        if self.kind in ("page", "video") and self.connections != "shared":
            raise ValueError(f"connections: a {self.kind} load lets the browser manage its connections; "
                             f"accepted: shared (got {self.connections!r})")
        return self

    @property
    def connection_kind(self) -> str:
        """shared, per-object or pool (without its size)."""
        return self.connections.split(":", 1)[0]
    player: Literal["hls", "dashjs"] = "hls"
    mode: Literal["vod", "live"] = "vod"
    duration_s: float = Field(60.0, gt=0, le=3600)
    segment_s: float = Field(4.0, gt=0, le=20)
    ladder: list[tuple[int, int]] | None = None
    codec: str = "h264"

    @model_validator(mode="after")
    def _video(self) -> "Workload":
        if self.kind == "video":
            try:
                validate(self.video_spec(), where="workloads")
            except QuicbenchError as e:
                raise ValueError(str(e)) from None
        return self

    def video_spec(self):
        """The encoded ladder a video workload plays (VOD and live of equal parameters share it)."""
        ladder = tuple(tuple(r) for r in self.ladder) if self.ladder else DEFAULT_LADDER
        segs = max(1, round(self.duration_s / self.segment_s)) if self.segment_s > 0 else 0
        if self.mode == "live":
            segs = LIVE_SOURCE_SEGMENTS     # the loop the live publisher repeats, whatever is watched
        dur = segs * self.segment_s
        return VideoSpec(duration_s=dur, segment_s=self.segment_s, ladder=ladder, codec=self.codec)

    @field_validator("size")
    @classmethod
    def _size(cls, v: str) -> str:
        try:
            return size_label(parse_size(v))
        except QuicbenchError as e:
            raise ValueError(str(e)) from None

    @field_validator("parallel")
    @classmethod
    def _parallel(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"parallel must be at least 1 or 'all', got {v}")
        return v

    @property
    def size_bytes(self) -> int:
        return parse_size(self.size)

    @property
    def parallelism(self) -> int:
        return self.count if self.parallel == "all" else min(self.parallel, self.count)

    @property
    def label(self) -> str:
        if self.kind == "video":
            custom = "" if (self.ladder is None and self.codec == "h264") else f":{self.video_spec().key[:6]}"
            return f"video:{self.player}:{self.mode}:{self.duration_s:g}s:seg{self.segment_s:g}{custom}"
        if self.kind == "page":
            return "page:realistic" if self.page == "realistic" else f"page:{self.count}x{self.size}"
        policy = "" if self.connections == "shared" else "/" + self.connections.replace("pool:", "pool")
        return f"{self.count}x{self.size}/p{self.parallelism}{policy}"

    @property
    def page_path(self) -> str:
        """URL path of the page a browser loads."""
        return "/realistic/index.html" if self.page == "realistic" else f"/{self.size}/index{self.count}.html"

    @property
    def payload_bytes(self) -> int:
        return self.size_bytes * self.count


class Plan(_Strict):
    name: str = "plan"
    description: str = ""
    protocols: list[Protocol] = Field(default_factory=lambda: list(PROTOCOLS), min_length=1)
    servers: dict[Protocol, str | list[str]] = Field(
        default_factory=dict, description="server per protocol (a list sweeps servers); default caddy")
    client: str = "qb-load"
    workloads: list[Workload] = Field(min_length=1)
    conditions: list[Condition] = Field(default_factory=lambda: [Condition(name="none")], min_length=1)
    repetitions: int = Field(3, ge=1, le=1000)
    seed: int = 1
    order: Literal["randomized", "sequential"] = "randomized"
    trial_timeout_s: float = Field(120.0, gt=0)
    warmup: int = Field(0, ge=0, le=10, description="unrecorded warm-up trials per condition")
    link: str = "auto"
    hops: Literal[1, 2] = 1
    tcp_cc: str = "cubic"
    offload: bool = Field(False, description="TSO/GSO/GRO on in the lab (GSO super-frames; link linkem)")
    calibrate: bool = Field(False, description="measure each condition (ping, iperf3) before its first trial")
    capture: bool = Field(False, description="tcpdump every trial in the client node; wire metrics")
    capture_keep: Literal["compressed", "raw", "delete"] = "compressed"
    capture_router: bool = Field(False, description="also capture at the router (kept, not analysed)")
    qlog: bool = Field(False, description="the load client writes a qlog per HTTP/3 connection")
    keylog: bool = Field(False, description="the load client writes a TLS key log per trial")

    @property
    def options(self) -> "TrialOptions":
        return TrialOptions(capture=self.capture, capture_keep=self.capture_keep,
                            capture_router=self.capture_router, qlog=self.qlog, keylog=self.keylog)

    @model_validator(mode="after")
    def _check(self) -> "Plan":
        if len(set(self.protocols)) != len(self.protocols):
            raise ValueError(f"protocols: listed twice in {self.protocols}")
        names = [c.name for c in self.conditions]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"conditions: names must be unique, repeated: {', '.join(sorted(dup))}")
        labels = [w.label for w in self.workloads]
        dupw = {n for n in labels if labels.count(n) > 1}
        if dupw:
            raise ValueError(f"workloads: listed twice: {', '.join(sorted(dupw))}")
        if "h2" in self.protocols:
            for w in self.workloads:
                if w.kind == "objects" and w.parallelism > H2_MAX_STREAMS:
                    raise ValueError(
                        f"workloads: {w.label} puts {w.parallelism} requests in flight, but the load client's "
                        f"h2 stalls beyond the servers' {H2_MAX_STREAMS} streams per connection "
                        f"(Go issue golang/go#70809): set parallel <= {H2_MAX_STREAMS}")
        if self.offload and self.capture:
            raise ValueError("capture: with offload = true the captures would hold GSO super-frames of "
                             "up to 64 KB, not wire packets, and the wire metrics would be wrong; "
                             "capture with offload = false")
        if any(h > 1 for h in [len(c.hops) for c in self.conditions]) and self.hops == 1:
            self.hops = 2
        return self

    def server_options(self, proto: str) -> list[str]:
        """The servers a protocol runs on (more than one sweeps servers)."""
        srv = self.servers.get(proto, "caddy")  # type: ignore[call-overload]
        return [srv] if isinstance(srv, str) else list(srv)

    def client_for(self, workload: Workload) -> str:
        """Object downloads use the plan's client; page loads a browser; videos the video player."""
        return {"page": "browser", "video": "video"}.get(workload.kind, self.client)

    def video_specs(self) -> list:
        """The distinct ladders the plan's video workloads play."""
        specs = {}
        for w in self.workloads:
            if w.kind == "video":
                specs.setdefault(w.video_spec().key, w.video_spec())
        return list(specs.values())

    def live_videos(self) -> list:
        specs = {}
        for w in self.workloads:
            if w.kind == "video" and w.mode == "live":
                specs.setdefault(w.video_spec().key, w.video_spec())
        return list(specs.values())

    def content_objects(self) -> dict[int, int]:
        objs: dict[int, int] = {}
        for w in self.workloads:
            if (w.kind == "page" and w.page == "realistic") or w.kind == "video":
                continue
            objs[w.size_bytes] = max(objs.get(w.size_bytes, 0), w.count)
        return objs

    @property
    def needs_realistic_page(self) -> bool:
        return any(w.kind == "page" and w.page == "realistic" for w in self.workloads)


@dataclass(frozen=True)
class TrialOptions:
    """What is recorded besides the metrics: captures, qlog, TLS keys."""
    capture: bool = False
    capture_keep: str = "compressed"
    capture_router: bool = False
    qlog: bool = False
    keylog: bool = False


@dataclass(frozen=True)
class TrialSpec:
    seq: int
    condition: Condition
    workload: Workload
    protocol: str
    server: str
    rep: int
    warmup: bool = False

    @property
    def key(self) -> str:
        tag = "warmup" if self.warmup else f"r{self.rep}"
        return f"{self.condition.name}|{self.workload.label}|{self.protocol}|{self.server}|{tag}"


def expand(plan: Plan, reps: int | None = None, only: dict[str, list[str]] | None = None) -> list[TrialSpec]:
    """The ordered trials of a plan.

    Conditions run one after another (a condition change reconfigures the link). Inside a
    condition, the cells (workload x repetition) are shuffled with the plan's seed when
    order = "randomized", and the protocols of one cell run back to back (in a shuffled
    order) so that slow drift hits all protocols alike, as Kakhki et al. (IMC'17) did.
    """
    reps = reps or plan.repetitions
    rng = random.Random(plan.seed)
    only = only or {}
    check_only(plan, only)
    trials: list[TrialSpec] = []

    def keep(field: str, value: str) -> bool:
        return field not in only or value in only[field]

    for cond in plan.conditions:
        if not keep("condition", cond.name):
            continue
        protos = [p for p in plan.protocols if keep("protocol", p)]
        workloads = [w for w in plan.workloads if keep("workload", w.label) and keep("size", w.size)]
        stacks = [(p, s) for p in protos for s in plan.server_options(p) if keep("server", s)]
        for _ in range(plan.warmup):
            for w in workloads[:1]:
                for p, s in stacks:
                    trials.append(TrialSpec(len(trials), cond, w, p, s, 0, warmup=True))
        cells = [(w, r) for w in workloads for r in range(1, reps + 1)]
        if plan.order == "randomized":
            rng.shuffle(cells)
        for w, r in cells:
            order = list(stacks)
            if plan.order == "randomized":
                rng.shuffle(order)
            for p, s in order:
                trials.append(TrialSpec(len(trials), cond, w, p, s, r))
    return trials


def check_only(plan: Plan, only: dict[str, list[str]]) -> None:
    """--only values must name things the plan has."""
    known = {"condition": [c.name for c in plan.conditions], "protocol": list(plan.protocols),
             "server": sorted({s for p in plan.protocols for s in plan.server_options(p)}),
             "workload": [w.label for w in plan.workloads], "size": sorted({w.size for w in plan.workloads})}
    for field, values in only.items():
        if field not in known:
            raise QuicbenchError(f"--only {field}=...: unknown field, accepted: {', '.join(known)}")
        for v in values:
            if v not in known[field]:
                raise QuicbenchError(f"--only {field}={v}: plan '{plan.name}' has no such {field}; "
                                     f"accepted: {', '.join(known[field])}")


MAX_PLAN_BYTES = 1_000_000


def load_plan(path: Path | str) -> Plan:
    path = Path(path)
    try:
        if not path.is_file():
            raise FileNotFoundError
        if path.stat().st_size > MAX_PLAN_BYTES:
            raise QuicbenchError(f"{path}: a plan file is at most {MAX_PLAN_BYTES} bytes of TOML")
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise QuicbenchError(f"plan file '{path}' not found (or not a regular file)") from None
    except PermissionError:
        raise QuicbenchError(f"plan file '{path}' cannot be read (permission denied)") from None
    except UnicodeDecodeError:
        raise QuicbenchError(f"{path}: not a TOML plan (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as e:
        raise QuicbenchError(f"{path}: not valid TOML: {e}") from None
    return plan_from_dict(_traces_relative_to(data, path.resolve().parent), source=str(path))


def _traces_relative_to(data: Any, base: Path) -> Any:
    """A plan's trace paths are relative to the plan file, not to the working directory."""
    if isinstance(data, dict):
        return {k: (str(base / v) if k == "trace" and isinstance(v, str) and not Path(v).is_absolute()
                    else _traces_relative_to(v, base)) for k, v in data.items()}
    if isinstance(data, list):
        return [_traces_relative_to(v, base) for v in data]
    return data


def plan_from_dict(data: dict[str, Any], source: str = "plan") -> Plan:
    data = dict(data)
    data.setdefault("name", Path(source).stem)
    try:
        return Plan.model_validate(data)
    except ValidationError as e:
        raise QuicbenchError(format_validation_error(e, source)) from None


DEFAULT_PLAN: dict[str, Any] = {
    "name": "default",
    "description": "h1, h2, h3 x {10 x 100KB, 4 x 1MB} x 3 repetitions on a plain lab link",
    "protocols": ["h1", "h2", "h3"],
    "workloads": [{"size": "100KB", "count": 10, "parallel": "all"},
                  {"size": "1MB", "count": 4, "parallel": "all"}],
    "repetitions": 3,
    "link": "auto",
}
