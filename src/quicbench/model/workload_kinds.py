"""Workload kinds: what a trial does (download objects, load a page, play a video) as one
concept. A kind says, in one place, its default client, its label, the plan's workload fields it
reads and their checks, how its trial is verified (and its last word on the row), how long it
takes, the content it needs (objects, videos, pages) and how the analysis and the report show
it (the metrics it measures, headline first, its report table and section title). Rows carry
the kind in their ``kind`` column; nothing parses a label, and nothing outside the kinds
branches on a kind's name.

Adding a kind is one class here (or in its own module) plus ``KINDS.register``: see
tests/integration/test_extension.py, which adds a toy kind and runs it end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from quicbench.model import columns
from quicbench.registry import Registry

# a kind's methods take the plan's Workload and TrialSpec (model/plan.py), which imports this
# module: they are typed Any here
Workload = Any
TrialSpec = Any


@dataclass(frozen=True)
class Metric:
    """A column the report shows for a kind, and how a sentence names it; its short header, digits
    and direction are its column's (model/columns.py)."""
    name: str
    what: str = ""         # in a sentence: "goodput", "page load time"

    @property
    def header(self) -> str:
        col = columns.metric(self.name)
        return col.header if col is not None and col.header else self.name

    @property
    def digits(self) -> int:
        col = columns.metric(self.name)
        return col.digits if col is not None and col.digits is not None else 2

    @property
    def higher_is_better(self) -> bool:
        return columns.higher_is_better(self.name)


class WorkloadKind:
    name: ClassVar[str]
    protocols: ClassVar[frozenset[str]] = frozenset()   # the registry's shape; a kind runs over any
    title: ClassVar[str]                 # the report's section heading
    clients: ClassVar[tuple[str, ...] | None] = None    # default clients; None: the plan's `client`
    # a kind run in a browser: the client of each of the plan's `browser` values (model.plan.BROWSERS)
    browser_clients: ClassVar[dict[str, str] | None] = None
    browser_managed: ClassVar[bool] = False   # the browser manages connections and sessions
    metrics: ClassVar[tuple[Metric, ...]]     # the first is the headline: it decides "best"
    lead_word: ClassVar[str] = "fastest"      # "h3 was fastest" / "h3 was best"
    # its parameters: the plan's workload fields it reads (model.plan.Workload); a field of another
    # kind's that only it can honour (har) is refused for the others
    params: ClassVar[frozenset[str]] = frozenset({"size", "count", "parallel"})
    # the report's table of its cells (analysis/report_data.py): "downloads" (goodput, phases, the
    # workload's size and count in its title), "pages", "video"; "generic": its declared metrics,
    # a verdict each
    report_table: ClassVar[str] = "generic"
    # in the terminal summary, metrics compared each on its own beside the headline (a viewer's
    # experience beside a video's QoE)
    beside_headline: ClassVar[tuple[str, ...]] = ()
    # the client opens the trial's connections and holds its sessions: the workload's connection
    # policy and resumption are the client's to honour, and a NAT rebinding has one connection to
    # rebind (False: a browser's, or the kind's own)
    client_connections: ClassVar[bool] = False

    @classmethod
    def headline(cls) -> Metric:
        return cls.metrics[0]

    @classmethod
    def measures(cls, metric: str) -> bool:
        """The kind declares the metric: the analyses and views of that metric apply to its workloads."""
        return any(m.name == metric for m in cls.metrics)

    @classmethod
    def several_objects(cls, count: int | None) -> bool:
        """A trial of a workload with `count` fetches several objects at once (head-of-line measures)."""
        return False

    @classmethod
    def study_attrs(cls, w: Workload, attrs: dict[str, Any]) -> dict[str, Any]:
        """What a study matches this workload by (model/study.py's WORKLOAD_ATTRS), beyond its kind,
        count and connections: updates to ``attrs``, the attributes read from its rows."""
        return {"size_bytes": w.size_bytes} if attrs.get("size_bytes") is None else {}

    @classmethod
    def label(cls, w: Workload) -> str:
        raise NotImplementedError

    @classmethod
    def verify(cls, row: dict[str, Any], spec: TrialSpec) -> str | None:
        """What the trial measured is what was asked (protocol, requests, bytes), else why not."""
        return None

    @classmethod
    def transfer_seconds(cls, w: Workload, rate_mbit: float, rtt_s: float) -> float:
        """A rough duration (model/estimate.py) at the given rate and RTT."""
        raise NotImplementedError

    @classmethod
    def content_objects(cls, w: Workload) -> dict[int, int]:
        """Generated objects it needs: size in bytes -> copies."""
        return {}

    @classmethod
    def check(cls, w: Workload) -> None:
        """The kind's rules for its parameters beyond their types: raise ValueError naming the field."""

    @classmethod
    def requests_in_flight(cls, w: Workload) -> int | None:
        """Requests the client keeps in flight on one connection at most (None: the browser's choice)."""
        return None

    @classmethod
    def video(cls, w: Workload) -> Any:
        """The encoded ladder it plays (model/video.py's VideoSpec), None if it plays none."""
        return None

    @classmethod
    def live_video(cls, w: Workload) -> Any:
        """The ladder a live publisher must loop for it, None if it watches no live stream."""
        return None

    @classmethod
    def realistic_page(cls, w: Workload) -> bool:
        """It loads the generated realistic page (content/pagegen.py)."""
        return False

    @classmethod
    def codec(cls, w: Workload) -> str | None:
        """The codec its client must be able to play on this host, None if it plays nothing."""
        return None

    @classmethod
    def finish_row(cls, row: dict[str, Any]) -> None:
        """The kind's last word on a measured trial's row, before it is verified (its own CPU rule)."""

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    @classmethod
    def version(cls) -> dict[str, str]:
        return {}


