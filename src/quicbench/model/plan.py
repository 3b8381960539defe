"""Experiment plans: protocols x workloads x conditions x repetitions, from TOML files.

The plan model is pydantic; errors name the file, the field and what is accepted.
``expand`` turns a plan into the ordered list of trials the runner executes.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import shlex
import string
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from quicbench.model.capabilities import client_capabilities
from quicbench.model.conditions import BACKGROUND_OBJECT_BYTES, Condition, KnownKeys
from quicbench.model.specs import ContentSpec, MatrixSpec, TrialOptions, TrialSpec
from quicbench.errors import QuicbenchError, format_validation_error
from quicbench.model.units import parse_size, size_label
from quicbench.model.video import DEFAULT_LADDER, VideoSpec
from quicbench.model.workload_kinds import KINDS, WorkloadKind

PROTOCOLS = ("h1", "h2", "h3")
BROWSERS = ("chromium", "firefox")    # what a plan's `browser` names (page and video workloads)
CONNECTION_POLICIES = ("shared", "per-object")
MAX_POOL = 1000              # connections of a pool:N policy (each is a handshake of its own)
# Streams in flight on one h2 connection: Caddy's (Go's) 250; nginx and Apache are configured to
# the same, so that a workload's `parallel` means the same on every server.
H2_MAX_STREAMS = 250
LIVE_SOURCE_SEGMENTS = 4   # a live stream loops a VOD of this many segments (16 s at 4 s)
Protocol = Literal["h1", "h2", "h3"]
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")       # fullmatch: client and server names
# a plan's name: it names Slurm and Kubernetes jobs and files; ASCII letters and digits, '.', '_', '-'
PLAN_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_TRIAL_TIMEOUT_S = 86_400.0    # a trial's timeout at most (one day)
MAX_PARALLEL = 100_000            # a workload's requests in flight at most (count's bound)
CC_RE = re.compile(r"[a-z][a-z0-9_]{0,15}")      # a congestion controller's name: cubic, bbr, reno, ...


class _Strict(KnownKeys):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _strict_scalars(cls, data: Any) -> Any:
        """Scalars as they are written: no bool from a string ("true"), no int from a float (1e9)
        or a bool, no number from a string; a float accepts an integer."""
        if isinstance(data, dict):
            for key, value in data.items():
                field = cls.model_fields.get(key)
                if field is not None:
                    _check_scalar(key, value, field.annotation)
        return data


def _check_scalar(key: str, value: Any, annotation: Any) -> None:
    """Refuse what pydantic would coerce into a scalar field: a bool or float for an int, a string
    for a bool or number (literal strings such as parallel's "all" stay accepted)."""
    import types
    import typing
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or \
        typing.get_origin(annotation) is typing.Union else (annotation,)
    literals = [a for o in options if typing.get_origin(o) is Literal for a in typing.get_args(o)]
    scalars = [t for t in (int, float, bool) if t in options]
    if value is None or any(value == a and type(value) is type(a) for a in literals):
        return
    if not scalars:
        # a literal field (hops = 1 | 2): no bool or float that equals one
        if literals and isinstance(value, (bool, float)):
            raise ValueError(f"{key}: one of {', '.join(map(repr, literals))} is expected, got {value!r} "
                             f"({type(value).__name__})")
        return
    bad = ((isinstance(value, bool) and bool not in scalars)
           or (isinstance(value, float) and float not in scalars)
           or (isinstance(value, str) and str not in options)
           or (bool in scalars and len(scalars) == 1 and not isinstance(value, bool)))
    if bad:
        want = [{int: "an integer", float: "a number", bool: "true or false"}[t] for t in scalars]
        want += [repr(a) for a in literals]
        raise ValueError(f"{key}: {' or '.join(want)} is expected, got {value!r} ({type(value).__name__})")


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
    kind: str = "objects"        # a registered workload kind (model/workload_kinds.py)
    size: str = "100KB"
    count: int = Field(1, ge=1, le=100_000)
    parallel: int | Literal["all"] = "all"
    page: Literal["gallery", "realistic"] = "gallery"
    # kind = "page": a page archive (HAR 1.2 with bodies, relative to the plan file) replayed from
    # its own origins by the `replay` server (docs/pages.md); `page` is then not used
    har: str | None = None
    # connection policy: "shared" (h2/h3 one multiplexed connection, h1 up to `parallel` reused
    # ones), "per-object" (a new connection and handshake per object, Go-Quick's getFiles) or
    # "pool:N" (at most N connections, requests spread over them)
    connections: str = "shared"
    # session resumption (objects): "none" (every connection a full handshake), "tickets" (a
    # priming connection, not measured, gets a TLS session ticket; every measured connection
    # resumes it), "0rtt" (tickets, and h3 requests sent in 0-RTT data) or "0rtt-token" (0rtt, and
    # h3 presents the server's address-validation token from its previous connection)
    resumption: Literal["none", "tickets", "0rtt", "0rtt-token"] = "none"

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS.names())}, got {v!r}")
        return v

    @property
    def workload_kind(self) -> type[WorkloadKind]:
        """The workload's kind (model/workload_kinds.py)."""
        return KINDS.get(self.kind)

    @field_validator("connections")
    @classmethod
    def _connections(cls, v: str) -> str:
        if v in CONNECTION_POLICIES:
            return v
        if v.startswith("pool:"):
            n = v[5:]
            if n.isascii() and n.isdigit() and 1 <= int(n) <= MAX_POOL:
                return f"pool:{int(n)}"
        raise ValueError(f"connections must be one of {', '.join(CONNECTION_POLICIES)} or pool:N with "
                         f"1 <= N <= {MAX_POOL}, got {v!r}")

    @model_validator(mode="after")
    def _page_connections(self) -> "Workload":
        if self.workload_kind.browser_managed and self.connections != "shared":
            raise ValueError(f"connections: a {self.kind} load lets the browser manage its connections; "
                             f"accepted: shared (got {self.connections!r})")
        if self.workload_kind.browser_managed and self.resumption != "none":
            raise ValueError(f"resumption: a {self.kind} load starts a fresh browser with no session; "
                             f"accepted: none (got {self.resumption!r})")
        return self

    @model_validator(mode="after")
    def _kind_rules(self) -> "Workload":
        """A field only other kinds read is refused (har), then the kind checks its parameters."""
        if self.har is not None and "har" not in self.workload_kind.params:
            readers = " or ".join(f'kind = "{k.name}"' for k in KINDS if "har" in k.params)
            raise ValueError(f"har: a page archive is loaded by {readers} workloads, got kind = {self.kind!r}")
        self.workload_kind.check(self)
        return self

    def archive(self):
        """The page archive of a `har` page (model/har.py), None for other workloads."""
        if self.har is None:
            return None
        from quicbench.model.har import read_archive
        return read_archive(self.har)

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

    def video_spec(self):
        """The encoded ladder a video workload plays (VOD and live of equal parameters share it)."""
        ladder = tuple(tuple(r) for r in self.ladder) if self.ladder is not None else DEFAULT_LADDER
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
        if isinstance(v, int) and not 1 <= v <= MAX_PARALLEL:
            raise ValueError(f"parallel must be 1 to {MAX_PARALLEL} or 'all', got {v}")
        return v

    @property
    def size_bytes(self) -> int:
        return parse_size(self.size)

    @property
    def parallelism(self) -> int:
        return self.count if self.parallel == "all" else min(self.parallel, self.count)

    @property
    def label(self) -> str:
        return self.workload_kind.label(self)

    @property
    def page_path(self) -> str:
        """URL path of the page a browser loads."""
        if self.har is not None:
            from urllib.parse import urlsplit
            u = urlsplit(self.archive().page_url)
            return u.path + (f"?{u.query}" if u.query else "")
        return "/realistic/index.html" if self.page == "realistic" else f"/{self.size}/index{self.count}.html"

    @property
    def payload_bytes(self) -> int:
        return self.size_bytes * self.count


