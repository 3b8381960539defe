"""The link emulator through a real lab, measured with ping and iperf3 (tools nobody here wrote)."""

import json
import re
import shutil
import statistics
import subprocess

import pytest
from scipy import stats as sstats

from conftest import root_only, run_qb, within_binomial
from quicbench.run.calibrate import measure_iperf3
from quicbench.model.conditions import Condition
from quicbench.lab import LabSpec, make_lab

pytestmark = [pytest.mark.integration, root_only]


def pings(lab, count, interval=0.005):
    out = subprocess.run(lab.cmd("client", ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2",
                                            lab.address("server")]),
                         capture_output=True, text=True, timeout=count * interval + 30).stdout
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def cond(**kw):
    return Condition.model_validate({"name": "t", **kw})


@pytest.fixture(scope="module")
def lab():
    with make_lab(LabSpec(name="t-link", link="linkem")) as lab:
        yield lab


def test_rtt_through_configured_delay(lab):
    lab.set_condition(cond(delay_ms=20))
    rtts = pings(lab, 100, 0.01)
    assert len(rtts) == 100
    assert abs(statistics.median(rtts) - 40.0) < 0.5


def test_loss_ratio_within_binomial_interval_and_directions_independent(lab):
    lab.set_condition(cond(up={"loss_pct": 10}))
    lab.link.reset()
    n = 1000
    rtts = pings(lab, n, 0.002)
    assert within_binomial(n - len(rtts), n, 0.1), (n - len(rtts), n)
    st = lab.link.stats()["router"]
    assert st["up"]["lost"] == n - len(rtts) and st["down"]["lost"] == 0
    assert st["down"]["forwarded"] == len(rtts)
    # every echo that was not lost left from the ring frame it arrived in
    assert st["ports"]["a"]["rx_kept"] == st["up"]["forwarded"], st["ports"]["a"]


def test_the_router_still_answers_for_itself(lab):
    """linkem drops transit frames at the router's ingress (after reading them) so that its kernel
    does not process them; what is addressed to the router itself still reaches the kernel."""
    lab.set_condition(cond(delay_ms=1))
    st = lab.link.stats()["router"]
    if shutil.which("nft"):
        assert st["kernel_transit"] == "dropped at ingress (nft)", st["kernel_transit"]
    for addr in lab.state["addresses"]["router"].values():
        out = subprocess.run(lab.cmd("client", ["ping", "-n", "-c", "3", "-i", "0.05", "-W", "1", addr]),
                             capture_output=True, text=True, timeout=30).stdout
        assert " 0% packet loss" in out, (addr, out)
    assert len(pings(lab, 20, 0.01)) == 20     # and transit still flows, through linkem


def lost_pings(lab, count, interval=0.002):
    out = subprocess.run(lab.cmd("client", ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2",
                                            lab.address("server")]),
                         capture_output=True, text=True, timeout=count * interval + 30).stdout
    answered = {int(x) for x in re.findall(r"icmp_seq=(\d+)", out)}
    return sorted(set(range(1, count + 1)) - answered)


def test_a_seed_makes_the_same_packets_lost_again(lab):
    """plan link_seed: linkem restarts its draws from a trial's seed, so the same packets of a
    repeated sequence are lost, in both directions; another seed loses others."""
    lab.set_condition(cond(loss_pct=10))
    lost = []
    for seed in (11, 11, 12):
        lab.link.reseed(seed)
        lost.append(lost_pings(lab, 400))
    assert 40 <= len(lost[0]) <= 120, lost[0]        # each echo crosses twice: 1 - 0.9² = 19 % lost
    assert lost[1] == lost[0]
    assert lost[2] != lost[0]


def test_rate_within_tolerance(lab):
    lab.set_condition(cond(rate_mbit=20, delay_ms=5))
    gp = measure_iperf3(lab, seconds=3)["goodput_mbps"]
    # the rate counts IP bytes: TCP payload (1448 of every 1500 bytes) is at most 96.5 % of it
    assert 0.90 * 20 <= gp <= 20 * 1448 / 1500 * 1.01, gp


