"""TCP's initial congestion window set by the plan (`tcp_initcwnd`) is the one the server
sends its first flight with, measured: a 30 KB response (21 segments of 1448 bytes) needs a
second round trip with the kernel's 10 segments and arrives in one flight with 32."""

import json

import pytest

from conftest import root_only, run_qb

pytestmark = [pytest.mark.integration, root_only]

RTT_MS = 50.0
PLAN = """
name = "initcwnd"
protocols = ["h1"]
repetitions = 1
link = "linkem"
{extra}
[[workloads]]
size = "30KB"
count = 4
parallel = 1
connections = "per-object"
[[conditions]]
name = "d25"
delay_ms = 25
"""


def transfers(tmp_path, extra: str) -> tuple[dict, dict, list[float]]:
    """(meta, row, each request's first byte to last byte in round trips) of one run."""
    tmp_path.mkdir()
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format(extra=extra))
    out = tmp_path / "runs"
    r = run_qb("run", str(plan), "--out", str(out), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    meta = json.loads((run_dir / "meta.json").read_text())
    (row,) = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert row["status"] == "ok", row["error"]
    reqs = [json.loads(line) for line in (run_dir / "trials" / f"{row['seq']:05d}" / "requests.jsonl").open()]
    return meta, row, [(q["last_byte_ns"] - q["first_byte_ns"]) / 1e6 / RTT_MS for q in reqs]


def test_the_first_flight_carries_the_plans_initial_window(tmp_path, no_leftovers):
    meta, row, took = transfers(tmp_path / "default", "")
    assert row["tcp_initcwnd"] is None and meta["lab"]["tcp_initcwnd"] is None
    # 10 segments, then the other 11 a round trip later
    assert all(0.8 < t < 1.5 for t in took), [round(t, 2) for t in took]

    meta, row, took = transfers(tmp_path / "iw32", "tcp_initcwnd = 32")
    assert row["tcp_initcwnd"] == 32 and meta["lab"]["tcp_initcwnd"] == 32
    assert all(t < 0.3 for t in took), [round(t, 2) for t in took]


def test_lab_up_sets_and_reads_back_the_window(no_leftovers):
    name = "iwtest"
    r = run_qb("lab", "up", "--name", name, "--initcwnd", "27")
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "initcwnd 27" in r.stdout
        for node, peer in (("client", "QB_SERVER"), ("server", "QB_CLIENT")):
            got = run_qb("lab", "exec", name, node, "--", "sh", "-c", f'ip route get ${peer}')
            assert "initcwnd 27" in got.stdout, got.stdout + got.stderr
    finally:
        run_qb("lab", "down", name)
    bad = run_qb("lab", "up", "--name", name, "--initcwnd", "0")
    assert bad.returncode == 2 and "initcwnd" in bad.stderr, bad.stderr
