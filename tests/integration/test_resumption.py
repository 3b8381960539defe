"""Session resumption and 0-RTT (issue 28.3): the measured connections resume the ticket a
priming connection got, h3 sends its requests in 0-RTT when asked, and the rows say so as the
client verified it (tls.ConnectionState.DidResume, quic ConnectionState.Used0RTT); with the
server's address-validation token (0rtt-token) the 0-RTT response is not held back."""

import json

import pytest

from conftest import root_only, run_qb

pytestmark = [pytest.mark.integration, root_only]

PLAN = """
name = "resumption"
protocols = ["h1", "h2", "h3"]
repetitions = 1
link = "linkem"
order = "sequential"
[[workloads]]
size = "10KB"
count = 2
connections = "per-object"
resumption = "tickets"
[[workloads]]
size = "10KB"
count = 2
connections = "per-object"
resumption = "0rtt"
[[workloads]]
size = "10KB"
count = 2
connections = "per-object"
resumption = "0rtt-token"
[[conditions]]
name = "d10"
delay_ms = 10
"""


def test_resumed_sessions_and_0rtt_are_used_and_verified(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    out = tmp_path / "runs"
    r = run_qb("run", str(plan), "--out", str(out), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    rows = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert len(rows) == 9
    body_ms = {}
    for row in rows:
        assert row["status"] == "ok", row["error"]
        assert row["connections"] == 2           # the priming connection is not one of the trial's
        assert row["resumed_pct"] == 100, row
        reqs = [json.loads(line) for line in (run_dir / "trials" / f"{row['seq']:05d}" / "requests.jsonl").open()]
        assert [q["resumed"] for q in reqs] == [True, True]
        if row["protocol"] != "h3":
            assert row["early_data_pct"] is None             # crypto/tls: no client 0-RTT
        elif row["resumption"] in ("0rtt", "0rtt-token"):
            assert row["early_data_pct"] == 100 and all(q["early_data"] for q in reqs), reqs
            body_ms[row["resumption"]] = max((q["last_byte_ns"] - q["first_byte_ns"]) / 1e6 for q in reqs)
        else:
            assert row["early_data_pct"] == 0                # tickets alone: requests after the handshake
    # without an address-validation token the server may send 3x what it received until the
    # handshake completes: the 10 KB response waits a round trip (20 ms) after its first bytes;
    # with the token of the connection before, it comes at once
    assert body_ms["0rtt"] >= 10, body_ms
    assert body_ms["0rtt-token"] < 10, body_ms
