"""The row schema: every column of trials.jsonl with its type, unit and meaning, and how it is shown.

This table is the one source of the row schema. The trial builds rows with it, the store
checks every row against it before writing, the analysis coerces loaded rows with it, and
meta.json carries it (with ``FORMAT_VERSION``) so that a run directory describes itself.
A column also says how it is shown: its title (the report's tables and axes), its header in
the terminal's tables, which way is better and the digits a value shows with. The columns
the analysis derives from the rows (``DERIVED``) are declared here too, each with its
derivation: the formula in words and the function that computes it. docs/data.md's column
tables are generated from both (``python -m quicbench.model.columns write``; a test checks).

Groups: ``trial`` columns are in every row; ``link`` columns come from the link emulator (linkem),
``capture`` columns from packet captures,
``page`` from browser page loads, ``video`` from video playback, ``passthrough`` are details some clients add. Columns of
groups a run did not use are empty.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

# 1: rows without a format version (before the columns table); 2: meta.json carries
# format_version, columns and the conditions' headline values; 3: each column also says its
# title, header, which way is better and its digits.
FORMAT_VERSION = 3

ColumnType = Literal["text", "int", "float", "bool", "json"]
# which way is better: "" where neither is (a count of requests, a timestamp)
Better = Literal["higher", "lower", ""]
# where a derived column's values come from: the row's own columns, the whole run's rows
# (bookkeeping: order, retries, what the statistics use) or the run's conditions (meta.json)
DerivedFrom = Literal["row", "run", "condition"]


@dataclass(frozen=True)
class Derivation:
    """How a derived column is computed: the formula in words (docs/data.md), the columns it
    reads, and the function that computes it from the run's table (a pandas DataFrame of the
    rows, with the derived columns declared before it); None for a condition's value, which
    the reader maps from the run's conditions (``inputs`` names the condition parameter)."""
    formula: str
    inputs: tuple[str, ...]
    source: DerivedFrom = "row"
    compute: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    unit: str
    meaning: str
    group: str = "trial"
    # the lab backends that fill it, with why, when that is not every backend (docs/hosts.md's
    # table of what differs by backend is made from these)
    backends: tuple[str, ...] = ()
    backends_why: str = ""
    # how it is shown: the report's title with unit ("goodput (Mbit/s)"; default: the meaning),
    # the terminal table's short header ("Mbit/s"), which way is better, and the decimals a
    # value shows with (None: four significant digits)
    title: str = ""
    header: str = ""
    better: Better = ""
    digits: int | None = None
    derivation: Derivation | None = None

    @property
    def label(self) -> str:
        """The title, else the meaning with its unit."""
        if self.title:
            return self.title
        return f"{self.meaning} ({self.unit})" if self.unit else self.meaning

    @property
    def higher_is_better(self) -> bool:
        """Higher is better unless the column says lower."""
        return self.better != "lower"


