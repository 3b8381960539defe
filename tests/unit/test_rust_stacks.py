"""The drivers of the Rust stacks of `make stacks`: the quiche server's command line, the
controller it reports, the stacks they name; the quiche and quinn clients' command lines (qb-load's)."""

import json
import re

import pytest

from conftest import REPO
from quicbench.clients import CLIENTS, FetchRequest, Target
from quicbench.clients.quiche import QuicheClient
from quicbench.clients.quinn import QuinnClient
from quicbench.content.objects import ContentSet
from quicbench.model.plan import TrialOptions, Workload
from quicbench.servers import SERVERS
from quicbench.servers.quiche import QuicheServer, backoff_cc, cc_family
from quicbench.tls import make_tls


class _FakeLab:
    remote = False

    def address(self, node):
        return "198.18.1.2"

    def cmd(self, node, argv):
        return argv


def _server(tmp_path, **kw):
    (tmp_path / "content").mkdir(exist_ok=True)
    manifest = {"videos": {"v": {"live_dir": str(tmp_path / "live")}}}
    return QuicheServer(_FakeLab(), tmp_path / "run", ContentSet(root=tmp_path / "content", manifest=manifest),
                        make_tls(tmp_path / "tls"), port=1443, **kw)


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A bin dir with the three programs (argv building needs only that they are there)."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("quicbench-quiche-server", "quicbench-quiche-client", "quicbench-quinn-client"):
        (d / name).write_text("#!/bin/sh\n")
        (d / name).chmod(0o755)
    monkeypatch.setenv("QUICBENCH_BIN", str(d))
    return d


def _arg(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_registered_h3_only_with_quiches_controllers():
    assert SERVERS["quiche"] is QuicheServer and CLIENTS["quiche"] is QuicheClient and CLIENTS["quinn"] is QuinnClient
    assert QuicheServer.protocols == {"h3"} and QuicheServer.quic_ccs == ("cubic", "reno", "bbr2")
    for c in (QuicheClient, QuinnClient):
        assert c.protocols == {"h3"} and c.connection_policies == ("shared", "per-object")
        assert c.resumption_modes == ("none",) and not c.binds_local_port


def test_server_argv_passes_listen_tls_root_cc_and_qlog(tmp_path, fake_bin):
    srv = _server(tmp_path)
    argv = srv.argv()
    assert argv[0] == str(fake_bin / "quicbench-quiche-server")
    assert _arg(argv, "--listen") == ["198.18.1.2:1443"] and _arg(argv, "--root") == [str(tmp_path / "content")]
    assert _arg(argv, "--cert") == [str(srv.tls.cert)] and _arg(argv, "--key") == [str(srv.tls.key)]
    assert _arg(argv, "--cc") == ["cubic"]                  # quic_ccs[0]: quiche's default
    assert "--allow-dir" not in argv      # the served copy has no links (ContentSet.isolated)
    assert "--qlog-dir" not in argv
    assert srv.enable_qlog() and _arg(srv.argv(), "--qlog-dir") == [str(tmp_path / "run" / "qlog")]
    assert _arg(_server(tmp_path, quic_cc="bbr2").argv(), "--cc") == ["bbr2"]


def test_missing_binaries_say_which_target_builds_them(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICBENCH_BIN", str(tmp_path))
    for d, target in ((QuicheServer, "quiche"), (QuicheClient, "quiche"), (QuinnClient, "quinn")):
        ok, why = d.available()
        assert not ok and f"run 'make {target}'" in why and str(tmp_path) in why
        assert d.provisions == (target,)


def _qlog(path, states, cwnds=()):
    recs = [{"qlog_version": "0.3", "trace": {"vantage_point": {"type": "server"}}}]
    recs += [{"time": float(i), "name": "recovery:congestion_state_updated", "data": {"new": s}}
             for i, s in enumerate(states)]
    recs += [{"time": 10.0 + i, "name": "quic:recovery_metrics_updated", "data": {"congestion_window": w}}
             for i, w in enumerate(cwnds)]
    path.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in recs))


