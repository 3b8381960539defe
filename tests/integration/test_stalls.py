"""Per-request stalls (qb-load's stall_ns and gaps_ns) and the all-streams-idle figure are
measured, and agree with each other and with the link (issue 28.2)."""

import json

import pytest

from conftest import root_only, run_qb

pytestmark = [pytest.mark.integration, pytest.mark.parallel_safe, root_only]

PLAN = """
name = "stalls"
protocols = ["h2", "h3"]
repetitions = 1
link = "linkem"
order = "sequential"
[[workloads]]
size = "200KB"
count = 6
[[conditions]]
name = "lossy"
delay_ms = 20
loss_pct = 3
rate_mbit = 20
"""


def test_stalls_are_recorded_and_consistent(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    out = tmp_path / "runs"
    r = run_qb("run", str(plan), "--out", str(out), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    rows = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert {row["protocol"] for row in rows} == {"h2", "h3"}
    for row in rows:
        assert row["status"] == "ok", row["error"]
        reqs = [json.loads(line) for line in (run_dir / "trials" / f"{row['seq']:05d}" / "requests.jsonl").open()]
        for q in reqs:
            gaps = q.get("gaps_ns") or []
            # gaps lie between the first and the last byte, in order, each at least 1 ms
            assert all(q["first_byte_ns"] <= a < b <= q["last_byte_ns"] and b - a >= 1_000_000 for a, b in gaps), q
            assert all(g[1] <= h[0] for g, h in zip(gaps, gaps[1:])), q
            assert q["stall_ns"] >= max((b - a for a, b in gaps), default=0)
        assert row["body_stall_ms_max"] == pytest.approx(max(q["stall_ns"] for q in reqs) / 1e6)
        assert 0 <= row["all_streams_idle_ms"] <= row["total_time_s"] * 1000
        if row["protocol"] == "h2":
            # 3 % loss of ~900 segments: some stream waited at least a round trip (40 ms) for a
            # retransmission, and with one TCP connection every stream waited with it
            assert row["body_stall_ms_max"] >= 40 and row["all_streams_idle_ms"] >= 40, row