COLUMNS: tuple[Column, ...] = (
    # -- trial
    Column("key", "text", "", "`condition|workload|protocol|server|rN` (`warmup` for warm-ups; protocol is `protocol~client` when a plan compares clients and `protocol/tcp_cc` when it sweeps `tcp_cc`; server is `server/quic_cc` when the plan sets `quic_cc` for it); unique per trial", "trial"),
    Column("seq", "int", "", "position in the run's trial order", "trial"),
    Column("run_id", "text", "", "the run's id", "trial"),
    Column("condition", "text", "", "condition name", "trial"),
    Column("condition_desc", "text", "", "the condition in words", "trial"),
    Column("protocol", "text", "", "`h1`, `h2`, `h3`", "trial"),
    Column("server", "text", "", "server software", "trial"),
    Column("client", "text", "", "the client: a driver (`qb-load`, `browser`) or a plan's `[client_commands.NAME]`", "trial"),
    Column("server_stack", "text", "", "the server's implementation and versions, e.g. `caddy 2.11.9, quic-go v0.57.1, go1.25.5` (a result is the stack's as much as the protocol's)", "trial"),
    Column("client_stack", "text", "", "the client's implementation and versions, e.g. `qb-load 0.1.0, go1.26.8, quic-go v0.65.0`", "trial"),
    Column("workload", "text", "", "workload label", "trial"),
    Column("kind", "text", "", "workload kind: `objects`, `page` or `video` (model/workload_kinds.py); rows of older runs get it from their plan", "trial"),
    Column("size_bytes", "int", "B", "object size, bytes", "trial"),
    Column("count", "int", "", "objects per trial", "trial"),
    Column("parallel", "int", "", "requests in flight at most", "trial"),
    Column("connection_policy", "text", "", "connection policy: `shared`, `per-object` or `pool:N` ([plans.md](plans.md))", "trial"),
    Column("resumption", "text", "", "session resumption asked of the client: `none`, `tickets`, `0rtt` or `0rtt-token` "
           "(docs/plans.md)", "trial"),
    Column("rep", "int", "", "repetition number (0 for warm-ups)", "trial"),
    Column("warmup", "bool", "", "warm-up trial (never in the statistics)", "trial"),
    Column("link_seed", "int", "", "the seed the link's random draws restarted from before the trial (plan `link_seed`: "
           "the same for every protocol of a repetition); empty without it", "trial"),
    Column("started_at", "float", "s (Unix time)", "Unix time the trial started", "trial"),
    Column("status", "text", "", "`ok` or `failed`", "trial"),
    Column("error", "text", "", "why the trial failed (empty when ok)", "trial"),
    Column("requests", "int", "", "requests the client reported", "trial"),
    Column("requests_ok", "int", "", "of those, successful", "trial"),
    Column("bytes", "int", "B", "payload bytes received", "trial"),
    Column("start_ns", "int", "ns", "first request's start, ns (client clock)", "trial"),
    Column("end_ns", "int", "ns", "last byte, ns", "trial"),
    Column("total_time_s", "float", "s", "`end_ns − start_ns`, s", "trial",
           title="total transfer time (s)", header="time s", better="lower", digits=3),
    Column("goodput_mbps", "float", "Mbit/s", "payload bits / total time, Mbit/s (empty unless every request succeeded)", "trial",
           title="goodput (Mbit/s)", header="Mbit/s", better="higher", digits=1),
    Column("connections", "int", "", "connections used", "trial"),
    Column("protocols", "text", "", "negotiated protocols and request counts, e.g. `h2:10`; `unverified:N` from a command client that reports only its exit code and bytes", "trial"),
    Column("ttfb_ms", "float", "ms", "first request's time to first byte, ms", "trial",
           title="time to first byte (ms)", header="TTFB ms", better="lower", digits=1),
    Column("connect_ms", "float", "ms", "median connect time of new connections, ms", "trial",
           title="connect (ms)", better="lower"),
    Column("tls_ms", "float", "ms", "median TLS handshake time of new connections, ms", "trial",
           title="TLS handshake (ms)", better="lower"),
    Column("handshake_ms", "float", "ms", "median handshake of new connections, connect start to TLS done "
           "(TCP + TLS, or QUIC's one handshake), ms", "trial"),
    Column("handshake_rtts", "float", "RTT", "handshake_ms in round trips of the condition's base RTT (empty below "
           "2 ms): about 2 for TCP + TLS 1.3, 1 for QUIC, 0 with QUIC 0-RTT; more on a loss-free link means the "
           "client and server pair spends extra round trips", "trial"),
    Column("request_ms_p50", "float", "ms", "median request duration, ms", "trial",
           title="request, median (ms)", better="lower"),
    Column("transfer_ms_p50", "float", "ms", "median first-byte → last-byte time, ms", "trial",
           title="transfer, median request (ms)", better="lower"),
    Column("resumed_pct", "float", "%", "of the trial's connections, the share whose TLS session resumed a "
           "ticket (empty unless the workload asks for resumption)", "trial"),
    Column("early_data_pct", "float", "%", "of the trial's QUIC connections, the share whose 0-RTT data the "
           "server accepted (empty for TCP: Go's TLS has no client 0-RTT; empty unless resumption is asked)", "trial"),
    Column("body_stall_ms_p50", "float", "ms", "per request, the longest time its body stood still after the first byte "
           "(qb-load's stall_ns; a page load: between the browser's deliveries of its data, DevTools' "
           "`Network.dataReceived`); median over the trial's requests, ms", "trial"),
    Column("body_stall_ms_max", "float", "ms", "the longest such stall of any request of the trial, ms", "trial"),
    Column("all_streams_idle_ms", "float", "ms", "the time every request in flight on a connection (at least two) "
           "stood still together, in gaps of at least half the base RTT (1 ms at least), summed over connections: "
           "head-of-line blocking (one lost TCP segment holds every h2 stream, QUIC only the streams it carried) "
           "and the sender's waits for acknowledgements together; empty for clients that do not report gaps",
           "trial"),
    Column("completion_spread_ms", "float", "ms", "p90 − p10 of the completion (last-byte) times of the trial's successful requests (a page: its subresources, the document excluded), ms; empty with fewer than two. A loss that holds every stream (TCP) makes the objects finish later together; one that holds only the streams it hit (QUIC) lets the others finish early and widens the spread: read it beside the trial's total time ([report.md](report.md#measure-sections))",
           "trial"),
    Column("wall_s", "float", "s", "client process wall time, s", "trial"),
    Column("client_cpu_s", "float", "s", "client CPU seconds over the fetch window (the client's own report; else the process's)", "trial",
           title="client CPU (s)", better="lower"),
    Column("client_process_cpu_s", "float", "s", "client CPU seconds of the whole process, start-up included", "trial"),
    Column("server_cpu_s", "float", "s", "server CPU seconds during the trial", "trial",
           title="server CPU (s)", better="lower"),
    Column("client_cpu_pct", "float", "%", "client CPU as % of one core over the transfer", "trial"),
    Column("server_cpu_pct", "float", "%", "server CPU as % of one core over the transfer", "trial"),
    Column("client_cpu_wait_s", "float", "s", "seconds the client's threads were runnable but waited for a CPU, over the fetch window (run-queue time from `/proc/*/task/*/schedstat`)", "trial"),
    Column("server_cpu_wait_s", "float", "s", "the same for the server's processes during the trial", "trial"),
    Column("machine_cpu_pct", "float", "%", "busy share of all of the machine's CPUs over the fetch window (`/proc/stat`: everything but idle, so the kernel's packet work, the link emulator and other labs count), %; over SSH the busier of the client's and the server's host; empty for a window under 0.2 s. Judged only with the path's waits (`cpu_bound`): a busy machine whose processes on the path get a CPU when they want one does not slow the transfer ([results/cpu-rule.md](results/cpu-rule.md))", "trial"),
    Column("softirq_wait_s", "float", "s", "seconds the kernel's softirq threads (`ksoftirqd/N`: the packet processing the kernel defers under load, at plain priority) were runnable but waited for a CPU over the fetch window, all CPUs together (their schedstat); over SSH the larger of the client's and the server's host. Not part of `cpu_bound`: recorded to test whether a busy machine slows short transfers through the kernel's deferred packet work ([results/cpu-rule.md](results/cpu-rule.md))", "trial"),
    Column("cpu_bound", "bool", "", "the CPU set the pace: a process on the path (client, server, link emulator) ran ≥ 90 % of a core over the transfer, or, with every CPU ≥ 90 % busy and goodput below 80 % of the link's rate, the path's processes together were runnable but waited for a CPU ≥ 20 % of it ([plans.md](plans.md#cpu-bound-trials)); a video: the server's and link's rule and the player rule (`player_cpu_bound`)", "trial"),
    Column("cpu_bound_by", "text", "", "who: `client`, `server`, `link` — those that ran ≥ 90 % of a core, then (the wait rule) those that waited ≥ 1 % of the transfer, longest wait first; `player` (a video: the player rule replaces `client`); comma-separated", "trial"),
    Column("near_ceiling", "bool", "", "goodput reached 80 % of what this protocol reaches on an unimpaired link in this kernel: the kernel, not the condition, set the pace (measured when the run executes inside User-Mode Linux, `--kernel uml`; empty otherwise; the ceiling is `meta.json` → `ceiling`)", "trial"),
    Column("link", "text", "", "link emulator used", "trial"),
    Column("tcp_cc", "text", "", "TCP congestion control the trial ran with: the client's and the server's namespace default (`net.ipv4.tcp_congestion_control`, set before the trial and read back from the server node); for h1/h2 the sender's, for h3 only background TCP flows use it", "trial"),
    Column("tcp_initcwnd", "int", "segments", "TCP's initial congestion window the trial's client and server used towards each other (plan `tcp_initcwnd`, set on their routes and read back from the kernel when the lab was made); empty: the kernel's default, 10 segments", "trial"),
    Column("quic_cc", "text", "", "h3: the congestion controller of the server's QUIC sender — the plan's `quic_cc`, else the server's default, else its stack's fixed one (`caddy`: quic-go's `reno`); empty for h1/h2 and for servers that do not say", "trial"),
    Column("quic_cc_seen", "text", "", "h3: the congestion controller the sender itself reported for the trial's connections (ngtcp2: its debug log, written with `verify_cc = true`; quinn and aioquic: their log line per connection, read back from the stack, with qlog; quiche: its qlog's congestion states and window backoffs, with qlog); a trial where it differs from `quic_cc` fails; empty when the sender reports none", "trial"),
    Column("hops", "int", "", "router hops", "trial"),
    Column("client_host", "text", "", "the host that ran the client (lab backend `ssh`; empty for `netns`)", "trial", ("ssh",), "names the SSH host; a namespace lab runs on one machine"),
    Column("server_host", "text", "", "the host that ran the server (lab backend `ssh`; empty for `netns`)", "trial", ("ssh",), "names the SSH host; a namespace lab runs on one machine"),
    Column("router_hosts", "text", "", "the router host(s), client side first (lab backend `ssh`; empty for `netns`)", "trial", ("ssh",), "names the SSH hosts; a namespace lab runs on one machine"),
    Column("concurrent", "int", "", "other trials that ran beside this one (`quicbench run --jobs N`: at its start or started during it); 0 when it ran alone ([scale.md](scale.md#several-labs-on-one-machine---jobs))", "trial"),
    Column("host", "text", "", "the machine the trial ran on (its hostname): merged shards keep it, so a per-host effect shows ([scale.md](scale.md))", "trial"),
    # -- link: the link emulator's own fidelity and CPU over the trial (linkem; empty for netem and plain)
    Column("link_cpu_s", "float", "s", "the link emulator's CPU seconds during the trial (linkem's threads, from its schedstat; every router's linkem together)", "link"),
    Column("link_cpu_wait_s", "float", "s", "seconds the link emulator's threads were runnable but waited for a CPU during the trial", "link"),
    Column("link_cpu_pct", "float", "%", "link emulator CPU as % of one core over the transfer", "link"),
    Column("link_packets", "int", "", "frames the link emulator sent during the trial, both directions, every router (a GSO run counts once)", "link",
           title="link emulator frames sent"),
    Column("link_late_p50_ms", "float", "ms", "median lateness of those frames against the time the condition scheduled them, ms (the upper bound of a histogram bucket at most 12.5 % wide)", "link",
           title="link emulator lateness, p50 (ms)"),
    Column("link_late_p99_ms", "float", "ms", "99th percentile of that lateness, ms", "link"),
    Column("link_late_max_ms", "float", "ms", "largest lateness, ms (its bucket's upper bound; exact when it is the largest since linkem started)", "link"),
    Column("link_late_drops", "int", "", "packets the link emulator dropped because it fell behind: its overload guard (arrivals while a due packet is more than 10 ms late) and receive-ring overflows", "link",
           title="link emulator drops, fell behind"),
    Column("link_codel_drops", "int", "", "packets CoDel dropped at the bottleneck during the trial (condition field `queue_discipline = \"codel\"`; both directions, every router); 0 with a drop-tail queue ([link.md](link.md#codel))", "link"),
    Column("link_sojourn_p50_ms", "float", "ms", "median sojourn time of the packets that left the bottleneck queue server→client during the trial: from arrival to the start of serialisation, queueing alone (upper bound of a histogram bucket at most 12.5 % wide); empty without a rate or trace", "link"),
    Column("link_sojourn_p99_ms", "float", "ms", "99th percentile of that sojourn time, ms", "link"),
    Column("tcp_out_segs", "int", "", "TCP segments the server sent during the transfer (its namespace's Tcp OutSegs)", "recovery"),
    Column("tcp_retrans_segs", "int", "", "TCP segments the server retransmitted (Tcp RetransSegs)", "recovery"),
    Column("tcp_dsack_segs", "int", "", "retransmitted segments the client reported as duplicates (DSACK, TcpExt TCPDSACKRecvSegs): retransmissions of segments that were not lost", "recovery"),
    Column("tcp_reorder_events", "int", "", "times the server's TCP detected reordering and widened its threshold (TcpExt TCPSACKReorder + TCPTSReorder + TCPRenoReorder)", "recovery"),
    Column("tcp_loss_undos", "int", "", "loss recoveries the server undid as spurious (TcpExt TCPFullUndo + TCPPartialUndo + TCPDSACKUndo + TCPLossUndo)", "recovery"),
    Column("tcp_spurious_rtos", "int", "", "retransmission timeouts found spurious (F-RTO, TcpExt TCPSpuriousRTOs)", "recovery"),
    Column("quic_packets_sent", "int", "", "QUIC packets the server sent (its qlog; plan key qlog, auto: lossy conditions; a server that writes qlog: caddy, ngtcp2, quinn, aioquic, netty, quiche)", "recovery"),
    Column("quic_lost", "int", "", "QUIC packets the server declared lost", "recovery"),
    Column("quic_lost_reordering", "int", "", "of those, declared lost by the packet threshold (packets sent later were acknowledged first); empty for a sender whose qlog gives no trigger (ngtcp2, aioquic, quiche)", "recovery"),
    Column("quic_lost_time", "int", "", "of those, declared lost by the time threshold; empty as above", "recovery"),
    Column("quic_lost_spurious", "int", "", "declared lost and later acknowledged by the client: not lost at all, a spurious loss declaration (quinn, whose qlog has no acknowledgements: received per the client's qlog; empty without it; empty for quiche, whose qlog has only a count of its losses)", "recovery"),
    Column("quic_client_received", "int", "", "QUIC packets the client received (its qlog; plan key qlog)", "recovery"),
    Column("quic_client_out_of_order", "int", "", "of those, received after a higher packet number of their space: reordered on the way", "recovery"),
    Column("quic_client_lost", "int", "", "QUIC packets the client declared lost (requests, acknowledgements)", "recovery"),
    Column("quic_client_lost_spurious", "int", "", "of those, acknowledged later by the server: spurious", "recovery"),
    Column("quic_client_acks_sent", "int", "", "QUIC packets the client sent with an ACK frame (its qlog)", "recovery"),
    Column("quic_client_ack_ratio", "float", "", "the receiver's ACK frequency: packets the client received per packet it sent with an ACK frame (its qlog); about 2 for a receiver acknowledging every other packet", "recovery"),
    Column("quic_qlog_connections", "int", "", "server qlogs (connections) the QUIC counts sum over", "recovery"),
    Column("quic_fc_blocked", "int", "", "DATA_BLOCKED and STREAM_DATA_BLOCKED frames the server sent (its qlog): each says the client's flow-control window stopped the sender; a count of frames, not of time blocked; empty without qlog, for a qlog that logs no frames of the packets sent, and for senders that never send them (quinn, aioquic)", "recovery"),
    Column("quic_ss_exit_cwnd", "int", "B", "the server's congestion window when it first left slow start, bytes (its qlog's congestion state going from slow start to congestion avoidance or recovery; median over the trial's connections). Set it beside the path's bandwidth-delay product: below it, a Reno or CUBIC sender then grows its window by about a packet per round trip; empty for a sender whose qlog does not log its congestion state (ngtcp2, quinn)", "recovery",
           title="congestion window at slow-start exit (B)"),
    Column("quic_ss_exit_without_loss", "int", "", "connections whose server left slow start before declaring any packet lost: a delay-based exit (quic-go: HyStart, on a rise of the round's minimum RTT), not a loss", "recovery"),
    Column("link_late", "bool", "", "the link emulator released packets late: p99 lateness above max(0.5 ms, 5 % of the condition's one-way delay); the row does not have the condition it names ([link.md](link.md#link-fidelity-per-trial))", "link"),
    Column("host_steal", "bool", "", "a link-late trial during which the hypervisor took (steal time, `/proc/stat`) at least the trial's p99 lateness from the CPUs the link emulator ran on: its lateness is the host's, not the emulator's; false for a link-late trial without that steal; empty otherwise ([link.md](link.md#link-fidelity-per-trial))", "link", ("netns",),
           "judged where linkem runs on the machine whose steal is read; over SSH the router's host is not read"),
    Column("host_steal_ms", "float", "ms", "CPU time the hypervisor ran something else while this machine's CPUs wanted to run (steal, `/proc/stat`), all CPUs together, over the fetch window, ms (10 ms resolution); over SSH the server's host", "trial"),
    Column("softirq_cpu_ms", "json", "ms", "softirq time (the kernel's packet work) of each CPU over the fetch window, ms, a list by CPU number (10 ms resolution); over SSH the server's host; where the packet work ran beside the link emulator and the endpoints", "trial"),
    Column("server_cpus", "json", "", "the CPUs the server's processes last ran on at the end of the fetch, a list; over SSH the server's host", "trial"),
    Column("link_cpus", "json", "", "the CPUs the link emulator's forwarding threads last ran on at the end of the trial, a list", "link"),
    Column("link_nivcsw", "int", "", "involuntary context switches of the link emulator's threads during the trial (a forwarding thread preempted)", "link"),
    # -- capture
    Column("wire_bytes_up", "int", "B", "bytes on the wire client→server (Ethernet frames)", "capture",
           title="wire bytes client→server"),
    Column("wire_bytes_down", "int", "B", "bytes on the wire server→client", "capture",
           title="wire bytes server→client"),
    Column("wire_packets_up", "int", "", "packets client→server", "capture",
           title="packets client→server"),
    Column("wire_packets_down", "int", "", "packets server→client", "capture",
           title="packets server→client"),
    Column("overhead_pct", "float", "%", "(wire bytes both ways − payload) / payload, %", "capture",
           title="overhead (% of payload)", better="lower"),
    Column("tcp_retransmits", "int", "", "TCP data segments sent again", "capture",
           title="TCP retransmitted segments", better="lower"),
    Column("quic_packets_up", "int", "", "UDP (QUIC) packets client→server", "capture",
           title="QUIC packets client→server"),
    Column("quic_packets_down", "int", "", "UDP (QUIC) packets server→client", "capture",
           title="QUIC packets server→client"),
    Column("wire_goodput_mbps", "float", "Mbit/s", "payload bits over first → last server data packet, Mbit/s", "capture",
           title="wire goodput (Mbit/s)", better="higher"),
    Column("wire_throughput_cv_pct", "float", "%", "steadiness of the transfer: coefficient of variation of the server→client wire bytes per 100 ms over the transfer's bins without the first and last 10 %, at least one each (slow start, tail); empty below 5 such bins", "capture",
           title="throughput variation, CV per 100 ms (%)", better="lower"),
    Column("capture_dropped", "int", "", "packets the capture missed (filter saw, not written, or kernel drops)", "capture",
           title="packets the capture missed"),
    # -- page
    Column("page_load_ms", "float", "ms", "page load time (the load event)", "page",
           title="page load time (ms)", header="load ms", better="lower", digits=0),
    Column("load_event_ms", "float", "ms", "load event start", "page",
           title="load event (ms)", better="lower"),
    Column("dom_content_loaded_ms", "float", "ms", "DOMContentLoaded event start", "page",
           title="DOMContentLoaded (ms)", header="DCL ms", better="lower", digits=0),
    Column("first_contentful_paint_ms", "float", "ms", "first contentful paint", "page",
           title="first contentful paint (ms)", better="lower"),
    Column("page_ttfb_ms", "float", "ms", "request start → response start (DevTools' \"Waiting (TTFB)\")", "page",
           title="page TTFB, waiting (ms)", header="TTFB ms", better="lower", digits=0),
    Column("page_response_start_ms", "float", "ms", "navigation start → response start (connect and TLS included)", "page",
           title="page response start (ms)", better="lower"),
    Column("page_handshake_ms", "float", "ms", "connect start → connect end", "page",
           title="page connect + TLS (ms)", better="lower"),
    Column("page_connect_ms", "float", "ms", "TCP connect (QUIC: the whole handshake)", "page",
           title="page connect (ms)", better="lower"),
    Column("page_tls_ms", "float", "ms", "TLS handshake (empty for QUIC)", "page",
           title="page TLS (ms)", better="lower"),
    Column("page_weight_bytes", "int", "B", "transferred bytes of every request", "page",
           title="page weight (bytes)", better="lower"),
    Column("page_body_bytes", "int", "B", "body bytes of every request", "page",
           title="page body bytes"),
    Column("page_requests", "int", "", "requests the page made", "page",
           title="page requests", better="lower"),
    Column("page_connections", "int", "", "connections the page used", "page",
           title="page connections"),
    Column("page_protocol", "text", "", "the navigation's protocol", "page"),
    Column("lcp_ms", "float", "ms", "largest contentful paint (PerformanceObserver, the last candidate by the end of the load)", "page",
           title="largest contentful paint (ms)", header="LCP ms", better="lower", digits=0),
    Column("cls", "float", "", "cumulative layout shift: the largest session window of layout-shift scores (1 s gap, 5 s window)", "page",
           better="lower"),
    Column("total_blocking_time_ms", "float", "ms", "long tasks' time beyond 50 ms between first contentful paint and the load event's end", "page",
           better="lower"),
    Column("speed_index_ms", "float", "ms", "Speed Index: the area above the visual progress curve of the screencast frames (visual-metrics method, [pages.md](pages.md#page-metrics); replayed pages, or `QUICBENCH_SPEED_INDEX=1`)", "page",
           title="Speed Index (ms)", header="SI ms", better="lower", digits=0),
    Column("visually_complete_ms", "float", "ms", "the first screencast frame at 100 % visual progress", "page",
           better="lower"),
    Column("first_visual_change_ms", "float", "ms", "the first screencast frame with visual progress", "page",
           better="lower"),
    Column("screencast_frames", "int", "", "screencast frames the visual metrics were computed from", "page"),
    Column("origins", "int", "", "origins (scheme, host, port) the page requested", "page"),
    Column("page_origin_stats", "json", "", "per origin: requests, wire bytes, connections", "page"),
    Column("page_protocol_stats", "json", "", "per protocol: requests, wire bytes, connections", "page"),
    Column("page_coalesced_connections", "int", "", "connections that served more than one origin (HTTP/2, HTTP/3 coalescing)", "page"),
    Column("replay_requests", "int", "", "a replayed page (`har`, [pages.md](pages.md)): requests its archive recorded", "page",
           title="replayed page: recorded requests"),
    Column("replay_missed", "int", "", "a replayed page: requests that matched no recorded entry (404 from the replay); more than 1 % of `replay_requests` fails the load", "page",
           title="replayed page: requests that missed", better="lower"),
    Column("replay_misses", "json", "", "a replayed page: the URLs that missed", "page"),
    Column("page_html_download_ms", "float", "ms", "the page's HTML: response start → response end (DevTools' "
           "\"Content Download\")", "page",
           title="page HTML content download (ms)"),
    Column("httpstat_connect_ms", "float", "ms", "DNCS's httpstat phases, from one fetch of the page's HTML on a new connection after the load (qb-load, [browser.md](browser.md#connection-phases-as-dncs-measured-them)): TCP connect; QUIC: the whole handshake", "page",
           title="httpstat: connect, QUIC: handshake (ms)", better="lower"),
    Column("httpstat_tls_ms", "float", "ms", "that fetch's TLS handshake (empty for QUIC: transport and TLS are one handshake)", "page",
           title="httpstat: TLS handshake (ms)", better="lower"),
    Column("httpstat_server_ms", "float", "ms", "that fetch's handshake done → first byte of the response "
           "(httpstat's \"Server Processing\")", "page",
           title="httpstat: server processing (ms)", better="lower"),
    Column("httpstat_transfer_ms", "float", "ms", "that fetch's first → last byte (httpstat's \"Content Transfer\")",
           "page",
           title="httpstat: content transfer (ms)", better="lower"),
    Column("httpstat_total_ms", "float", "ms", "request start → last byte (httpstat's total, without a DNS lookup: the lab has no DNS)", "page",
           title="httpstat: total (ms)", better="lower"),
    Column("httpstat_protocol", "text", "", "the protocol that fetch negotiated (the trial's, or the trial fails)", "page"),
    # -- video
    Column("video_player", "text", "", "player: `hls` (hls.js) or `dashjs`", "video"),
    Column("video_mode", "text", "", "`vod` or `live`", "video"),
    Column("startup_s", "float", "s", "page load start → first `playing`", "video",
           title="video startup (s)", header="start s", better="lower", digits=2),
    Column("startup_player_s", "float", "s", "player start → first `playing`", "video",
           better="lower"),
    Column("stalls", "int", "", "rebuffering events after the first frame", "video",
           better="lower"),
    Column("stall_total_s", "float", "s", "time spent rebuffering", "video",
           title="video stall time (s)", header="stall s", better="lower", digits=2),
    Column("stall_unended", "bool", "", "a stall had not ended when playback stopped", "video"),
    Column("rebuffer_ratio", "float", "", "stalled time / watched time", "video",
           title="rebuffer ratio", better="lower"),
    Column("rebuffer_s_per_min", "float", "s/min", "stalled seconds per minute watched", "video",
           better="lower"),
    Column("watched_s", "float", "s", "first `playing` → stop", "video"),
    Column("played_s", "float", "s", "time the play position advanced", "video"),
    Column("switches", "int", "", "rendered quality level changes", "video"),
    Column("switches_up", "int", "", "changes to a higher level", "video"),
    Column("switches_down", "int", "", "changes to a lower level", "video"),
    Column("switches_per_min", "float", "1/min", "level changes per minute watched", "video",
           title="quality switches per minute", better="lower"),
    Column("mean_bitrate_kbps", "float", "kbit/s", "played bitrate, time-weighted nominal bitrate of the rendered levels", "video",
           title="played bitrate (kbit/s)", header="kbit/s", better="higher", digits=0),
    Column("level_time_s", "json", "s", "seconds played per level (JSON object)", "video"),
    Column("top_level_share", "float", "", "share of played time at the top level", "video",
           better="higher"),
    Column("segments_video", "int", "", "video segment requests that completed", "video"),
    Column("segments_audio", "int", "", "audio segment requests that completed", "video"),
    Column("segment_bytes", "int", "B", "bytes of completed media segments", "video"),
    Column("segment_ttfb_ms_median", "float", "ms", "median video segment time to first byte: the browser's network "
           "record, request sent → response headers (DevTools' \"Waiting (TTFB)\")", "video",
           better="lower"),
    Column("segment_ttfb_ms_mean", "float", "ms", "mean of the same over the video segments", "video",
           better="lower"),
    Column("segment_download_ms_median", "float", "ms", "median video segment download time", "video",
           better="lower"),
    Column("segment_kbps_mean", "float", "kbit/s", "mean encoded bitrate of the video segments downloaded "
           "(bytes × 8 / segment_s), not a download rate", "video"),
    Column("frag_latency_ms_mean", "float", "ms", "hls.js: mean fragment latency, the loader's request start → first byte (`stats.loading.first − stats.loading.start`) over every media fragment, the hls.js demo's `fragAvgLatency`: **DNCS-HTTP3's \"Avg latency\"** ([video.md](video.md#dncs-http3s-metrics)); empty for dash.js", "video",
           title="hls.js fragment latency (ms)", better="lower"),
    Column("frag_latency_ms_median", "float", "ms", "hls.js: median of the same", "video",
           better="lower"),
    Column("frag_kbps_mean", "float", "kbit/s", "hls.js: mean per-fragment throughput, bytes × 8 / (buffering end − first byte), the hls.js demo's `fragAvgKbps`: **DNCS-HTTP3's \"Avg bitrate\"**; empty for dash.js",
           "video",
           title="hls.js fragment throughput (kbit/s)", better="higher"),
    Column("live_latency_s_mean", "float", "s", "live: mean of wall clock − program date time of the play position (the latency to the live edge, seconds; not DNCS's \"latency\": that is `frag_latency_ms_mean`)", "video",
           title="live latency (s)", header="live s", better="lower", digits=1),
    Column("live_latency_s_median", "float", "s", "live: median latency to the live edge", "video",
           better="lower"),
    Column("live_latency_s_max", "float", "s", "live: largest latency", "video"),
    Column("live_latency_s_last", "float", "s", "live: latency at the end of playback", "video"),
    Column("frames_decoded", "int", "", "frames decoded (getVideoPlaybackQuality)", "video"),
    Column("frames_dropped", "int", "", "frames dropped (getVideoPlaybackQuality)", "video",
           better="lower"),
    Column("frames_dropped_ratio", "float", "", "dropped / decoded frames", "video",
           title="dropped frames ratio", better="lower"),
    Column("frames_presented", "int", "", "frames the compositor presented after the first `playing` (requestVideoFrameCallback)", "video"),
    Column("frames_skipped", "int", "", "frames the media time passed that were never presented (requestVideoFrameCallback)", "video"),
    Column("frames_skipped_ratio", "float", "", "skipped / (presented + skipped) frames", "video"),
    Column("renderer_cpu_pct", "float", "%", "the browser's renderer processes' CPU, % of one core over the playback (first frame → stop)", "video"),
    Column("renderer_wait_pct", "float", "%", "time the renderer's threads were runnable but waited for a CPU, % of the playback (`/proc/*/task/*/schedstat`)", "video"),
    Column("gpu_process_cpu_pct", "float", "%", "the browser's GPU process's CPU (the display compositor), % of one core over the playback", "video"),
    Column("gpu_process_wait_pct", "float", "%", "time the GPU process's threads waited for a CPU, % of the playback", "video"),
    Column("startup_cpu_pct", "float", "%", "the browser's processes' CPU during the start-up (page load → first frame), % of one core", "video"),
    Column("startup_main_wait_pct", "float", "%", "time the renderer's main thread (the player's JavaScript) waited for a CPU during the start-up, % of it", "video"),
    Column("player_cpu_bound", "bool", "", "the player rule: frames lost (> 1 % dropped or never presented) while the renderer waited for a CPU ≥ 20 % of the playback, or the player's JavaScript waited ≥ 50 % of the start-up ([video.md](video.md#cpu-bound-playback))", "video"),
    Column("cpu_health_frames", "text", "", "`ok`, or `dropping` above 1 % dropped frames (a CPU-health figure)", "video"),
    Column("qoe_lin", "float", "", "Pensieve's QoE_lin per chunk: (Σ q(R_n) − 4.3 × Σ T_n − Σ |q(R_{n+1}) − q(R_n)|) / N, q(R) = R in Mbit/s, T_n rebuffering s, N chunks played ([video.md](video.md#qoe))", "video",
           title="QoE_lin per chunk (Pensieve)", header="QoE", better="higher", digits=2),
    Column("qoe_log", "float", "", "Pensieve's QoE_log per chunk: as `qoe_lin` with q(R) = ln(R / R_min) (R_min the ladder's lowest rung) and 2.66 × Σ T_n", "video",
           better="higher"),
    Column("qoe_hd", "float", "", "Pensieve's QoE_hd per chunk: as `qoe_lin` with q(R) from Pensieve's HD table (0.3, 0.75, 1.2, 1.85, 2.85, 4.3 Mbit/s → 1, 2, 3, 12, 15, 20; a rung scores as the highest table bitrate it reaches) and 8 × Σ T_n", "video",
           better="higher"),
    Column("qoe_chunks", "float", "", "N of the QoE columns: chunks played, played seconds / segment length", "video"),
    Column("qoe_score", "float", "", "older runs only (no longer written): mean Mbit/s − 4.3 × rebuffer s/min − 1 × switches/min, a per-minute score that was not Pensieve's QoE_lin; use `qoe_lin`", "video",
           better="higher"),
    Column("player_errors", "int", "", "errors in the player's log", "video"),
    Column("player_fatal_errors", "int", "", "fatal errors in the player's log", "video"),
    # -- competing traffic and latency under load (the condition's background / latency_probe)
    Column("bg_flows", "int", "", "background flows that shared the bottleneck with the trial (the condition's `background`)", "load"),
    Column("bg_mbps", "float", "Mbit/s", "their IP bytes delivered to the client over the trial's transfer, Mbit/s", "load"),
    Column("bg_class_mbps", "text", "", "the same per class, e.g. `h3=11.2,tcp:bbr=30.5`", "load"),
    Column("fg_wire_mbps", "float", "Mbit/s", "the trial's own IP bytes delivered to the client over its transfer, Mbit/s (counted as the background flows are)", "load"),
    Column("fg_share_pct", "float", "%", "the trial's share of everything delivered over its transfer", "load",
           title="share of the bottleneck (%)"),
    Column("jain_index", "float", "", "Jain's fairness index over the trial (one flow, whatever its connections) and each background flow: 1 = equal rates, 1/n = one flow took all", "load",
           title="Jain's fairness index", better="higher"),
    Column("load_owd_samples", "int", "", "probe packets (100/s, server to client) sent during the transfer that arrived", "load"),
    Column("load_owd_ms_p50", "float", "ms", "their median one-way delay, queueing included: compare with the condition's one-way delay", "load",
           title="one-way delay under load, p50 (ms)"),
    Column("load_owd_ms_p99", "float", "ms", "their 99th-percentile one-way delay", "load",
           title="one-way delay under load, p99 (ms)"),
    # -- NAT rebinding (the condition's rebind_at_s)
    Column("rebind_at_s", "float", "s", "NAT rebinding: this long into the transfer the client's source port, as the server sees it, was to change (the condition's `rebind_at_s`)", "load"),
    Column("rebound", "bool", "", "the rewrite was in place before the transfer ended", "load"),
    Column("rebind_seen_by_server", "bool", "", "the server node received packets from the new port (an nftables counter there)", "load"),
    Column("rebind_stall_ms", "float", "ms", "the longest gap in a response body in the second after the rebinding (0: none of 1 ms or more); the trial's status says whether the transfer survived", "load"),
    # -- passthrough
    Column("har_entries", "int", "", "entries in the browser's HAR", "passthrough"),
    Column("protocol_mismatches", "text", "", "JSON list of requests that used another protocol (browser)", "passthrough"),
)

BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}


# -- derived columns: what the analysis computes from the rows (analysis/load.py) and the export
# adds from the run's conditions (report/exports.py); trials.parquet has them after the row's columns.
# Each function takes the run's table (a pandas DataFrame) and returns the column.

def _row_index(t: Any) -> Any:
    return range(len(t))


def _superseded(t: Any) -> Any:
    return t.duplicated("key", keep="last") if len(t) else False


def _used(t: Any) -> Any:
    # a page load or a video may lack a goodput
    measured = t["goodput_mbps"].notna() | t["page_load_ms"].notna() | t["startup_s"].notna()
    return (t["status"] == "ok") & ~t["superseded"] & ~t["warmup"] & measured


def _per_gb(cpu: str) -> Callable[[Any], Any]:
    def per_gb(t: Any) -> Any:
        gb = t["bytes"] / 1e9
        return (t[cpu] / gb).where(gb > 0)
    per_gb.__name__ = f"{cpu}_per_gb"
    return per_gb


def _cpu_s_per_gb(t: Any) -> Any:
    return t["client_cpu_s_per_gb"] + t["server_cpu_s_per_gb"]


def _wait_ms(t: Any) -> Any:
    return (t["ttfb_ms"] - t["connect_ms"].fillna(0) - t["tls_ms"].fillna(0)).clip(lower=0)


