"""issue 45 part 2: merge and every reader of a run directory refuse links that leave it."""

import os

import pytest

from quicbench.errors import QuicbenchError
from quicbench.fleet.merge import merge_runs
from test_merge import shards


def _a_trial(d):
    """The directory of a measured trial of run d (one that merge copies)."""
    import json
    row = next(r for r in map(json.loads, (d / "trials.jsonl").read_text().splitlines()) if not r["warmup"])
    return d / "trials" / f"{row['seq']:05d}"


def _merge_refused(tmp_path, dirs, match):
    with pytest.raises(QuicbenchError, match=match):
        merge_runs(dirs, tmp_path / "merged")
    assert not (tmp_path / "merged").exists() and not list(tmp_path.glob(".merged.building-*"))


def test_merge_refuses_a_trial_directory_that_is_a_link_out(tmp_path):
    _, dirs = shards(tmp_path)
    t = _a_trial(dirs[0])
    os.rename(t, tmp_path / "aside")
    t.symlink_to("/etc")
    _merge_refused(tmp_path, dirs, r"a link to /etc, outside the run directory")


def test_merge_refuses_a_link_or_hard_link_inside_a_trial(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("x")
    _, dirs = shards(tmp_path)
    t = _a_trial(dirs[1])
    (t / "shadow").symlink_to(secret)
    _merge_refused(tmp_path, dirs, r"shadow: a link to .*secret, outside the run directory")
    (t / "shadow").unlink()
    os.link(secret, t / "shadow")
    _merge_refused(tmp_path, dirs, r"shadow: has 2 names \(a hard link")


def test_links_within_the_run_are_fine(tmp_path):
    _, dirs = shards(tmp_path)
    t = _a_trial(dirs[1])
    (t / "same").symlink_to(t / "summary.json")
    assert merge_runs(dirs, tmp_path / "merged").rows


@pytest.mark.parametrize("name", ["meta.json", "trials.jsonl"])
def test_readers_refuse_meta_or_trials_linked_out(tmp_path, name):
    from quicbench.analysis.load import load_run
    _, dirs = shards(tmp_path)
    (tmp_path / "elsewhere").write_bytes((dirs[0] / name).read_bytes())
    (dirs[0] / name).unlink()
    (dirs[0] / name).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(QuicbenchError, match=rf"{name}: a link to .*elsewhere, outside the run directory"):
        load_run(dirs[0])
    _merge_refused(tmp_path, dirs, "outside the run directory")


def test_timeseries_named_outside_the_run_is_refused(tmp_path):
    import pandas as pd
    from quicbench.analysis.load import RunData
    from quicbench.analysis.timeseries import timeseries_path
    run = RunData(tmp_path, {}, pd.DataFrame(), [])
    with pytest.raises(QuicbenchError, match="outside the run directory"):
        timeseries_path(run, {"timeseries": "/etc/passwd"})
    with pytest.raises(QuicbenchError, match="outside the run directory"):
        timeseries_path(run, {"timeseries": "../../etc/passwd"})
