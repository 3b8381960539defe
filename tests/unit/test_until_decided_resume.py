"""issue 45 part 4: --until-decided is resumable. The extension trials a Ctrl-C or SIGKILL cut run
before any new look, exactly once; the interrupt hint carries every flag that shapes the run."""

import json

from rich.console import Console

from quicbench.cli.run import _until_decided
from quicbench.model.columns import FORMAT_VERSION
from quicbench.model.plan import plan_from_dict
from quicbench.model.runmeta import RunMeta
from quicbench.model.shard import Selection
from quicbench.run.runner import Runner, plan_fingerprint
from quicbench.store import RunStore
from test_merge import row

PLAN = {"name": "ud", "protocols": ["h1", "h2"], "repetitions": 2, "warmup": 0,
        "workloads": [{"size": "10KB", "count": 2}], "conditions": [{"name": "c"}]}


def _store(tmp_path, plan):
    store = RunStore.create(tmp_path / "runs", RunMeta(format_version=FORMAT_VERSION, status="running",
                                                       plan=json.loads(plan.model_dump_json()),
                                                       plan_fingerprint=plan_fingerprint(plan)))
    for t in Selection().trials(plan):
        store.append(row(t, store.run_id, "h", goodput=50.0 + t.rep))      # h1 and h2 alike: undecided
    return store


def _record(store, trials):
    for t in trials:
        store.append(row(t, store.run_id, "h", goodput=50.0 + t.rep))


def test_cut_extension_trials_run_again_before_a_new_look_exactly_once(tmp_path):
    plan = plan_from_dict(PLAN)
    store = _store(tmp_path, plan)
    quiet = Console(file=open("/dev/null", "w"))
    extend = _until_decided(8, quiet)(store, plan, Selection())
    first = extend()                                   # look 1: reps 3..4 of both protocols
    assert sorted((t.protocol, t.rep) for t in first) == [("h1", 3), ("h1", 4), ("h2", 3), ("h2", 4)]
    _record(store, first[:1])                          # then a kill: three of them cut
    # the resume makes a new hook (a new process) from meta.json
    resumed = _until_decided(8, quiet)(store, plan, Selection())
    again = resumed()
    assert sorted(t.key for t in again) == sorted(t.key for t in first[1:])
    assert len(store.read_meta()["sequential"]["looked"]) == 1           # no look on a partial extension
    assert len({t.seq for t in again} | {r["seq"] for r in store.rows()}) == len(store.rows()) + 3
    _record(store, again)
    nxt = resumed()                                    # now look 2, on every trial of look 1
    assert len(store.read_meta()["sequential"]["looked"]) == 2
    keys = [r["key"] for r in store.rows()]
    assert len(keys) == len(set(keys))                 # every planned trial once
    assert not {t.key for t in nxt} & set(keys)        # a look adds only trials not yet run


def test_the_interrupt_hint_carries_every_flag_that_shapes_the_run(tmp_path):
    plan = plan_from_dict(PLAN)
    store = _store(tmp_path, plan)
    store.update_meta(sequential={"max_reps": 8, "looks": 3, "step": 2})
    sel = Selection(reps=3, only={"protocol": ["h1"]})
    r = Runner(sel.resolve(plan), store, Console(file=open("/dev/null", "w")), sel, jobs=2)
    hint = r._testbed_flags()
    assert "--until-decided 8" in hint and "--reps 3" in hint and "--only protocol=h1" in hint and "--jobs 2" in hint


def test_a_bug_outside_a_trial_leaves_the_run_failed_with_its_reason_not_running(tmp_path):
    """An exception that is no QuicbenchError (a quicbench bug) still ends meta.json's 'running':
    failed, with the exception named, and the resume hint printed; the exception propagates."""
    import io

    import pytest
    plan = plan_from_dict(PLAN)
    store = _store(tmp_path, plan)
    out = io.StringIO()
    r = Runner(Selection().resolve(plan), store, Console(file=out, width=300), Selection())
    with pytest.raises(KeyError):
        with r._run_status():
            raise KeyError("acks_sent")
    meta = store.read_meta()
    assert meta["status"] == "failed" and meta["failed_reason"] == "quicbench internal error: KeyError: 'acks_sent'"
    assert "--resume" in out.getvalue()