DERIVED: tuple[Column, ...] = (
    Column("row_index", "int", "", "line number in `trials.jsonl` (0-based, torn lines skipped)", "derived",
           derivation=Derivation("the row's position in the file", (), "run", _row_index)),
    Column("superseded", "bool", "", "a later row has the same `key` (the trial was retried)", "derived",
           derivation=Derivation("a later row has the same `key`", ("key",), "run", _superseded)),
    Column("used", "bool", "", "the row is in the statistics (final, not warm-up, ok, has a goodput or a page "
           "load time)", "derived",
           derivation=Derivation("`status` = `ok`, not `superseded`, not `warmup`, and a `goodput_mbps`, "
                                 "`page_load_ms` or `startup_s`",
                                 ("status", "superseded", "warmup", "goodput_mbps", "page_load_ms", "startup_s"),
                                 "run", _used)),
    Column("client_cpu_s_per_gb", "float", "s/GB", "`client_cpu_s` per GB of payload", "derived",
           title="client CPU (s per GB)", better="lower",
           derivation=Derivation("`client_cpu_s / (bytes / 10⁹)`; empty without bytes", ("client_cpu_s", "bytes"),
                                 "row", _per_gb("client_cpu_s"))),
    Column("server_cpu_s_per_gb", "float", "s/GB", "`server_cpu_s` per GB of payload", "derived",
           title="server CPU (s per GB)", better="lower",
           derivation=Derivation("`server_cpu_s / (bytes / 10⁹)`; empty without bytes", ("server_cpu_s", "bytes"),
                                 "row", _per_gb("server_cpu_s"))),
    Column("cpu_s_per_gb", "float", "s/GB", "their sum", "derived",
           title="client + server CPU (s per GB)", better="lower",
           derivation=Derivation("`client_cpu_s_per_gb + server_cpu_s_per_gb`",
                                 ("client_cpu_s_per_gb", "server_cpu_s_per_gb"), "row", _cpu_s_per_gb)),
    Column("wait_ms", "float", "ms", "server wait: the first byte's time beyond connect and TLS", "derived",
           title="server wait (ms)", better="lower",
           derivation=Derivation("`ttfb_ms − connect_ms − tls_ms` (an empty connect or TLS counts 0), clipped at 0",
                                 ("ttfb_ms", "connect_ms", "tls_ms"), "row", _wait_ms)),
    Column("delay_ms", "float", "ms", "the condition's one-way delay (as in summary.csv)", "derived",
           derivation=Derivation("the condition's `delay_ms` (meta.json's `conditions`)", ("delay_ms",), "condition")),
    Column("loss_pct", "float", "%", "the condition's loss (as in summary.csv)", "derived",
           derivation=Derivation("the condition's `loss_pct` (meta.json's `conditions`)", ("loss_pct",), "condition")),
    Column("rate_mbit", "float", "Mbit/s", "the condition's bottleneck rate (as in summary.csv)", "derived",
           derivation=Derivation("the condition's `rate_mbit` (meta.json's `conditions`)", ("rate_mbit",),
                                 "condition")),
)
DERIVED_BY_NAME: dict[str, Column] = {c.name: c for c in DERIVED}
assert not set(BY_NAME) & set(DERIVED_BY_NAME), "a derived column has a row column's name"


