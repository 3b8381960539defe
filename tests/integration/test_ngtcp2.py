"""A second QUIC stack end to end: ngtcp2's server and client (Debian's ngtcp2 1.11, from
bookworm-backports), and congestion control as a plan dimension, through a lab with loss.

One run: h3 served by Caddy (quic-go) and by ngtcp2 with quic_cc cubic and bbr, fetched by qb-load
and by the ngtcp2 client (against Caddy too); h2 over TCP cubic and bbr. Checked from what was
measured: every request's protocol and bytes, the congestion controller the ngtcp2 sender itself
reported per trial (its log, with qlog on), its qlog's loss counts, and each h2 trial's TCP
congestion control as the server's kernel ran it (``ss -ti`` in the server node, sampled while
the trials ran)."""

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import lab_namespaces, root_only, run_qb

pytestmark = [pytest.mark.integration, root_only,
              pytest.mark.skipif(not Path("/usr/sbin/gtlsserver").exists() or not Path("/usr/bin/gtlsclient").exists(),
                                 reason="ngtcp2-server/ngtcp2-client not installed (make setup)")]

PLAN = """
name = "ngtcp2-stacks"
protocols = ["h2", "h3"]
client = ["qb-load", "ngtcp2"]
servers = { h3 = ["caddy", "ngtcp2"] }
quic_cc = { ngtcp2 = ["cubic", "bbr"] }
tcp_cc = ["cubic", "bbr"]
qlog = true
verify_cc = true
repetitions = 1
order = "sequential"
trial_timeout_s = 30
[[workloads]]
size = "1MB"
count = 2
[[workloads]]
size = "10KB"
count = 3
connections = "per-object"
parallel = 3
[[conditions]]
name = "lossy"
delay_ms = 5
loss_pct = 1
rate_mbit = 20
"""


class TcpCcSampler:
    """Samples ``ss -ti`` in the run's server node: (time ns, congestion controls of the
    established connections from port 443)."""

    def __init__(self, before: set[str]):
        self.before, self.samples, self.done = before, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _server_ns(self) -> str | None:
        new = [n for n in lab_namespaces() - self.before if n.startswith("qb-r") and n.endswith("-server")]
        return new[0] if len(new) == 1 else None

    def _run(self) -> None:
        ns = None
        while not self.done.is_set():
            ns = ns or self._server_ns()
            if ns:
                t = time.time_ns()
                out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tinH", "state", "established",
                                      "( sport = :443 )"], capture_output=True, text=True).stdout
                ccs = set(re.findall(r"^\s+(cubic|bbr|reno)\b", out, re.M))
                if ccs:
                    self.samples.append((t, ccs))
            time.sleep(0.01)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(5)


def test_ngtcp2_server_and_client_with_quic_and_tcp_cc_through_a_lossy_lab(tmp_path, no_leftovers):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    with TcpCcSampler(lab_namespaces()) as sampler:
        r = run_qb("run", str(plan), "--out", str(tmp_path / "runs"), "--no-report", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next((tmp_path / "runs").iterdir())
    rows = [json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines()]
    # h2 x 2 tcp_cc x qb-load; h3 x (caddy, ngtcp2/cubic, ngtcp2/bbr) x 2 clients; x 2 workloads
    assert len(rows) == 2 * (2 + 3 * 2), [x["key"] for x in rows]
    assert len({x["key"] for x in rows}) == len(rows)
    for x in rows:
        w = 2 if x["count"] == 2 else 3
        assert x["status"] == "ok", (x["key"], x["error"])
        assert x["protocols"] == f"{x['protocol']}:{w}", x["key"]         # negotiated, per request
        assert x["bytes"] == x["size_bytes"] * w and x["requests_ok"] == w
        assert x["connections"] == (1 if w == 2 else 3)
    h3 = [x for x in rows if x["protocol"] == "h3"]
    for x in h3:
        assert x["quic_packets_sent"] > 0 and x["quic_qlog_connections"] >= 1   # the sender's own qlog
        if x["server"] == "ngtcp2":
            # the sender named its congestion controller itself, and it is the one the key asked for
            assert x["key"].split("|")[3] == f"ngtcp2/{x['quic_cc']}"
            assert x["quic_cc_seen"] == x["quic_cc"], x["key"]
            assert x["server_stack"].startswith("ngtcp2 1.11") and "nghttp3" in x["server_stack"]
            log = (run_dir / "trials" / f"{x['seq']:05d}" / "server-cc.log").read_text()
            assert (" cca bbr " in log) == (x["quic_cc"] == "bbr")
            if x["quic_lost"]:
                assert x["quic_lost_reordering"] is None      # ngtcp2's qlog gives no loss trigger
        else:
            assert x["quic_cc"] == "reno" and x["quic_cc_seen"] is None     # quic-go's, not settable
        if x["client"] == "ngtcp2":
            assert x["client_stack"].startswith("ngtcp2 1.11")
            assert x["quic_client_received"] > 0 and x["client_cpu_s"] > 0
            assert x["ttfb_ms"] >= 10 and x["handshake_ms"] >= 9          # at least a round trip of 10 ms
    big = [x for x in h3 if x["count"] == 2 and x["server"] == "ngtcp2"]
    assert sum(x["quic_lost"] for x in big) > 0                          # 1 % loss: the sender saw it
    assert {(x["server"], x["client"]) for x in h3} == {(s, c) for s in ("caddy", "ngtcp2") for c in ("qb-load", "ngtcp2")}
    # each h2 trial ran over the TCP congestion control its row names, as the server's kernel ran it
    h2 = [x for x in rows if x["protocol"] == "h2"]
    assert sorted(x["tcp_cc"] for x in h2) == ["bbr", "bbr", "cubic", "cubic"]
    checked = 0
    for x in h2:
        seen = set().union(*[ccs for t, ccs in sampler.samples if x["start_ns"] <= t <= x["end_ns"]] or [set()])
        assert seen <= {x["tcp_cc"]}, (x["key"], seen)
        checked += bool(seen)
    assert checked >= 2, sampler.samples[:5]
    # the report's cells name stack and congestion control
    from quicbench.analysis.load import load_run
    cells = set(load_run(run_dir).trials["protocol"])
    assert {"h2/cubic", "h2/bbr", "h3@ngtcp2/bbr~ngtcp2", "h3@ngtcp2/cubic~qb-load", "h3@caddy/reno~ngtcp2"} <= cells
