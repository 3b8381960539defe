"""One trial: a protocol fetching a workload through the lab, measured and verified."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from quicbench.run.capture import Capture, finish_pcap
from quicbench.run import recovery
from quicbench.clients.base import Client, ClientResult, FetchRequest, Target
from quicbench.clients.loadclient import LoadClient
from quicbench.lab.base import CpuCounters
from quicbench.run.background import Background
from quicbench.run.rebind import Rebinding, ports_for as rebind_ports
from quicbench.model.columns import make_row
from quicbench.cpu import PathCpu, cpu_bound_by, machine_busy_share, ticks_ms, transfer_seconds
from quicbench.link.fidelity import LinkReading, LinkWindow, link_late, link_window
from quicbench.run.metrics import summarize_requests
from quicbench.run.wire import analyze_pcap, write_timeseries
from quicbench.model.specs import TrialOptions, TrialSpec


def base_row(spec: TrialSpec, client_name: str) -> dict[str, Any]:
    """What identifies a trial: the start of its row, whatever its outcome."""
    w = spec.workload
    return make_row(key=spec.key, seq=spec.seq, condition=spec.condition.name,
                    condition_desc=spec.condition.short(), protocol=spec.protocol, server=spec.server,
                    client=client_name, workload=w.label, kind=w.kind, size_bytes=w.size_bytes, count=w.count,
                    parallel=w.parallelism, connection_policy=w.connections,
                    resumption=w.resumption, rep=spec.rep, warmup=spec.warmup, started_at=time.time())


def run_trial(spec: TrialSpec, target: Target, client: Client, server_pid: int | None,
              trial_dir: Path, timeout_s: float, options: TrialOptions | None = None,
              server_qlog_dir: Path | None = None, sender: Any = None) -> dict[str, Any]:
    """Run one trial and return its row (status ok or failed with the reason). The server's
    qlogs (server_qlog_dir, when it writes them) are moved into the trial's directory. An h3
    trial's row names its sender's congestion controller (``sender``: the server driver), and
    fails if the sender reported another one."""
    w = spec.workload
    row = base_row(spec, client.name)
    options = options or TrialOptions()
    background = None
    if spec.condition.background or spec.condition.probes_latency:
        background = Background(target.lab, target, spec.condition, options.tcp_cc, LoadClient.executable(),
                                trial_dir / "background")
    rebinding, local_port = None, None
    if spec.condition.rebind_at_s:
        local_port, seen_port = rebind_ports(spec.seq)
        rebinding = Rebinding(target.lab, spec.protocol, local_port, seen_port, spec.condition.rebind_at_s)
    captures = _start_captures(target, trial_dir, options)
    # the sender's TCP counters: only this trial sends TCP in the server's namespace, unless
    # background TCP flows share it
    tcp_counted = spec.protocol in ("h1", "h2") and not any(b.protocol != "h3" for b in spec.condition.background)
    try:
        with background or contextlib.nullcontext(), rebinding or contextlib.nullcontext():
            mark0 = background.mark() if background else None
            tcp0 = recovery.tcp_counters(target.lab) if tcp_counted else None
            cpu0, link0 = target.lab.endpoint_cpu(server_pid), _link_reading(target)
            if rebinding:
                rebinding.arm()
            res = client.fetch(FetchRequest(target, spec.protocol, w, trial_dir, timeout_s, options, local_port))
            cpu1, link1 = target.lab.endpoint_cpu(server_pid), _link_reading(target)
            tcp1 = recovery.tcp_counters(target.lab) if tcp_counted else None
            mark1 = background.mark() if background else None
            rebound = rebinding.metrics(res.requests) if rebinding else {}
    finally:
        cap_counts = [c.stop() for c in captures]
    if background and mark0 and mark1:
        row.update(background.metrics(mark0, mark1))
    row.update(rebound)
    m = summarize_requests(res.requests, stall_min_ms=max(1.0, spec.condition.base_rtt_ms / 2))
    row.update(m)
    row["handshake_rtts"] = handshake_rtts(m.get("handshake_ms"), spec.condition.base_rtt_ms)
    row.update(res.extra)          # e.g. page-load metrics of the browser client
    if captures:
        row.update(_wire_view(captures[0].pcap, target.address, m.get("bytes"), trial_dir, cap_counts[0]))
        for c in captures:
            finish_pcap(c.pcap, options.capture_keep)
    row.update(_cpu_columns(row, res, cpu0, cpu1, link0, link1, spec))
    row.update(recovery.tcp_columns(tcp0, tcp1))
    if server_qlog_dir is not None:
        target.lab.collect("server", server_qlog_dir)    # from a server on another host
    server_qlogs = recovery.take_server_qlogs(server_qlog_dir, trial_dir)
    row.update(recovery.quic_columns(server_qlogs, trial_dir / "qlog",
                                     blocked_frames=getattr(sender, "quic_blocked_frames", True)))
    cc_error = None
    if sender is not None and spec.protocol == "h3":
        row["quic_cc"] = sender.sender_cc
        row["quic_cc_seen"] = sender.reported_cc(server_qlogs, trial_dir)
        cc_error = cc_mismatch(row["quic_cc"], row["quic_cc_seen"], type(sender).name)
    row.update(recovery.quic_client_columns(trial_dir / "qlog"))
    w.workload_kind.finish_row(row)      # e.g. a player's own CPU rule
    error = res.error
    if rebinding and rebinding.error:
        error = rebinding.error
    elif rebinding and not row.get("rebound") and error is None:
        error = (f"rebind_at_s = {spec.condition.rebind_at_s:g}: the transfer ended before the rebinding "
                 f"(make it last longer, or rebind sooner)")
    if error is None:
        error = cc_error
    if error is None:
        error = verify(row, spec)
    row["status"] = "failed" if error else "ok"
    row["error"] = error
    return row


def _link_reading(target: Target) -> LinkReading | None:
    """The link emulator's counters now; None when it keeps none (netem, plain) or does not answer
    (the lab's own checks say why: a trial is not failed for a missing fidelity reading)."""
    link = target.lab.link
    try:
        return link.reading() if link is not None else None
    except (OSError, ValueError):
        return None


def _cpu_columns(row: dict[str, Any], res: ClientResult, cpu0: CpuCounters, cpu1: CpuCounters, link0: LinkReading | None,
                 link1: LinkReading | None, spec: TrialSpec) -> dict[str, Any]:
    """CPU of the path's processes (client, server, link emulator) and the machine over the
    transfer, the link's lateness, and the verdicts: cpu_bound (the CPU set the pace) and
    link_late (the link emulator did not keep the condition's timing)."""
    duration = transfer_seconds(row)
    out: dict[str, Any] = {"wall_s": res.wall_s, "client_process_cpu_s": res.process_cpu_s,
                           "client_cpu_s": res.cpu_s, "client_cpu_wait_s": res.cpu_wait_s,
                           "server_cpu_s": None, "server_cpu_wait_s": None}
    if cpu0.server is not None and cpu1.server is not None:
        out["server_cpu_s"] = cpu1.server[0] - cpu0.server[0]
        out["server_cpu_wait_s"] = max(0.0, cpu1.server[1] - cpu0.server[1])
    window = link_window(link0, link1) if link0 is not None and link1 is not None else None
    if window is not None:
        out.update(link_cpu_s=window.cpu_s, link_cpu_wait_s=window.cpu_wait_s, link_packets=window.packets,
                   link_late_p50_ms=window.late_p50_ms, link_late_p99_ms=window.late_p99_ms,
                   link_late_max_ms=window.late_max_ms, link_late_drops=window.late_drops,
                   link_late=link_late(window, spec.condition), link_codel_drops=window.codel_drops,
                   link_sojourn_p50_ms=window.sojourn_p50_ms, link_sojourn_p99_ms=window.sojourn_p99_ms)
    for who in ("client", "server", "link"):
        cpu = out.get(f"{who}_cpu_s")
        out[f"{who}_cpu_pct"] = 100 * cpu / duration if cpu is not None and duration else None
    # the busiest endpoint machine (one here; the client's and the server's host over SSH)
    shares = [machine_busy_share(m0, cpu1.machines[h]) for h, m0 in cpu0.machines.items() if h in cpu1.machines]
    busy = max((x for x in shares if x is not None), default=None)
    out["machine_cpu_pct"] = 100 * busy if busy is not None else None
    waits = [cpu1.softirq_wait[h] - w0 for h, w0 in cpu0.softirq_wait.items() if h in cpu1.softirq_wait]
    out["softirq_wait_s"] = max(0.0, max(waits)) if waits else None
    out.update(placement_columns(cpu0, cpu1, window, out.get("link_late")))
    bound_by = cpu_bound_by(PathCpu.from_row({**row, **out}, spec.condition.down_rate_mbit))
    out["cpu_bound"] = bool(bound_by)
    out["cpu_bound_by"] = ",".join(bound_by) or None
    return out


def placement_columns(cpu0: CpuCounters, cpu1: CpuCounters, window: LinkWindow | None,
                      late: bool | None) -> dict[str, Any]:
    """Where the trial ran and what else took its CPUs: the hypervisor's steal and the softirq time
    of each CPU over the fetch window (this machine; over SSH the server's host), the CPUs
    the link emulator's forwarding threads and the server last ran on, the link emulator's
    involuntary context switches, and ``host_steal``: a link-late trial during which the
    hypervisor took at least the trial's p99 lateness from the CPUs the link emulator ran on
    (its lateness is the host's, not the emulator's; judged where linkem runs on this machine)."""
    out: dict[str, Any] = {"host_steal_ms": None, "softirq_cpu_ms": None, "link_cpus": None, "server_cpus": None,
                           "link_nivcsw": None, "host_steal": None}
    host = next((h for h in cpu0.per_cpu if h in cpu1.per_cpu and len(cpu0.per_cpu[h]) == len(cpu1.per_cpu[h])), None)
    steal: list[float] = []
    if host is not None:
        before, after = cpu0.per_cpu[host], cpu1.per_cpu[host]
        steal = [ticks_ms(max(0, a[1] - b[1])) for b, a in zip(before, after)]
        out["host_steal_ms"] = sum(steal)
        out["softirq_cpu_ms"] = [ticks_ms(max(0, a[0] - b[0])) for b, a in zip(before, after)]
    out["server_cpus"] = list(cpu1.server_cpus) or None
    if window is not None:
        out["link_cpus"] = list(window.cpus) or None
        out["link_nivcsw"] = window.nivcsw
        if late and host == "" and steal and window.late_p99_ms is not None:   # linkem on this machine
            cores = [c for c in window.cpus if c < len(steal)] or list(range(len(steal)))
            out["host_steal"] = max(steal[c] for c in cores) >= window.late_p99_ms
    return out


def _start_captures(target: Target, trial_dir: Path, options: TrialOptions) -> list[Capture]:
    if not options.capture:
        return []
    lab = target.lab
    caps = [Capture(lab, "client", lab.interface("client", "server"), target.address, trial_dir / "client.pcap")]
    if options.capture_router:
        caps.append(Capture(lab, "router", lab.interface("router", "client"), target.address,
                            trial_dir / "router.pcap"))
    started: list[Capture] = []
    try:
        for c in caps:
            c.start()
            started.append(c)
    except BaseException:
        for c in started:
            c.stop()
        raise
    return caps


def _wire_view(pcap: Path, server_ip: str, payload: int | None, trial_dir: Path,
               counts: dict[str, int]) -> dict[str, Any]:
    wire = analyze_pcap(pcap, server_ip, payload)
    write_timeseries(trial_dir, wire.pop("timeseries"))
    # packets the filter saw but tcpdump did not write, plus the kernel's drops
    missed = (counts.get("received", 0) - counts.get("captured", 0)) if "received" in counts else None
    wire["capture_dropped"] = None if missed is None else missed + counts.get("dropped_by_kernel", 0)
    return wire


MIN_RTT_FOR_RTT_COUNT_MS = 2.0    # below this, per-packet and scheduling times swamp a round trip


def handshake_rtts(handshake_ms: float | None, base_rtt_ms: float) -> float | None:
    """The median new connection's handshake (connect start to TLS done) in round trips of the
    condition's base RTT: about 2 for TCP + TLS 1.3, 1 for QUIC, 0 for QUIC 0-RTT (the
    connection can send at once). More on a loss-free link is a stack's doing (docs/data.md)."""
    if handshake_ms is None or base_rtt_ms < MIN_RTT_FOR_RTT_COUNT_MS:
        return None
    return handshake_ms / base_rtt_ms


def cc_mismatch(asked: str | None, seen: str | None, server: str) -> str | None:
    """Why a trial's sender did not run the congestion controller its row names (None: it did, or
    it reported none)."""
    if seen is None or asked is None or seen == asked:
        return None
    return (f"quic_cc: the row says {asked}, but {server}'s sender reported {seen} for this trial's "
            f"connections (server-cc.log in the trial's directory)")


def verify(row: dict[str, Any], spec: TrialSpec) -> str | None:
    """Check what was measured (protocol negotiated, every request, every byte): the kind says how."""
    return spec.workload.workload_kind.verify(row, spec)