def _protocols_used(row: dict[str, Any], protocol: str, allow_none: bool = False) -> str | None:
    """Every request that got a response used the requested protocol ('none:' are requests still
    in flight when a playback stopped)."""
    used = row.get("protocols") or ""
    bad = [p for p in used.split(",") if p and not p.startswith(f"{protocol}:")
           and not (allow_none and p.startswith("none:"))]
    if bad or f"{protocol}:" not in used:
        return f"protocol mismatch: requested {protocol}, requests used {row.get('protocols')}"
    return None


class Objects(WorkloadKind):
    """Go-Quick's getFiles: `count` copies of an object of `size`, fetched by the load client."""
    name = "objects"
    title = "Object downloads: geometric mean over successful trials; * = best in its cell"
    metrics = (Metric("goodput_mbps", "goodput"),
               Metric("total_time_s", "time"))
    params = frozenset({"size", "count", "parallel", "connections", "resumption"})
    client_connections = True
    report_table = "downloads"

    TRIAL_OVERHEAD_S = 0.15      # client start, handshakes, bookkeeping (measured: make bench)

    @classmethod
    def label(cls, w: Workload) -> str:
        policy = "" if w.connections == "shared" else "/" + w.connections.replace("pool:", "pool")
        session = "" if w.resumption == "none" else f"/{w.resumption}"
        return f"{w.count}x{w.size}/p{w.parallelism}{policy}{session}"

    @classmethod
    def verify(cls, row: dict[str, Any], spec: TrialSpec) -> str | None:
        w = spec.workload
        if row.get("requests") != w.count:
            return f"expected {w.count} requests, client reported {row.get('requests')}"
        if row.get("requests_ok") != w.count:
            return f"{w.count - (row.get('requests_ok') or 0)} of {w.count} requests failed"
        if row.get("protocols") == f"unverified:{w.count}":
            pass    # a command client that reports only its exit code and bytes (docs/endpoints.md)
        elif row.get("protocols") != f"{spec.protocol}:{w.count}":
            return f"protocol mismatch: requested {spec.protocol}, negotiated {row.get('protocols')}"
        if row.get("bytes") != w.payload_bytes:
            return f"expected {w.payload_bytes} payload bytes, received {row.get('bytes')}"
        if w.resumption != "none" and row.get("resumed_pct") != 100:
            # the trial measures resumed connections or nothing: a full handshake would pass for one
            return (f"resumption = '{w.resumption}': {row.get('resumed_pct')} % of connections resumed a "
                    f"session, not all (did the server send a ticket?)" if row.get("resumed_pct") is not None
                    else f"resumption = '{w.resumption}': the client reported no session state")
        return verify_connections(row.get("connections"), w, spec.protocol)

    @classmethod
    def transfer_seconds(cls, w: Workload, rate_mbit: float, rtt_s: float) -> float:
        transfer = w.payload_bytes * 8 / (rate_mbit * 1e6)
        rounds = 3 + w.count / max(w.parallelism, 1)
        return cls.TRIAL_OVERHEAD_S + transfer + rounds * rtt_s

    @classmethod
    def content_objects(cls, w: Workload) -> dict[int, int]:
        return {w.size_bytes: w.count}

    @classmethod
    def requests_in_flight(cls, w: Workload) -> int | None:
        return w.parallelism

    @classmethod
    def several_objects(cls, count: int | None) -> bool:
        return count is not None and count >= 2


