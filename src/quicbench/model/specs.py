"""The plan resolved: the typed hand-offs from the plan model to run/ (docs/architecture.md,
"Hand-offs").

``Selection.resolve(plan)`` (model/shard.py) expands a plan into a ``RunSpec``: the ordered
``TrialSpec``s of the selection, the ``LabSpec`` every lab of the run starts from, what the
servers serve (``ContentSpec``), the few run-wide settings a trial needs and the plan's factors
as it names them (``MatrixSpec``, what preflight checks). run/ reads these,
never the plan. This module holds the types only (it imports nothing of the plan model).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from quicbench.model.conditions import Condition

Workload = Any      # model.plan.Workload (that module imports this one)


@dataclass(frozen=True)
class TrialOptions:
    """What is recorded besides the metrics: captures, qlog, TLS keys."""
    capture: bool = False
    capture_keep: str = "compressed"
    capture_router: bool = False
    qlog: bool = False
    keylog: bool = False
    tcp_cc: str = "cubic"       # background TCP flows without a cc of their own use the plan's


@dataclass(frozen=True)
class TrialSpec:
    seq: int
    condition: Condition
    workload: Workload
    protocol: str
    server: str
    rep: int
    warmup: bool = False
    client: str = "qb-load"
    compares_clients: bool = False    # the plan runs a protocol with several clients
    # the QUIC sender's congestion controller asked of the server (h3; None: its default): the
    # server runs as an instance of its own, ``server_instance``
    quic_cc: str | None = None
    # the TCP congestion control of the trial (h1/h2; None: the plan's one tcp_cc); named in the
    # key when the plan sweeps it
    tcp_cc: str | None = None
    sweeps_tcp_cc: bool = False

    @property
    def server_instance(self) -> str:
        """The running server this trial uses: the server, or server/quic_cc (ngtcp2/bbr)."""
        return f"{self.server}/{self.quic_cc}" if self.quic_cc else self.server

    def link_seed(self, plan_seed: int) -> int:
        """The seed of the link's random draws for this trial (Plan.link_seed): the same for every
        protocol, server and client of a repetition, and in every run of the plan."""
        tag = "warmup" if self.warmup else f"r{self.rep}"
        text = f"{plan_seed}|{self.condition.name}|{self.workload.label}|{tag}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1

    @property
    def key(self) -> str:
        tag = "warmup" if self.warmup else f"r{self.rep}"
        swept = self.sweeps_tcp_cc and self.tcp_cc and self.protocol != "h3"
        proto = f"{self.protocol}/{self.tcp_cc}" if swept else self.protocol
        proto = f"{proto}~{self.client}" if self.compares_clients else proto
        return f"{self.condition.name}|{self.workload.label}|{proto}|{self.server_instance}|{tag}"


LAB_NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,15}")


class LabSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    backend: str = "netns"
    hops: Literal[1, 2] = 1
    tcp_cc: str = "cubic"
    # TCP's initial congestion window in segments on the client's and the server's route to each
    # other (`ip route ... initcwnd N`); None: the kernel's default (10 segments, RFC 6928)
    tcp_initcwnd: int | None = Field(None, ge=1, le=1000)
    mtu: int = Field(1500, ge=1280, le=9000)
    link: str = "auto"
    # TSO/GSO/GRO on at every lab interface: endpoints hand 64 KB super-frames to the path, as
    # production hosts do; only linkem cuts them into wire packets (docs/link.md, "Offloads")
    offload: bool = False
    condition: Condition = Condition()
    persistent: bool = False  # a lab from `lab up` lives until `lab down`; others die with their owner
    run_dir: str | None = None  # the run directory of the run that owns the lab
    inventory: str | None = None  # backend ssh: the inventory file (docs/hosts.md)
    # binaries each node must have (node -> names), checked by backends with remote hosts
    binaries: dict[str, list[str]] = Field(default_factory=dict)
    # what the endpoint drivers say of their binaries (name -> package, root, version_args, own):
    # the backend installs, runs (sudo) and asks versions by it; it knows only its own tools
    binary_facts: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not LAB_NAME_RE.fullmatch(v):
            raise ValueError(f"lab name '{v}' must be 1-16 characters of a-z, 0-9 and '-'")
        return v


@dataclass(frozen=True)
class ContentSpec:
    """What the run's servers serve: generated objects (size in bytes -> copies), the realistic
    page, the video ladders and the page archives (content/objects.py's ``generate``)."""
    objects: Mapping[int, int]
    seed: int
    realistic_page: bool = False
    videos: tuple[Any, ...] = ()         # model.video.VideoSpec
    archives: tuple[str, ...] = ()


@dataclass(frozen=True)
class MatrixSpec:
    """The factors a plan crosses, as it names them, before expansion and selection: what
    preflight (run/preflight.py) holds against the drivers and this host, whichever trials a
    run selects."""
    protocols: tuple[str, ...]
    workloads: tuple[Workload, ...]
    # each workload's clients by its label: the kind's browser client per browser, its own
    # client, else the plan's client(s)
    clients: Mapping[str, tuple[str, ...]]
    browsers: tuple[str, ...]
    # the servers of every protocol the plan runs, then of any other it names a server for
    servers: Mapping[str, tuple[str, ...]]
    tcp_ccs: tuple[str, ...]
    # quic_cc as the plan asks it (None, a name, a list, or a table server -> names), and what
    # it asks of each h3 server (None: the server's default)
    quic_cc: Any
    quic_ccs: Mapping[str, tuple[str | None, ...]]


@dataclass(frozen=True)
class RunSpec:
    """A plan resolved for running: its selected trials, the lab they run in, the content, the
    run-wide settings of a trial, and what meta.json records of the plan."""
    trials: tuple[TrialSpec, ...]
    # what every lab of the run starts from; each session names its own lab and sets its first
    # condition, owning run and the binaries its drivers need
    lab: LabSpec
    conditions: tuple[Condition, ...]      # every condition of the plan (a lab is made for all)
    content: ContentSpec
    options: TrialOptions
    trial_timeout_s: float
    qlog: bool | Literal["auto"]           # auto: where the condition impairs packets
    verify_cc: bool
    calibrate: bool
    seed: int
    link_seed: bool                        # the link reseeds its random draws before each trial
    matrix: MatrixSpec                     # the plan's factors as it names them (what preflight checks)
    studies: tuple[str, ...] = ()          # the studies the report sets the run beside (model/study.py)
    # the plan's command endpoints by name ([client_commands.NAME], [server_commands.NAME])
    client_commands: Mapping[str, Any] = field(default_factory=dict)
    server_commands: Mapping[str, Any] = field(default_factory=dict)
    # what meta.json records of the plan and the selection (model/runmeta.py's fields)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def qlog_for(self, condition: Condition) -> bool:
        """Whether trials under this condition are qlogged (auto: where the path loses, duplicates,
        corrupts or reorders packets, so that every lossy h3 row has its loss-recovery counts; on a
        clean path qlog would only cost the endpoints CPU)."""
        return condition.impairs_packets if self.qlog == "auto" else bool(self.qlog)
