"""Labs with offloads on: endpoints send GSO super-frames and linkem cuts them per wire packet.

Measured with iperf3 and with a UDP_SEGMENT sender; linkem's counters are checked against what the
receiver actually got.
"""

import json
import subprocess
import sys
import time

import pytest

from conftest import root_only, within_binomial
from quicbench.run.calibrate import measure_iperf3
from quicbench.model.conditions import Condition
from quicbench.lab import LabSpec, make_lab

pytestmark = [pytest.mark.integration, root_only]


def cond(**kw):
    return Condition.model_validate({"name": "t", **kw})


@pytest.fixture(scope="module")
def lab():
    with make_lab(LabSpec(name="t-gso", link="linkem", offload=True)) as lab:
        yield lab


def test_offloads_are_on_and_linkem_knows(lab):
    feats = subprocess.run(lab.cmd("server", ["ethtool", "-k", "eth0"]), capture_output=True, text=True).stdout
    assert "tcp-segmentation-offload: on" in feats
    assert lab.state["spec"]["offload"] is True


def test_tcp_super_frames_are_cut_per_wire_packet(lab):
    lab.set_condition(cond(delay_ms=1, down={"loss_pct": 0.1}))
    lab.link.reset()
    res = measure_iperf3(lab, seconds=3)          # server -> client: the "down" direction
    assert res.get("goodput_mbps", 0) > 20, res
    st = lab.link.stats()["router"]
    down, port_b = st["down"], st["ports"]["b"]
    # the server really sent super-frames: many wire packets per frame linkem read
    assert down["received"] > 4 * port_b["rx_frames"], (down["received"], port_b)
    assert port_b["rx_truncated"] == 0
    # a super-frame with no segment lost leaves whole, from the ring frame it arrived in
    assert port_b["rx_kept"] > 0.5 * port_b["rx_frames"], port_b
    # loss is decided per wire packet
    assert within_binomial(down["lost"], down["received"], 0.001), (down["lost"], down["received"])
    assert down["forwarded"] + down["lost"] + down["queue_dropped"] <= down["received"]
    assert st["up"]["lost"] == 0


def test_rate_paces_each_segment(lab):
    lab.set_condition(cond(rate_mbit=20, delay_ms=5))
    gp = measure_iperf3(lab, seconds=3)["goodput_mbps"]
    # as without offloads: at most 1448 of every 1500 IP bytes are TCP payload
    assert 0.90 * 20 <= gp <= 20 * 1448 / 1500 * 1.01, gp


def test_codel_holds_each_wire_segment(lab):
    # CoDel holds packets until their dequeue: a super-frame's segments are held one by one and
    # leave alone, and the queue stays near its target
    lab.set_condition(cond(rate_mbit=20, delay_ms=5, queue={"packets": 1000}, queue_discipline="codel"))
    settle(lab)
    gp = measure_iperf3(lab, seconds=3)["goodput_mbps"]
    st = lab.link.stats()["router"]
    down = st["down"]
    # super-frames (small ones: TCP sizes them to its pacing rate at 20 Mbit/s)
    assert down["received"] > 1.2 * st["ports"]["b"]["rx_frames"], (down["received"], st["ports"]["b"])
    assert 0.80 * 20 <= gp <= 20 * 1448 / 1500 * 1.01, gp
    assert down["codel_dropped"] > 0, down
    assert down["sojourn_us"]["count"] > 0 and down["sojourn_us"]["p50_us"] < 15_000, down["sojourn_us"]
    assert down["forwarded"] + down["lost"] + down["queue_dropped"] + down["codel_dropped"] <= down["received"]


RECEIVER = r"""
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9999))
print("ready", flush=True)
s.settimeout(2.0)
seen, sizes = set(), {}
try:
    while True:
        d = s.recv(65535)
        seen.add(int.from_bytes(d[:4], "big"))
        sizes[len(d)] = sizes.get(len(d), 0) + 1
except socket.timeout:
    pass
print(json.dumps({"distinct": len(seen), "got": sum(sizes.values()), "sizes": sorted(sizes)}))
"""

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_UDP, 103, 1200)          # UDP_SEGMENT: one send = 41 datagrams
k = 0
for _ in range(150):
    buf = b"".join((k + i).to_bytes(4, "big") + bytes(1196) for i in range(40)) + (k + 40).to_bytes(4, "big") + bytes(96)
    s.sendto(buf, (sys.argv[1], 9999))
    k += 41
    time.sleep(0.003)
print(k)
"""


def settle(lab):
    """Wait until no packet crosses the link (earlier tests' connections close), then reset."""
    def seen():
        st = lab.link.stats()["router"]
        return st["up"]["received"] + st["down"]["received"]
    for _ in range(50):
        before = seen()
        time.sleep(0.3)
        if seen() == before:
            break
    lab.link.reset()


def test_udp_gso_datagrams_arrive_whole_and_counted(lab):
    lab.set_condition(cond(delay_ms=2, up={"loss_pct": 10}))
    settle(lab)
    server = lab.address("server")
    rx = subprocess.Popen(lab.cmd("server", [sys.executable, "-c", RECEIVER, server]), stdout=subprocess.PIPE,
                          text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        sent = int(subprocess.run(lab.cmd("client", [sys.executable, "-c", SENDER, server]), capture_output=True,
                                  text=True, timeout=60, check=True).stdout)
        res = json.loads(rx.communicate(timeout=30)[0])
    finally:
        rx.kill()
    got = res["got"]
    assert sent == 150 * 41
    assert res["distinct"] == got             # no datagram twice
    assert set(res["sizes"]) <= {1200, 100}   # cut at gso_size, the tail as sent
    up = lab.link.stats()["router"]["up"]
    assert up["received"] == sent             # every datagram of every super-frame counted
    assert up["forwarded"] == got             # and what linkem says it sent is what arrived
    assert within_binomial(up["lost"], sent, 0.10), up["lost"]


OFFLOAD_PLAN = """
name = "offload-run"
protocols = ["h1", "h2", "h3"]
repetitions = 1
offload = true
[[conditions]]
name = "lossy"
delay_ms = 5
loss_pct = 0.5
rate_mbit = 100
[[workloads]]
size = "1MB"
count = 3
"""


def test_a_run_with_offloads_negotiates_and_delivers_every_byte(tmp_path, no_leftovers):
    from conftest import run_qb
    plan = tmp_path / "plan.toml"
    plan.write_text(OFFLOAD_PLAN)
    cp = run_qb("run", str(plan), "--out", str(tmp_path / "out"), "--no-report", timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run_dir = next(d for d in (tmp_path / "out").iterdir() if d.is_dir())
    rows = [json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert sorted(r["protocol"] for r in rows) == ["h1", "h2", "h3"]
    for r in rows:
        assert r["status"] == "ok", r
        assert r["link"] == "linkem"
        assert r["protocols"] == f"{r['protocol']}:3"          # what was negotiated, per request
        assert r["bytes"] == 3 * 1_000_000
    assert json.loads((run_dir / "meta.json").read_text())["lab"]["offload"] is True
