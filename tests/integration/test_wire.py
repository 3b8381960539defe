"""The wire view: captures, overhead bounds, time series, qlog, key log."""

import gzip
import json

import dpkt
import pytest

from conftest import root_only
from quicbench.clients import LoadClient, Target
from quicbench.model.conditions import Condition
from quicbench.content.objects import generate
from quicbench.lab import LabSpec, make_lab
from quicbench.model.plan import TrialOptions, TrialSpec, Workload
from quicbench.servers import CaddyServer
from quicbench.tls import make_tls
from quicbench.run.trial import run_trial

pytestmark = [pytest.mark.integration, root_only]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    wd = tmp_path_factory.mktemp("wire")
    content = generate({1_000_000: 4}, seed=5, cache=wd / "cache")
    with make_lab(LabSpec(name="t-wire", link="plain")) as lab:
        tls = make_tls(wd / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, wd / "caddy", content, tls) as server:
            yield server, Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443,
                                 tls=tls, content=content), wd


def trial(served, proto, options, name):
    server, target, wd = served
    spec = TrialSpec(0, Condition(name="none"), Workload(size="1MB", count=4, parallel=1), proto, "caddy", 1)
    row = run_trial(spec, target, LoadClient(), server.pid, wd / name, 60, options)
    assert row["status"] == "ok", row["error"]
    return row, wd / name


def test_h1_overhead_within_physical_bounds(served):
    row, d = trial(served, "h1", TrialOptions(capture=True, capture_keep="raw"), "h1-cap")
    assert row["capture_dropped"] == 0
    # Lower bound: every 1448-byte TCP segment (timestamps on) carries 14 + 20 + 32 = 66 bytes of
    # Ethernet/IP/TCP headers, 4.6 % of the payload, before ACKs, TLS records and HTTP headers.
    # Upper bound: ACKs add about 66 bytes per two segments (2.3 %), TLS 1.3 about 22 bytes per
    # 16 KB record, handshakes a few KB: well under 12 % for 4 MB — plus, when the busy machine
    # made TCP send segments again (seen once: 14.8 %), at most a full 1514-byte frame for each.
    retransmitted = row["tcp_retransmits"] * 1514 / 4_000_000 * 100
    assert 4.5 < row["overhead_pct"] < 12 + retransmitted, (row["overhead_pct"], row["tcp_retransmits"])
    assert row["wire_bytes_down"] > row["bytes"] > row["wire_bytes_up"] > 0
    assert row["quic_packets_down"] == 0
    # the time series integrates to the bytes on the wire
    ts = json.loads((d / "timeseries.json").read_text())
    assert sum(ts["down_bytes"]) == row["wire_bytes_down"]
    # and the pcap is a real capture: frames of at most 1514 bytes (no offload super-frames)
    with open(d / "client.pcap", "rb") as f:
        lens = [len(buf) for _, buf in dpkt.pcap.Reader(f)]
    assert len(lens) == row["wire_packets_down"] + row["wire_packets_up"]
    assert max(lens) <= 128   # headers only


@pytest.mark.parallel_safe
def test_h3_capture_qlog_and_keylog(served):
    row, d = trial(served, "h3", TrialOptions(capture=True, qlog=True, keylog=True), "h3-cap")
    assert row["quic_packets_down"] > 2800   # 4 MB in at most ~1450-byte QUIC packets
    assert row["overhead_pct"] > 0 and row["tcp_retransmits"] == 0
    assert (d / "client.pcap.gz").exists() and not (d / "client.pcap").exists()
    with gzip.open(d / "client.pcap.gz") as f:
        assert sum(1 for _ in dpkt.pcap.Reader(f)) == row["wire_packets_down"] + row["wire_packets_up"]
    qlogs = list((d / "qlog").glob("*.sqlog"))
    assert len(qlogs) == 1
    records = [json.loads(r) for r in qlogs[0].read_text().split("\x1e") if r.strip()]
    names = {e.get("name") for e in records[1:]}
    assert any("packet_sent" in (n or "") for n in names) and any("packet_received" in (n or "") for n in names)
    keys = (d / "keys.log").read_text()
    assert "CLIENT_HANDSHAKE_TRAFFIC_SECRET" in keys and "SERVER_TRAFFIC_SECRET_0" in keys


@pytest.mark.parallel_safe
def test_capture_off_leaves_no_pcap(served):
    row, d = trial(served, "h2", TrialOptions(), "h2-nocap")
    assert "wire_bytes_down" not in row
    assert not list(d.glob("*.pcap*")) and not (d / "timeseries.json").exists()


def test_wire_goodput_never_exceeds_configured_rate(tmp_path):
    content = generate({1_000_000: 3}, seed=6, cache=tmp_path / "cache")
    cond = Condition.model_validate({"name": "r20", "rate_mbit": 20, "delay_ms": 5})
    with make_lab(LabSpec(name="t-wirerate", link="linkem", condition=cond)) as lab:
        tls = make_tls(tmp_path / "tls", ips=[lab.address("server")])
        with CaddyServer(lab, tmp_path / "caddy", content, tls) as server:
            target = Target(lab=lab, hostname=tls.hostname, address=lab.address("server"), port=443, tls=tls,
                            content=content)
            for proto in ("h2", "h3"):
                spec = TrialSpec(0, cond, Workload(size="1MB", count=3), proto, "caddy", 1)
                row = run_trial(spec, target, LoadClient(), server.pid, tmp_path / proto, 60,
                                TrialOptions(capture=True))
                assert row["status"] == "ok", row["error"]
                assert row["capture_dropped"] == 0
                # payload over the time data was on the wire: below the 20 Mbit/s the link carries,
                # and not far below it (the link is the bottleneck)
                assert 12 < row["wire_goodput_mbps"] <= 20, row["wire_goodput_mbps"]
                assert row["goodput_mbps"] <= row["wire_goodput_mbps"] * 1.02
                # a steady bottleneck: the bytes per 100 ms vary little once slow start is over
                assert row["wire_throughput_cv_pct"] is not None and row["wire_throughput_cv_pct"] < 30, \
                    row["wire_throughput_cv_pct"]
