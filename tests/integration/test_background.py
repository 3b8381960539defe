"""Background flows share the bottleneck and are measured (issue 28.1): each flow's bytes are
counted, the congestion control asked is the sender's, the trial's traffic is counted apart,
the probe sees the queue, and nothing outlives the trial."""

import re
import subprocess

import pytest

from conftest import fetch, root_only
from quicbench.clients import LoadClient, Target
from quicbench.content.objects import generate
from quicbench.lab import LabSpec, make_lab
from quicbench.model.conditions import BACKGROUND_OBJECT_BYTES, Condition
from quicbench.model.plan import Workload
from quicbench.run.background import NFT_TABLE, Background
from quicbench.servers import SERVERS
from quicbench.tls import make_tls

pytestmark = [pytest.mark.integration, root_only]


def sending_cc(ss: str, port: int) -> str | None:
    """The congestion control of the socket on server port that sent the most (iperf3 has a
    control connection beside its data connection)."""
    lines = ss.splitlines()
    socks = [(int(re.search(r"bytes_acked:(\d+)", info).group(1)) if "bytes_acked:" in info else 0, info.split()[0])
             for head, info in zip(lines[::2], lines[1::2]) if f":{port} " in head]
    return max(socks)[1] if socks else None


def test_background_flows_are_counted_with_their_congestion_control(tmp_path, no_leftovers):
    cond = Condition.model_validate({"name": "shared", "delay_ms": 5, "rate_mbit": 20, "background": [
        {"protocol": "tcp", "cc": "bbr"}, {"protocol": "tcp"}, {"protocol": "h3"}]})
    content = generate({BACKGROUND_OBJECT_BYTES: 1, 2_000_000: 1}, seed=3, cache=tmp_path / "cache")
    with make_lab(LabSpec(name="t-bg", link="linkem")) as lab:
        lab.set_condition(cond)
        tls = make_tls(tmp_path / "tls", ips=[lab.address("server")])
        srv = SERVERS["caddy"](lab, tmp_path / "caddy", content, tls, port=443)
        srv.start()
        try:
            target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443, tls=tls,
                            content=content)
            with Background(lab, target, cond, "cubic", LoadClient.executable(), tmp_path / "bg") as bg:
                ss = subprocess.run(lab.cmd("server", ["ss", "-Htin", "state", "established"]), capture_output=True,
                                    text=True).stdout
                ccs = {port: sending_cc(ss, port) for port in (bg.flows[0].port, bg.flows[1].port)}
                assert ccs == {bg.flows[0].port: "bbr", bg.flows[1].port: "cubic"}, ss
                before = bg.mark()
                res = fetch(LoadClient(), target, "h2", Workload(size="2MB", count=1), tmp_path / "fg", 60)
                after = bg.mark()
                m = bg.metrics(before, after)
        finally:
            srv.stop()
        assert res.error is None
        assert m["bg_flows"] == 3
        rates = dict(kv.split("=") for kv in m["bg_class_mbps"].split(","))
        assert set(rates) == {"tcp:bbr", "tcp:cubic", "h3"} and all(float(v) > 0 for v in rates.values())
        # everything delivered fits the 20 Mbit/s bottleneck (IP bytes; a little slack for the edges)
        assert m["fg_wire_mbps"] + m["bg_mbps"] <= 20 * 1.05
        # the trial's traffic, counted at the client, is its goodput plus headers
        secs = (after.at_ns - before.at_ns) / 1e9
        assert m["fg_wire_mbps"] * secs * 1e6 / 8 >= 2_000_000
        assert 1 / 4 <= m["jain_index"] <= 1 and 0 < m["fg_share_pct"] < 100
        # the probe crossed the loaded queue: its delay is above the 5 ms one way
        assert m["load_owd_samples"] > 0 and m["load_owd_ms_p50"] > 5
        # nothing outlives the trial: the counters and every flow are gone
        nft = subprocess.run(lab.cmd("client", ["nft", "list", "tables"]), capture_output=True, text=True).stdout
        assert NFT_TABLE not in nft
        assert all(p.poll() is not None for f in bg.flows for p in f.procs) and all(not f.procs for f in bg.flows)
