"""meta.json has a schema (model/runmeta.py) and one writer (RunStore); a run's selection is one type."""

import json

import pytest

from quicbench.model.plan import plan_from_dict
from quicbench.model.runmeta import RunMeta
from quicbench.model.shard import Selection, Shard
from quicbench.store import RunStore

PLAN = {"name": "m", "protocols": ["h1", "h2"], "repetitions": 3,
        "workloads": [{"size": "10KB", "count": 2}], "conditions": [{"name": "a"}, {"name": "b"}]}


def test_create_writes_the_model_and_update_checks_every_field(tmp_path):
    store = RunStore.create(tmp_path, RunMeta(status="created", reps=2, only=None, created=1.0))
    meta = json.loads(store.layout.meta.read_text())
    assert meta["run_id"] == store.dir.name and meta["reps"] == 2 and "only" in meta and meta["only"] is None
    store.update_meta(status="running", calibration={"a": {"ok": True}})
    assert store.meta().status == "running" and store.read_meta()["calibration"] == {"a": {"ok": True}}
    with pytest.raises(ValueError, match="no field stauts"):
        store.update_meta(stauts="complete")
    with pytest.raises(ValueError):
        store.update_meta(status="done")          # not a status
    with pytest.raises(ValueError):
        store.update_meta(server_ports={"caddy": "four-four-three"})
    assert store.meta().status == "running"       # a refused write changed nothing
    store.release()


def test_older_keys_are_kept_when_read_and_rewritten(tmp_path):
    store = RunStore.create(tmp_path, RunMeta(status="created"))
    raw = json.loads(store.layout.meta.read_text())
    store.layout.meta.write_text(json.dumps({**raw, "retired_key": [1, 2]}))
    store.update_meta(status="complete")
    assert store.read_meta()["retired_key"] == [1, 2] and store.meta().status == "complete"
    store.release()


def test_build_writes_all_or_nothing(tmp_path):
    src = tmp_path / "trial"
    src.mkdir()
    (src / "client.log").write_text("x")
    row = {"key": "k", "seq": 0, "status": "ok", "condition": "a", "protocol": "h1"}
    out = tmp_path / "merged"
    store = RunStore.build(out, RunMeta(status="complete"), [row], [(src, "trials/00000")])
    assert store.rows() == [row] and (out / "trials/00000/client.log").read_text() == "x"
    assert store.read_meta()["run_id"] == "merged"
    with pytest.raises(ValueError):
        RunStore.build(tmp_path / "bad", RunMeta(status="complete"), [{**row, "no_such_column": 1}])
    assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".bad.*"))


def test_selection_round_trips_through_meta():
    plan = plan_from_dict(PLAN)
    sel = Selection(reps=2, only={"condition": ["a"]}, shard=Shard(1, 2))
    meta = sel.as_meta(plan)
    assert meta["shard"]["trials"] == sum(not t.warmup for t in sel.trials(plan))
    assert Selection.from_meta(meta) == sel
    assert {t.condition.name for t in sel.trials(plan)} == {"a"}
    assert len(Selection().trials(plan)) == len(Selection(reps=3).trials(plan))

