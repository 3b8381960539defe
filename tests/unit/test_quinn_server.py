"""The quinn server's driver: its command line, the stack it names, what doctor says of it."""

import re

from conftest import REPO
from quicbench.content.objects import ContentSet
from quicbench.servers import SERVERS
from quicbench.servers.quinn import QuinnServer
from quicbench.tls import make_tls


class _FakeLab:
    def address(self, node):
        return "198.18.1.2"


def _server(tmp_path, **kw):
    (tmp_path / "content").mkdir(exist_ok=True)
    manifest = {"videos": {"v": {"live_dir": str(tmp_path / "live")}}}
    return QuinnServer(_FakeLab(), tmp_path / "run", ContentSet(root=tmp_path / "content", manifest=manifest),
                       make_tls(tmp_path / "tls"), port=1443, **kw)


def _arg(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_argv_passes_listen_tls_root_cc_and_qlog(tmp_path):
    srv = _server(tmp_path)
    argv = srv.argv()
    assert argv[0].endswith("build/bin/quicbench-h3server")
    assert _arg(argv, "--listen") == ["198.18.1.2:1443"] and _arg(argv, "--root") == [str(tmp_path / "content")]
    assert _arg(argv, "--cert") == [str(srv.tls.cert)] and _arg(argv, "--key") == [str(srv.tls.key)]
    assert _arg(argv, "--cc") == ["cubic"]                  # quic_ccs[0]: quinn's default
    assert "--allow-dir" not in argv      # the served copy has no links (ContentSet.isolated)
    assert "--qlog-dir" not in argv
    assert srv.enable_qlog() and _arg(srv.argv(), "--qlog-dir") == [str(tmp_path / "run" / "qlog")]
    assert _arg(_server(tmp_path, quic_cc="bbr").argv(), "--cc") == ["bbr"]


def test_the_cc_reported_is_the_log_line_of_the_trials_connections(tmp_path):
    srv = _server(tmp_path, quic_cc="reno")
    srv.workdir.mkdir()
    (srv.workdir / "quinn.log").write_text(
        "quicbench-h3server 0.1.0 (quinn 0.11.12) listening on 198.18.1.2:1443 (udp), congestion control reno\n"
        "connection aa01 from 198.18.0.1:5000: congestion control reno\n"
        "connection bb02 from 198.18.0.1:5001: congestion control cubic\n"     # another trial's
        "connection aa01 from 198.18.0.1:5000 ended: closed\n")
    trial = tmp_path / "trial"
    trial.mkdir()
    assert srv.reported_cc([trial / "aa01_server.sqlog"], trial) == "reno"
    assert (trial / "server-cc.log").read_text() == "connection aa01 from 198.18.0.1:5000: congestion control reno\n"
    assert srv.reported_cc([trial / "aa01_server.sqlog", trial / "bb02_server.sqlog"], trial) == "cubic,reno"
    assert srv.reported_cc([trial / "cc03_server.sqlog"], trial) is None
    assert srv.reported_cc([], trial) is None


def test_other_servers_have_no_quic_cc_to_set(tmp_path):
    assert SERVERS["caddy"].quic_ccs == () and SERVERS["nginx"].quic_ccs == ()
    assert _server(tmp_path).quic_cc is None and _server(tmp_path).sender_cc == "cubic"


def test_the_stack_named_is_the_one_pinned():
    """server_stack comes from the binary's --version, which names the crates of Cargo.lock."""
    v = QuinnServer.version()
    assert set(v) == {"quicbench_h3server", "quinn", "quinn_proto", "h3", "h3_quinn", "rustls"}
    lock = (REPO / "h3server" / "Cargo.lock").read_text()
    for crate in ("quinn", "quinn-proto", "h3", "h3-quinn", "rustls"):
        m = re.search(rf'name = "{crate}"\nversion = "([^"]+)"', lock)
        assert m and v[crate.replace("-", "_")] == m.group(1), crate
    assert QuinnServer.version_text() == v["quicbench_h3server"]
    facts = QuinnServer.binary_facts()["quicbench-h3server"]
    assert facts["own"] is True and facts["package"] is None and facts["version_args"] == ["--version"]


def test_doctor_lists_it_with_its_stack():
    from quicbench.cli.doctor import checks
    row = next(c for c in checks(boot_uml=False) if c[0] == "server quinn")
    assert row[1] is True and re.match(r"\[quinn: h3\] quicbench-h3server \S+, quinn 0\.11\.\d+, quinn-proto .*; h3; quic_cc: cubic, reno, bbr$",
                                         row[2])
