"""CoDel against drop-tail, measured: one bulk TCP download (iperf3, CUBIC) through a 10 Mbit/s
bottleneck with a buffer of 1000 packets (1.2 s at the rate), 10 ms each way, while a paced UDP
probe (100 packets/s, server to client) measures the one-way delay a packet of another
application sees behind it, and linkem counts CoDel's drops and the sojourn time of every packet
leaving the queue.

Drop-tail: CUBIC fills the buffer and the probe waits hundreds of ms. CoDel (RFC 8289, target 5
ms, interval 100 ms), switched on in the same lab at run time: the sojourn median stays within
the tolerance below and goodput near the rate.

Tolerances, and why: CoDel keeps the *minimum* sojourn over each interval near its target, not
every packet's; CUBIC's sawtooth and its slow-start overshoot (excluded: the probe starts 1.5 s
in) put the median a few ms above 5 ms and the tail higher. So the download direction's median
sojourn must be under 3 x target (15 ms) and the probe's median one-way delay under 10 ms of
propagation + 20 ms, against more than 100 ms of queueing under drop-tail; goodput at least 80 %
of the rate (TCP's ceiling is 96.5 %; a single CUBIC flow under CoDel loses a few % to its
backoffs).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import threading
import time

import pytest

from conftest import root_only
from quicbench.lab import LabSpec, make_lab
from quicbench.link.fidelity import link_window
from quicbench.model.conditions import Condition
from quicbench.probe.udp import probe

pytestmark = [pytest.mark.integration, root_only]

RATE, DELAY, BUFFER = 10, 10, 1000
SECONDS = 6.0
PROBE_START_S, PROBE_COUNT, PROBE_PPS = 1.5, 400, 100


def condition(discipline: str) -> Condition:
    return Condition.model_validate({"name": discipline, "delay_ms": DELAY, "rate_mbit": RATE,
                                     "queue": {"packets": BUFFER}, "queue_discipline": discipline})


@pytest.fixture(scope="module")
def lab():
    with make_lab(LabSpec(name="t-codel", link="linkem", condition=condition("fifo"))) as lab:
        yield lab


def bulk_download(lab, discipline: str) -> dict:
    """A 6 s iperf3 download with the probe from 1.5 s on; linkem's window over the download."""
    lab.set_condition(condition(discipline))
    server = subprocess.Popen(lab.cmd("server", ["iperf3", "-s", "-1", "-B", lab.address("server")]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        before = lab.link.reading()
        result: dict = {}

        def run_probe():
            time.sleep(PROBE_START_S)
            result["probe"] = probe(lab.ns("server"), lab.ns("client"), lab.address("client"), count=PROBE_COUNT,
                                    pps=PROBE_PPS, port=47311, drain_s=0.5, samples=True)
        t = threading.Thread(target=run_probe)
        t.start()
        cp = subprocess.run(lab.cmd("client", ["iperf3", "-c", lab.address("server"), "-R", "-t", f"{SECONDS:g}",
                                               "-J"]), capture_output=True, text=True, timeout=SECONDS + 30)
        t.join(30)
        window = link_window(before, lab.link.reading())
    finally:
        server.kill()
        server.wait()
    data = json.loads(cp.stdout)
    assert "error" not in data, data["error"]
    owd = result["probe"]["owd_samples_ms"]
    return {"goodput": data["end"]["sum_received"]["bits_per_second"] / 1e6, "window": window,
            "probe_p50": statistics.median(owd), "probe_n": len(owd)}


def test_codel_keeps_the_queue_near_its_target_where_drop_tail_does_not(lab):
    fifo = bulk_download(lab, "fifo")
    codel = bulk_download(lab, "codel")
    print(f"fifo: goodput {fifo['goodput']:.2f} Mbit/s, probe p50 {fifo['probe_p50']:.1f} ms, "
          f"sojourn p50/p99 {fifo['window'].sojourn_p50_ms}/{fifo['window'].sojourn_p99_ms} ms; "
          f"codel: goodput {codel['goodput']:.2f}, probe p50 {codel['probe_p50']:.1f} ms, sojourn p50/p99 "
          f"{codel['window'].sojourn_p50_ms}/{codel['window'].sojourn_p99_ms} ms, {codel['window'].codel_drops} drops")
    # the probe crossed the bottleneck behind the download, most of its packets arrived
    assert fifo["probe_n"] > PROBE_COUNT * 0.8 and codel["probe_n"] > PROBE_COUNT * 0.8
    # drop-tail: a standing queue of hundreds of ms, no CoDel drop
    assert fifo["window"].codel_drops == 0
    assert fifo["probe_p50"] - DELAY > 100, fifo
    assert fifo["window"].sojourn_p50_ms > 100, fifo
    # CoDel: it dropped, and the queue stayed near its 5 ms target
    w = codel["window"]
    assert w.codel_drops > 0, codel
    assert w.sojourn_p50_ms < 15, codel
    assert codel["probe_p50"] < DELAY + 20, codel
    # ... while the download kept the link busy
    assert codel["goodput"] > 0.8 * RATE, codel
    assert fifo["goodput"] > 0.8 * RATE, fifo