def derived(source: DerivedFrom | None = None) -> tuple[Column, ...]:
    """The derived columns (of one source: row, run or condition), in the order they are computed."""
    return tuple(c for c in DERIVED if source is None or c.derivation.source == source)


def metric(name: str) -> Column | None:
    """A row column or a derived one by name (None: neither)."""
    return BY_NAME.get(name) or DERIVED_BY_NAME.get(name)


def higher_is_better(name: str) -> bool:
    """Which way the metric is better: higher unless its column says lower (an unknown name: higher)."""
    col = metric(name)
    return col is None or col.higher_is_better


def metric_names() -> frozenset[str]:
    """The per-trial metrics: the numeric row columns and the columns derived from a row's own."""
    return frozenset(c.name for c in (*COLUMNS, *derived("row")) if c.type in ("int", "float"))


def names(*, group: str | None = None, type: str | None = None) -> tuple[str, ...]:
    return tuple(c.name for c in COLUMNS if (group is None or c.group == group) and (type is None or c.type == type))


# what meta.json's `columns` holds of each column (format 3; format 2 had the first five)
DESCRIBED = ("name", "type", "unit", "meaning", "group", "title", "header", "better", "digits")


def describe_column(c: Column) -> dict[str, Any]:
    return {k: getattr(c, k) for k in DESCRIBED}


