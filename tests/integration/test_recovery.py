"""Loss recovery counted per trial, for real: under jitter that reorders, quic-go (Caddy's
server) declares packets lost that the client then acknowledges (spurious), while Linux TCP
detects the reordering; under plain loss the losses are real."""

import json

import pytest

from conftest import root_only, run_qb

pytestmark = [pytest.mark.integration, root_only]

PLAN = """
name = "recovery"
protocols = ["h1", "h3"]
repetitions = 1
warmup = 0
[[workloads]]
size = "2MB"
count = 1
[[conditions]]
name = "reorder"
delay_ms = 10
jitter_ms = 4
jitter_dist = "uniform"
reorder = true
rate_mbit = 50
[[conditions]]
name = "loss"
delay_ms = 10
loss_pct = 2
rate_mbit = 50
[[conditions]]
name = "clean"
delay_ms = 10
rate_mbit = 50
"""


def test_loss_declarations_and_spurious_ones_are_counted(tmp_path, no_leftovers):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    p = run_qb("run", str(plan), "--out", str(tmp_path / "runs"), "--no-report", timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    run = next((tmp_path / "runs").iterdir())
    rows = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    ok = [r for r in rows if r["status"] == "ok"]
    # one trial per cell: every row below is checked on its own, a second repetition would check the same
    assert len(ok) == 6, [r.get("error") for r in rows]
    assert {(r["condition"], r["protocol"]) for r in ok} == {(c, p) for c in ("reorder", "loss", "clean")
                                                           for p in ("h1", "h3")}
    by = {(r["condition"], r["protocol"]): [] for r in ok}
    for r in ok:
        by[(r["condition"], r["protocol"])].append(r)
    for r in by[("reorder", "h3")]:
        # the server's own qlog, kept with the trial, counted: reordering makes quic-go declare
        # packets lost that were only late
        assert r["quic_qlog_connections"] >= 1 and r["quic_packets_sent"] > 1000
        assert list((run / "trials" / f"{r['seq']:05d}" / "qlog-server").glob("*_server.sqlog"))
        assert r["quic_lost_spurious"] > 0 and r["quic_lost"] >= r["quic_lost_spurious"]
        assert r["quic_lost_reordering"] + r["quic_lost_time"] == r["quic_lost"]
        # the client's own qlog shows the cause: packets arrived after higher-numbered ones
        assert r["quic_client_received"] > 1000 and r["quic_client_out_of_order"] > 0
        assert "tcp_out_segs" not in r      # h3 sends no TCP
    for r in by[("reorder", "h1")]:
        # Linux TCP sees the reordering (RACK/SACK/timestamps) and widens its threshold
        assert r["tcp_out_segs"] > 1000 and r["tcp_reorder_events"] > 0
        assert "quic_lost" not in r
    for r in by[("loss", "h3")]:
        # 2 % random loss: real losses, and few of the declarations are spurious
        assert r["quic_lost"] >= 0.005 * r["quic_packets_sent"]
        assert r["quic_lost_spurious"] <= r["quic_lost"] / 2
        assert r["quic_client_out_of_order"] == 0      # loss alone reorders nothing
    for r in by[("loss", "h1")]:
        assert r["tcp_retrans_segs"] >= 0.005 * r["tcp_out_segs"]
    # qlog = "auto" (the default): qlog where the path loses or reorders packets, so every lossy h3
    # row above has its counts; on the clean path the server ran without it (restarted between)
    for r in by[("clean", "h3")]:
        assert r.get("quic_packets_sent") is None and r.get("quic_client_received") is None, r
        assert not (run / "trials" / f"{r['seq']:05d}" / "qlog-server").exists()
    for r in by[("clean", "h1")]:
        assert r["tcp_out_segs"] > 1000                # TCP's counters need no qlog
