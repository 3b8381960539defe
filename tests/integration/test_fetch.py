"""The same objects fetched over h1, h2 and h3 through a real lab, verified."""

import json

import pytest

from conftest import root_only, fetch
from quicbench.clients import LoadClient, Target
from quicbench.content.objects import generate
from quicbench.lab import LabSpec, make_lab
from quicbench.model.plan import Workload
from quicbench.servers import CaddyServer
from quicbench.tls import make_tls

pytestmark = [pytest.mark.integration, root_only]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    wd = tmp_path_factory.mktemp("fetch")
    content = generate({100_000: 6, 1_000_000: 2}, seed=3, cache=wd / "cache")
    with make_lab(LabSpec(name="t-fetch")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, wd / "caddy", content, tls) as server:
            yield lab, server, Target(lab=lab, hostname=tls.hostname, address=lab.address("server"),
                                      port=443, tls=tls, content=content), wd


@pytest.mark.parallel_safe
@pytest.mark.parametrize("proto", ["h1", "h2", "h3"])
def test_objects_over_each_protocol(served, proto):
    lab, server, target, wd = served
    w = Workload(size="100KB", count=6, parallel=3)
    res = fetch(LoadClient(), target, proto, w, wd / proto, timeout_s=30)
    assert res.error is None and res.returncode == 0
    assert len(res.requests) == 6
    assert {r["proto"] for r in res.requests} == {proto}
    assert all(r["sha256_ok"] and r["bytes"] == 100_000 and r["status"] == 200 for r in res.requests)
    conns = {r["conn_id"] for r in res.requests}
    if proto in ("h2", "h3"):
        assert len(conns) == 1       # one multiplexed connection
    else:
        assert 1 <= len(conns) <= 3  # at most P connections, reused
    assert res.summary["bytes"] == 600_000


@pytest.mark.parallel_safe
def test_trial_row_is_verified(served):
    from quicbench.model.conditions import Condition
    from quicbench.model.plan import TrialSpec
    from quicbench.run.trial import run_trial
    lab, server, target, wd = served
    spec = TrialSpec(0, Condition(name="none"), Workload(size="1MB", count=2), "h3", "caddy", 1)
    row = run_trial(spec, target, LoadClient(), server.pid, wd / "trial", 30)
    assert row["status"] == "ok", row["error"]
    assert row["protocols"] == "h3:2" and row["bytes"] == 2_000_000
    assert row["goodput_mbps"] > 1 and row["server_cpu_s"] > 0 and row["client_cpu_s"] > 0
    # run-queue waits: measured (from schedstat) for both ends, never negative
    assert row["client_cpu_wait_s"] >= 0 and row["server_cpu_wait_s"] >= 0
    assert row["softirq_wait_s"] >= 0       # the kernel's softirq threads: read on every trial
    assert row["ttfb_ms"] is not None and row["connect_ms"] is not None


def test_machine_cpu_share_is_measured_and_the_link_exempts(served):
    """Every CPU of the machine kept busy (hogs at nice 19, which hardly slow the trial) while a
    rate-limited transfer runs: the row records the machine's busy share, and the trial is not
    CPU-bound because the link set the pace."""
    import os
    import subprocess
    import sys
    from quicbench.model.conditions import Condition
    from quicbench.model.plan import TrialSpec
    from quicbench.run.trial import run_trial
    lab, server, target, wd = served
    cond = Condition(name="r20", rate_mbit=20)
    lab.set_condition(cond)
    try:
        spec = TrialSpec(0, cond, Workload(size="1MB", count=2), "h2", "caddy", 1)
        quiet = run_trial(spec, target, LoadClient(), server.pid, wd / "quiet", 30)
        hogs = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 1)]
        try:
            busy = run_trial(spec, target, LoadClient(), server.pid, wd / "busy", 30)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    finally:
        lab.set_condition(Condition(name="none"))
    assert quiet["status"] == "ok" and busy["status"] == "ok", (quiet["error"], busy["error"])
    assert quiet["machine_cpu_pct"] < 90 and not quiet["cpu_bound"], quiet
    assert busy["machine_cpu_pct"] >= 90, busy["machine_cpu_pct"]
    assert busy["goodput_mbps"] >= 0.8 * 20 and not busy["cpu_bound"], busy


@pytest.mark.parallel_safe
def test_root_index_for_hostname_and_ip(served):
    import subprocess
    lab, server, target, wd = served
    for host in (target.hostname, target.address):
        out = subprocess.run(lab.cmd("client", [
            "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{header_json}", "--cacert",
            str(target.tls.ca_cert), "--resolve", f"{target.hostname}:443:{target.address}",
            f"https://{host}/"]), capture_output=True, text=True)
        code, headers = out.stdout.split(" ", 1)
        assert code == "200", out.stderr
        assert "no-cache" in json.loads(headers)["cache-control"][0]