class Page(WorkloadKind):
    """A page load in a browser: Go-Quick's gallery (`count` images of `size`), DNCS's realistic page,
    or a recorded page (`har`) replayed from its own origins."""
    name = "page"
    title = "Page loads: geometric mean over successful loads; * = fastest load in its cell"
    clients = ("browser",)
    browser_clients = {"chromium": "browser", "firefox": "firefox"}
    browser_managed = True
    metrics = (Metric("page_load_ms", "page load time"),
               Metric("page_ttfb_ms", "time to first byte"),
               Metric("dom_content_loaded_ms", "DOMContentLoaded"))
    params = frozenset({"size", "count", "page", "har"})
    report_table = "pages"

    OVERHEAD_S = 3.0              # browser start, settle and close per page load (measured: docs/browser.md)
    REALISTIC_PAGE_BYTES = 10_200_000

    @classmethod
    def label(cls, w: Workload) -> str:
        if w.har is not None:
            from pathlib import Path
            return f"page:har:{Path(w.har).stem}"
        return "page:realistic" if w.page == "realistic" else f"page:{w.count}x{w.size}"

    @classmethod
    def verify(cls, row: dict[str, Any], spec: TrialSpec) -> str | None:
        if not row.get("protocols"):
            return f"protocol mismatch: requested {spec.protocol}, requests used {row.get('protocols')}"
        bad = _protocols_used(row, spec.protocol)
        if bad:
            return bad
        if row.get("requests_ok") != row.get("requests"):
            return f"{(row.get('requests') or 0) - (row.get('requests_ok') or 0)} page request(s) failed"
        recorded, missed = row.get("replay_requests"), row.get("replay_missed")
        if recorded and missed and missed > MAX_MISSED_SHARE * recorded:
            return (f"replay missed {missed} of the archive's {recorded} recorded requests (more than "
                    f"{MAX_MISSED_SHARE:.0%}): not the recorded page")
        if row.get("httpstat_protocol") not in (None, spec.protocol):
            return (f"protocol mismatch: requested {spec.protocol}, the httpstat fetch of the page used "
                    f"{row['httpstat_protocol']}")
        return None

    @classmethod
    def transfer_seconds(cls, w: Workload, rate_mbit: float, rtt_s: float) -> float:
        if w.har is not None:
            payload = w.archive().body_bytes
        else:
            payload = cls.REALISTIC_PAGE_BYTES if w.page == "realistic" else w.payload_bytes
        return cls.OVERHEAD_S + payload * 8 / (rate_mbit * 1e6) + 6 * rtt_s

    @classmethod
    def content_objects(cls, w: Workload) -> dict[int, int]:
        return {} if w.page == "realistic" or w.har is not None else {w.size_bytes: w.count}

    @classmethod
    def check(cls, w: Workload) -> None:
        if w.har is not None:
            from quicbench.errors import QuicbenchError
            from quicbench.model.har import read_archive
            try:
                read_archive(w.har)
            except QuicbenchError as e:
                raise ValueError(str(e)) from None

    @classmethod
    def realistic_page(cls, w: Workload) -> bool:
        return w.page == "realistic"

    @classmethod
    def several_objects(cls, count: int | None) -> bool:
        return True

    @classmethod
    def study_attrs(cls, w: Workload, attrs: dict[str, Any]) -> dict[str, Any]:
        # a realistic page is matched by its kind alone (its size then falls back to the plan's)
        out = {"page": w.page} | ({"size_bytes": None, "count": None} if w.page == "realistic" else {})
        return out | super().study_attrs(w, {**attrs, **out})


# a replayed page whose requests missed the archive more than this is not the recorded page
MAX_MISSED_SHARE = 0.01


