"""nginx and Apache (event, prefork) through a real lab: h1/h2 verified, h3 rejected, clean stop."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import root_only, fetch
from quicbench.clients import LoadClient, Target
from quicbench.content.objects import ContentSet, generate
from quicbench.errors import QuicbenchError
from quicbench.lab import LabSpec, make_lab
from quicbench.model.plan import Workload, plan_from_dict
from quicbench.run.preflight import check_plan
from quicbench.servers import SERVERS
from quicbench.cpu import group_members
from quicbench.tls import make_tls

# name -> protocols it must serve; the ports are those the runner gives servers run side by side
CASES = {"nginx": ("h1", "h2"), "apache": ("h1", "h2"), "apache-prefork": ("h1",)}
PORTS = {"nginx": 443, "apache": 1443, "apache-prefork": 2443}


def group_pids(pgid: int) -> set[int]:
    return set(group_members(pgid))


def pgrep_f(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout.splitlines()


# -- plan validation (no lab needed) ----------------------------------------------------
def _plan(servers: dict, protocols=("h1", "h2", "h3")):
    plan = plan_from_dict({"protocols": list(protocols), "servers": servers,
                           "workloads": [{"size": "100KB", "count": 2}]})
    check_plan(plan)
    return plan


@pytest.mark.parallel_safe
def test_registry_protocols():
    assert SERVERS["nginx"].protocols == {"h1", "h2"}
    assert SERVERS["apache"].protocols == {"h1", "h2"}
    assert SERVERS["apache-prefork"].protocols == {"h1"}


@pytest.mark.parallel_safe
@pytest.mark.parametrize("server", ["nginx", "apache", "apache-prefork"])
def test_h3_rejected_naming_caddy(server):
    with pytest.raises(QuicbenchError) as e:
        _plan({"h3": server})
    msg = str(e.value)
    can = msg.split("servers that can: ")[1].split(", ")
    assert f"{server} cannot serve h3" in msg and "caddy" in can and server not in can


@pytest.mark.parallel_safe
def test_prefork_h2_rejected_naming_servers_that_can():
    with pytest.raises(QuicbenchError) as e:
        _plan({"h2": "apache-prefork"}, protocols=("h2",))
    assert "servers that can: apache, caddy, caddy-2.6, nginx" in str(e.value)


@pytest.mark.parallel_safe
def test_plan_holds_protocol_varies_server():
    p = _plan({"h1": "apache-prefork", "h2": "nginx"})
    assert [p.server_options(x) for x in ("h1", "h2", "h3")] == [["apache-prefork"], ["nginx"], ["caddy"]]
    assert _plan({}).server_options("h2") == ["caddy"]


class _FakeLab:
    def address(self, node):
        return "198.18.1.2"


@pytest.mark.parallel_safe
@pytest.mark.parametrize("server", ["nginx", "apache", "apache-prefork"])
def test_config_is_self_contained_and_valid(tmp_path, server):
    """The per-run config names only the run directory, the content and the TLS files
    (nothing of /etc), listens on the lab address and port given; Apache's passes -t."""
    import shutil
    from quicbench.content.objects import ContentSet
    cls = SERVERS[server]
    tls = make_tls(tmp_path / "tls")
    (tmp_path / "content").mkdir()
    srv = cls(_FakeLab(), tmp_path / "run", ContentSet(root=tmp_path / "content", manifest={}), tls, port=1443)
    srv.workdir.mkdir()
    argv = srv.argv()
    conf = next(p for p in srv.workdir.iterdir() if p.suffix == ".conf").read_text()
    assert "/etc/" not in conf and "198.18.1.2:1443" in conf and str(tls.key) in conf
    if cls.binary == "apache2":  # (nginx -t binds its listeners: the lab tests cover it)
        binary = shutil.which("apache2") or pytest.skip("apache2 not installed")
        cp = subprocess.run([binary, "-t", *argv[argv.index(binary) + 1:]], capture_output=True, text=True,
                            timeout=10)
        assert cp.returncode == 0, cp.stdout + cp.stderr