def test_jitter_distribution_ks(lab):
    lab.set_condition(cond(delay_ms=20, down={"jitter_ms": 4, "jitter_dist": "normal", "reorder": True}))
    rtts = pings(lab, 400, 0.01)
    assert len(rtts) == 400
    # RTT = 20 ms up + 20 ms + N(0, 4 ms) down (+ ~0.1 ms of stack time)
    res = sstats.kstest([r - 0.1 for r in rtts], "norm", args=(40, 4))
    assert res.pvalue > 1e-6, res
    # and a uniform jitter is *not* taken for a normal one
    lab.set_condition(cond(delay_ms=20, down={"jitter_ms": 4, "jitter_dist": "uniform", "reorder": True}))
    rtts_u = pings(lab, 400, 0.01)
    # bounded on both sides: nothing arrives before 40 - 4 ms; host scheduling only ever adds time, so a few
    # late samples are allowed above 40 + 4 ms (a N(40, 4) jitter would put about 32 % of them outside)
    assert min(rtts_u) > 40 - 4.1, min(rtts_u)
    outside = [r for r in rtts_u if r > 40 + 4.5]
    assert len(outside) <= 0.03 * len(rtts_u), sorted(outside)
    assert sstats.kstest([r - 0.1 for r in rtts_u], "uniform", args=(36, 8)).pvalue > 1e-6
    assert sstats.kstest([r - 0.1 for r in rtts_u], "norm", args=(40, 4)).pvalue < 0.05


def test_spikes_visible_in_throughput_series(lab):
    lab.set_condition(cond(rate_mbit=20, spikes={"period_ms": 1000, "duration_ms": 300, "rate_pct": 5}))
    out = subprocess.run(lab.cmd("server", ["iperf3", "-s", "-1", "-D"]), capture_output=True)
    assert out.returncode == 0
    import time
    time.sleep(0.2)
    cp = subprocess.run(lab.cmd("client", ["iperf3", "-c", lab.address("server"), "-R", "-t", "4", "-i", "0.1",
                                           "-J"]), capture_output=True, text=True, timeout=60)
    series = [iv["sum"]["bits_per_second"] / 1e6 for iv in json.loads(cp.stdout)["intervals"]][5:]
    top = statistics.median(series)
    assert top > 15
    dips = [x for x in series if x < 0.4 * top]
    # 300 ms of every second at 5 % of the rate: about 3 of every 10 bins are dips
    assert 0.15 <= len(dips) / len(series) <= 0.45, series


def test_queue_drops_when_overfilled(lab):
    lab.set_condition(cond(rate_mbit=5, queue={"packets": 20}))
    lab.link.reset()
    subprocess.run(lab.cmd("server", ["iperf3", "-s", "-1", "-D"]), capture_output=True)
    import time
    time.sleep(0.2)
    subprocess.run(lab.cmd("client", ["iperf3", "-c", lab.address("server"), "-u", "-b", "20M", "-t", "1", "-R",
                                      "-l", "1400"]), capture_output=True, timeout=60)
    down = lab.link.stats()["router"]["down"]
    assert down["queue_dropped"] > 0.5 * down["received"]    # 20 Mbit/s into a 5 Mbit/s link
    assert down["forwarded"] + down["queue_dropped"] + down["lost"] <= down["received"] + 64


def test_lab_up_with_condition_flags_and_bad_values(no_leftovers):
    r = run_qb("lab", "up", "--name", "t-flags", "--link", "linkem", "--delay", "5", "--down", "rate_mbit=10")
    assert r.returncode == 0, r.stderr
    try:
        st = [s for s in json.loads(run_qb("lab", "status", "--json").stdout) if s["name"] == "t-flags"][0]
        hop = st["spec"]["condition"]["hops"][0]
        assert hop["up"]["delay_ms"] == 5 and hop["down"]["rate_mbit"] == 10 and hop["up"]["rate_mbit"] is None
    finally:
        run_qb("lab", "down", "t-flags")
    for args, needle in ((["--loss", "120"], "loss_pct"), (["--jitter-dist", "cauchy"], "jitter_dist"),
                         (["--delay", "-3"], "delay_ms"), (["--trace", "/nonexistent"], "trace file '/nonexistent' not found"),
                         (["--up", "colour=red"], "unknown field 'colour'")):
        r = run_qb("lab", "up", "--name", "t-bad", "--link", "linkem", *args)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
