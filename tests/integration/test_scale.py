"""Scale-out for real: a plan run as 3 shards and merged has exactly the unsharded run's trial
keys, and the same through a real (single-node, throw-away) Slurm cluster as a 3-task array."""

import json
import os
import time
from pathlib import Path

import pytest

from conftest import root_only, run_qb
from slurm_cluster import SlurmCluster, missing_binaries

pytestmark = [pytest.mark.integration, pytest.mark.parallel_safe, root_only]

PLAN = """
name = "scale-test"
protocols = ["h1", "h2", "h3"]
repetitions = 3
link = "plain"
trial_timeout_s = 60
[[workloads]]
size = "10KB"
count = 2
"""


def keys(run: Path) -> list[str]:
    return sorted(json.loads(l)["key"] for l in (run / "trials.jsonl").read_text().splitlines())


@pytest.fixture
def own_leftovers(tmp_path_factory):
    """Fail if a lab of this test's runs is left behind. Only this test's labs count: other
    checkouts may run labs on the same machine at the same time."""
    yield
    from quicbench.paths import STATE_DIR
    left = []
    for f in (Path(STATE_DIR) / "labs").glob("*.json") if (Path(STATE_DIR) / "labs").is_dir() else []:
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if str((state.get("spec") or {}).get("run_dir") or "").startswith(str(tmp_path_factory.getbasetemp())):
            left.append(f.stem)
    assert left == [], f"labs left behind: {left}"


def run_dirs(parent: Path) -> list[Path]:
    return sorted(d for d in parent.iterdir() if (d / "meta.json").is_file())


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("scale") / "plan.toml"
    p.write_text(PLAN)
    return p


