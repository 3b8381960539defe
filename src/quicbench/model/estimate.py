"""A rough duration estimate for a plan (printed by `plan show`)."""

from __future__ import annotations

from quicbench.model.plan import Plan, TrialSpec

# each kind's own overheads are in model/workload_kinds.py
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
    competing = sum(b.flows for b in c.background)
    if competing:      # a fair share of the bottleneck, after the background flows' warm-up
        rate /= 1 + competing
        return BACKGROUND_WARMUP_S + _transfer_seconds(t, rate, rtt_s)
    return _transfer_seconds(t, rate, rtt_s)


def _transfer_seconds(t: TrialSpec, rate: float, rtt_s: float) -> float:
    return t.workload.workload_kind.transfer_seconds(t.workload, rate, rtt_s)


def estimate_seconds(plan: Plan, trials: list[TrialSpec]) -> float:
    return LAB_SETUP_S + sum(trial_seconds(t) for t in trials)