def test_the_cc_reported_is_the_qlogs_family_and_the_log_lines_name(tmp_path):
    srv = _server(tmp_path, quic_cc="reno")
    srv.workdir.mkdir()
    (srv.workdir / "quiche.log").write_text(
        "quicbench-quiche-server 0.1.0 (quiche 0.30.0) listening on 198.18.1.2:1443 (udp), congestion control reno\n"
        "connection aa01 from 198.18.0.1:5000: congestion control reno\n"
        "connection bb02 from 198.18.0.1:5001: congestion control bbr2\n"
        "connection cc03 from 198.18.0.1:5002: congestion control cubic\n")
    trial = tmp_path / "trial"
    trial.mkdir()
    _qlog(trial / "aa01_server.sqlog", ["slow_start", "recovery", "congestion_avoidance"])
    _qlog(trial / "bb02_server.sqlog", ["bbr_startup", "bbr_drain", "bbr_probe_bw_down"])
    # a connection whose line says cubic but whose qlog shows BBRv2 states is named by its qlog
    _qlog(trial / "cc03_server.sqlog", ["bbr_startup"])
    _qlog(trial / "dd04_server.sqlog", [])
    # a congestion event: the window to 0.7 of itself is cubic's backoff, whatever the line says
    _qlog(trial / "ee05_server.sqlog", ["slow_start", "recovery"], cwnds=[13500, 40000, 28000, 30000])
    assert srv.reported_cc([trial / "aa01_server.sqlog"], trial) == "reno"
    kept = (trial / "server-cc.log").read_text()
    assert kept == ("connection aa01 from 198.18.0.1:5000: congestion control reno; "
                    "qlog states: congestion_avoidance,recovery,slow_start\n")
    assert srv.reported_cc([trial / "bb02_server.sqlog"], trial) == "bbr2"
    assert srv.reported_cc([trial / "cc03_server.sqlog"], trial) == "bbr2"
    assert srv.reported_cc([trial / "aa01_server.sqlog", trial / "bb02_server.sqlog"], trial) == "bbr2,reno"
    assert srv.reported_cc([trial / "dd04_server.sqlog"], trial) is None     # no states: quiche said nothing
    assert srv.reported_cc([trial / "ee05_server.sqlog"], trial) == "cubic"
    assert (trial / "server-cc.log").read_text().endswith("; cwnd backoffs: 0.70\n")
    assert srv.reported_cc([], trial) is None


def test_backoffs_tell_cubic_from_reno():
    assert backoff_cc([0.7, 0.7, 0.5]) == "cubic" and backoff_cc([0.5, 0.5, 0.71]) == "reno"
    assert backoff_cc([]) is None and backoff_cc([0.1, 0.95]) is None     # a collapse, rounding: neither


def test_cc_family():
    assert cc_family({"bbr_startup", "bbr_drain"}) == "bbr2"
    assert cc_family({"slow_start", "conservative_slow_start"}) == "loss-based"
    assert cc_family({"slow_start", "bbr_startup"}) is None and cc_family(set()) is None


def _request(tmp_path, workload, options=None):
    (tmp_path / "content").mkdir(exist_ok=True)
    content = ContentSet(root=tmp_path / "content", manifest={})
    target = Target(lab=_FakeLab(), hostname="www.quicbench.test", address="198.18.1.2", port=443,
                    tls=make_tls(tmp_path / "tls"), content=content)
    return FetchRequest(target, "h3", workload, tmp_path / "trial", 30, options, local_port=None)


@pytest.mark.parametrize("cls", [QuicheClient, QuinnClient])
def test_client_argv_is_qb_loads(tmp_path, fake_bin, cls):
    req = _request(tmp_path, Workload(size="10KB", count=5, parallel=2, connections="per-object"))
    argv = cls().argv(req.target, "h3", req.workload, req.trial_dir, 30) + cls().extra_args(req)
    assert argv[0] == str(fake_bin / f"quicbench-{cls.name}-client")
    assert _arg(argv, "--proto") == ["h3"] and _arg(argv, "--base-url") == ["https://www.quicbench.test"]
    assert _arg(argv, "--connect") == ["198.18.1.2:443"] and _arg(argv, "--ca") == [str(req.target.tls.ca_cert)]
    assert _arg(argv, "--path-template") == ["/10KB/obj-{i}.bin"]
    assert _arg(argv, "--count") == ["5"] and _arg(argv, "--parallel") == ["2"]
    assert _arg(argv, "--connections") == ["per-object"] and _arg(argv, "--resumption") == ["none"]
    assert _arg(argv, "--requests") == [str(req.trial_dir / "requests.jsonl")] and _arg(argv, "--timeout") == ["30s"]
    assert "--qlog-dir" not in argv and "--keylog" not in argv and "--bind-port" not in argv
    # qlog asked for: into the trial's qlog/, as qb-load's; a key log is qb-load's only
    qreq = _request(tmp_path, req.workload, TrialOptions(qlog=True, keylog=True))
    assert cls().extra_args(qreq) == ["--qlog-dir", str(qreq.trial_dir / "qlog")]


def _crate_version(lock_path, crate):
    m = re.search(rf'name = "{crate}"\nversion = "([^"]+)"', lock_path.read_text())
    return m.group(1) if m else None