class Video(WorkloadKind):
    """Adaptive streaming in a browser (docs/video.md): hls.js or dash.js, VOD or live."""
    name = "video"
    title = ("Video playback over successful plays: geometric means, QoE and stall time arithmetic means; QoE is "
             "Pensieve's QoE_lin per chunk; * = best QoE in its cell")
    clients = ("video",)
    browser_clients = {"chromium": "video", "firefox": "firefox-video"}
    browser_managed = True
    lead_word = "best"
    report_table = "video"
    beside_headline = ("startup_s", "stall_total_s", "mean_bitrate_kbps", "live_latency_s_mean")
    metrics = (Metric("qoe_lin", "QoE"),
               Metric("startup_s", "start-up time"),
               Metric("stall_total_s", "stall time"),
               Metric("mean_bitrate_kbps", "played bitrate"),
               Metric("live_latency_s_mean", "live latency"))
    params = frozenset({"player", "mode", "duration_s", "segment_s", "ladder", "codec"})

    # browser start, settle and close, then the start-up and what is watched. Measured: a 20 s VOD
    # on a LAN link took 27.0 s with a 0.55 s start-up; plans/dncs-video.toml's 60 s plays at
    # 8 Mbit/s / 20 ms took 72.1-72.9 s (docs/video.md)
    OVERHEAD_S = 7.0
    STARTUP_BYTES = 1_500_000    # the player library, playlists, first audio and video segments
    STARTUP_CPU_S = 0.5          # the browser's start-up work on a 2-core machine (a LAN start-up)

    @classmethod
    def label(cls, w: Workload) -> str:
        custom = "" if (w.ladder is None and w.codec == "h264") else f":{w.video_spec().key[:6]}"
        return f"video:{w.player}:{w.mode}:{w.duration_s:g}s:seg{w.segment_s:g}{custom}"

    @classmethod
    def verify(cls, row: dict[str, Any], spec: TrialSpec) -> str | None:
        # the client checked segments and the player; requests in flight at the end have no protocol
        return _protocols_used(row, spec.protocol, allow_none=True)

    @classmethod
    def transfer_seconds(cls, w: Workload, rate_mbit: float, rtt_s: float) -> float:
        # a playback lasts as long as what is watched, whatever the link
        startup = cls.STARTUP_CPU_S + cls.STARTUP_BYTES * 8 / (rate_mbit * 1e6) + 10 * rtt_s
        return cls.OVERHEAD_S + startup + (w.video_spec().duration_s if w.mode == "vod" else w.duration_s)

    @classmethod
    def check(cls, w: Workload) -> None:
        from quicbench.errors import QuicbenchError
        from quicbench.model.video import validate
        try:
            validate(w.video_spec(), where="workloads")
        except QuicbenchError as e:
            raise ValueError(str(e)) from None

    @classmethod
    def video(cls, w: Workload) -> Any:
        return w.video_spec()

    @classmethod
    def live_video(cls, w: Workload) -> Any:
        return w.video_spec() if w.mode == "live" else None

    @classmethod
    def study_attrs(cls, w: Workload, attrs: dict[str, Any]) -> dict[str, Any]:
        return {"player": w.player, "mode": w.mode, "size_bytes": None, "count": None}

    @classmethod
    def codec(cls, w: Workload) -> str | None:
        return w.codec

    @classmethod
    def finish_row(cls, row: dict[str, Any]) -> None:
        # a player's CPU has its own rule (the client computed it: video_metrics.player_cpu_bound);
        # the download rule's client figures flag every playback on a small machine
        bound_by = [b for b in (row["cpu_bound_by"] or "").split(",") if b in ("server", "link")]
        bound_by += ["player"] if row.get("player_cpu_bound") else []
        row["cpu_bound"] = bool(bound_by)
        row["cpu_bound_by"] = ",".join(bound_by) or None


def verify_connections(opened: int | None, w: Workload, protocol: str) -> str | None:
    """The connections a trial opened must be what its policy promises."""
    if opened is None:
        return None
    if w.connection_kind == "per-object" and opened != w.count:
        return f"connections = per-object: expected {w.count} connections, the client opened {opened}"
    if w.connection_kind == "pool":
        limit = int(w.connections.split(":", 1)[1])
        if opened > limit:
            return f"connections = {w.connections}: the client opened {opened} connections"
    if w.connection_kind == "shared" and protocol in ("h2", "h3") and opened != 1:
        return f"connections = shared: {protocol} should use one connection, the client opened {opened}"
    return None


KINDS: Registry[type[WorkloadKind]] = Registry("workload kind", [Objects, Page, Video])


def report_table(kind: str) -> str:
    """The report's table for the registered kind of this name ("generic" for an unknown name)."""
    return KINDS.get(kind).report_table if kind in KINDS else "generic"


def measures(kind: str, metric: str) -> bool:
    """The registered kind of this name declares the metric (an unknown name: no)."""
    return kind in KINDS and KINDS.get(kind).measures(metric)
