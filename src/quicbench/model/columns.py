"""The row schema: every column of trials.jsonl with its type, unit and meaning.

This table is the one source of the row schema. The trial builds rows with it, the store
checks every row against it before writing, the analysis coerces loaded rows with it, and
meta.json carries it (with ``FORMAT_VERSION``) so that a run directory describes itself.
docs/data.md documents the same columns for readers.

Groups: ``trial`` columns are in every row; ``capture`` columns come from packet captures,
``page`` from browser page loads, ``passthrough`` are details some clients add. Columns of
groups a run did not use are empty.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

# 1: rows without a format version (before the columns table); 2: meta.json carries
# format_version, columns and the conditions' headline values.
FORMAT_VERSION = 2

ColumnType = Literal["text", "int", "float", "bool"]


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    unit: str
    meaning: str
    group: str = "trial"


COLUMNS: tuple[Column, ...] = (
    # -- trial
    Column("key", "text", "", "`condition|workload|protocol|server|rN` (`warmup` for warm-ups); unique per trial", "trial"),
    Column("seq", "int", "", "position in the run's trial order", "trial"),
    Column("run_id", "text", "", "the run's id", "trial"),
    Column("condition", "text", "", "condition name", "trial"),
    Column("condition_desc", "text", "", "the condition in words", "trial"),
    Column("protocol", "text", "", "`h1`, `h2`, `h3`", "trial"),
    Column("server", "text", "", "server software", "trial"),
    Column("client", "text", "", "load client", "trial"),
    Column("workload", "text", "", "workload label", "trial"),
    Column("size_bytes", "int", "B", "object size, bytes", "trial"),
    Column("count", "int", "", "objects per trial", "trial"),
    Column("parallel", "int", "", "requests in flight at most", "trial"),
    Column("connection_policy", "text", "", "connection policy: `shared`, `per-object` or `pool:N`", "trial"),
    Column("rep", "int", "", "repetition number (0 for warm-ups)", "trial"),
    Column("warmup", "bool", "", "warm-up trial (never in the statistics)", "trial"),
    Column("started_at", "float", "s (Unix time)", "Unix time the trial started", "trial"),
    Column("status", "text", "", "`ok` or `failed`", "trial"),
    Column("error", "text", "", "why the trial failed (empty when ok)", "trial"),
    Column("requests", "int", "", "requests the client reported", "trial"),
    Column("requests_ok", "int", "", "of those, successful", "trial"),
    Column("bytes", "int", "B", "payload bytes received", "trial"),
    Column("start_ns", "int", "ns", "first request's start, ns (client clock)", "trial"),
    Column("end_ns", "int", "ns", "last byte, ns", "trial"),
    Column("total_time_s", "float", "s", "`end_ns − start_ns`, s", "trial"),
    Column("goodput_mbps", "float", "Mbit/s", "payload bits / total time, Mbit/s (empty unless every request succeeded)", "trial"),
    Column("connections", "int", "", "connections used", "trial"),
    Column("protocols", "text", "", "negotiated protocols and request counts, e.g. `h2:10`", "trial"),
    Column("ttfb_ms", "float", "ms", "first request's time to first byte, ms", "trial"),
    Column("connect_ms", "float", "ms", "median connect time of new connections, ms", "trial"),
    Column("tls_ms", "float", "ms", "median TLS handshake time of new connections, ms", "trial"),
    Column("request_ms_p50", "float", "ms", "median request duration, ms", "trial"),
    Column("transfer_ms_p50", "float", "ms", "median first-byte → last-byte time, ms", "trial"),
    Column("wall_s", "float", "s", "client process wall time, s", "trial"),
    Column("client_cpu_s", "float", "s", "client CPU seconds over the fetch window (the client's own report; else the process's)", "trial"),
    Column("client_process_cpu_s", "float", "s", "client CPU seconds of the whole process, start-up included", "trial"),
    Column("server_cpu_s", "float", "s", "server CPU seconds during the trial", "trial"),
    Column("client_cpu_pct", "float", "%", "client CPU as % of one core over the transfer", "trial"),
    Column("server_cpu_pct", "float", "%", "server CPU as % of one core over the transfer", "trial"),
    Column("client_cpu_wait_s", "float", "s", "seconds the client's threads were runnable but waited for a CPU, over the fetch window (run-queue time from `/proc/*/task/*/schedstat`)", "trial"),
    Column("server_cpu_wait_s", "float", "s", "the same for the server's processes during the trial", "trial"),
    Column("cpu_bound", "bool", "", "client or server ran ≥ 90 % of a core during the transfer, or wanted that much (ran + waited for a CPU) while goodput stayed below 80 % of the link's rate ([plans.md](plans.md#cpu-bound-trials))", "trial"),
    Column("cpu_bound_by", "text", "", "`client`, `server` or `client,server`", "trial"),
    Column("link", "text", "", "link emulator used", "trial"),
    Column("tcp_cc", "text", "", "TCP congestion control", "trial"),
    Column("hops", "int", "", "router hops", "trial"),
    Column("concurrent", "int", "", "other trials that ran beside this one (`quicbench run --jobs N`: at its start or started during it); 0 when it ran alone", "trial"),
    Column("host", "text", "", "the machine the trial ran on (its hostname): merged shards keep it, so a per-host effect shows", "trial"),
    # -- capture
    Column("wire_bytes_up", "int", "B", "bytes on the wire client→server (Ethernet frames)", "capture"),
    Column("wire_bytes_down", "int", "B", "bytes on the wire server→client", "capture"),
    Column("wire_packets_up", "int", "", "packets client→server", "capture"),
    Column("wire_packets_down", "int", "", "packets server→client", "capture"),
    Column("overhead_pct", "float", "%", "(wire bytes both ways − payload) / payload, %", "capture"),
    Column("tcp_retransmits", "int", "", "TCP data segments sent again", "capture"),
    Column("quic_packets_up", "int", "", "UDP (QUIC) packets client→server", "capture"),
    Column("quic_packets_down", "int", "", "UDP (QUIC) packets server→client", "capture"),
    Column("wire_goodput_mbps", "float", "Mbit/s", "payload bits over first → last server data packet, Mbit/s", "capture"),
    Column("capture_dropped", "int", "", "packets the capture missed (filter saw, not written, or kernel drops)", "capture"),
    # -- page
    Column("page_load_ms", "float", "ms", "page load time (the load event)", "page"),
    Column("load_event_ms", "float", "ms", "load event start", "page"),
    Column("dom_content_loaded_ms", "float", "ms", "DOMContentLoaded event start", "page"),
    Column("first_contentful_paint_ms", "float", "ms", "first contentful paint", "page"),
    Column("page_ttfb_ms", "float", "ms", "request start → response start (DevTools' \"Waiting (TTFB)\")", "page"),
    Column("page_response_start_ms", "float", "ms", "navigation start → response start (connect and TLS included)", "page"),
    Column("page_handshake_ms", "float", "ms", "connect start → connect end", "page"),
    Column("page_connect_ms", "float", "ms", "TCP connect (QUIC: the whole handshake)", "page"),
    Column("page_tls_ms", "float", "ms", "TLS handshake (empty for QUIC)", "page"),
    Column("page_weight_bytes", "int", "B", "transferred bytes of every request", "page"),
    Column("page_body_bytes", "int", "B", "body bytes of every request", "page"),
    Column("page_requests", "int", "", "requests the page made", "page"),
    Column("page_connections", "int", "", "connections the page used", "page"),
    Column("page_protocol", "text", "", "the navigation's protocol", "page"),
    # -- passthrough
    Column("har_entries", "int", "", "entries in the browser's HAR", "passthrough"),
    Column("protocol_mismatches", "text", "", "JSON list of requests that used another protocol (browser)", "passthrough"),
)

BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}


def names(*, group: str | None = None, type: str | None = None) -> tuple[str, ...]:
    return tuple(c.name for c in COLUMNS if (group is None or c.group == group) and (type is None or c.type == type))


def describe() -> list[dict[str, str]]:
    """The table as JSON-able dicts (for meta.json)."""
    return [asdict(c) for c in COLUMNS]


def _type_ok(col: Column, v: Any) -> bool:
    if v is None:
        return True
    if col.type == "text":
        return isinstance(v, str)
    if col.type == "bool":
        return isinstance(v, bool)
    if col.type == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isinf(v))


def check_row(row: dict[str, Any]) -> list[str]:
    """What is wrong with a row: unknown columns, values of the wrong type (empty: nothing)."""
    problems = []
    for k, v in row.items():
        col = BY_NAME.get(k)
        if col is None:
            problems.append(f"unknown column '{k}'")
        elif not _type_ok(col, v):
            problems.append(f"column '{k}' ({col.type}) got {type(v).__name__} {v!r}")
    return problems


def make_row(**values: Any) -> dict[str, Any]:
    """A row from keyword values; every name must be a column (a typo fails here, at once)."""
    unknown = [k for k in values if k not in BY_NAME]
    if unknown:
        raise KeyError(f"not columns of the row schema: {', '.join(unknown)}")
    return dict(values)
