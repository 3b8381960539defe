"""One trial: a protocol fetching a workload through the lab, measured and verified."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from quicbench.run.capture import Capture, finish_pcap
from quicbench.clients.base import Client, FetchRequest, Target
from quicbench.model.columns import make_row
from quicbench.cpu import cpu_bound, machine_bound, machine_busy_share
from quicbench.run.metrics import summarize_requests
from quicbench.run.wire import analyze_pcap, write_timeseries
from quicbench.model.plan import TrialOptions, TrialSpec


def base_row(spec: TrialSpec, client_name: str) -> dict[str, Any]:
    """What identifies a trial: the start of its row, whatever its outcome."""
    w = spec.workload
    return make_row(key=spec.key, seq=spec.seq, condition=spec.condition.name,
                    condition_desc=spec.condition.short(), protocol=spec.protocol, server=spec.server,
                    client=client_name, workload=w.label, size_bytes=w.size_bytes, count=w.count,
                    parallel=w.parallelism, connection_policy=w.connections, rep=spec.rep, warmup=spec.warmup, started_at=time.time())


def run_trial(spec: TrialSpec, target: Target, client: Client, server_pid: int | None,
              trial_dir: Path, timeout_s: float, options: TrialOptions | None = None) -> dict[str, Any]:
    """Run one trial and return its row (status ok or failed with the reason)."""
    w = spec.workload
    row = base_row(spec, client.name)
    options = options or TrialOptions()
    captures = _start_captures(target, trial_dir, options)
    try:
        cpu0 = target.lab.endpoint_cpu(server_pid)
        res = client.fetch(FetchRequest(target, spec.protocol, w, trial_dir, timeout_s, options))
        cpu1 = target.lab.endpoint_cpu(server_pid)
    finally:
        cap_counts = [c.stop() for c in captures]
    m = summarize_requests(res.requests)
    row.update(m)
    row.update(res.extra)          # e.g. page-load metrics of the browser client
    if captures:
        row.update(_wire_view(captures[0].pcap, target.address, m.get("bytes"), trial_dir, cap_counts[0]))
        for c in captures:
            finish_pcap(c.pcap, options.capture_keep)
    duration = m.get("total_time_s")
    if w.kind == "video" and row.get("watched_s"):
        # a player's CPU is spent over the playback (decoding), not over its requests' span
        duration = row["watched_s"] + (row.get("startup_s") or 0.0)
    server_cpu = server_wait = None
    if cpu0.server is not None and cpu1.server is not None:
        server_cpu, server_wait = cpu1.server[0] - cpu0.server[0], max(0.0, cpu1.server[1] - cpu0.server[1])
    client_cpu, client_wait = res.cpu_s, res.cpu_wait_s
    row.update({
        "wall_s": res.wall_s,
        "client_cpu_s": client_cpu,
        "client_process_cpu_s": res.process_cpu_s,
        "server_cpu_s": server_cpu,
        "client_cpu_wait_s": client_wait,
        "server_cpu_wait_s": server_wait,
        "client_cpu_pct": 100 * client_cpu / duration if client_cpu is not None and duration else None,
        "server_cpu_pct": 100 * server_cpu / duration if server_cpu is not None and duration else None,
    })
    # the busiest endpoint machine (one here; the client's and the server's host over SSH)
    shares = [machine_busy_share(m0, cpu1.machines[h]) for h, m0 in cpu0.machines.items() if h in cpu1.machines]
    busy = max((x for x in shares if x is not None), default=None)
    row["machine_cpu_pct"] = 100 * busy if busy is not None else None
    bound_by = [who for who, cpu, wait in (("client", client_cpu, client_wait), ("server", server_cpu, server_wait))
                if cpu_bound(cpu, duration, wait, m.get("goodput_mbps"), spec.condition.down_rate_mbit)]
    if machine_bound(busy, m.get("goodput_mbps"), spec.condition.down_rate_mbit):
        bound_by.append("machine")
    if w.kind == "video":
        # a player's CPU has its own rule (the client computed it: video_metrics.player_cpu_bound);
        # the download rule's client and machine figures flag every playback on a small machine
        bound_by = [b for b in bound_by if b == "server"] + (["player"] if row.get("player_cpu_bound") else [])
    row["cpu_bound"] = bool(bound_by)
    row["cpu_bound_by"] = ",".join(bound_by) or None
    error = res.error
    if error is None:
        error = verify(row, spec)
    row["status"] = "failed" if error else "ok"
    row["error"] = error
    return row


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


def verify(row: dict[str, Any], spec: TrialSpec) -> str | None:
    """Check what was measured: protocol negotiated, every request, every byte."""
    w = spec.workload
    if w.kind == "video":
        # every request that got a response used the requested protocol (requests still in
        # flight when playback stopped have none); the client checked segments and the player
        bad = [p for p in (row.get("protocols") or "").split(",")
               if p and not p.startswith(f"{spec.protocol}:") and not p.startswith("none:")]
        if bad or f"{spec.protocol}:" not in (row.get("protocols") or ""):
            return f"protocol mismatch: requested {spec.protocol}, requests used {row.get('protocols')}"
        return None
    if w.kind == "page":
        bad = [p for p in (row.get("protocols") or "").split(",") if p and not p.startswith(f"{spec.protocol}:")]
        if bad or not row.get("protocols"):
            return f"protocol mismatch: requested {spec.protocol}, requests used {row.get('protocols')}"
        if row.get("requests_ok") != row.get("requests"):
            return f"{(row.get('requests') or 0) - (row.get('requests_ok') or 0)} page request(s) failed"
        return None
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
    return verify_connections(row.get("connections"), w, spec.protocol)


def verify_connections(opened: int | None, w, protocol: str) -> str | None:
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
