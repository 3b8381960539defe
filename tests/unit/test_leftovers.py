"""What killed processes leave behind is removed by the next run (issue 26, case 8)."""

import os

from quicbench.model.runmeta import RunMeta
from quicbench.store import RunStore


def test_a_killed_builds_leftovers_are_removed_by_the_next(tmp_path):
    import subprocess
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f".merged.building-{dead.pid}"
    older = tmp_path / f".merged.merging-{dead.pid}"
    alive = tmp_path / f".other.building-{os.getpid()}"     # a build still running: kept
    for d in (left, older, alive):
        (d / "trials").mkdir(parents=True)
    RunStore.build(tmp_path / "merged2", RunMeta(status="complete"), [])
    assert not left.exists() and not older.exists() and alive.exists()


def test_browser_profiles_of_killed_runs_are_reaped(tmp_path, monkeypatch):
    import tempfile
    import time as time_
    from quicbench.clients.browser import driver
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = tmp_path / f"{driver.PROFILE_PREFIX}old"
    new = tmp_path / f"{driver.PROFILE_PREFIX}new"
    for d in (old, new):
        (d / "tmp" / "org.chromium.Chromium.x").mkdir(parents=True)
    os.utime(old, (time_.time() - 3600, time_.time() - 3600))
    assert driver.reap_profiles() == [old]            # no browser uses either; the new one may be starting
    assert not old.exists() and new.exists()
