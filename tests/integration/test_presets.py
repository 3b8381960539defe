"""The CI-sized preset runs end to end through the link emulator, with both connection policies."""

import json
from collections import Counter

import pytest

from conftest import REPO, root_only, run_qb

pytestmark = [pytest.mark.integration, root_only]


def test_go_quick_lite_completes(tmp_path, no_leftovers):
    # one repetition of each of the preset's cells on its clean path and its impaired one with delay,
    # reordering jitter and loss (24 of its 36 cells): the whole shape, end to end, in a third of the
    # time (the worst path, 50_2, adds only time: its collapse is tests/integration/test_recovery.py's)
    r = run_qb("run", str(REPO / "plans" / "go-quick-lite.toml"), "--reps", "1", "--only", "condition=0_0,12.5_0.5",
               "--out", str(tmp_path), timeout=1200)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run_dir = next(d for d in tmp_path.iterdir() if d.is_dir())
    rows = [json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 4 * 3
    failed = [(r["key"], r["error"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed
    assert Counter(r["condition"] for r in rows) == {"0_0": 12, "12.5_0.5": 12}
    for row in rows:
        assert row["protocols"] == f"{row['protocol']}:{row['count']}"
        assert row["bytes"] == row["size_bytes"] * row["count"]
        assert row["link"] in ("linkem", "netem")
        # the connections opened are the policy's: one per object, or one multiplexed (h2, h3)
        if row["connection_policy"] == "per-object":
            assert row["connections"] == row["count"], row["key"]
        else:
            assert row["connection_policy"] == "shared"
            assert row["connections"] == (1 if row["protocol"] in ("h2", "h3") else row["connections"]), row["key"]
            assert 1 <= row["connections"] <= row["count"]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "complete"
    assert set(meta["calibration"]) == {"0_0", "12.5_0.5"}
    # impairments show: the lossy, delayed condition is slower than the clean one
    def med(cond, proto):
        vals = sorted(r["goodput_mbps"] for r in rows if r["condition"] == cond and r["protocol"] == proto
                      and r["size_bytes"] == 1_000_000 and r["connection_policy"] == "per-object")
        return vals[len(vals) // 2]
    for proto in ("h1", "h2", "h3"):
        assert med("0_0", proto) > med("12.5_0.5", proto)
