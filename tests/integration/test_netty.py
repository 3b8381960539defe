"""The JVM's HTTP/3 (Netty's QUIC and HTTP/3 codecs, quiche inside) at both ends of a real lab:
the netty server fetched by qb-load (quic-go) and by the netty client, and the netty client
fetching from Caddy (quic-go): HTTP/3 negotiated, every byte and sha256 checked, times and CPU
reported, the server's qlog read by the loss counts."""

import json
import subprocess

import pytest

from conftest import root_only
from quicbench.clients import LoadClient, Target
from quicbench.clients.netty import NettyClient
from quicbench.content.objects import generate
from quicbench.lab import LabSpec, make_lab
from quicbench.model.conditions import Condition
from quicbench.model.plan import TrialOptions, TrialSpec, Workload
from quicbench.run.trial import run_trial
from quicbench.servers.caddy import CaddyServer
from quicbench.servers.netty import NettyServer

pytestmark = [pytest.mark.integration, pytest.mark.parallel_safe, root_only]     # built by make setup-all (make test): make netty

COND = Condition(name="d5", delay_ms=5)


@pytest.fixture(scope="module")
def lab_env(tmp_path_factory):
    from quicbench.tls import make_tls
    wd = tmp_path_factory.mktemp("netty")
    content = generate({1_000_000: 2}, seed=43, cache=wd / "cache")
    with make_lab(LabSpec(name="t-netty", condition=COND)) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        yield lab, content, tls, wd


def _target(lab, content, tls, port):
    return Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=port, tls=tls, content=content)


def _requests(trial):
    return [json.loads(l) for l in (trial / "requests.jsonl").read_text().splitlines()]


def _left(workdir) -> list[str]:
    return subprocess.run(["pgrep", "-af", str(workdir)], capture_output=True, text=True).stdout.splitlines()


def test_netty_server_to_qb_load_and_to_the_netty_client(lab_env):
    lab, content, tls, wd = lab_env
    srv = NettyServer(lab, wd / "srv", content, tls, port=443, quic_cc="bbr")
    assert srv.enable_qlog()
    with srv:
        rows = {}
        for client in (LoadClient(), NettyClient()):
            spec = TrialSpec(0, COND, Workload(size="1MB", count=1), "h3", "netty", 1)
            trial = wd / "trial" / client.name
            rows[client.name] = run_trial(spec, _target(lab, content, tls, 443), client, srv.pid, trial, 60,
                                          TrialOptions(qlog=True), server_qlog_dir=srv.qlog_dir, sender=srv)
            row = rows[client.name]
            assert row["status"] == "ok", (client.name, row["error"])
            [r] = _requests(trial)
            assert r["proto"] == "h3" and r["status"] == 200 and r["bytes"] == 1_000_000 and r["sha256_ok"]
            assert row["protocols"] == "h3:1" and row["connections"] == 1 and row["goodput_mbps"] > 0
            # the sender's qlog (quiche's, one per connection) is read by the loss counts
            assert row["quic_qlog_connections"] == 1 and row["quic_packets_sent"] > 700
            assert row["quic_cc"] == "bbr"
    assert _left(srv.workdir) == [], "the server left processes behind"
    # the netty client's own report: its CPU over the transfer and its threads' run-queue wait
    nc = rows["netty"]
    assert nc["client_cpu_s"] > 0 and nc["client_cpu_wait_s"] is not None
    assert nc["ttfb_ms"] >= 10 and nc["handshake_ms"] >= 10     # 2 x 5 ms one way
    assert nc["quic_client_received"] > 700                     # its own qlog, quiche's


def test_netty_client_fetches_from_caddy_one_connection_per_object(lab_env):
    lab, content, tls, wd = lab_env
    spec = TrialSpec(0, COND, Workload(size="1MB", count=2, parallel=2, connections="per-object"), "h3", "caddy", 1)
    trial = wd / "trial" / "caddy-netty"
    with CaddyServer(lab, wd / "caddy", content, tls, port=4443) as srv:
        row = run_trial(spec, _target(lab, content, tls, 4443), NettyClient(), srv.pid, trial, 60)
    assert row["status"] == "ok", row["error"]
    reqs = _requests(trial)
    assert [r["i"] for r in reqs] == [1, 2] and {r["proto"] for r in reqs} == {"h3"}
    assert all(r["bytes"] == 1_000_000 and r["sha256_ok"] and not r["conn_reused"] for r in reqs)
    assert row["connections"] == 2 and row["bytes"] == 2_000_000
    summary = json.loads((trial / "summary.json").read_text())
    assert summary["versions"]["netty"] == "4.2.18.Final" and summary["versions"]["quiche"]


def test_an_unknown_cc_stops_the_start_naming_the_accepted_ones(lab_env):
    from quicbench.errors import QuicbenchError
    lab, content, tls, wd = lab_env
    srv = NettyServer(lab, wd / "srv-bad", content, tls, port=1443, quic_cc="vegas")
    with pytest.raises(QuicbenchError) as e:
        srv.start()
    assert "exited at start (code 2)" in str(e.value) and "cubic, reno, bbr" in str(e.value)
    assert _left(srv.workdir) == []
