"""NAT rebinding mid-transfer (issue 28.4): the server sees the client's new port; TCP (h1,
h2) cannot continue; QUIC can, if the server stack moves to the new path (Caddy 2.11.9, quic-go
v0.63, sometimes does: docs/plans.md, "NAT rebinding"); the rows say which, and nothing is left
in the nodes."""

import json
import subprocess

import pytest

from conftest import root_only, run_qb
from quicbench.run.rebind import NFT_TABLE

pytestmark = [pytest.mark.integration, pytest.mark.parallel_safe, root_only]

PLAN = """
name = "rebind"
protocols = ["h1", "h2", "h3"]
repetitions = 1
link = "linkem"
order = "sequential"
trial_timeout_s = 13          # past qb-load's 10 s QUIC keep-alive (see the h3 assertion)
[[workloads]]                 # one request after another: the client keeps sending
size = "100KB"
count = 40
parallel = 1
[[conditions]]
name = "rebind"
delay_ms = 10
rate_mbit = 20
rebind_at_s = 0.8
"""


def test_tcp_breaks_and_quic_survives_a_rebinding(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    out = tmp_path / "runs"
    r = run_qb("run", str(plan), "--out", str(out), "--no-report")
    assert r.returncode == 1, r.stdout + r.stderr          # the TCP trials failed, as they must
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    rows = {row["protocol"]: row for row in map(json.loads, (run_dir / "trials.jsonl").read_text().splitlines())}
    for proto, row in rows.items():
        assert row["rebind_at_s"] == 0.8 and row["rebound"], row
    for proto in ("h1", "h2"):
        # a new 4-tuple is another connection to TCP: the server resets it if the client sends on
        # it, or the client waits for a response that goes to the old mapping until the deadline.
        # The transfer completes only if the client opened a new connection (Go's net/http retries
        # a GET on a fresh one after a reset): TCP's connection itself never survives
        row, err = rows[proto], rows[proto]["error"] or ""
        if row["status"] == "ok":
            assert row["connections"] >= 2, row
        else:
            assert "connection reset" in err or "timeout" in err, err
    h3 = rows["h3"]
    # the server sees QUIC's new port as soon as the client sends: at once when it has data in flight
    # or acknowledges what arrives, else (a rebinding just after the server acknowledged the client's
    # last request, its response dropped on the old mapping) only with the keep-alive PING 10 s later
    assert h3["rebind_seen_by_server"], h3
    if h3["status"] == "ok":
        assert h3["connections"] == 1, h3          # the same connection, moved: not a new one
        # survived: the server moved to the new port (RFC 9000 9.3 lets it send there as soon as a
        # packet from it arrives, before the path is validated), every byte came, the stall was measured
        assert h3["bytes"] == 4_000_000 and h3["rebind_stall_ms"] is not None and h3["rebind_stall_ms"] >= 0, h3
    else:
        # the server kept sending to the old mapping, which the rebinding dropped
        assert "timeout" in h3["error"] or "no recent network activity" in h3["error"], h3["error"]
    state = json.loads((run_dir / "meta.json").read_text())
    assert state.get("status") == "complete"
    for ns in [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
               if n.startswith("qb-")]:
        tables = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "tables"], capture_output=True, text=True)
        assert NFT_TABLE not in tables.stdout
