"""Shards: the partition of a plan's trials (deterministic, complete, cells unsplit, fair per
condition) and the parsing of --shard."""

from collections import Counter

import pytest

from quicbench.errors import QuicbenchError
from quicbench.model.plan import expand, plan_from_dict
from quicbench.model.shard import Shard, cell_of, parse_shard, select, shard_of_key

PLAN = {
    "name": "shards", "protocols": ["h1", "h2", "h3"], "repetitions": 5, "warmup": 1,
    "servers": {"h1": ["caddy", "nginx"]},
    "workloads": [{"size": "10KB", "count": 2}, {"size": "1MB", "count": 1}, {"size": "100KB", "count": 3}],
    "conditions": [{"name": "clean"}, {"name": "slow", "delay_ms": 50}, {"name": "lossy", "loss_pct": 2}],
}


def trials(**over):
    return expand(plan_from_dict({**PLAN, **over}))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 45, 60])
def test_every_measured_key_is_in_exactly_one_shard(n):
    all_ = trials()
    measured = [t.key for t in all_ if not t.warmup]
    got = Counter(t.key for i in range(1, n + 1) for t in select(all_, Shard(i, n)) if not t.warmup)
    assert set(got) == set(measured) and set(got.values()) == {1}


@pytest.mark.parametrize("n", [2, 3, 4])
def test_cells_stay_whole_and_keep_their_interleaving(n):
    all_ = trials()
    for i in range(1, n + 1):
        mine = [t for t in select(all_, Shard(i, n)) if not t.warmup]
        for cell in {cell_of(t) for t in mine}:
            full = [t.key for t in all_ if not t.warmup and cell_of(t) == cell]
            assert [t.key for t in mine if cell_of(t) == cell] == full   # same trials, same order
        seqs = [t.seq for t in mine]
        assert seqs == sorted(seqs)                                      # expand order, plan-wide seq


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_every_shard_gets_a_fair_share_of_each_condition(n):
    all_ = trials()
    for cond in ("clean", "slow", "lossy"):
        per = [len({cell_of(t) for t in select(all_, Shard(i, n)) if not t.warmup and t.condition.name == cond})
               for i in range(1, n + 1)]
        assert max(per) - min(per) <= 1, (cond, per)
    sizes = [sum(not t.warmup for t in select(all_, Shard(i, n))) for i in range(1, n + 1)]
    assert max(sizes) - min(sizes) <= 4   # one cell (4 stacks) at most


def test_few_cells_per_condition_still_spread_over_shards():
    all_ = trials(repetitions=1, workloads=[{"size": "10KB", "count": 1}])   # one cell per condition
    owners = [{cell_of(t) for t in select(all_, Shard(i, 3)) if not t.warmup} for i in range(1, 4)]
    assert [len(o) for o in owners] == [1, 1, 1]


def test_partition_is_deterministic_and_warmups_follow_the_conditions():
    a = [[t.key for t in select(trials(), Shard(i, 4))] for i in range(1, 5)]
    b = [[t.key for t in select(trials(), Shard(i, 4))] for i in range(1, 5)]
    assert a == b
    for i in range(1, 5):
        mine = select(trials(), Shard(i, 4))
        conds = {t.condition.name for t in mine if not t.warmup}
        assert {t.condition.name for t in mine if t.warmup} == conds
    assert select(trials(), None) == trials()


def test_shard_of_key_names_the_shard_to_rerun():
    all_ = trials()
    owner = shard_of_key(all_, 3)
    for i in range(1, 4):
        assert all(owner[t.key] == i for t in select(all_, Shard(i, 3)) if not t.warmup)


@pytest.mark.parametrize("text,env,want", [
    ("1/3", {}, Shard(1, 3)), ("3/3", {}, Shard(3, 3)), (" 2 / 5 ", {}, Shard(2, 5)),
    ("auto/3", {"SLURM_ARRAY_TASK_ID": "2"}, Shard(2, 3)),                       # --array=1-3
    ("auto/3", {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1"}, Shard(1, 3)),
    ("auto/3", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0"}, Shard(1, 3)),   # --array=0-2
    ("auto/3", {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0"}, Shard(3, 3)),
    ("auto/3", {"JOB_COMPLETION_INDEX": "0"}, Shard(1, 3)),                      # k8s: 0-based
    ("auto/3", {"JOB_COMPLETION_INDEX": "2"}, Shard(3, 3)),
])
def test_parse_shard(text, env, want):
    assert parse_shard(text, env) == want


@pytest.mark.parametrize("text,env", [
    ("0/3", {}), ("4/3", {}), ("x/y", {}), ("3", {}), ("1/0", {}), ("-1/3", {}), ("1/3/4", {}), ("", {}),
    ("auto/3", {}), ("auto/0", {"JOB_COMPLETION_INDEX": "0"}),
    ("auto/3", {"SLURM_ARRAY_TASK_ID": "4"}), ("auto/3", {"SLURM_ARRAY_TASK_ID": "0"}),
    ("auto/3", {"SLURM_ARRAY_TASK_ID": "x"}), ("auto/3", {"JOB_COMPLETION_INDEX": "3"}),
    ("auto/3", {"JOB_COMPLETION_INDEX": "-1"}),
])
def test_bad_shard_names_the_flag(text, env):
    with pytest.raises(QuicbenchError, match="^--shard"):
        parse_shard(text, env)


@pytest.mark.parametrize("flag", ["0/3", "4/3", "x/y", "auto/3"])
def test_bad_shard_on_the_command_line_is_exit_2_and_leaves_nothing(flag, tmp_path, monkeypatch, capfd):
    import sys

    from quicbench.cli.main import main
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    monkeypatch.delenv("JOB_COMPLETION_INDEX", raising=False)
    plan = tmp_path / "p.toml"
    plan.write_text('name = "p"\n[[workloads]]\nsize = "10KB"\n')
    out = tmp_path / "runs"
    monkeypatch.setattr(sys, "argv", ["quicbench", "run", str(plan), "--shard", flag, "--out", str(out)])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--shard" in err[0]
    assert not out.exists()
