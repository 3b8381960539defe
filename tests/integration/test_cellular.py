"""A trial over a recorded cellular trace delivers what the trace allows (issue 28.5).

Two 2-second slices of data/traces/cellular/Verizon-LTE-short.down, one where the link carried
about 11 Mbit/s and one where it carried about 3, each replayed as a whole trace (linkem repeats
a trace when it ends, as mahimahi does). A download over each gets a goodput close to, and never
above, the slice's capacity, so the delivered rate follows the trace, not a fixed rate.
"""

import collections
import json

import pytest

from conftest import REPO, root_only, run_qb
from quicbench.model.conditions import trace_mean_mbit

pytestmark = [pytest.mark.integration, root_only]

TRACE = REPO / "data" / "traces" / "cellular" / "Verizon-LTE-short.down"


def slice_trace(dest, start_ms: int, length_ms: int = 2000):
    """The trace's packets in [start, start + length) as a trace of its own (timestamps from 1)."""
    stamps = [int(t) for t in TRACE.read_text().split() if start_ms <= int(t) < start_ms + length_ms]
    dest.write_text("".join(f"{t - start_ms + 1}\n" for t in stamps))
    return dest


def two_second_bins() -> dict[int, float]:
    counts = collections.Counter(int(t) // 2000 for t in TRACE.read_text().split())
    return {b: n * 1500 * 8 / 2 / 1e6 for b, n in counts.items()}


def test_delivered_rate_follows_the_trace(tmp_path, no_leftovers):
    bins = two_second_bins()
    high = min((b for b, r in bins.items() if 10 < r < 13), key=lambda b: b)
    low = min((b for b, r in bins.items() if 2.5 < r < 3.5), key=lambda b: b)
    traces = {"high": slice_trace(tmp_path / "high.down", high * 2000),
              "low": slice_trace(tmp_path / "low.down", low * 2000)}
    caps = {k: trace_mean_mbit(p) for k, p in traces.items()}
    assert caps["high"] > 3 * caps["low"]
    conditions = "".join(f'[[conditions]]\nname = "{k}"\ndown = {{ trace = "{p}", delay_ms = 10 }}\n'
                         f'up = {{ delay_ms = 10 }}\n' for k, p in traces.items())
    plan = tmp_path / "cell.toml"
    plan.write_text('protocols = ["h2", "h3"]\nrepetitions = 1\nlink = "linkem"\norder = "sequential"\n'
                    f'[[workloads]]\nsize = "2MB"\ncount = 1\n{conditions}')
    out = tmp_path / "runs"
    r = run_qb("run", str(plan), "--out", str(out), "--no-report", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    rows = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    for row in rows:
        assert row["status"] == "ok", row["error"]
        cap = caps[row["condition"]]
        # never above what the trace lets through; most of it (handshake and slow start cost some)
        assert 0.5 * cap < row["goodput_mbps"] <= 1.03 * cap, (row["condition"], row["protocol"],
                                                              row["goodput_mbps"], cap)
    by = {(row["condition"], row["protocol"]): row["goodput_mbps"] for row in rows}
    for proto in ("h2", "h3"):
        assert by[("high", proto)] > 2.5 * by[("low", proto)]