# Placeholders of a command endpoint's command line (docs/endpoints.md). A client command is run
# in the client node once per trial; a server command in the server node once per run.
CLIENT_PLACEHOLDERS: dict[str, str] = {
    "url": "URL of the first object, https://HOST[:PORT]/PATH",
    "urls": "the URL of every object of the trial, one argument each (a word of its own)",
    "base": "https://HOST[:PORT]",
    "host": "the lab's host name (SNI, certificate, :authority)",
    "port": "the server's port (TCP and UDP)",
    "path": "URL path of the first object",
    "address": "the server's address in the lab",
    "connect": "ADDRESS:PORT of the server (for --resolve / --connect-to)",
    "proto": "the protocol to force: h1, h2 or h3",
    "ca": "PEM file of the lab's CA (the only CA to trust)",
    "spki": "base64 SHA-256 of the server key's SPKI (Chromium's --ignore-certificate-errors-spki-list)",
    "count": "objects to fetch",
    "parallel": "requests in flight at most",
    "out": "file for per-request JSON lines in qb-load's format; using it says the command writes them",
    "dir": "the trial's directory (the command may write files there)",
    "manifest": "the content manifest (path, size, sha256 of every object)",
    "timeout": "the trial's deadline in seconds",
    "python": "the Python interpreter quicbench runs with (its packages included)",
    "plan_dir": "the plan file's directory (fixed when the plan is loaded)",
}
SERVER_PLACEHOLDERS: dict[str, str] = {
    "address": "the server's address in the lab (listen here only)",
    "port": "the port to listen on (TCP and, for h3, UDP)",
    "listen": "ADDRESS:PORT (IPv6 in brackets)",
    "host": "the lab's host name",
    "cert": "PEM certificate chain for the host name",
    "key": "PEM private key of the certificate",
    "ca": "PEM file of the lab's CA",
    "root": "directory to serve (the content set)",
    "dir": "a working directory of the server's own (logs, config)",
    "python": "the Python interpreter quicbench runs with",
    "plan_dir": "the plan file's directory (fixed when the plan is loaded)",
}


