"""The Rust HTTP/3 stacks of `make stacks` end to end through a lab: the quiche server
(stacks/quiche/) fetched by qb-load, the quiche and quinn clients against Caddy (quic-go), and
the cross pairs of the two stacks. Each trial fetches over h3 and checks every request (protocol,
bytes, sha256) and that the row names both stacks with their versions."""

import json
import subprocess

import pytest

from conftest import root_only
from quicbench.clients import LoadClient, Target
from quicbench.clients.quiche import QuicheClient
from quicbench.clients.quinn import QuinnClient
from quicbench.content.objects import generate
from quicbench.errors import QuicbenchError
from quicbench.lab import LabSpec, make_lab
from quicbench.model.conditions import Condition
from quicbench.model.plan import TrialOptions, TrialSpec, Workload
from quicbench.registry import driver_stack
from quicbench.run.recovery import qlog_records
from quicbench.run.trial import run_trial
from quicbench.servers.caddy import CaddyServer
from quicbench.servers.quiche import QuicheServer
from quicbench.servers.quinn import QuinnServer
from quicbench.tls import make_tls

pytestmark = [pytest.mark.integration, root_only,
              pytest.mark.skipif(not all(d.available()[0] for d in (QuicheServer, QuicheClient, QuinnClient)),
                                 reason="the Rust stacks are not built (make stacks)")]

COND = Condition(name="d5", delay_ms=5)


@pytest.fixture(scope="module")
def lab_env(tmp_path_factory):
    wd = tmp_path_factory.mktemp("rust-stacks")
    content = generate({300_000: 3, 10_000: 4}, seed=43, cache=wd / "cache")
    with make_lab(LabSpec(name="t-rstack", condition=COND)) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        yield lab, content, tls, wd


def _target(lab, content, tls, port):
    return Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=port, tls=tls, content=content)


