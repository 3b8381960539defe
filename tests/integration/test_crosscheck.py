"""`quicbench link crosscheck`: linkem on this kernel against netem in User-Mode Linux."""

import json
import math
import tempfile
from pathlib import Path

import pytest

from conftest import root_only, run_qb
from quicbench.kernels import UmlKernel

pytestmark = [pytest.mark.integration, root_only,
              pytest.mark.skipif(not UmlKernel().available()[0], reason=UmlKernel().available()[1])]


def crosscheck_namespaces() -> set[str]:
    import subprocess
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {l.split()[0] for l in out.splitlines() if l.startswith("qb-x")}


def crosscheck_temp_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("qb-crosscheck-*"))


def test_crosscheck_jitter_and_loss():
    before, temp_before = crosscheck_namespaces(), crosscheck_temp_dirs()
    # a rate with reordering jitter: netem cannot do both, the rate is left out and said so (on
    # stderr: with --json stdout is the JSON alone). 1000 datagrams at 1000/s: the sample the
    # loss bounds below are computed for, in half the default rate's time (UML's netem probe keeps
    # 1000/s too: tests/integration/uml_netem_probe.py)
    cp = run_qb("link", "crosscheck", "--delay", "20", "--jitter", "5", "--loss", "2", "--rate", "1000",
                "--up", "reorder=true",
                "--down", "reorder=true", "--count", "1000", "--pps", "1000", "--goodput-reps", "1", "--json",
                timeout=600)
    assert cp.returncode in (0, 1), cp.stderr
    res = json.loads(cp.stdout)
    assert "rate left out" in cp.stderr and res["condition"]["note"].startswith("rate left out")
    assert res["linkem"]["link"]["name"] == "linkem" and res["netem"]["link"]["name"] == "netem"
    assert res["netem"]["kernel"] == UmlKernel().version()["version"]
    assert res["probe"] == {"count": 1000, "pps": 1000, "size": 64}
    for d in ("up", "down"):
        v = res["verdicts"][d]
        # the same condition through both: loss agrees, both reorder, medians close (a busy
        # host has delayed UML's timers by 1.5 ms at the median for a whole probe)
        # loss: both sides at the configured 2 % and at each other, judged at 99.99 % (the
        # verdict's own 99 % would fail one run in fifty by chance over two directions)
        la, lb = v["loss"]["values"]
        n = 1000
        for f in (la, lb):
            assert abs(f - 0.02) <= 3.9 * math.sqrt(0.02 * 0.98 / n), v["loss"]
        assert abs(la - lb) <= 3.9 * math.sqrt(0.02 * 0.98 * 2 / n), v["loss"]
        assert min(v["reorder"]["values"]) > 0.2, v["reorder"]
        a, b = v["owd"]["p50_ms"]
        assert abs(a - b) < 2.5 and 18.5 < a < 21.5, v["owd"]
        # the noise floors are measured: linkem's is small
        assert 0 <= v["floor_excess_p50_ms"][0] < 0.3
    # goodput: TCP, h2 and h3 measured through both (never failed); one repetition a side is not
    # judged (the verdicts' logic: tests/unit/test_crosscheck_verdicts.py)
    g = res["verdicts"]["goodput"]
    assert set(g) == {"tcp", "h2", "h3"}, g
    for m in g.values():
        assert m["n"] == [1, 1] and all(x > 0 for x in m["values"]), g
        assert m["verdict"].startswith("not judged"), m
    assert set(res["netem"]["goodput"]["ceiling_mbps"]) == {"h2", "h3"}   # UML's ceiling measured
    assert res["ok"] == all(not m["verdict"].startswith(("differ", "fail")) for d in ("up", "down", "goodput")
                            for m in res["verdicts"][d].values() if isinstance(m, dict) and "verdict" in m)
    # the probe's and the runs' temp dirs are gone (compared with before: a killed earlier run's are not ours)
    assert crosscheck_temp_dirs() - temp_before == set()
    assert crosscheck_namespaces() <= before


def test_crosscheck_refuses_what_netem_cannot_do(tmp_path):
    trace = tmp_path / "link.trace"
    trace.write_text("".join(f"{t}\n" for t in range(1, 100)))     # mahimahi: one packet per ms
    cp = run_qb("link", "crosscheck", "--trace", str(trace))
    assert cp.returncode == 2 and "netem has no trace" in cp.stderr, cp.stderr
