"""--until-decided: repetitions are added to undecided cells only, in the same run, up to MAX;
the report of the run tests at alpha / looks and says so."""

import json

import pytest

from conftest import root_only, run_qb

pytestmark = [pytest.mark.integration, root_only]

# h1 and h2 over a clean fast link (close: often undecided at n = 2) and over a 5 Mbit/s link
# with 1 % loss (very different: decided at once)
PLAN = """
name = "until-decided"
protocols = ["h1", "h2"]
repetitions = 2
warmup = 0
[statistics]
alpha = 0.05
[[workloads]]
size = "200KB"
count = 2
[[conditions]]
name = "clean"
delay_ms = 1
[[conditions]]
name = "far-apart"
delay_ms = 30
rate_mbit = 5
"""


def test_undecided_cells_get_more_repetitions_up_to_max(tmp_path, no_leftovers):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    bad = run_qb("run", str(plan), "--out", str(tmp_path / "bad"), "--until-decided", "1")
    assert bad.returncode == 2 and "--until-decided 1" in bad.stderr and "MAX >= 2" in bad.stderr
    assert not (tmp_path / "bad").exists()
    p = run_qb("run", str(plan), "--out", str(tmp_path / "runs"), "--until-decided", "6", "--no-report",
               timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    run = next((tmp_path / "runs").iterdir())
    meta = json.loads((run / "meta.json").read_text())
    seq = meta["sequential"]
    assert seq["looks"] == 3 and seq["step"] == 2 and seq["alpha_per_look"] == pytest.approx(0.05 / 3)
    rows = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    reps = {}
    for r in rows:
        reps.setdefault(r["condition"], set()).add(r["rep"])
    looked = seq["looked"]
    assert 1 <= len(looked) <= 3
    # a cell got repetitions past the plan's only if a look found it undecided, and never past MAX
    for cond, rs in reps.items():
        assert max(rs) <= 6 and rs == set(range(1, max(rs) + 1))
        undecided_at = [i for i, look in enumerate(looked) if any(c.startswith(f"{cond} |") for c in look["cells"])]
        assert max(rs) == 2 + 2 * len([i for i in undecided_at if i < 2]), (cond, rs, looked)
    # trial directories are never shared between trials
    assert len({r["seq"] for r in rows}) == len(rows)
    # the report tests at alpha / looks
    rep = run_qb("report", str(run), "--format", "text")
    assert rep.returncode == 0 and "sequential: 3 looks at alpha 0.0167 each" in rep.stdout, rep.stdout