def test_the_stacks_named_are_the_ones_pinned():
    """server_stack and client_stack come from the binaries' --version, which name Cargo.lock's crates."""
    lock = REPO / "stacks" / "quiche" / "Cargo.lock"
    v = QuicheServer.version()
    assert set(v) == {"quicbench_quiche_server", "quiche", "boring_sys"}
    assert v["quiche"] == _crate_version(lock, "quiche") and v["boring_sys"] == _crate_version(lock, "boring-sys")
    c = QuicheClient.version()
    assert set(c) == {"quicbench_quiche_client", "quiche", "boring_sys"} and c["quiche"] == v["quiche"]
    q = QuinnClient.version()
    h3lock = REPO / "h3server" / "Cargo.lock"
    assert set(q) == {"quicbench_quinn_client", "quinn", "quinn_proto", "h3", "h3_quinn", "rustls"}
    for crate in ("quinn", "quinn-proto", "h3", "h3-quinn", "rustls"):
        assert q[crate.replace("-", "_")] == _crate_version(h3lock, crate), crate
    facts = QuicheServer.binary_facts()["quicbench-quiche-server"]
    assert facts["own"] is True and facts["package"] is None and facts["root"] is True
    assert QuinnClient.binary_facts()["quicbench-quinn-client"]["own"] is True


def test_quiches_losses_are_counted_from_its_running_total(tmp_path):
    """quiche's qlog has no packet_lost events, only cf_lost_packets in recovery_metrics_updated:
    the count comes from there, with no trigger and no spurious count (unknown, not 0)."""
    from quicbench.run.recovery import quic_columns, quic_counts
    recs = [{"qlog_version": "0.3", "title": "quicbench-quiche-server 0.1.0 (quiche 0.30.0, boring-sys 5.4.0)"}]
    recs += [{"time": float(i), "name": "quic:packet_sent", "data": {"header": {"packet_type": "1RTT", "packet_number": i}}}
             for i in range(10)]
    recs += [{"time": 3.0, "name": "quic:recovery_metrics_updated", "data": {"congestion_window": 13500}},
             {"time": 4.0, "name": "quic:recovery_metrics_updated", "data": {"cf_lost_packets": {"total": 2, "delta": 2}}},
             {"time": 4.0, "name": "quic:congestion_state_updated", "data": {"new": "recovery"}},
             {"time": 5.0, "name": "quic:recovery_metrics_updated", "data": {"cf_lost_packets": {"total": 3, "delta": 1}}}]
    lossy = tmp_path / "aa_server.sqlog"
    lossy.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in recs))
    c = quic_counts(lossy)
    assert (c["sent"], c["lost"], c["spurious"], c["untriggered"]) == (10, 3, None, 3)
    assert c["ss_exit_without_loss"] == 0        # it left slow start on a loss
    cols = quic_columns([lossy])
    assert cols["quic_lost"] == 3 and cols["quic_lost_reordering"] is None and cols["quic_lost_time"] is None
    assert cols["quic_lost_spurious"] is None
    clean = tmp_path / "bb_server.sqlog"           # no loss: 0 lost, 0 spurious (known)
    clean.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in recs[:12]))
    assert (quic_counts(clean)["lost"], quic_counts(clean)["spurious"]) == (0, 0)


def test_a_receiver_that_counts_its_losses_by_total_still_gives_its_ack_ratio(tmp_path):
    """A client qlog in quiche's style (a running loss total, no packet_lost events) still
    counts the packets it acknowledged in, so its ACK ratio is there (it once had no acks_sent
    at all, and the trial raised instead of recording its row)."""
    from quicbench.run.recovery import quic_client_columns
    recs = [{"qlog_version": "0.3", "title": "quicbench-quiche-client 0.1.0 (quiche 0.30.0)"}]
    recs += [{"time": float(i), "name": "quic:packet_received",
              "data": {"header": {"packet_type": "1RTT", "packet_number": i}}} for i in range(8)]
    recs += [{"time": 8.0 + i, "name": "quic:packet_sent",
              "data": {"header": {"packet_type": "1RTT", "packet_number": i}, "frames": [{"frame_type": "ack"}]}}
             for i in range(2)]
    recs += [{"time": 11.0, "name": "quic:recovery_metrics_updated", "data": {"cf_lost_packets": {"total": 1}}}]
    qlog = tmp_path / "qlog"
    qlog.mkdir()
    (qlog / "cc_client.sqlog").write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in recs))
    cols = quic_client_columns(qlog)
    assert cols["quic_client_lost"] == 1 and cols["quic_client_acks_sent"] == 2
    assert cols["quic_client_ack_ratio"] == 4.0