def command_placeholders(command: str) -> list[str]:
    """The placeholder names a command line uses ({{ and }} are literal braces). A placeholder is a
    bare name: a conversion ({ca!r}) or a format spec ({count:>5}) is refused, since they are
    applied when the trial runs and could fail there."""
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(command) if f is not None]
    except ValueError as e:
        raise ValueError(f"command {command!r}: {e} (write a literal brace as {{{{ or }}}})") from None
    for f, spec, conv in fields:
        if conv or spec:
            raise ValueError(f"command {command!r}: placeholder {{{f}{'!' + conv if conv else ''}"
                             f"{':' + spec if spec else ''}}} takes no conversion or format spec; "
                             f"write it as {{{f}}}")
    return [f for f, _, _ in fields]


def _check_command(command: str, accepted: dict[str, str], what: str) -> str:
    if not command.strip():
        raise ValueError(f"{what}: empty command")
    bad = sorted({f"U+{ord(c):04X}" for c in command if (ord(c) < 32 and c not in "\t\n") or ord(c) == 127})
    if bad:
        raise ValueError(f"{what}: control character(s) {', '.join(bad)} in the command line; "
                         f"accepted: printable text, spaces, tabs and newlines between words")
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise ValueError(f"{what}: {command!r} is not a shell-like command line: {e}") from None
    used = command_placeholders(command)
    unknown = sorted({f for f in used if f not in accepted})
    if unknown:
        raise ValueError(f"{what}: unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
                         f"accepted: {', '.join('{' + a + '}' for a in accepted)}")
    for w in words:
        if "{urls}" in w and w != "{urls}":
            raise ValueError(f"{what}: {{urls}} expands to one argument per object, so it must be a word of "
                             f"its own, not part of {w!r}")
    first = command_placeholders(words[0])
    if first and not set(first) <= {"python", "plan_dir"}:
        raise ValueError(f"{what}: the program {words[0]!r} must be named, not a placeholder other than "
                         f"{{python}} or {{plan_dir}}")
    return command


