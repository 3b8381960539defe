"""The netns lab: created, used and removed for real, on every exit path."""

import json
import signal
import subprocess
import sys

import pytest

from conftest import lab_namespaces, root_only, run_qb
from quicbench.lab import LabSpec, make_lab, reap_dead_labs
from quicbench.lab.base import labs_dir

pytestmark = [pytest.mark.integration, root_only]


def ns_exec(ns, *argv):
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True)


def test_lab_up_down_leaves_nothing(no_leftovers):
    with make_lab(LabSpec(name="t-updown")) as lab:
        assert {lab.ns(n) for n in lab.nodes} <= lab_namespaces()
        server = lab.address("server")
        assert server.startswith("198.1") and lab.address("client").startswith("198.1")
        # reachable through the router, TTL decremented once
        ping = ns_exec(lab.ns("client"), "ping", "-c", "2", "-i", "0.2", "-W", "1", server)
        assert ping.returncode == 0 and "ttl=63" in ping.stdout
        # no route out of the lab: neither the client nor the router reaches public addresses
        assert "unreachable" in ns_exec(lab.ns("router"), "ip", "route", "get", "1.1.1.1").stderr.lower()
        out = ns_exec(lab.ns("client"), "ping", "-c", "1", "-W", "1", "1.1.1.1")
        assert out.returncode != 0
        # congestion control cubic everywhere, offloads off on every lab interface
        for node in lab.nodes:
            cc = ns_exec(lab.ns(node), "sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout.strip()
            assert cc == "cubic"
        for ns, dev in ((lab.ns("router"), "to-server"), (lab.ns("server"), "eth0"), (lab.ns("client"), "eth0")):
            feats = ns_exec(ns, "ethtool", "-k", dev).stdout
            # UDP segmentation too: a QUIC sender's UDP_SEGMENT super-frames would pass a veth whole
            for f in ("tcp-segmentation-offload: off", "generic-segmentation-offload: off",
                      "generic-receive-offload: off", "tx-udp-segmentation: off"):
                assert f in feats, (ns, dev, f)
        mtu = ns_exec(lab.ns("client"), "cat", "/sys/class/net/eth0/mtu").stdout.strip()
        assert mtu == "1500"
        # a process started in the lab dies with it
        sleeper = subprocess.Popen(lab.cmd("server", ["sleep", "300"]))
    assert sleeper.wait(5) is not None
    assert not (labs_dir() / "t-updown.json").exists()


def test_exception_inside_lab_cleans_up(no_leftovers):
    with pytest.raises(RuntimeError):
        with make_lab(LabSpec(name="t-exc", hops=2, tcp_cc="reno")) as lab:
            ping = ns_exec(lab.ns("client"), "ping", "-c", "1", "-W", "1", lab.address("server"))
            assert ping.returncode == 0 and "ttl=62" in ping.stdout    # two router hops
            assert ns_exec(lab.ns("server"), "sysctl", "-n",
                           "net.ipv4.tcp_congestion_control").stdout.strip() == "reno"
            raise RuntimeError("boom")
    assert not any(n.startswith("qb-t-exc-") for n in lab_namespaces())


def test_lab_left_by_sigkill_is_reaped(no_leftovers):
    code = ("from quicbench.lab import LabSpec, make_lab\n"
            "lab = make_lab(LabSpec(name='t-killed')); lab.up(); print('up', flush=True)\n"
            "import time; time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    assert "qb-t-killed-client" in lab_namespaces()
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert "qb-t-killed-client" in lab_namespaces()    # left behind ...
    assert "t-killed" in reap_dead_labs()                  # ... and found
    assert not any(n.startswith("qb-t-killed-") for n in lab_namespaces())


def test_cli_lab_lifecycle(no_leftovers):
    r = run_qb("lab", "up", "--name", "t-cli")
    assert r.returncode == 0, r.stderr
    try:
        st = json.loads(run_qb("lab", "status", "--json").stdout)
        mine = [s for s in st if s["name"] == "t-cli"][0]
        assert mine["namespaces"]["server"] == "qb-t-cli-server"
        server_ip = mine["addresses"]["server"]["eth0"]
        r = run_qb("lab", "exec", "t-cli", "client", "--", "ping", "-c", "1", "-W", "1", server_ip)
        assert r.returncode == 0 and "1 received" in r.stdout
        r = run_qb("lab", "up", "--name", "t-cli")
        assert r.returncode == 2 and "already exists" in r.stderr
    finally:
        r = run_qb("lab", "down", "t-cli")
    assert r.returncode == 0
    r = run_qb("lab", "down", "t-cli")
    assert r.returncode == 2 and "no lab named 't-cli'" in r.stderr


def test_exec_in_unknown_lab_is_a_clear_error():
    p = subprocess.Popen([sys.executable, "-m", "quicbench.cli.main", "lab", "exec", "nosuch", "client"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 2 and "no lab named 'nosuch'" in err