def describe() -> list[dict[str, Any]]:
    """The table as JSON-able dicts (for meta.json): name, type, unit, meaning, group, title,
    header, better, digits."""
    return [describe_column(c) for c in COLUMNS]


def _type_ok(col: Column, v: Any) -> bool:
    if v is None:
        return True
    if col.type == "text":
        return isinstance(v, str)
    if col.type == "bool":
        return isinstance(v, bool)
    if col.type == "json":
        return isinstance(v, (dict, list))
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


BACKENDS = ("netns", "ssh")


def backend_differences() -> list[Column]:
    """The columns some lab backend leaves empty (docs/hosts.md lists them with why)."""
    return [c for c in COLUMNS if c.backends and set(c.backends) != set(BACKENDS)]


def backend_table() -> str:
    """docs/hosts.md's table of the columns that differ by backend, made from the columns table."""
    lines = ["| column | filled by | why not by the others |", "|---|---|---|"]
    lines += [f"| `{c.name}` | {', '.join(c.backends)} | {c.backends_why} |" for c in backend_differences()]
    return "\n".join(lines)


# -- docs/data.md's column tables --------------------------------------------------------------------

# the groups in the order docs/data.md's sections list them
DOC_GROUPS = ("trial", "link", "recovery", "capture", "page", "video", "load", "passthrough", "derived")
DOCS_FILE = Path(__file__).resolve().parents[3] / "docs" / "data.md"


