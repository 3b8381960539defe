"""The extension claim: a server driver and a workload kind, each one new module plus its
registration (tests/fixtures/extension), run through a lab end to end with nothing else changed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, root_only

pytestmark = [pytest.mark.integration, pytest.mark.parallel_safe, root_only]

EXT = REPO / "tests" / "fixtures" / "extension"
PLAN = """
name = "extension"
protocols = ["h1"]
repetitions = 2
servers = { h1 = "toy-py" }
[[workloads]]
kind = "first-byte"
size = "10KB"
[[workloads]]
size = "100KB"
count = 3
[[conditions]]
name = "lan"
"""
# the CLI with the two modules imported first: how a user's own drivers are loaded
CLI = "import toy_server, toy_kind, sys; from quicbench.cli.main import main; sys.argv[0] = 'quicbench'; main()"


def qb(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200",
               PYTHONPATH=os.pathsep.join([str(EXT), str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def test_toy_server_and_toy_kind_run_end_to_end(tmp_path, no_leftovers):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    p = qb("run", str(plan), "--out", str(tmp_path / "runs"), "--no-report")
    assert p.returncode == 0, p.stdout + p.stderr
    run = next((tmp_path / "runs").iterdir())
    rows = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    measured = [r for r in rows if not r.get("warmup")]
    assert {r["status"] for r in measured} == {"ok"}, [r.get("error") for r in measured]
    assert {(r["kind"], r["workload"]) for r in measured} == {("first-byte", "first-byte:10KB"),
                                                              ("objects", "3x100KB/p3")}
    # the toy server served every byte over h1, and says what it is
    for r in measured:
        assert r["server"] == "toy-py" and r["server_stack"].startswith("toy-py python 3.")
        assert r["protocols"] == f"h1:{r['count']}" and r["bytes"] == r["count"] * r["size_bytes"]
    assert json.loads((run / "meta.json").read_text())["versions"]["server_toy-py"]["toy-py"].startswith("python")
    # the report shows the new kind in its own table, with its headline metric
    text = qb("report", str(run), "--format", "text")
    assert text.returncode == 0, text.stdout + text.stderr
    assert "First byte: time to the first byte" in text.stdout and "TTFB ms" in text.stdout
    assert "Object downloads" in text.stdout
    # and a plan naming a kind nobody registered is refused with the accepted values
    plan.write_text(PLAN.replace('kind = "first-byte"', 'kind = "first-bite"'))
    bad = qb("run", str(plan), "--out", str(tmp_path / "bad"), "--dry-run")
    assert bad.returncode == 2 and "first-byte" in bad.stderr and "first-bite" in bad.stderr, bad.stderr