# -- through a lab --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lab_env(tmp_path_factory):
    wd = tmp_path_factory.mktemp("servers")
    content = generate({100_000: 6, 20_000: 300}, seed=5, cache=wd / "cache")
    with make_lab(LabSpec(name="t-srv")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        yield lab, content, tls, wd


@pytest.fixture(scope="module")
def running(lab_env):
    """All three servers at once, on the ports the runner would give them."""
    lab, content, tls, wd = lab_env
    servers = {}
    try:
        for name in CASES:
            srv = SERVERS[name](lab, wd / "run" / name, content, tls, port=PORTS[name])
            srv.start()
            servers[name] = srv
        yield servers
    finally:
        for srv in servers.values():
            srv.stop()
    for name in CASES:
        assert pgrep_f(str(wd / "run" / name)) == [], f"{name} left processes behind"


def _target(lab_env, port):
    lab, content, tls, wd = lab_env
    return Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=port, tls=tls,
                  content=content)


@pytest.mark.parallel_safe
@pytest.mark.integration
@root_only
@pytest.mark.parametrize("server,proto", [(s, p) for s, ps in CASES.items() for p in ps])
def test_serves_objects(lab_env, running, server, proto):
    wd = lab_env[3]
    w = Workload(size="100KB", count=6, parallel=3)
    res = fetch(LoadClient(), _target(lab_env, PORTS[server]), proto, w, wd / "fetch" / f"{server}-{proto}",
                             timeout_s=30)
    assert res.error is None and res.returncode == 0, res.error
    assert len(res.requests) == 6
    assert {r["proto"] for r in res.requests} == {proto}
    assert all(r["sha256_ok"] and r["bytes"] == 100_000 and r["status"] == 200 for r in res.requests)
    conns = {r["conn_id"] for r in res.requests}
    assert (len(conns) == 1) if proto == "h2" else (1 <= len(conns) <= 3)
    assert res.summary["bytes"] == 600_000


@pytest.mark.integration
@root_only
@pytest.mark.parametrize("server,proto", [(s, p) for s, ps in CASES.items() for p in ps])
def test_long_workload_keeps_its_connections(lab_env, running, server, proto):
    """h1: 300 requests over 2 connections (no keep-alive request cap, stock Apache's is 100).
    h2: 200 streams at once on one connection (stock limits: nginx 128, Apache 100; past the
    server's limit the load client stalls, golang/go#70809), without stalls."""
    wd = lab_env[3]
    w = Workload(size="20KB", count=300, parallel=2) if proto == "h1" else Workload(size="20KB", count=200)
    res = fetch(LoadClient(), _target(lab_env, PORTS[server]), proto, w, wd / "long" / f"{server}-{proto}",
                             timeout_s=20)
    assert res.error is None and len(res.requests) == w.count
    assert all(r["sha256_ok"] and r["proto"] == proto for r in res.requests)
    assert len({r["conn_id"] for r in res.requests}) == (1 if proto == "h2" else 2)
    assert res.summary["duration_s"] < 3


@pytest.mark.parallel_safe
@pytest.mark.integration
@root_only
@pytest.mark.parametrize("server", list(CASES))
def test_root_index_headers_and_alpn(lab_env, running, server):
    lab, content, tls, wd = lab_env
    port = PORTS[server]
    addr = lab.address("server")
    for host in (tls.hostname, addr):
        for flag, want in (("--http1.1", "1.1"), ("--http2", "2")):
            out = subprocess.run(lab.cmd("client", [
                "curl", "-sS", flag, "-o", "/dev/null", "-w", "%{http_code} %{http_version} %{header_json}",
                "--cacert", str(tls.ca_cert), "--resolve", f"{tls.hostname}:{port}:{addr}",
                f"https://{host}:{port}/"]), capture_output=True, text=True, timeout=10)
            code, version, headers = out.stdout.split(" ", 2)
            assert code == "200", out.stderr
            # a server that cannot do h2 must fall back to 1.1 when offered h2
            assert version == (want if want == "1.1" or "h2" in CASES[server] else "1.1")
            h = json.loads(headers)
            assert h["cache-control"] == ["no-cache, no-store, must-revalidate"]
            assert h["pragma"] == ["no-cache"] and h["expires"] == ["0"]
    listing = subprocess.run(lab.cmd("client", [
        "curl", "-sS", "-w", "\n%{http_code}", "--cacert", str(tls.ca_cert),
        "--resolve", f"{tls.hostname}:{port}:{addr}", f"https://{tls.hostname}:{port}/100KB/"]),
        capture_output=True, text=True, timeout=10).stdout
    assert listing[-3:] in ("403", "404") and "obj-6.bin" not in listing   # no listing of a directory
    assert (wd / "run" / server / f"{server}.log").exists()


