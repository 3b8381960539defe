"""The aioquic drivers end to end: aioquic's server sends to qb-load (quic-go), Caddy (quic-go) sends
to aioquic's client, and each to the other, in one run of a 2 x 2 stack matrix (about 20 s)."""

import json
from pathlib import Path

import pytest

from conftest import root_only, run_qb

pytestmark = [pytest.mark.integration, pytest.mark.parallel_safe, root_only]

PLAN = """
name = "aioquic-pairs"
protocols = ["h3"]
repetitions = 1
client = ["qb-load", "aioquic"]
servers = { h3 = ["caddy", "aioquic"] }
quic_cc = { aioquic = "cubic" }
qlog = true
[[workloads]]
size = "100KB"
count = 4
connections = "per-object"
parallel = 2
[[conditions]]
name = "c"
delay_ms = 5
rate_mbit = 20
"""


def test_aioquic_sends_and_receives_with_other_stacks(tmp_path: Path, no_leftovers):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    r = run_qb("run", str(plan), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(d for d in (tmp_path / "runs").iterdir() if d.is_dir())
    rows = {(x["server"], x["client"]): x for x in map(json.loads, (run_dir / "trials.jsonl").read_text().splitlines())}
    assert set(rows) == {(s, c) for s in ("caddy", "aioquic") for c in ("qb-load", "aioquic")}
    for (server, client), x in rows.items():
        assert x["status"] == "ok", x["error"]
        assert x["protocols"] == "h3:4" and x["connections"] == 4 and x["bytes"] == 400_000
        assert x["ttfb_ms"] > 0 and x["client_cpu_s"] > 0 and x["client_cpu_wait_s"] is not None
        assert x["quic_qlog_connections"] == 4 and x["quic_client_received"] > 0    # both ends' qlogs
        assert x["quic_client_ack_ratio"] >= 1          # the receiver acknowledged: packets per ACK it sent
        assert x["server_stack"].startswith("aioquic 1." if server == "aioquic" else "caddy 2.")
        assert x["client_stack"].startswith("aioquic 1." if client == "aioquic" else "qb-load ")
    # the controller asked of aioquic is the one aioquic ran, read back from it
    assert rows[("aioquic", "qb-load")]["quic_cc"] == "cubic" == rows[("aioquic", "qb-load")]["quic_cc_seen"]
    md = run_qb("report", str(run_dir), "--format", "md")
    assert md.returncode == 0, md.stderr
    assert "## Stack matrix" in md.stdout and "| sender \\ receiver | aioquic | qb-load |" in md.stdout
