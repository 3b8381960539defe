import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QB = [sys.executable, "-m", "quicbench.cli.main"]


def lab_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {l.split()[0] for l in out.splitlines() if l.strip().startswith("qb-")
            and not l.startswith("qb-lkdev-")}


@pytest.fixture
def no_leftovers():
    """Fail if the test leaves a lab namespace or state file behind."""
    before = lab_namespaces()
    yield
    after = lab_namespaces()
    assert after - before == set(), f"namespaces left behind: {sorted(after - before)}"


@pytest.fixture
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "cache"


def run_qb(*args: str, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    e = dict(os.environ, **(env or {}))
    e.setdefault("COLUMNS", "200")
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=timeout, env=e, **kw)


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def fetch(client, target, protocol, workload, trial_dir, timeout_s, options=None):
    """One transfer through a client driver, as the trial hands it over."""
    from quicbench.clients.base import FetchRequest
    return client.fetch(FetchRequest(target, protocol, workload, trial_dir, timeout_s, options))
