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


@pytest.mark.parallel_safe
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


# h1 and h2 over a clean link at an alpha no four or six repetitions reach: every cell is extended
# to MAX, so the run always has extension trials to cut
NEVER_DECIDED = """
name = "cut-until-decided"
protocols = ["h1", "h2"]
repetitions = 2
warmup = 0
[statistics]
alpha = 1e-9
[[workloads]]
size = "100KB"
count = 2
[[conditions]]
name = "clean"
delay_ms = 1
"""


def test_sigint_then_sigkill_then_the_hint_run_every_trial_exactly_once(tmp_path, no_leftovers):
    """Ctrl-C during an extension, the printed hint, SIGKILL during the resumed extension, the hint
    again: every planned trial (2 protocols x 6 repetitions) has exactly one successful row."""
    import os
    import re
    import shlex
    import signal
    import subprocess
    import time

    from conftest import QB
    plan = tmp_path / "plan.toml"
    plan.write_text(NEVER_DECIDED)
    out = tmp_path / "runs"
    env = dict(os.environ, COLUMNS="400", QUICBENCH_STATE=str(tmp_path / "state"))

    def rows(run_dir):
        p = run_dir / "trials.jsonl"
        return [json.loads(l) for l in p.read_text().splitlines()] if p.exists() else []

    def start(argv):
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    def until_rows(n, proc):
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            dirs = [d for d in out.iterdir() if d.is_dir()] if out.exists() else []
            if dirs and len(rows(dirs[0])) >= n:
                return dirs[0]
            assert proc.poll() is None, proc.communicate()[0]
            time.sleep(0.02)
        raise AssertionError(f"{n} rows not reached")

    p = start([*QB, "run", str(plan), "--out", str(out), "--no-report", "--until-decided", "6"])
    run_dir = until_rows(5, p)                 # the first look (after 4 trials) extended the cells
    p.send_signal(signal.SIGINT)
    said = p.communicate(timeout=120)[0]
    assert p.returncode == 130, said
    hint = re.search(r"resume with '(quicbench run [^']+)'", said.replace("\n", " "))
    assert hint and "--until-decided 6" in hint.group(1), said
    resume = [*QB, *shlex.split(hint.group(1))[1:]]

    before = len(rows(run_dir))
    p = start(resume)
    until_rows(before + 2, p)                  # into the resumed extension
    p.send_signal(signal.SIGKILL)
    p.wait()
    down = subprocess.run([*QB, "lab", "down", "--all"], capture_output=True, text=True, env=env)
    assert down.returncode == 0, down.stderr   # a SIGKILLed run leaves its lab to lab down

    p = start(resume)
    said = p.communicate(timeout=300)[0]
    assert p.returncode == 0, said
    ok = [r for r in rows(run_dir) if r["status"] == "ok"]
    keys = [r["key"] for r in ok]
    assert len(keys) == len(set(keys)) == 12, sorted(keys)
    assert {(r["protocol"], r["rep"]) for r in ok} == {(pr, k) for pr in ("h1", "h2") for k in range(1, 7)}
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "complete"
