"""A rough duration estimate for a plan (printed by `plan show`)."""

from __future__ import annotations

from quicbench.model.plan import Plan, TrialSpec

TRIAL_OVERHEAD_S = 0.15      # client start, handshakes, bookkeeping (measured: make bench)
PAGE_OVERHEAD_S = 3.0        # browser start, settle and close per page load (measured: docs/browser.md)
# a playback: browser start, settle and close, the start-up, then what is watched. Measured: a
# 20 s VOD on a LAN link took 27.0 s with a 0.55 s start-up; plans/dncs-video.toml's 60 s plays at
# 8 Mbit/s / 20 ms took 72.1-72.9 s (docs/video.md)
VIDEO_OVERHEAD_S = 7.0
VIDEO_STARTUP_BYTES = 1_500_000   # the player library, playlists, first audio and video segments
VIDEO_STARTUP_CPU_S = 0.5         # the browser's start-up work on a 2-core machine (a LAN start-up)
REALISTIC_PAGE_BYTES = 10_200_000
LAB_SETUP_S = 1.5            # lab, servers, content
BACKGROUND_WARMUP_S = 2.5    # background flows start and run 2 s before the transfer (run/background.py)
# effective goodput assumed per protocol when the link does not limit (2-core machine)
UNLIMITED_MBIT = {"h1": 2000.0, "h2": 1500.0, "h3": 400.0}


def trial_seconds(t: TrialSpec) -> float:
    c = t.condition
    rtt_s = c.base_rtt_ms / 1000
    rate = min(c.bottleneck_mbit or 1e9, c.down_trace_mbit or 1e9, UNLIMITED_MBIT.get(t.protocol, 500.0))
    loss = max((h.up.loss_pct + h.down.loss_pct) for h in c.hops) / 100
    if loss:
        # Mathis et al.: throughput ~ MSS/RTT * 1.22/sqrt(p), per connection
        conns = t.workload.parallelism if t.protocol == "h1" else 1
        mathis = conns * 1460 * 8 / max(rtt_s, 1e-3) * 1.22 / loss ** 0.5 / 1e6
        rate = min(rate, mathis)
    w = t.workload
    competing = sum(b.flows for b in c.background)
    if competing:      # a fair share of the bottleneck, after the background flows' warm-up
        rate /= 1 + competing
        return BACKGROUND_WARMUP_S + _transfer_seconds(t, rate, rtt_s)
    return _transfer_seconds(t, rate, rtt_s)


def _transfer_seconds(t: TrialSpec, rate: float, rtt_s: float) -> float:
    w = t.workload
    if w.kind == "video":        # a playback lasts as long as what is watched, whatever the link
        startup = VIDEO_STARTUP_CPU_S + VIDEO_STARTUP_BYTES * 8 / (rate * 1e6) + 10 * rtt_s
        return VIDEO_OVERHEAD_S + startup + (w.video_spec().duration_s if w.mode == "vod" else w.duration_s)
    if w.kind == "page":
        payload = REALISTIC_PAGE_BYTES if w.page == "realistic" else w.payload_bytes
        return PAGE_OVERHEAD_S + payload * 8 / (rate * 1e6) + 6 * rtt_s
    transfer = w.payload_bytes * 8 / (rate * 1e6)
    rounds = 3 + w.count / max(w.parallelism, 1)
    return TRIAL_OVERHEAD_S + transfer + rounds * rtt_s


def estimate_seconds(plan: Plan, trials: list[TrialSpec]) -> float:
    return LAB_SETUP_S + sum(trial_seconds(t) for t in trials)