def docs_markers(group: str) -> tuple[str, str]:
    return (f"<!-- columns {group}: generated from src/quicbench/model/columns.py; do not edit -->",
            f"<!-- /columns {group} -->")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def docs_table(group: str) -> str:
    """One group's table of docs/data.md, between its markers."""
    begin, end = docs_markers(group)
    if group == "derived":
        lines = ["| column | type | unit | meaning | derivation |", "|---|---|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.unit} | {_cell(c.meaning)} | {_cell(c.derivation.formula)} |"
                  for c in DERIVED]
    else:
        lines = ["| column | type | unit | meaning |", "|---|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.unit} | {_cell(c.meaning)} |" for c in COLUMNS if c.group == group]
    return "\n".join([begin, "", *lines, "", end])


def with_docs_tables(text: str) -> str:
    """docs/data.md's text with each generated table replaced by the columns table's."""
    for group in DOC_GROUPS:
        begin, end = docs_markers(group)
        if begin not in text or end not in text:
            raise ValueError(f"docs/data.md has no markers for the {group} columns ({begin})")
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = head + docs_table(group) + tail
    return text


def _main(argv: list[str]) -> int:
    if argv == ["docs"]:
        print("\n\n".join(docs_table(g) for g in DOC_GROUPS))
        return 0
    if argv == ["write"]:
        DOCS_FILE.write_text(with_docs_tables(DOCS_FILE.read_text()))
        print(f"wrote the column tables of {DOCS_FILE}")
        return 0
    print("usage: python -m quicbench.model.columns docs|write (write: docs/data.md's column tables, from this table)")
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
