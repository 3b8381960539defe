"""The run directory cannot be corrupted, lab faults are detected at once, bad input is a clear error.

One test per case found when quicbench was tried as a careful user would (SIGKILLs, two writers,
a full disk, a killed link emulator, hostile plans and flags).
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import QB, lab_namespaces, labs_left, root_only, run_qb

pytestmark = [pytest.mark.integration, root_only]

SLOW_PLAN = """
name = "slow"
protocols = ["h1", "h2", "h3"]
repetitions = 6
link = "linkem"
[[workloads]]
size = "100KB"
count = 4
[[conditions]]
name = "d20"
delay_ms = 20
"""


def rows(run_dir: Path) -> list[dict]:
    p = run_dir / "trials.jsonl"
    return [json.loads(l) for l in p.read_text().splitlines()] if p.exists() else []


def start(plan: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*QB, "run", str(plan), "--out", str(out), "--no-report", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, COLUMNS="200"))


def wait_for(pred, timeout: float = 120, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"{what}: not reached after {timeout}s")


def run_dir_with_rows(out: Path, n: int) -> Path:
    def ready():
        dirs = [d for d in out.iterdir() if d.is_dir()] if out.exists() else []
        return dirs[0] if dirs and len(rows(dirs[0])) >= n else None
    return wait_for(ready, what=f"{n} rows")


def run_lab_state(run_dir: Path) -> dict:
    """The state file of the lab a live run owns."""
    def find():
        for p in Path(os.environ.get("QUICBENCH_STATE", "/run/quicbench"), "labs").glob("*.json"):
            try:
                st = json.loads(p.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if (st.get("spec") or {}).get("run_dir") == str(run_dir.resolve()) and st.get("status") == "up":
                return st
        return None
    return wait_for(find, what="the run's lab")


# 1. one writer per run directory; TLS material made once
@pytest.mark.parallel_safe
def test_second_writer_is_refused_and_tls_is_made_once(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN)
    out = tmp_path / "runs"
    p = start(plan, out)
    try:
        run_dir = run_dir_with_rows(out, 1)
        ca = (run_dir / "tls" / "ca.pem").read_bytes()
        r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report")
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"is being written by process {p.pid}" in r.stderr
        assert (run_dir / "tls" / "ca.pem").read_bytes() == ca
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=120)
    r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (run_dir / "tls" / "ca.pem").read_bytes() == ca            # a resume keeps the run's certificates
    got = rows(run_dir)
    assert len(got) == len({r["key"] for r in got}) == 18
    assert all(r["status"] == "ok" for r in got), [r["error"] for r in got if r["status"] != "ok"]


# 2. a full disk: no torn row, a one-line error, exit 1, meta 'interrupted', resumable
@pytest.mark.parallel_safe
def test_full_disk_stops_cleanly_and_resumes(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN.replace('link = "linkem"', 'link = "plain"').replace(
        '[[conditions]]\nname = "d20"\ndelay_ms = 20\n', ""))
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "qb-test-full", str(disk)], check=True)
    try:
        r = run_qb("run", str(plan), "--out", str(disk), "--no-report", timeout=300)
        assert r.returncode == 1, r.stdout + r.stderr
        err = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        assert len(err) == 1 and "disk full" in err[0], r.stderr
        assert "Traceback" not in r.stderr + r.stdout
        run_dir = next(d for d in disk.iterdir() if d.is_dir())
        lines = (run_dir / "trials.jsonl").read_bytes().splitlines()
        assert all(json.loads(l)["key"] for l in lines)                    # no torn row
        assert json.loads((run_dir / "meta.json").read_text())["status"] == "interrupted"
        # move the run to a disk with room and resume it there
        moved = tmp_path / "runs" / run_dir.name
        moved.parent.mkdir()
        subprocess.run(["cp", "-a", str(run_dir), str(moved)], check=True)
    finally:
        subprocess.run(["umount", str(disk)], check=False)
    # --retry-failed: the trials the full disk failed run again, so the run ends complete (exit 0)
    r = run_qb("run", str(plan), "--resume", str(moved), "--retry-failed", "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(moved)
    last = {row["key"]: row for row in got}
    assert len(last) == 18 and all(row["status"] == "ok" for row in last.values())


# 3. a retried trial starts from an empty directory; the earlier attempt is kept aside, named
@pytest.mark.parallel_safe
def test_retried_trial_directory_is_fresh(tmp_path):
    from quicbench.model.runmeta import RunMeta
    from quicbench.store import RunStore
    store = RunStore.create(tmp_path, RunMeta(status="created"))
    d = store.trial_dir(1)
    (d / "qlog").mkdir()
    (d / "keys.log").write_text("first attempt")
    again = store.trial_dir(1)
    assert again == d and list(again.iterdir()) == []
    aside = d.with_name("00001.attempt-1")
    assert (aside / "keys.log").read_text() == "first attempt"
    store.release()


# 4. a dead link emulator is restarted and the trial runs again; never recorded as the network's
@pytest.mark.parallel_safe
def test_killed_linkem_is_detected_restarted_and_nothing_wrong_recorded(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN)
    out = tmp_path / "runs"
    p = start(plan, out)
    run_dir = run_dir_with_rows(out, 2)
    state = run_lab_state(run_dir)
    os.kill(state["link"]["pids"]["router"], signal.SIGKILL)
    t0 = time.monotonic()
    output = p.communicate(timeout=300)[0]
    assert p.returncode == 0, output
    assert "linkem on router is not running" in output and "restarting it (1/2)" in output
    got = rows(run_dir)
    assert len(got) == len({r["key"] for r in got}) == 18
    assert all(r["status"] == "ok" for r in got), [r["error"] for r in got if r["status"] != "ok"]
    assert time.monotonic() - t0 < 120        # no trial ran into its timeout


# 5. lab set / lab down on a live run's lab are refused; down --force stops the run cleanly
def test_lab_set_and_down_refuse_a_live_runs_lab(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN)
    out = tmp_path / "runs"
    p = start(plan, out)
    run_dir = run_dir_with_rows(out, 1)
    name = run_lab_state(run_dir)["name"]
    r = run_qb("lab", "set", name, "--rate", "2", "--loss", "1")
    assert r.returncode == 2 and "belongs to the live run" in r.stderr, r.stderr
    r = run_qb("lab", "down", name)
    assert r.returncode == 2 and "--force" in r.stderr, r.stderr
    r = run_qb("lab", "down", "--all")
    assert r.returncode == 0 and f"lab {name} skipped" in r.stdout, r.stdout + r.stderr
    assert p.poll() is None                                   # the run goes on
    r = run_qb("lab", "down", name, "--force")
    assert r.returncode == 0, r.stdout + r.stderr
    p.communicate(timeout=60)
    assert p.returncode == 130
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "interrupted"
    assert all(r["status"] == "ok" for r in rows(run_dir))     # no trial failed because of it
    assert all(r["condition_desc"] == "20ms" for r in rows(run_dir))


# 8. lab status shows a dead run's lab as dead
def test_status_reports_a_killed_runs_lab_as_dead(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN)
    out = tmp_path / "runs"
    p = start(plan, out)
    run_dir = run_dir_with_rows(out, 1)
    name = run_lab_state(run_dir)["name"]
    p.send_signal(signal.SIGKILL)
    p.wait()
    r = run_qb("lab", "status", "--json")
    st = {s["name"]: s for s in json.loads(r.stdout)}
    assert st[name]["status"].startswith("dead"), st[name]["status"]
    r = run_qb("lab", "down", name)
    assert r.returncode == 0, r.stderr


# 9. two Ctrl-C presses in quick succession still take the lab down
@pytest.mark.parallel_safe
def test_double_ctrl_c_leaves_no_lab(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN)
    out = tmp_path / "runs"
    others = lab_namespaces()
    p = start(plan, out)
    run_dir_with_rows(out, 1)
    p.send_signal(signal.SIGINT)
    time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    assert p.returncode == 130
    assert labs_left(others) == set()


# 11, 14. tracebacks become one-line errors; flags that make no sense are refused
@pytest.mark.parallel_safe
@pytest.mark.parametrize("args,needle,code", [
    (["run", "--out", "/proc/x", "--reps", "1"], "--out /proc/x: cannot create a run directory", 2),
    (["run", "--retry-failed"], "--retry-failed needs --resume", 2),
    (["report", "{empty}"], "has no trial rows", 2),
])
def test_clear_errors(tmp_path, args, needle, code, no_leftovers):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "meta.json").write_text('{"run_id": "x"}')
    r = run_qb(*[a.replace("{empty}", str(empty)) for a in args])
    assert r.returncode == code, r.stdout + r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parallel_safe
def test_binary_plan_file_is_a_clear_error(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_bytes(bytes(range(256)))
    r = run_qb("run", str(plan), "--out", str(tmp_path / "runs"))
    assert r.returncode == 2 and "not a TOML plan" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists()


# 12. a plan that cannot run fails in plan show / --dry-run, before anything starts
@pytest.mark.parallel_safe
@pytest.mark.parametrize("field,needle", [
    ('link = "wormhole"', "link: unknown link emulator 'wormhole'"),
    ('tcp_cc = "warp"', "tcp_cc: 'warp' is not available"),
])
def test_bad_driver_fields_fail_before_anything_starts(tmp_path, field, needle):
    plan = tmp_path / "p.toml"
    plan.write_text(field + '\n[[workloads]]\nsize = "10KB"\n')
    for args in (["plan", "show", str(plan)], ["run", str(plan), "--dry-run"],
                 ["run", str(plan), "--out", str(tmp_path / "runs")]):
        r = run_qb(*args)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
    assert not (tmp_path / "runs").exists()


# 14. --reps with --resume is recorded; the resume hint names the plan file
@pytest.mark.parallel_safe
def test_reps_change_on_resume_is_recorded_and_hint_names_the_plan(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN.replace("repetitions = 6", "repetitions = 1"))
    out = tmp_path / "runs"
    p = start(plan, out)
    run_dir = run_dir_with_rows(out, 1)
    p.send_signal(signal.SIGINT)
    output = p.communicate(timeout=120)[0]
    assert f"quicbench run {plan} --resume {run_dir}" in output, output
    r = run_qb("run", str(plan), "--resume", str(run_dir), "--reps", "2", "--no-report")
    assert r.returncode == 0, r.stderr
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["reps"] == 2 and meta["reps_changed"][0]["from"] == 1
    assert len(rows(run_dir)) == 6


# 10. a page load's browser dies with its run, even when the run is SIGKILLed
def test_browser_dies_with_a_killed_run(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text('protocols = ["h2"]\nrepetitions = 20\n[[workloads]]\nkind = "page"\nsize = "100KB"\n'
                    'count = 10\n')
    out = tmp_path / "runs"
    p = start(plan, out)
    run_dir = wait_for(lambda: next((d for d in out.iterdir() if d.is_dir()), None) if out.exists() else None,
                       what="a run directory")
    client_ns = run_lab_state(run_dir)["namespaces"]["client"]

    def browsers() -> list[int]:
        pids = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                if b"qb-browser-profile" not in (d / "cmdline").read_bytes():
                    continue
            except OSError:
                continue
            ns = subprocess.run(["ip", "netns", "identify", d.name], capture_output=True, text=True).stdout.strip()
            if ns == client_ns:
                pids.append(int(d.name))
        return pids

    wait_for(browsers, what="a browser of the run")
    # issue 26 case 8: the browser's temporary directories (org.chromium.Chromium.*) are made in
    # its profile, so they go with it instead of staying in /tmp after a SIGKILL
    def chromium() -> tuple[int, Path] | None:
        for pid in browsers():
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            dirs = [Path(a.split(b"=", 1)[1].decode()) for a in args if a.startswith(b"--user-data-dir=")]
            if dirs:
                return pid, dirs[0]
        return None
    first, own_profile = wait_for(chromium, what="Chromium itself")
    environ = dict(kv.split(b"=", 1) for kv in Path(f"/proc/{first}/environ").read_bytes().split(b"\0") if b"=" in kv)
    assert Path(environ[b"TMPDIR"].decode()).parent == own_profile
    wait_for(lambda: list((own_profile / "tmp").glob("org.chromium.Chromium.*")), timeout=30,
             what="the browser's temporary directory inside its profile")
    p.send_signal(signal.SIGKILL)
    p.wait()
    profiles = set()
    for pid in browsers():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        profiles |= {Path(a.split(b"=", 1)[1].decode()) for a in args if a.startswith(b"--user-data-dir=")}
    wait_for(lambda: not browsers(), timeout=15, what="no browser of the killed run")
    # the load's fresh profile goes with it (other runs' profiles on this host are not ours to judge)
    wait_for(lambda: not [p for p in profiles if p.exists()], timeout=15, what="the killed load's profile removed")
    r = run_qb("lab", "down", run_lab_state(run_dir)["name"])   # the killed run's lab itself
    assert r.returncode == 0


# 13. Ctrl-C during the end-of-run report says that the report was not written, and how to write it
def test_ctrl_c_during_the_report_says_so(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text('protocols = ["h1", "h2"]\nrepetitions = 3\n[[workloads]]\nsize = "10KB"\ncount = 2\n')
    out = tmp_path / "runs"
    p = subprocess.Popen([*QB, "run", str(plan), "--out", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=dict(os.environ, COLUMNS="200"))
    run_dir = run_dir_with_rows(out, 6)
    wait_for(lambda: json.loads((run_dir / "meta.json").read_text()).get("status") == "complete",
             what="the trials' end")
    p.send_signal(signal.SIGINT)
    output = p.communicate(timeout=60)[0]
    assert p.returncode == 130, output
    assert "the report was not written" in output and f"quicbench report {run_dir}" in output, output
    assert not (run_dir / "report.html").exists()


# 4b. a lab removed from outside (another user's `ip netns del`) stops the run; nothing is recorded for it
@pytest.mark.parallel_safe
def test_a_lab_removed_from_outside_stops_the_run_without_wrong_rows(tmp_path, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text(SLOW_PLAN)
    out = tmp_path / "runs"
    p = start(plan, out)
    run_dir = run_dir_with_rows(out, 2)
    state = run_lab_state(run_dir)
    subprocess.run(["ip", "netns", "del", state["namespaces"]["client"]], check=True)
    output = p.communicate(timeout=120)[0]
    assert p.returncode == 1, output
    assert "lost its namespace(s)" in output and "resume" in output, output
    assert all(r["status"] == "ok" for r in rows(run_dir)), [r["error"] for r in rows(run_dir)]
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "interrupted"
    r = run_qb("run", str(plan), "--resume", str(run_dir), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(rows(run_dir)) == len({r["key"] for r in rows(run_dir)}) == 18


# issue 26 case 4: a run that finished with failed trials exits 1 (README's exit codes), also with --json
@pytest.mark.parallel_safe
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_failed_trials_exit_1(tmp_path, extra, no_leftovers):
    plan = tmp_path / "p.toml"
    plan.write_text('protocols = ["h1"]\nrepetitions = 1\ntrial_timeout_s = 1\nlink = "linkem"\n'
                    '[[workloads]]\nsize = "1MB"\ncount = 2\n[[conditions]]\nname = "slow"\nrate_mbit = 1\n')
    out = tmp_path / "runs"
    r = run_qb("run", str(plan), "--out", str(out), "--no-report", *extra)
    assert r.returncode == 1, r.stdout + r.stderr
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    assert [row["status"] for row in rows(run_dir)] == ["failed"]
    assert "1 trial(s) failed" in r.stdout + r.stderr
    if extra:
        assert json.loads(r.stdout)       # stdout is still the summary alone


@pytest.mark.parallel_safe
def test_a_run_that_cannot_start_its_server_is_refused_leaving_nothing(tmp_path, no_leftovers):
    """Issue 26, case 5 and issue 45, part 7: a server whose readiness never passes stops the run
    with exit 2, one line saying why, and no run directory (no trial was recorded)."""
    plan = tmp_path / "p.toml"
    plan.write_text('name = "mute"\nprotocols = ["h1"]\nrepetitions = 1\nservers = { h1 = "mute" }\n'
                    '[server_commands.mute]\ncommand = "sleep 60"\nprotocols = ["h1", "h2", "h3"]\n'
                    'ready_timeout_s = 1\n[[workloads]]\nsize = "10KB"\n')
    r = run_qb("run", str(plan), "--out", str(tmp_path / "runs"), "--no-report")
    assert r.returncode == 2, r.stdout + r.stderr
    # besides the warning before the run that its condition has no rate limit (docs/link.md)
    said = [line for line in r.stderr.strip().splitlines() if not line.startswith("warning: with both endpoints busy linkem")]
    assert "mute" in r.stderr and len(said) == 1, r.stderr
    assert not (tmp_path / "runs").exists()
    assert "resume with" not in r.stdout + r.stderr