def _wait_workers(pgid: int) -> set[int]:
    deadline = time.monotonic() + 5
    while len(group_pids(pgid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = group_pids(pgid)
    assert len(pids) >= 2, "no worker processes forked"
    return pids


@pytest.mark.parallel_safe
@pytest.mark.integration
@root_only
@pytest.mark.parametrize("server", list(CASES))
def test_stop_leaves_no_process(lab_env, server):
    """Workers exist while serving; stop() leaves none, also after the master was killed and
    the server restarted on the same port (as the runner restarts a crashed server)."""
    lab, content, tls, wd = lab_env
    sdir = wd / "stop" / server
    srv = SERVERS[server](lab, sdir, content, tls, port=3443)
    pgids = []
    try:
        srv.start()
        pgids.append(srv.pid)
        _wait_workers(srv.pid)
        os.kill(srv.pid, signal.SIGKILL)      # the master dies; its workers may linger
        srv.proc.wait(5)
        srv.start()                           # restart: the old group must not hold the port
        pgids.append(srv.pid)
        _wait_workers(srv.pid)
        assert group_pids(pgids[0]) == set()
        res = fetch(LoadClient(), _target(lab_env, 3443), "h1", Workload(size="100KB", count=2),
                                 wd / "fetch" / f"restart-{server}", timeout_s=20)
        assert res.error is None and all(r["sha256_ok"] for r in res.requests)
    finally:
        srv.stop()
    assert all(group_pids(g) == set() for g in pgids)
    assert pgrep_f(str(sdir)) == []


@pytest.mark.parallel_safe
@pytest.mark.parametrize("server", ["caddy", "nginx", "apache", "quinn"])
def test_every_server_binds_only_the_lab_address(lab_env, tmp_path, server):
    """A server listens on the lab's server address, not on every address of its node."""
    lab, content, tls, wd = lab_env
    srv = SERVERS[server](lab, tmp_path / server, content, tls, port=4443)
    with srv:
        out = subprocess.run(lab.cmd("server", ["ss", "-Hln", "-tu", "sport = :4443"]),
                             capture_output=True, text=True).stdout
    local = {line.split()[4] for line in out.splitlines() if line.strip()}
    kinds = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert local == {f"{lab.address('server')}:4443"}, out
    protos = SERVERS[server].protocols
    assert kinds == ({"tcp"} if protos & {"h1", "h2"} else set()) | ({"udp"} if "h3" in protos else set())


def _get(lab, tls, port: int, path: str) -> tuple[str, str]:
    """(status code, body) of an h1 GET from the client node."""
    addr = lab.address("server")
    out = subprocess.run(lab.cmd("client", [
        "curl", "-sS", "--http1.1", "-w", "\n%{http_code}", "--cacert", str(tls.ca_cert),
        "--resolve", f"{tls.hostname}:{port}:{addr}", f"https://{tls.hostname}:{port}{path}"]),
        capture_output=True, text=True, timeout=10).stdout
    body, _, code = out.rpartition("\n")
    return code, body


@pytest.mark.parallel_safe
@pytest.mark.integration
@root_only
@pytest.mark.parametrize("server", ["caddy", *CASES])
def test_serves_no_file_outside_the_content(lab_env, tmp_path, server):
    """issue 26 case 3: a link in the content directory to a file outside it (/etc/shadow) is
    refused at start; a link made after the start is not served (the server serves a private
    copy); directories are not listed."""
    lab, _, tls, _ = lab_env
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the lab\n")
    root = tmp_path / "content"
    (root / "d").mkdir(parents=True)
    (root / "a.txt").write_text("served\n")
    (root / "d" / "s").symlink_to(secret)
    srv = SERVERS[server](lab, tmp_path / "run", ContentSet(root=root, manifest={}), tls, port=3443)
    with pytest.raises(QuicbenchError, match=r"d/s is a link to .*secret.txt, outside the content directory"):
        srv.start()
    assert srv.pid is None and not (tmp_path / "run").exists()
    (root / "d" / "s").unlink()
    (root / "d" / "inside").symlink_to(root / "a.txt")       # a link within the root is fine
    srv.start()
    try:
        assert _get(lab, tls, 3443, "/a.txt") == ("200", "served\n")
        code, body = _get(lab, tls, 3443, "/d/")
        assert code in ("403", "404") and "inside" not in body      # no listing
        (root / "late").symlink_to(secret)                          # made after the start
        code, body = _get(lab, tls, 3443, "/late")
        # every server serves its private copy (ContentSet.isolated): the late link is not in it
        assert code in ("403", "404") and "not for the lab" not in body
    finally:
        srv.stop()
