"""`quicbench merge` on synthetic shard run directories: union, duplicates, missing trials,
plan and version mismatches, output safety, and a merged run the report reads."""

import json
import sys
from pathlib import Path

import pytest

from quicbench.errors import QuicbenchError
from quicbench.model.plan import expand, plan_from_dict
from quicbench.model.shard import Shard, select
from quicbench.fleet.merge import merge_runs
from quicbench.run.runner import plan_fingerprint

PLAN = {"name": "merge-test", "protocols": ["h1", "h2", "h3"], "repetitions": 3, "warmup": 1,
        "workloads": [{"size": "10KB", "count": 2}, {"size": "100KB", "count": 1}],
        "conditions": [{"name": "clean"}, {"name": "slow", "delay_ms": 20}]}


def plan(**over):
    return plan_from_dict({**PLAN, **over})


def row(t, run_id, host, status="ok", started=None, goodput=None):
    gp = goodput if goodput is not None else {"h1": 50.0, "h2": 55.0, "h3": 40.0}[t.protocol] * (1 + t.rep / 100)
    ok = status == "ok"
    return {"key": t.key, "seq": t.seq, "run_id": run_id, "condition": t.condition.name,
            "condition_desc": t.condition.short(), "protocol": t.protocol, "server": t.server, "client": "qb-load",
            "workload": t.workload.label, "size_bytes": t.workload.size_bytes, "count": t.workload.count,
            "parallel": t.workload.parallelism, "connection_policy": "shared", "rep": t.rep, "warmup": t.warmup,
            "started_at": started if started is not None else 1_800_000_000.0 + t.seq, "status": status,
            "error": None if ok else "boom", "bytes": t.workload.payload_bytes if ok else 0,
            "goodput_mbps": gp if ok else None, "total_time_s": 0.01 if ok else None,
            "client_cpu_s": 0.01, "server_cpu_s": 0.01, "cpu_bound": False, "link": "linkem", "tcp_cc": "cubic",
            "hops": 1, "host": host}


def write_shard(root: Path, p, shard: Shard | None, host="node1", skip=(), fail=(), version="0.1.0",
                status="complete", extra_rows=()) -> Path:
    d = root / (f"s{shard.index}of{shard.count}" if shard else "full")
    d.mkdir(parents=True)
    trials = select(expand(p), shard)
    meta = {"run_id": d.name, "format_version": 2, "status": status, "plan": json.loads(p.model_dump_json()),
            "plan_fingerprint": plan_fingerprint(p), "quicbench_version": version, "reps": None, "only": {},
            "host": {"hostname": host, "quicbench": version}, "versions": {"client_qb-load": {"qb_load": "1"}},
            "link": {"name": "linkem"}, "shard": shard.as_meta() if shard else None}
    (d / "meta.json").write_text(json.dumps(meta))
    rows = [row(t, d.name, host, status="failed" if t.key in fail else "ok") for t in trials if t.key not in skip]
    rows += list(extra_rows)
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for t in trials:
        (d / "trials" / f"{t.seq:05d}").mkdir(parents=True, exist_ok=True)
        (d / "trials" / f"{t.seq:05d}" / "summary.json").write_text(json.dumps({"host": host}))
    return d


def shards(tmp_path, n=3, **kw):
    p = plan()
    return p, [write_shard(tmp_path / "shards", p, Shard(i, n), host=f"node{i}", **kw) for i in range(1, n + 1)]


def keys(run: Path) -> list[str]:
    return [json.loads(l)["key"] for l in (run / "trials.jsonl").read_text().splitlines()]