class ClientCommand(_Strict):
    """A client by contract: any command line that fetches a trial's objects (docs/endpoints.md)."""
    command: str
    protocols: list[Protocol] = Field(default_factory=lambda: list(PROTOCOLS), min_length=1)
    version: str | None = Field(None, description="a command that prints the client's version")

    @field_validator("command")
    @classmethod
    def _command(cls, v: str) -> str:
        return _check_command(v, CLIENT_PLACEHOLDERS, "command")

    @field_validator("version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        return None if v is None else _check_command(v, {"python": "", "plan_dir": ""}, "version")

    @property
    def writes_requests(self) -> bool:
        """The command writes per-request JSON lines to {out}; else its exit code and stdout bytes count."""
        return "out" in command_placeholders(self.command)


class ServerCommand(_Strict):
    """A server by contract: a command that serves the content set over TLS (docs/endpoints.md)."""
    command: str
    protocols: list[Protocol] = Field(default_factory=lambda: list(PROTOCOLS), min_length=1)
    ready: str | None = Field(None, description="a command run in the client node; exit 0 = ready "
                                                "(default: the ports of its protocols listen)")
    ready_timeout_s: float = Field(10.0, gt=0, le=300)
    version: str | None = Field(None, description="a command that prints the server's version")

    @field_validator("command")
    @classmethod
    def _command(cls, v: str) -> str:
        return _check_command(v, SERVER_PLACEHOLDERS, "command")

    @field_validator("ready")
    @classmethod
    def _ready(cls, v: str | None) -> str | None:
        return None if v is None else _check_command(v, SERVER_PLACEHOLDERS, "ready")

    @field_validator("version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        return None if v is None else _check_command(v, {"python": "", "plan_dir": ""}, "version")


class Statistics(_Strict):
    """How reports compare protocols (docs/report.md): the test, alpha, the multiple-comparison
    correction over a report's family of comparisons, and the equivalence margin."""
    test: Literal["welch-log", "welch", "mwu"] = "welch-log"
    alpha: float = Field(0.01, gt=0, lt=0.5)
    correction: Literal["holm", "none"] = "holm"
    margin_pct: float = Field(10.0, gt=0, lt=100, description="equivalent: the ratio within [1/(1+M), 1+M]")


class Plan(_Strict):
    name: str = "plan"
    description: str = ""
    protocols: list[Protocol] = Field(default_factory=lambda: list(PROTOCOLS), min_length=1)
    servers: dict[Protocol, str | list[str]] = Field(
        default_factory=dict, description="server per protocol (a list sweeps servers); default caddy")
    # the client of object workloads: a driver (qb-load) or a [client_commands.NAME]; a list
    # compares clients (each protocol runs with every client that fetches it)
    client: str | list[str] = "qb-load"
    client_commands: dict[str, ClientCommand] = Field(default_factory=dict)
    # the browser of page and video workloads (docs/browser.md): chromium (Debian's Chromium,
    # Playwright) or firefox (Debian's Firefox ESR, puppeteer-core); a list compares browsers
    browser: str | list[str] = "chromium"
    server_commands: dict[str, ServerCommand] = Field(default_factory=dict)
    workloads: list[Workload] = Field(min_length=1)
    conditions: list[Condition] = Field(default_factory=lambda: [Condition(name="none")], min_length=1)
    repetitions: int = Field(3, ge=1, le=1000)
    seed: int = Field(1, ge=0, lt=2**63)
    order: Literal["randomized", "sequential", "interleaved"] = "randomized"
    trial_timeout_s: float = Field(120.0, gt=0, le=MAX_TRIAL_TIMEOUT_S)
    warmup: int = Field(0, ge=0, le=10, description="unrecorded warm-up trials per condition")
    link: str = "auto"
    link_seed: bool = Field(
        False, description="before each trial the link restarts its random draws (loss, jitter, reordering) from a "
                           "seed of the plan's seed, the condition, the workload and the repetition: repetition r of "
                           "every protocol, and of every run of the plan, meets the same random sequence (common "
                           "random numbers); link linkem")
    hops: Literal[1, 2] = 1
    # TCP congestion control of h1/h2 trials, set in the lab's nodes before each trial; a list
    # sweeps it (cells h2/cubic, h2/bbr)
    tcp_cc: str | list[str] = "cubic"
    tcp_initcwnd: int | None = Field(
        None, ge=1, le=1000,
        description="TCP's initial congestion window in segments, on the client's and the server's route to each "
                    "other (ip route ... initcwnd); unset: the kernel's 10. QUIC stacks keep their own")
    # the QUIC sender's congestion controller of h3 trials, for servers that can set it
    # (Server.quic_ccs): a name or a list for every h3 server of the plan, or a table server ->
    # name or list; each (server, quic_cc) is a server instance of its own (cells h3@ngtcp2/bbr).
    # Unset: every server's default.
    quic_cc: str | list[str] | dict[str, str | list[str]] | None = None
    offload: bool = Field(False, description="TSO/GSO/GRO on in the lab (GSO super-frames; link linkem)")
    calibrate: bool = Field(False, description="measure each condition (ping, iperf3) before its first trial")
    capture: bool = Field(False, description="tcpdump every trial in the client node; wire metrics")
    capture_keep: Literal["compressed", "raw", "delete"] = "compressed"
    capture_router: bool = Field(False, description="also capture at the router (kept, not analysed)")
    qlog: bool | Literal["auto"] = Field(
        "auto", description="qlog of every HTTP/3 connection, at the client and at servers that write it (their "
                            "loss declarations); auto: in conditions that lose, duplicate, corrupt or reorder packets")
    verify_cc: bool = Field(False, description="QUIC senders log the congestion controller they run and each h3 "
                                               "trial's quic_cc is checked against it (the server's qlog is on too; "
                                               "ngtcp2's per-acknowledgement log costs server CPU)")
    statistics: Statistics = Field(default_factory=Statistics)
    keylog: bool = Field(False, description="the load client writes a TLS key log per trial")
    # the published studies the report sets this run beside (model/study.py): a built-in study's
    # name (go-quick, cvart, dncs-http3), a study file (relative to the plan), or a list of them
    study: str | list[str] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not PLAN_NAME_RE.fullmatch(v):
            raise ValueError(f"name {v!r}: 1-64 characters of A-Z, a-z, 0-9, '.', '_', '-', the first a letter or "
                             f"digit (it names jobs and files)")
        return v

    @field_validator("study")
    @classmethod
    def _study(cls, v: str | list[str] | None) -> str | list[str] | None:
        from quicbench.model.study import NAME_RE as STUDY_NAME, is_path
        for ref in ([v] if isinstance(v, str) else v or []):
            if not ref or not (is_path(ref) or STUDY_NAME.fullmatch(ref)):
                raise ValueError(f"study {ref!r}: a study's name (a-z, 0-9, '-', '_', '.') or a study file "
                                 f"(path ending in .toml)")
        return v

    @field_validator("tcp_cc")
    @classmethod
    def _tcp_cc(cls, v: str | list[str]) -> str | list[str]:
        _cc_names(v, "tcp_cc")
        return v

    @field_validator("quic_cc")
    @classmethod
    def _quic_cc(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if not v:
                raise ValueError("an empty table; name a server's congestion controller(s), "
                                 "e.g. quic_cc = { ngtcp2 = [\"cubic\", \"bbr\"] }, or leave quic_cc out")
            for server, names in v.items():
                _cc_names(names, f"quic_cc.{server}")
        elif v is not None:
            _cc_names(v, "quic_cc")
        return v

    @property
    def tcp_ccs(self) -> list[str]:
        """The TCP congestion controls the plan's h1/h2 trials run with (more than one sweeps)."""
        return [self.tcp_cc] if isinstance(self.tcp_cc, str) else list(self.tcp_cc)

    def quic_cc_options(self, server: str) -> list[str | None]:
        """The QUIC congestion controllers an h3 server runs with (None: its default)."""
        v = self.quic_cc.get(server) if isinstance(self.quic_cc, dict) else self.quic_cc
        if v is None:
            return [None]
        return [v] if isinstance(v, str) else list(v)

    @property
    def options(self) -> "TrialOptions":
        return TrialOptions(capture=self.capture, capture_keep=self.capture_keep,
                            capture_router=self.capture_router, qlog=self.qlog is True, keylog=self.keylog,
                            tcp_cc=self.tcp_ccs[0])

    @model_validator(mode="after")
    def _check(self) -> "Plan":
        if len(set(self.protocols)) != len(self.protocols):
            raise ValueError(f"protocols: listed twice in {self.protocols}")
        if not self.client_names or len(set(self.client_names)) != len(self.client_names):
            raise ValueError(f"client: name one client or a list of different ones, got {self.client!r}")
        bad = [b for b in self.browser_names if b not in BROWSERS]
        if bad or not self.browser_names or len(set(self.browser_names)) != len(self.browser_names):
            raise ValueError(f"browser: name one browser or a list of different ones; accepted: "
                             f"{', '.join(BROWSERS)}, got {self.browser!r}")
        for name in [*self.client_names, *self.client_commands, *self.server_commands]:
            if not NAME_RE.fullmatch(name):
                raise ValueError(f"client/server name {name!r}: use 1-32 characters of a-z, A-Z, 0-9, '-', '_', '.'")
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
                in_flight = w.workload_kind.requests_in_flight(w)
                if in_flight is not None and in_flight > H2_MAX_STREAMS:
                    raise ValueError(
                        f"workloads: {w.label} puts {in_flight} requests in flight, but the load client's "
                        f"h2 stalls beyond the servers' {H2_MAX_STREAMS} streams per connection "
                        f"(Go issue golang/go#70809): set parallel <= {H2_MAX_STREAMS}")
        archives = [w.archive() for w in self.workloads if w.har is not None]
        if archives:
            from quicbench.model.har import check_compatible
            try:
                check_compatible(archives)
            except QuicbenchError as e:
                raise ValueError(f"workloads: {e}") from None
            other = sorted({s for p in self.protocols for s in self.server_options(p)} - {"replay"})
            if other:
                raise ValueError(f"servers: page archives (har) are served by the replay server only; accepted: "
                                 f"servers = {{h1 = \"replay\", h2 = \"replay\", h3 = \"replay\"}}, got "
                                 f"{', '.join(other)}")
        if self.offload and self.capture:
            raise ValueError("capture: with offload = true the captures would hold GSO super-frames of "
                             "up to 64 KB, not wire packets, and the wire metrics would be wrong; "
                             "capture with offload = false")
        if self.link_seed and self.link != "linkem":
            raise ValueError(f"link_seed: accepted with link = \"linkem\" (the link that seeds its random draws), "
                             f"got link = \"{self.link}\"")
        # a field that the chosen options would ignore is refused, not silently dropped
        if not self.capture and self.capture_keep != "compressed":
            raise ValueError("capture_keep: applies with capture = true (what is kept of each trial's captures); "
                             "set capture = true or drop capture_keep")
        if self.capture_router and not self.capture:
            raise ValueError("capture_router: applies with capture = true; set capture = true or drop it")
        if "h3" not in self.protocols:
            for key in ("verify_cc", "qlog"):
                if getattr(self, key) is True:
                    raise ValueError(f"{key}: applies to h3 trials (QUIC senders and connections); the plan's "
                                     f"protocols are {', '.join(self.protocols)}: add h3 or drop {key}")
        for proto, srv in self.servers.items():
            names = [srv] if isinstance(srv, str) else list(srv)
            if not names or len(set(names)) != len(names) or not all(names):
                raise ValueError(f"servers.{proto}: name one server or a list of different ones, got {srv!r}")
        if any(h > 1 for h in [len(c.hops) for c in self.conditions]) and self.hops == 1:
            self.hops = 2
        return self

    def server_options(self, proto: str) -> list[str]:
        """The servers a protocol runs on (more than one sweeps servers)."""
        srv = self.servers.get(proto, "caddy")  # type: ignore[call-overload]
        return [srv] if isinstance(srv, str) else list(srv)

    @property
    def client_names(self) -> list[str]:
        return [self.client] if isinstance(self.client, str) else list(self.client)

    @property
    def browser_names(self) -> list[str]:
        return [self.browser] if isinstance(self.browser, str) else list(self.browser)

    def clients_for(self, workload: Workload) -> list[str]:
        """The kind's client for each of the plan's browsers (page loads, the video player), its
        own client, else the plan's client(s)."""
        kind = workload.workload_kind
        if kind.browser_clients is not None:
            return [kind.browser_clients[b] for b in self.browser_names]
        own = kind.clients
        return list(own) if own is not None else self.client_names

    @property
    def compares_clients(self) -> bool:
        """Some protocol runs with several clients (or browsers): trial keys name the client."""
        return len(self.client_names) > 1 or len(self.browser_names) > 1

    def client_protocols(self, name: str) -> frozenset[str] | None:
        """The protocols a client fetches: a client command's ``protocols``, a driver's declared ones
        (model/capabilities.py; None: a name no driver has; preflight refuses it)."""
        cmd = self.client_commands.get(name)
        if cmd:
            return frozenset(cmd.protocols)
        caps = client_capabilities(name)
        return caps.protocols if caps is not None else None

    def video_specs(self) -> list:
        """The distinct ladders the plan's video workloads play."""
        specs = {}
        for w in self.workloads:
            spec = w.workload_kind.video(w)
            if spec is not None:
                specs.setdefault(spec.key, spec)
        return list(specs.values())

    def live_videos(self) -> list:
        specs = {}
        for w in self.workloads:
            spec = w.workload_kind.live_video(w)
            if spec is not None:
                specs.setdefault(spec.key, spec)
        return list(specs.values())

    def content_objects(self) -> dict[int, int]:
        objs: dict[int, int] = {}
        for w in self.workloads:
            for size, count in w.workload_kind.content_objects(w).items():
                objs[size] = max(objs.get(size, 0), count)
        if any(b.protocol == "h3" for c in self.conditions for b in c.background):
            objs.setdefault(BACKGROUND_OBJECT_BYTES, 1)    # what background QUIC flows fetch again and again
        return objs

    @property
    def page_archives(self) -> list[str]:
        """The HAR files of the plan's archive pages, each once."""
        return list(dict.fromkeys(w.har for w in self.workloads if w.har is not None))

    @property
    def needs_realistic_page(self) -> bool:
        return any(w.workload_kind.realistic_page(w) for w in self.workloads)

    def content(self) -> ContentSpec:
        """What the servers of the plan's runs serve (content/objects.py's ``generate``)."""
        return ContentSpec(objects=self.content_objects(), seed=self.seed, realistic_page=self.needs_realistic_page,
                           videos=tuple(self.video_specs()), archives=tuple(self.page_archives))

    def matrix(self) -> MatrixSpec:
        """The factors the plan crosses, as it names them (what preflight checks)."""
        named = dict.fromkeys([*self.protocols, *self.servers])     # the plan's protocols first
        h3_servers = self.server_options("h3") if "h3" in self.protocols else []
        return MatrixSpec(protocols=tuple(self.protocols), workloads=tuple(self.workloads),
                          clients={w.label: tuple(self.clients_for(w)) for w in self.workloads},
                          browsers=tuple(self.browser_names),
                          servers={p: tuple(self.server_options(p)) for p in named},
                          tcp_ccs=tuple(self.tcp_ccs), quic_cc=self.quic_cc,
                          quic_ccs={s: tuple(self.quic_cc_options(s)) for s in h3_servers})

    @property
    def studies(self) -> tuple[str, ...]:
        """The studies the plan's report is set beside (model/study.py), each as the plan names it."""
        return (self.study,) if isinstance(self.study, str) else tuple(self.study or ())


def plan_fingerprint(plan: Plan) -> str:
    """What the trials measure: the plan without the studies its report is set beside (naming one
    later does not make a run's directory another plan's)."""
    return hashlib.sha256(plan.model_dump_json(exclude={"study"}).encode()).hexdigest()[:16]


def condition_headlines(conditions: list[Condition]) -> dict[str, dict[str, Any]]:
    """Each condition's headline values (delay, loss, rate, jitter, RTT), for meta.json."""
    def number(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v
    return {c.name: {k: number(v) for k, v in c.headline().items()} | {"desc": c.short()} for c in conditions}


def _cc_names(v: Any, field: str) -> None:
    where = f"{field}: " if "." in field else ""     # the error already names a top-level field
    names = [v] if isinstance(v, str) else v
    if not isinstance(names, list) or not names:
        raise ValueError(f"{where}name a congestion controller or a non-empty list of them, got {v!r}")
    for n in names:
        if not isinstance(n, str) or not CC_RE.fullmatch(n):
            raise ValueError(f"{where}{n!r} is not a congestion controller's name (lower-case letters, digits "
                             f"and '_', e.g. cubic, reno, bbr)")
    if len(set(names)) != len(names):
        raise ValueError(f"{where}listed twice in {names}")


def expand(plan: Plan, reps: int | None = None, only: dict[str, list[str]] | None = None) -> list[TrialSpec]:
    """The ordered trials of a plan.

    Conditions run one after another (a condition change reconfigures the link). Inside a
    condition, the cells (workload x repetition) are shuffled with the plan's seed when
    order = "randomized", and the protocols of one cell run back to back (in a shuffled
    order) so that slow drift hits all protocols alike, as Kakhki et al. (IMC'17) did.
    order = "interleaved" runs repetition 1 of every condition (in a shuffled order), then
    repetition 2, ...: variants of a condition compared with each other (an experiment that
    changes one factor) see the same drift of the machine.
    """
    reps = reps or plan.repetitions
    rng = random.Random(plan.seed)
    only = check_only(plan, only or {})
    trials: list[TrialSpec] = []
    blocks: list[tuple[Any, ...]] = []        # order = "interleaved": each condition's cells, visited per repetition

    def keep(field: str, value: str) -> bool:
        return field not in only or value in only[field]

    for cond in plan.conditions:
        if not keep("condition", cond.name):
            continue
        protos = [p for p in plan.protocols if keep("protocol", p)]
        workloads = [w for w in plan.workloads if keep("workload", w.label) and keep("size", w.size)]
        # every (protocol, server, congestion control): h3 over each of its server's quic_cc,
        # h1/h2 over each tcp_cc
        servers = [(p, s, cc) for p in protos for s in plan.server_options(p) if keep("server", s)
                   for cc in (plan.quic_cc_options(s) if p == "h3" else plan.tcp_ccs)
                   if keep("quic_cc" if p == "h3" else "tcp_cc", str(cc))]

        # (the defaults bind this condition's values: order = "interleaved" calls these later)
        def stacks(w: Workload, servers=servers) -> list[tuple[str, str, str | None, str]]:
            # every (protocol, server, cc, client) of a workload; a client runs only its protocols
            names = [c for c in plan.clients_for(w) if keep("client", c)]
            return [(p, s, cc, c) for p, s, cc in servers for c in names
                    if plan.client_protocols(c) is None or p in plan.client_protocols(c)]

        compares = plan.compares_clients
        sweeps_tcp = len(plan.tcp_ccs) > 1

        def spec(seq: int, w: Workload, p: str, s: str, cc: str | None, c: str, r: int, warmup: bool,
                 cond=cond, compares=compares, sweeps_tcp=sweeps_tcp) -> TrialSpec:
            return TrialSpec(seq, cond, w, p, s, r, warmup=warmup, client=c, compares_clients=compares,
                             quic_cc=cc if p == "h3" else None,
                             tcp_cc=plan.tcp_ccs[0] if p == "h3" else cc, sweeps_tcp_cc=sweeps_tcp)

        if plan.order == "interleaved":
            blocks.append((cond, workloads, stacks, spec))
            continue
        for _ in range(plan.warmup):
            for w in workloads[:1]:
                for p, s, cc, c in stacks(w):
                    trials.append(spec(len(trials), w, p, s, cc, c, 0, True))
        cells = [(w, r) for w in workloads for r in range(1, reps + 1)]
        if plan.order == "randomized":
            rng.shuffle(cells)
        for w, r in cells:
            order = stacks(w)
            if plan.order == "randomized":
                rng.shuffle(order)
            for p, s, cc, c in order:
                trials.append(spec(len(trials), w, p, s, cc, c, r, False))
    warmed: set[str] = set()
    for r in range(1, reps + 1) if blocks else ():
        visit = list(blocks)
        rng.shuffle(visit)
        for cond, workloads, stacks, spec in visit:
            if cond.name not in warmed:
                warmed.add(cond.name)
                for _ in range(plan.warmup):
                    for w in workloads[:1]:
                        for p, s, cc, c in stacks(w):
                            trials.append(spec(len(trials), w, p, s, cc, c, 0, True))
            ws = list(workloads)
            rng.shuffle(ws)
            for w in ws:
                order = stacks(w)
                rng.shuffle(order)
                for p, s, cc, c in order:
                    trials.append(spec(len(trials), w, p, s, cc, c, r, False))
    return trials


def _sizes_as_labels(only: dict[str, list[str]]) -> dict[str, list[str]]:
    """--only's sizes as the plan labels them: 103250B and 103.25KB name the same workloads (a
    value that is no size stays as given, for check_only to refuse)."""
    def label(text: str) -> str:
        try:
            return size_label(parse_size(text))
        except QuicbenchError:
            return text
    return {**only, "size": [label(v) for v in only["size"]]} if "size" in only else only


def check_only(plan: Plan, only: dict[str, list[str]]) -> dict[str, list[str]]:
    """--only values must name things the plan has (an error names the value as given); returns
    them with sizes as the plan labels them."""
    labels = _sizes_as_labels(only)
    known = {"condition": [c.name for c in plan.conditions], "protocol": list(plan.protocols),
             "server": sorted({s for p in plan.protocols for s in plan.server_options(p)}),
             "workload": [w.label for w in plan.workloads], "size": sorted({w.size for w in plan.workloads}),
             "client": sorted({c for w in plan.workloads for c in plan.clients_for(w)}),
             "tcp_cc": plan.tcp_ccs,
             "quic_cc": sorted({str(cc) for p in plan.protocols if p == "h3" for s in plan.server_options(p)
                                for cc in plan.quic_cc_options(s)})}
    for field, values in only.items():
        if field not in known:
            raise QuicbenchError(f"--only {field}=...: unknown field, accepted: {', '.join(known)}")
        for v, label in zip(values, labels[field]):
            if label not in known[field]:
                raise QuicbenchError(f"--only {field}={v}: plan '{plan.name}' has no such {field}; "
                                     f"accepted: {', '.join(known[field])}")
    return labels


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
    except RecursionError:
        raise QuicbenchError(f"{path}: arrays or tables nested too deeply for a plan") from None
    base = path.resolve().parent
    return plan_from_dict(_study_relative_to(_commands_relative_to(_traces_relative_to(data, base), base), base),
                          source=str(path))


def _study_relative_to(data: Any, base: Path) -> Any:
    """A plan's study files are relative to the plan file (a study's name stays a name)."""
    from quicbench.model.study import is_path
    if not isinstance(data, dict) or not data.get("study"):
        return data
    refs = data["study"]

    def fix(r: Any) -> Any:
        return str(base / r) if isinstance(r, str) and is_path(r) and not Path(r).is_absolute() else r
    return {**data, "study": fix(refs) if isinstance(refs, str) else [fix(r) for r in refs]}


def _commands_relative_to(data: Any, base: Path) -> Any:
    """{plan_dir} in a command endpoint's command lines is the plan file's directory, fixed at load
    (so that a run's meta.json holds the command as it ran)."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for table in ("client_commands", "server_commands"):
        defs = data.get(table)
        if not isinstance(defs, dict):
            continue
        data[table] = {name: ({k: (v.replace("{plan_dir}", shlex.quote(str(base))) if isinstance(v, str) else v)
                               for k, v in d.items()} if isinstance(d, dict) else d)
                       for name, d in defs.items()}
    return data


def _traces_relative_to(data: Any, base: Path) -> Any:
    """A plan's trace and HAR paths are relative to the plan file, not to the working directory."""
    if isinstance(data, dict):
        return {k: (str(base / v) if k in ("trace", "har") and isinstance(v, str) and not Path(v).is_absolute()
                    else _traces_relative_to(v, base)) for k, v in data.items()}
    if isinstance(data, list):
        return [_traces_relative_to(v, base) for v in data]
    return data


def plan_from_dict(data: dict[str, Any], source: str = "plan") -> Plan:
    data = dict(data)
    data.setdefault("name", re.sub(r"[^A-Za-z0-9_.-]", "-", Path(source).stem).lstrip("._-")[:64] or "plan")
    try:
        return Plan.model_validate(data)
    except ValidationError as e:
        raise QuicbenchError(format_validation_error(e, source)) from None
    except RecursionError:
        raise QuicbenchError(f"{source}: arrays or tables nested too deeply for a plan") from None


# The first run says something true about the three protocols on realistic paths, in about two
# minutes: three named conditions, each with a bottleneck rate that no endpoint comes near to
# being CPU-bound at on a 2-core machine, and enough repetitions that differences of a few
# percent are significant (Welch's t-test, p < 0.01).
DEFAULT_PLAN: dict[str, Any] = {
    "name": "default",
    "description": "h1, h2, h3 x 10 x 50KB x 7 repetitions on broadband, mobile and satellite paths",
    "protocols": ["h1", "h2", "h3"],
    "workloads": [{"size": "50KB", "count": 10, "parallel": "all"}],
    "conditions": [
        # a clean fixed-line path: 20 ms RTT, 50 Mbit/s
        {"name": "broadband", "delay_ms": 10, "rate_mbit": 50},
        # a lossy mobile path: 40 ms RTT, 1.5 % random loss each way, 10 Mbit/s
        {"name": "mobile", "delay_ms": 20, "loss_pct": 1.5, "rate_mbit": 10},
        # geostationary satellite: 600 ms RTT, 20 Mbit/s, rare loss
        {"name": "satellite", "delay_ms": 300, "loss_pct": 0.05, "rate_mbit": 20},
    ],
    "repetitions": 7,
    "link": "auto",
}