@pytest.fixture(scope="module")
def unsharded(plan, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("unsharded")
    r = run_qb("run", str(plan), "--out", str(out), "--no-report", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (d,) = run_dirs(out)
    return d


def test_three_shards_merged_equal_the_unsharded_run(plan, unsharded, tmp_path, own_leftovers):
    shards = tmp_path / "shards"
    for i in (1, 2, 3):
        r = run_qb("run", str(plan), "--shard", f"{i}/3", "--out", str(shards), "--no-report", timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    dirs = sorted(run_dirs(shards), key=lambda d: json.loads((d / "meta.json").read_text())["shard"]["index"])
    assert len(dirs) == 3
    for i, d in enumerate(dirs, 1):
        meta = json.loads((d / "meta.json").read_text())
        assert meta["shard"] == {"index": i, "count": 3, "trials": 3} and meta["status"] == "complete"
        assert meta["plan_fingerprint"] and meta["quicbench_version"] and meta["host"]["hostname"]
        assert len(keys(d)) == 3 and len({k.rsplit("|", 1)[1] for k in keys(d)}) == 1   # one cell each
    assert sorted(k for d in dirs for k in keys(d)) == keys(unsharded)
    r = run_qb("merge", *map(str, dirs), "--out", str(tmp_path / "merged"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert keys(tmp_path / "merged") == keys(unsharded)
    rows = [json.loads(l) for l in (tmp_path / "merged" / "trials.jsonl").read_text().splitlines()]
    assert all(r["host"] == os.uname().nodename and r["status"] == "ok" for r in rows)
    r = run_qb("report", str(tmp_path / "merged"))
    assert r.returncode == 0 and (tmp_path / "merged" / "report.html").is_file(), r.stdout + r.stderr
    r = run_qb("compare", str(unsharded), str(tmp_path / "merged"), "--format", "md")
    assert r.returncode == 0, r.stdout + r.stderr


def test_resume_of_a_shard_keeps_its_shard(plan, tmp_path):
    r = run_qb("run", str(plan), "--shard", "2/3", "--out", str(tmp_path), "--no-report", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (d,) = run_dirs(tmp_path)
    r = run_qb("run", str(plan), "--resume", str(d), "--shard", "1/3", "--no-report")
    assert r.returncode == 2 and "--shard" in r.stderr and "shard 2/3" in r.stderr
    r = run_qb("run", str(plan), "--resume", str(d), "--no-report")
    assert r.returncode == 0 and "nothing to do" in r.stdout, r.stdout + r.stderr


@pytest.fixture
def slurm():
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): scripts/install-deps.sh installs "
                    f"slurm-wlm and munge (make setup)")
    cluster = SlurmCluster()
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


def test_slurm_array_of_three_shards_merges_to_the_unsharded_keys(plan, unsharded, slurm, tmp_path,
                                                                  own_leftovers):
    out = tmp_path / "slurm"
    t0 = time.monotonic()
    r = run_qb("slurm", str(plan), "--shards", "3", "--out", str(out), "--submit", "--wait-timeout", "900",
               env=slurm.env, timeout=1000)
    took = time.monotonic() - t0
    print(r.stdout)
    logs = "\n".join(f"--- {f.name}\n{f.read_text()}" for f in sorted((out / "logs").glob("*.log")))
    assert r.returncode == 0, r.stdout + r.stderr + logs + slurm.logs()
    script = (out / "quicbench.sbatch").read_text()
    assert "#SBATCH --array=1-3" in script and "#SBATCH --exclusive" in script and "--shard auto/3" in script
    assert "make -C" in script and " setup" in script
    assert len(run_dirs(out / "shards")) == 3
    assert keys(out / "merged") == keys(unsharded)
    rows = [json.loads(l) for l in (out / "merged" / "trials.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" and r["goodput_mbps"] > 0 for r in rows), rows
    r2 = run_qb("report", str(out / "merged"))
    assert r2.returncode == 0 and (out / "merged" / "report.html").is_file(), r2.stdout + r2.stderr
    # how long the array took, and each task (from the shards' own times), for the record
    spans = []
    for d in run_dirs(out / "shards"):
        m = json.loads((d / "meta.json").read_text())
        spans.append((m["shard"]["index"], m["created"], m["finished_at"]))
    first = min(s[1] for s in spans)
    report = [f"slurm: cluster up in {slurm.started_in:.1f} s; submit -> merged {took:.1f} s"] + [
        f"  shard {i}/3: started +{c - first:.1f} s, ran {f - c:.1f} s" for i, c, f in sorted(spans)]
    print("\n".join(report))
    (Path(os.environ.get("QB_SLURM_TIMES", "/dev/null"))).write_text("\n".join(report) + "\n")
    # --exclusive on one node: the tasks ran one after another, never beside each other
    ordered = sorted(spans, key=lambda s: s[1])
    assert all(a[2] <= b[1] + 0.5 for a, b in zip(ordered, ordered[1:])), spans


def test_jobs_two_labs_record_every_trial_and_concurrency(plan, unsharded, tmp_path, own_leftovers):
    # the same plan, calibrating: every condition is measured first, alone, then the trials run
    cal = tmp_path / "cal.toml"
    cal.write_text(plan.read_text().replace('link = "plain"', 'link = "plain"\ncalibrate = true'))
    r = run_qb("run", str(cal), "--jobs", "2", "--out", str(tmp_path / "runs"), "--no-report", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (d,) = run_dirs(tmp_path / "runs")
    assert keys(d) == keys(unsharded)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["lab"]["labs"] == 2 and meta["status"] == "complete" and "refused" in meta["admission"]
    conds = {json.loads(l)["condition"] for l in (d / "trials.jsonl").read_text().splitlines()}
    assert set(meta["calibration"]) == conds and all(c["ping"]["received"] > 0 for c in meta["calibration"].values())
    rows = [json.loads(l) for l in (d / "trials.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" and isinstance(r["concurrent"], int) and 0 <= r["concurrent"] <= 1
               for r in rows)
    assert {p.name for p in (d / "servers").iterdir()} == {"caddy", "caddy.lab2"}   # each lab's own servers
    # a cell's protocols stayed together, in their interleaved order
    for cell in {r["key"].rsplit("|", 1)[1] for r in rows}:
        seqs = [r["seq"] for r in rows if r["key"].endswith("|" + cell)]
        assert seqs == sorted(seqs)


def test_jobs_zero_is_refused(tmp_path):
    p = tmp_path / "plan.toml"
    p.write_text(PLAN)
    r = run_qb("run", str(p), "--jobs", "0", "--out", str(tmp_path / "runs"))
    assert r.returncode == 2 and "--jobs" in r.stderr and not (tmp_path / "runs").exists()