def test_union_of_shards_equals_the_plan(tmp_path):
    p, dirs = shards(tmp_path)
    res = merge_runs(dirs, tmp_path / "merged")
    measured = [t.key for t in expand(p) if not t.warmup]
    got = keys(tmp_path / "merged")
    assert sorted(k for k in got if not k.endswith("warmup")) == sorted(measured)
    assert len(got) == len(set(got))                      # warm-ups of several shards: one per key
    assert res.missing == [] and res.duplicates == [] and res.trials == len(measured)
    meta = json.loads((tmp_path / "merged" / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["plan_fingerprint"] == plan_fingerprint(p)
    assert sorted(meta["hosts"]) == ["node1", "node2", "node3"] and "shard" not in meta
    assert [i["shard"]["index"] for i in meta["merge"]["inputs"]] == [1, 2, 3]
    rows = [json.loads(l) for l in (tmp_path / "merged" / "trials.jsonl").read_text().splitlines()]
    assert {r["host"] for r in rows} == {"node1", "node2", "node3"}
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)
    for r in rows:   # each trial's directory comes from the shard that ran it
        summary = tmp_path / "merged" / "trials" / f"{r['seq']:05d}" / "summary.json"
        assert json.loads(summary.read_text())["host"] == r["host"]


def test_duplicates_keep_the_latest_ok_row_and_say_so(tmp_path):
    p, dirs = shards(tmp_path)
    t = next(t for t in select(expand(p), Shard(1, 3)) if not t.warmup)
    # a re-run of shard 1 where that trial failed, and another one, later, where it is ok again
    again = write_shard(tmp_path / "rerun", p, Shard(1, 3), host="node9", fail={t.key})
    later = tmp_path / "later"
    later.mkdir()
    meta = json.loads((dirs[0] / "meta.json").read_text())
    (later / "meta.json").write_text(json.dumps({**meta, "run_id": "later"}))
    (later / "trials.jsonl").write_text(json.dumps(row(t, "later", "node7", started=1_900_000_000.0)) + "\n")
    res = merge_runs([*dirs, again, later], tmp_path / "merged")
    dup = {d["key"]: d for d in res.duplicates}
    assert dup[t.key]["kept"] == str(later) and dup[t.key]["kept_status"] == "ok"
    assert set(dup[t.key]["dropped"]) == {str(dirs[0]), str(again)}
    rows = [json.loads(l) for l in (tmp_path / "merged" / "trials.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r["key"] == t.key]
    assert len(mine) == 1 and mine[0]["host"] == "node7"
    # every other key of shard 1: the original (ok) run's row beats the re-run's (also ok, but ok beats
    # failed only for the failed one; among two ok rows the later start wins)
    assert all(r["status"] == "ok" for r in rows if not r["warmup"])
    assert len(keys(tmp_path / "merged")) == len(set(keys(tmp_path / "merged")))


def test_ok_beats_a_later_failure(tmp_path):
    p, dirs = shards(tmp_path)
    t = next(t for t in select(expand(p), Shard(2, 3)) if not t.warmup)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.json").write_text((dirs[1] / "meta.json").read_text())
    (bad / "trials.jsonl").write_text(json.dumps(row(t, "bad", "x", status="failed", started=2e9)) + "\n")
    res = merge_runs([*dirs, bad], tmp_path / "merged")
    assert [d["kept"] for d in res.duplicates] == [str(dirs[1])]


def test_missing_trials_are_listed_with_the_shard_to_rerun(tmp_path, capfd, monkeypatch):
    p, dirs = shards(tmp_path)
    res = merge_runs(dirs[:1] + dirs[2:], tmp_path / "merged")
    want = sorted(t.key for t in select(expand(p), Shard(2, 3)) if not t.warmup)
    assert sorted(res.missing) == want and res.rerun == {"2/3": len(want)}
    meta = json.loads((tmp_path / "merged" / "meta.json").read_text())
    assert meta["status"] == "incomplete" and sorted(meta["merge"]["missing"]) == want
    # the command says so and exits 1; the shard re-run by its index merges to a complete run
    code, out, err = cli(["merge", str(dirs[0]), str(dirs[2]), "--out", str(tmp_path / "m2")], capfd, monkeypatch)
    assert code == 1 and "--shard 2/3" in err
    rerun = write_shard(tmp_path / "rerun", p, Shard(2, 3))
    code, out, err = cli(["merge", str(dirs[0]), str(dirs[2]), str(rerun), "--out", str(tmp_path / "m3")],
                         capfd, monkeypatch)
    assert code == 0 and "0 missing" in out


def test_a_failed_shard_in_progress_is_refused(tmp_path):
    import fcntl
    import os
    _, dirs = shards(tmp_path)
    fd = os.open(dirs[1] / "run.lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"process 4242 (quicbench run)\n")
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(QuicbenchError, match="still being written by process 4242"):
            merge_runs(dirs, tmp_path / "merged")
    finally:
        os.close(fd)
    assert not (tmp_path / "merged").exists()


@pytest.mark.parametrize("what", ["plan", "version"])
def test_mismatch_is_refused_unless_forced_and_then_recorded(tmp_path, what):
    p, dirs = shards(tmp_path, n=2)
    other = write_shard(tmp_path / "other", plan(seed=7) if what == "plan" else p, Shard(2, 2),
                        version="0.1.0" if what == "plan" else "0.2.0")
    with pytest.raises(QuicbenchError, match="plan fingerprint" if what == "plan" else "quicbench version"):
        merge_runs([dirs[0], other], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    res = merge_runs([dirs[0], other], tmp_path / "merged", force=True)
    meta = json.loads((tmp_path / "merged" / "meta.json").read_text())
    assert meta["merge"]["forced"] and meta["merge"]["mismatches"] == res.mismatches != []
    got = keys(tmp_path / "merged")
    assert len(got) == len(set(got))
    rows = [json.loads(l) for l in (tmp_path / "merged" / "trials.jsonl").read_text().splitlines()]
    assert len({r["seq"] for r in rows}) == len(rows)      # two plans' seqs never share a trial directory


def test_parts_run_with_different_only_merge_into_the_whole_plan(tmp_path):
    p = plan()
    conds = [c.name for c in p.conditions]
    assert len(conds) >= 2
    parts = []
    for i, sel in enumerate(([conds[0]], conds[1:])):
        d = write_shard(tmp_path / f"part{i}", p, None)
        meta = json.loads((d / "meta.json").read_text())
        meta["only"] = {"condition": sel}
        (d / "meta.json").write_text(json.dumps(meta))
        rows = [json.loads(l) for l in (d / "trials.jsonl").read_text().splitlines()]
        (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["condition"] in sel))
        parts.append(d)
    res = merge_runs(parts, tmp_path / "merged")
    assert res.mismatches == [] and res.missing == []
    meta = json.loads((tmp_path / "merged" / "meta.json").read_text())
    assert meta["only"] is None and "only_parts" not in meta and meta["status"] == "complete"
    assert sorted(k for k in keys(tmp_path / "merged") if not k.endswith("warmup")) == \
        sorted(t.key for t in expand(p) if not t.warmup)
    # one part alone: its selection is what was planned, the other part's trials are not "missing"
    res = merge_runs(parts[:1], tmp_path / "alone")
    assert res.missing == []
    assert json.loads((tmp_path / "alone" / "meta.json").read_text())["only"] == {"condition": [conds[0]]}


def test_out_never_touches_an_input(tmp_path):
    _, dirs = shards(tmp_path)
    for out in (dirs[0], dirs[0] / "sub", tmp_path / "shards" / "s1of3" / "trials"):
        with pytest.raises(QuicbenchError, match="^--out"):
            merge_runs(dirs, out)
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    with pytest.raises(QuicbenchError, match="^--out .*not an empty directory"):
        merge_runs(dirs, full)
    empty = tmp_path / "empty"
    empty.mkdir()
    merge_runs(dirs, empty)
    assert (empty / "meta.json").is_file()


def test_a_directory_without_meta_is_named(tmp_path):
    _, dirs = shards(tmp_path)
    (dirs[1] / "meta.json").unlink()
    with pytest.raises(QuicbenchError, match=f"^{dirs[1]}: not a quicbench run directory"):
        merge_runs(dirs, tmp_path / "merged")
    with pytest.raises(QuicbenchError, match="nowhere: not a quicbench"):
        merge_runs([dirs[0], tmp_path / "nowhere"], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def cli(args, capfd, monkeypatch):
    from quicbench.cli.main import main
    monkeypatch.setattr(sys, "argv", ["quicbench", *args])
    with pytest.raises(SystemExit) as e:
        main()
    out = capfd.readouterr()
    return e.value.code, out.out, out.err


def test_cli_bad_input_is_exit_2_one_line_nothing_left(tmp_path, capfd, monkeypatch):
    _, dirs = shards(tmp_path)
    (dirs[2] / "meta.json").unlink()
    code, out, err = cli(["merge", *map(str, dirs), "--out", str(tmp_path / "m")], capfd, monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(dirs[2]) in err
    code, out, err = cli(["merge", str(dirs[0]), "--out", str(dirs[0])], capfd, monkeypatch)
    assert code == 2 and "--out" in err
    assert not (tmp_path / "m").exists() and not list(tmp_path.glob(".m.merging*"))


def test_report_reads_a_merged_run_and_shows_hosts(tmp_path):
    from quicbench.analysis.load import load_run
    from quicbench.report import report_markdown, write_report
    _, dirs = shards(tmp_path)
    merge_runs(dirs, tmp_path / "merged")
    run = load_run(tmp_path / "merged")
    assert set(run.ok["host"]) == {"node1", "node2", "node3"}
    assert write_report(tmp_path / "merged").is_file()
    md = report_markdown(tmp_path / "merged")
    assert "node2" in md


def test_a_torn_line_is_named_and_the_merge_says_so(tmp_path):
    _, dirs = shards(tmp_path)
    t = dirs[1] / "trials.jsonl"
    lines = t.read_text().splitlines(keepends=True)
    t.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])     # the last write cut short
    res = merge_runs(dirs, tmp_path / "merged")
    assert res.torn == [f"{t}:{len(lines)}"] and res.problems
    meta = json.loads((tmp_path / "merged" / "meta.json").read_text())
    assert meta["merge"]["torn_lines"] == res.torn and meta["status"] == "incomplete"


def test_an_input_that_did_not_end_makes_an_incomplete_merge(tmp_path):
    _, dirs = shards(tmp_path)
    m = json.loads((dirs[2] / "meta.json").read_text())
    (dirs[2] / "meta.json").write_text(json.dumps({**m, "status": "running"}))   # crashed: no lock held
    res = merge_runs(dirs, tmp_path / "merged")
    assert res.missing == [] and res.problems and res.unfinished == [f"{dirs[2]} (shard 3/3): status running"]
    meta = json.loads((tmp_path / "merged" / "meta.json").read_text())
    assert meta["status"] == "incomplete" and meta["merge"]["unfinished_inputs"] == res.unfinished


def test_out_may_be_the_working_directory(tmp_path, monkeypatch):
    _, dirs = shards(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    res = merge_runs(dirs, Path("."))
    assert not res.problems and (here / "meta.json").is_file() and (here / "trials.jsonl").is_file()
    assert json.loads((here / "meta.json").read_text())["run_id"] == "here"
    assert not [p for p in here.iterdir() if p.name.startswith(".")]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]     # no build directory left


def _set_versions(d: Path, versions: dict) -> None:
    meta = json.loads((d / "meta.json").read_text())
    meta["versions"] = versions
    (d / "meta.json").write_text(json.dumps(meta))


def test_parts_that_ran_different_clients_merge_and_keep_every_drivers_versions(tmp_path):
    # Go-Quick by the seed's method: getFiles by the load client, h2 by browser page loads
    p, dirs = shards(tmp_path, n=2)
    server = {"caddy": "2.11.9"}
    _set_versions(dirs[0], {"client_qb-load": {"qb_load": "1"}, "server_caddy": server})
    _set_versions(dirs[1], {"client_browser": {"chromium": "156"}, "server_caddy": server})
    res = merge_runs(dirs, tmp_path / "merged")
    assert res.mismatches == []
    meta = json.loads((tmp_path / "merged" / "meta.json").read_text())
    assert meta["versions"] == {"client_qb-load": {"qb_load": "1"}, "client_browser": {"chromium": "156"},
                                "server_caddy": server}


def test_a_driver_both_parts_ran_must_be_the_same_build(tmp_path):
    p, dirs = shards(tmp_path, n=2)
    _set_versions(dirs[0], {"server_caddy": {"caddy": "2.11.9"}})
    _set_versions(dirs[1], {"server_caddy": {"caddy": "2.10.0"}})
    with pytest.raises(QuicbenchError, match="server_caddy versions differ"):
        merge_runs(dirs, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