def _pgrep(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout.splitlines()


def _trial(lab_env, server_cls, client, workload, name, port, cc=None, qlog=False, cond=COND):
    lab, content, tls, wd = lab_env
    srv = server_cls(lab, wd / "srv" / name, content, tls, port=port, quic_cc=cc)
    if qlog:
        assert srv.enable_qlog()
    trial = wd / "trial" / name
    if cond is not COND:
        lab.set_condition(cond)
    try:
        with srv:
            row = run_trial(TrialSpec(0, cond, workload, "h3", server_cls.name, 1), _target(lab, content, tls, port),
                            client, srv.pid, trial, 30, TrialOptions(qlog=qlog), server_qlog_dir=srv.qlog_dir,
                            sender=srv)
    finally:
        if cond is not COND:
            lab.set_condition(COND)
    assert _pgrep(str(srv.workdir)) == [], "the server left processes behind"
    assert row["status"] == "ok", row["error"]
    reqs = [json.loads(l) for l in (trial / "requests.jsonl").read_text().splitlines()]
    assert len(reqs) == workload.count and {r["proto"] for r in reqs} == {"h3"}
    assert all(r["status"] == 200 and r["bytes"] == workload.size_bytes and r["sha256_ok"] and r["error"] is None
               for r in reqs)
    assert row["protocols"] == f"h3:{workload.count}" and row["bytes"] == workload.count * workload.size_bytes
    # the stacks a run's row names (run/session.py adds them to run_trial's row)
    row.update(server_stack=driver_stack(server_cls), client_stack=driver_stack(type(client)))
    assert row["goodput_mbps"] > 0 and row["ttfb_ms"] > 0 and row["client_cpu_s"] > 0
    assert row["client_cpu_wait_s"] is not None
    return row, reqs, trial, srv



# 2 % loss server -> client only: the client's CONNECTION_CLOSE always arrives, so the server
# closes a connection's qlog at once (a lost close leaves it open until the idle timeout, and the
# trial would read it half-written: 445 of about 700 packets once here)
LOSSY = Condition(name="d5l2", up={"delay_ms": 5}, down={"delay_ms": 5, "loss_pct": 2})


@pytest.mark.parametrize("cc", QuicheServer.quic_ccs)
def test_quiche_server_to_qb_load_with_its_qlog_and_cc(lab_env, cc):
    row, reqs, trial, srv = _trial(lab_env, QuicheServer, LoadClient(), Workload(size="300KB", count=3, parallel=3),
                                   f"quiche-qbload-{cc}", 443, cc=cc, qlog=True, cond=LOSSY)
    assert row["server_stack"].startswith("quicbench-quiche-server 0.1.0, quiche 0.30.")
    assert row["client_stack"].startswith("qb-load ")
    # one shared connection: its qlog, whole, names the controller's states (BBRv2's or the
    # loss-based ones) and, under loss, cubic's or reno's backoff; the row has the controller from it
    qlogs = sorted((trial / "qlog-server").glob("*_server.sqlog"))
    assert len(qlogs) == 1 == row["quic_qlog_connections"] and row["quic_packets_sent"] > 600
    names = {r.get("name") for r in qlog_records(qlogs[0])}
    assert any(str(n).endswith("packet_sent") for n in names)
    assert row["quic_cc"] == row["quic_cc_seen"] == cc
    kept = (trial / "server-cc.log").read_text()
    assert ("qlog states: bbr_" in kept) == (cc == "bbr2")
    assert ("cwnd backoffs: " in kept) == (cc != "bbr2")
    # 2 % loss over ~700 packets: quiche's qlog counts its losses (its running total: no trigger,
    # spurious unknown)
    assert 0 < row["quic_lost"] < 0.1 * row["quic_packets_sent"]
    assert row["quic_lost_reordering"] is None and row["quic_lost_spurious"] is None


@pytest.mark.parallel_safe
@pytest.mark.parametrize("client_cls", [QuicheClient, QuinnClient])
def test_each_rust_client_against_caddy(lab_env, client_cls):
    row, reqs, trial, _ = _trial(lab_env, CaddyServer, client_cls(), Workload(size="10KB", count=4, parallel=2,
                                                                                connections="per-object"),
                                 f"caddy-{client_cls.name}", 1443)
    assert row["client_stack"].startswith(f"quicbench-{client_cls.name}-client 0.1.0, {client_cls.name} ")
    # one connection per object, each opened by its request
    assert len({r["conn_id"] for r in reqs}) == 4 and not any(r["conn_reused"] for r in reqs)
    assert all(r["tls_done_ns"] and r["start_ns"] <= r["connect_start_ns"] < r["tls_done_ns"] < r["first_byte_ns"]
               <= r["last_byte_ns"] for r in reqs)
    s = json.loads((trial / "summary.json").read_text())
    assert s["connections"] == 4 and s["goodput_mbps"] > 0 and s["cpu_user_s"] + s["cpu_sys_s"] > 0
    assert row["client_cpu_s"] is not None


@pytest.mark.parallel_safe
@pytest.mark.parametrize("server_cls,client_cls", [(QuinnServer, QuinnClient), (QuicheServer, QuicheClient),
                                                   (QuicheServer, QuinnClient), (QuinnServer, QuicheClient)])
def test_the_rust_pairs_share_one_connection(lab_env, server_cls, client_cls):
    name = f"{server_cls.name}-{client_cls.name}"
    row, reqs, trial, _ = _trial(lab_env, server_cls, client_cls(), Workload(size="300KB", count=3, parallel=2),
                                 name, 2443, qlog=True)
    # shared: one connection, the first request opened it; the client's qlog pairs with the server's
    assert {r["conn_id"] for r in reqs} == {1} and [r["conn_reused"] for r in reqs] == [False, True, True]
    server_qlogs = sorted((trial / "qlog-server").glob("*_server.sqlog"))
    assert len(server_qlogs) == 1
    assert (trial / "qlog" / server_qlogs[0].name.replace("_server.", "_client.")).is_file()


@pytest.mark.parallel_safe
def test_an_unknown_cc_stops_the_quiche_server_naming_the_accepted_ones(lab_env):
    lab, content, tls, wd = lab_env
    srv = QuicheServer(lab, wd / "srv" / "bad", content, tls, port=3443, quic_cc="vegas")
    with pytest.raises(QuicbenchError) as e:
        srv.start()
    assert "exited at start (code 2)" in str(e.value) and "cubic, reno, bbr2" in str(e.value)
    assert _pgrep(str(srv.workdir)) == []
