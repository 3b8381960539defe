"""issue 45 part 7: nothing left behind. A refused start leaves no run directory; every command
reaps what killed processes left (content caches' .tmp-PID-*, merges' .building-PID) and only those;
a row whose server died says so."""

import os
import subprocess
import sys

import pytest
from rich.console import Console

from quicbench.errors import EnvironmentFault, QuicbenchError
from quicbench.model.plan import plan_from_dict
from quicbench.store import reap_stale_temporaries


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_refused_start_leaves_no_run_directory(tmp_path, monkeypatch):
    import quicbench.run.runner as runner
    plan = plan_from_dict({"workloads": [{"size": "10KB"}]})

    def refuse(*a, **k):
        raise QuicbenchError("content: refused for the test")
    monkeypatch.setattr(runner, "generate", refuse)
    monkeypatch.setattr(runner, "check_run", lambda *a, **k: None)
    with pytest.raises(QuicbenchError, match="refused for the test"):
        runner.start_run(plan, tmp_path / "runs", Console(file=open(os.devnull, "w")))
    assert not (tmp_path / "runs").exists()
    # an environment fault (exit 1) keeps the run: it is resumable
    (tmp_path / "kept").mkdir()

    def fault(*a, **k):
        raise EnvironmentFault("disk full for the test")
    monkeypatch.setattr(runner, "generate", fault)
    with pytest.raises(EnvironmentFault):
        runner.start_run(plan, tmp_path / "kept", Console(file=open(os.devnull, "w")))
    assert len(list((tmp_path / "kept").iterdir())) == 1


def test_stale_temporaries_of_dead_processes_are_reaped_and_only_those(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICBENCH_CACHE", str(tmp_path / "cache"))
    dead, alive = _dead_pid(), os.getpid()
    for sub in ("content", "video"):
        for pid in (dead, alive):
            (tmp_path / "cache" / sub / f".tmp-{pid}-abc").mkdir(parents=True)
        (tmp_path / "cache" / sub / ".tmp-oldstyle").mkdir()          # owner unknown: kept
    parent = tmp_path / "merges"
    for pid in (dead, alive):
        (parent / f".m.building-{pid}").mkdir(parents=True)
        (tmp_path / "cache" / "builds").mkdir(exist_ok=True)
        (tmp_path / "cache" / "builds" / f"{pid}-x").write_text(str(parent / f".m.building-{pid}"))
    # a registry entry naming something that is not a build directory is not followed
    (tmp_path / "victim").mkdir()
    (tmp_path / "cache" / "builds" / f"{dead}-y").write_text(str(tmp_path / "victim"))
    removed = reap_stale_temporaries()
    assert sorted(p.name for p in removed) == sorted([f".tmp-{dead}-abc"] * 2 + [f".m.building-{dead}"])
    assert (tmp_path / "cache" / "content" / f".tmp-{alive}-abc").exists()
    assert (tmp_path / "cache" / "content" / ".tmp-oldstyle").exists()
    assert (parent / f".m.building-{alive}").exists() and (tmp_path / "victim").exists()
    assert not (tmp_path / "cache" / "builds" / f"{dead}-x").exists()


def test_every_command_reaps(tmp_path, monkeypatch, capfd):
    from quicbench.cli.main import main
    monkeypatch.setenv("QUICBENCH_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "cache" / "content" / f".tmp-{_dead_pid()}-abc"
    d.mkdir(parents=True)
    monkeypatch.setattr(sys, "argv", ["quicbench", "plan", "show", "--only", "nonsense"])
    with pytest.raises(SystemExit):
        main()
    assert not d.exists()


class _Srv:
    name = "nginx"

    def __init__(self, proc):
        self.proc = proc


def test_a_server_that_died_is_named_in_the_row():
    from quicbench.run.session import server_exit
    p = subprocess.Popen(["sleep", "30"])
    assert server_exit(_Srv(p)) is None
    p.kill()
    p.wait()
    assert server_exit(_Srv(p)) == "server nginx exited (signal SIGKILL) during the trial"
    q = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    q.wait()
    assert server_exit(_Srv(q)) == "server nginx exited (code 3) during the trial"
