"""`quicbench run` end to end: bad input, interruption, SIGKILL and resume."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import QB, lab_namespaces, labs_left, root_only, run_qb
from quicbench.kernels.features import probe

pytestmark = [pytest.mark.integration, root_only]

PLAN = """
name = "resume-test"
protocols = ["h1", "h2", "h3"]
repetitions = 8
[[workloads]]
size = "1MB"
count = 3
[[workloads]]
size = "10KB"
count = 5
parallel = 2
"""


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines()]


def only_run_dir(out: Path) -> Path:
    dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def start_run(plan: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*QB, "run", str(plan), "--out", str(out), "--no-report", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, COLUMNS="200"))


def wait_rows(run_dirs_parent: Path, n: int, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = [d for d in run_dirs_parent.iterdir() if d.is_dir()] if run_dirs_parent.exists() else []
        if dirs and (dirs[0] / "trials.jsonl").exists() and len(rows(dirs[0])) >= n:
            return dirs[0]
        time.sleep(0.01)
    raise AssertionError(f"fewer than {n} rows after {timeout}s")


def communicate_or_stacks(p: subprocess.Popen, timeout: float) -> str:
    """The process's output once it ends; if it does not end in time, fail with its stacks
    (quicbench prints every thread's stack on SIGUSR1) and what it printed."""
    try:
        return p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        exited = p.poll()          # not None: it ended, but something it started holds its stdout
        p.send_signal(signal.SIGUSR1)
        time.sleep(1)
        p.kill()
        try:
            output = p.communicate(timeout=10)[0]
        except subprocess.TimeoutExpired as e:   # something else holds its stdout open
            output = (e.output or b"").decode(errors="replace") + "\n[stdout still open after the kill]"
        raise AssertionError(f"no end of output {timeout}s after the signal (exit status then: {exited}); "
                             f"its output and stacks:\n{output}")


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    out = tmp_path / "runs"
    p = start_run(plan, out)
    run_dir = wait_rows(out, 5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    killed_at = len(rows(run_dir))
    assert killed_at < 48
    # the killed run's lab is still there until the next command reaps it
    r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reaped lab" in r.stderr
    got = rows(run_dir)
    keys = Counter(row["key"] for row in got)
    assert len(keys) == 3 * 2 * 8
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    assert all(row["status"] == "ok" for row in got), [row["error"] for row in got if row["status"] != "ok"]
    assert {row["protocols"] for row in got if row["protocol"] == "h3"} <= {"h3:3", "h3:5"}
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "complete"
    # link 'auto' says what it passed over and why, in meta.json and on the terminal (a kernel
    # whose sch_netem is missing or does not load must not fall back to linkem silently)
    if probe()["netem"]:
        assert meta["link"]["name"] == "netem" and "auto_passed_over" not in meta["link"]
    else:
        assert meta["link"]["name"] == "linkem"
        assert "no sch_netem" in meta["link"]["auto_passed_over"]["netem"]
        assert "link auto: not netem: this kernel has no sch_netem" in " ".join(r.stdout.split())
    # nothing more to do
    r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report")
    assert r.returncode == 0 and "nothing to do" in r.stdout


@pytest.mark.parallel_safe
def test_ctrl_c_cleans_up_and_resumes(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    out = tmp_path / "runs"
    others = lab_namespaces()              # labs of other runs on this host are not ours to judge
    p = start_run(plan, out)
    run_dir = wait_rows(out, 3)
    assert labs_left(others), "the run's lab was not up"
    p.send_signal(signal.SIGINT)
    output = communicate_or_stacks(p, timeout=120)   # a guard against hanging, not a speed target
    assert p.returncode == 130, output
    assert "resume with" in output
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "interrupted"
    assert labs_left(others) == set()
    r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len({row["key"] for row in rows(run_dir)}) == 48 == len(rows(run_dir))


@pytest.mark.parallel_safe
def test_resume_with_other_plan_is_refused(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    r = run_qb("run", str(plan), "--out", str(tmp_path / "runs"), "--only", "protocol=h2", "--only",
               "size=10KB", "--reps", "1", "--no-report")
    assert r.returncode == 0, r.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert [row["protocol"] for row in rows(run_dir)] == ["h2"]
    other = tmp_path / "q.toml"
    other.write_text(PLAN.replace("repetitions = 8", "repetitions = 2"))
    r = run_qb("run", str(other), "--resume", str(run_dir))
    assert r.returncode == 2 and "different plan" in r.stderr


@pytest.mark.parallel_safe
@pytest.mark.parametrize("body,needle", [
    ('protocols = ["h4"]\n[[workloads]]\nsize = "1MB"', "Input should be 'h1', 'h2' or 'h3'"),
    ('[[workloads]]\nsize = "1 megabyte"', "bad size '1 megabyte'"),
    ('[[workloads]]\nsize = "1MB"\ncount = 0', "count: Input should be greater than or equal to 1"),
])
def test_bad_plan_exit_2_nothing_left(tmp_path, body, needle, no_leftovers):
    plan = tmp_path / "bad.toml"
    plan.write_text(body)
    r = run_qb("run", str(plan), "--out", str(tmp_path / "runs"))
    assert r.returncode == 2
    assert needle in r.stderr and str(plan) in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 3   # one message (rich may wrap it)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parallel_safe
def test_unknown_protocol_in_only(tmp_path):
    r = run_qb("run", "--only", "protocol=quic", "--out", str(tmp_path))
    assert r.returncode == 2 and "protocol=quic" in r.stderr and "h1, h2, h3" in r.stderr


@pytest.mark.parallel_safe
def test_missing_binary(tmp_path, no_leftovers):
    env = {"QUICBENCH_BIN": str(tmp_path / "nobin"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    r = run_qb("run", "--out", str(tmp_path / "runs"), env=env)
    assert r.returncode == 2
    assert "missing binary 'qb-load'" in r.stderr and "make setup" in r.stderr


@pytest.mark.parallel_safe
def test_not_root(tmp_path):
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                        "import sys; sys.argv=['quicbench','lab','up']; from quicbench.cli.main import main; main()"],
                       capture_output=True, text=True, env=dict(os.environ, COLUMNS="200",
                                                                 QUICBENCH_STATE=str(tmp_path)))
    assert r.returncode == 2, r.stderr
    assert "needs root" in r.stderr
