"""The netty server and client drivers: their command lines, the stack they name, what they refuse."""

import os

import pytest

from quicbench.clients import CLIENTS, Target
from quicbench.clients.netty import MAX_PARALLEL, NettyClient
from quicbench.content.objects import ContentSet
from quicbench.errors import QuicbenchError
from quicbench.model.plan import Workload
from quicbench.provision import PROVISIONS
from quicbench.registry import stack_text
from quicbench.servers import SERVERS
from quicbench.endpoints.netty import netty_executable, parse_versions
from quicbench.servers.netty import NettyServer
from quicbench.tls import make_tls


class _FakeLab:
    remote = False

    def address(self, node):
        return "198.18.1.2"


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    """A build/bin with the launcher and its jar (empty stand-ins: only their presence is read)."""
    d = tmp_path / "bin"
    d.mkdir()
    (d / "quicbench-netty").write_text("#!/bin/sh\n")
    os.chmod(d / "quicbench-netty", 0o755)
    (d / "quicbench-netty.jar").write_bytes(b"")
    monkeypatch.setenv("QUICBENCH_BIN", str(d))
    return d


def _content(tmp_path):
    (tmp_path / "content").mkdir(exist_ok=True)
    return ContentSet(root=tmp_path / "content", manifest={"videos": {"v": {"live_dir": str(tmp_path / "live")}}})


def _server(tmp_path, **kw):
    return NettyServer(_FakeLab(), tmp_path / "run", _content(tmp_path), make_tls(tmp_path / "tls"), port=1443, **kw)


def _arg(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_registered_as_an_h3_server_and_an_h3_client():
    assert SERVERS["netty"] is NettyServer and CLIENTS["netty"] is NettyClient
    assert NettyServer.protocols == {"h3"} == NettyClient.protocols
    assert NettyServer.quic_ccs == ("cubic", "reno", "bbr")
    assert NettyClient.connection_policies == ("shared", "per-object")


def test_server_argv_passes_listen_tls_root_cc_and_qlog(tmp_path, bin_dir):
    srv = _server(tmp_path)
    argv = srv.argv()
    assert argv[:2] == [str(bin_dir / "quicbench-netty"), "server"]
    assert _arg(argv, "--listen") == ["198.18.1.2:1443"] and _arg(argv, "--root") == [str(tmp_path / "content")]
    assert _arg(argv, "--cert") == [str(srv.tls.cert)] and _arg(argv, "--key") == [str(srv.tls.key)]
    assert _arg(argv, "--cc") == ["cubic"]                      # quiche's default
    assert "--allow-dir" not in argv      # the served copy has no links (ContentSet.isolated)
    assert "--qlog-dir" not in argv
    assert srv.enable_qlog() and _arg(srv.argv(), "--qlog-dir") == [str(tmp_path / "run" / "qlog")]
    assert _arg(_server(tmp_path, quic_cc="bbr").argv(), "--cc") == ["bbr"]


def test_a_missing_build_says_make_netty_and_is_provided_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICBENCH_BIN", str(tmp_path))
    ok, why = NettyServer.available()
    assert not ok and "run 'make netty'" in why and "'make stacks'" in why
    ok, why = NettyClient.available()
    assert not ok and "run 'make netty'" in why
    assert NettyServer.provisions == NettyClient.provisions == ("netty",) and "netty" in PROVISIONS
    # the launcher without its jar is not a build either
    (tmp_path / "quicbench-netty").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "quicbench-netty", 0o755)
    with pytest.raises(QuicbenchError, match="make netty"):
        netty_executable()


def test_versions_name_netty_quiche_and_java():
    v = parse_versions('{"quicbench_netty":"0.1.0","netty":"4.2.18.Final","quiche":"0.29.3","java":"17.0.15"}\n')
    assert stack_text("netty", v) == "quicbench-netty 0.1.0, netty 4.2.18.Final, quiche 0.29.3, java 17.0.15"
    assert parse_versions("something else") == {"quicbench_netty": "something else"}
    assert parse_versions("") == {}


def _target(tmp_path, port=443):
    return Target(lab=_FakeLab(), hostname="www.quicbench.test", address="198.18.1.2", port=port,
                  tls=make_tls(tmp_path / "tls"), content=_content(tmp_path))


def test_client_argv_is_getfiles_with_the_labs_ca_and_manifest(tmp_path, bin_dir):
    t = _target(tmp_path, port=4433)
    w = Workload(size="100KB", count=8, parallel=3, connections="per-object")
    argv = NettyClient.fetch_argv(t, w, tmp_path / "trial", 30)
    assert argv[:2] == [str(bin_dir / "quicbench-netty"), "client"]
    assert _arg(argv, "--connect") == ["198.18.1.2:4433"] and _arg(argv, "--host") == ["www.quicbench.test"]
    assert _arg(argv, "--ca") == [str(t.tls.ca_cert)] and _arg(argv, "--manifest") == [str(t.content.manifest_path)]
    assert _arg(argv, "--path-template") == ["/100KB/obj-{i}.bin"]
    assert _arg(argv, "--count") == ["8"] and _arg(argv, "--parallel") == ["3"]
    assert _arg(argv, "--connections") == ["per-object"]
    assert _arg(argv, "--requests") == [str(tmp_path / "trial" / "requests.jsonl")]
    assert _arg(argv, "--timeout") == ["30s"] and "--qlog-dir" not in argv
    qlog = NettyClient.fetch_argv(t, Workload(size="1MB", count=2), tmp_path / "trial", 12.5, qlog=True)
    assert _arg(qlog, "--qlog-dir") == [str(tmp_path / "trial" / "qlog")] and _arg(qlog, "--timeout") == ["12.5s"]
    assert _arg(qlog, "--parallel") == ["2"] and _arg(qlog, "--connections") == ["shared"]   # "all": count


def test_client_refuses_what_it_cannot_do():
    assert NettyClient.workload_problem(Workload(size="1MB", count=4, parallel=2)) is None
    assert "pool:2" in NettyClient.workload_problem(Workload(size="1MB", count=4, connections="pool:2"))
    many = Workload(size="1KB", count=MAX_PARALLEL + 1)
    assert f"parallel <= {MAX_PARALLEL}" in NettyClient.workload_problem(many)
    assert NettyClient.resumption_modes == ("none",)


def test_a_lab_on_other_hosts_gets_the_launcher_its_jar_and_java():
    for driver, root in ((NettyServer, True), (NettyClient, False)):
        facts = driver.binary_facts()
        assert set(facts) == set(driver.binaries) == {"quicbench-netty", "quicbench-netty.jar", "java"}
        assert facts["quicbench-netty"]["own"] and facts["quicbench-netty.jar"]["own"]     # copied over
        assert facts["quicbench-netty"]["root"] is root
        assert facts["java"] == {"package": "openjdk-17-jre-headless", "root": False, "version_args": ["-version"],
                                 "own": False}
