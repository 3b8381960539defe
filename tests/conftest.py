import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QB = [sys.executable, "-m", "quicbench.cli.main"]

# `make test` runs the integration tests marked `parallel_safe` two at a time (pytest-xdist, each file
# on one worker), then every other one alone. A test is parallel_safe when another test beside it can
# neither fail it nor be failed by it:
#  - it asserts no measured duration, rate, loss or CPU share that the other test's load could move past
#    its bound (a lower bound the path itself sets, such as a time to first byte of at least one round
#    trip, only grows with load: it may stay);
#  - every lab it makes has a live owner while the test runs: no `quicbench lab up` (its owner exits at
#    once), no SIGKILLed run, no QUICBENCH_STATE of its own (other tests' `no_leftovers` would count such
#    a lab as theirs, and their quicbench commands may reap it), and it runs no `lab down --all`;
#  - it judges only its own labs, processes and files (`labs_left`, not the host's whole namespace list).
# Unmarked integration tests run alone: a new test that is unsure stays unmarked.

# The level at which a check of a measured statistic against its sampling law (a count against its
# binomial law: losses, duplicates, corruptions; a skewness against its standard error) may fail a
# correct implementation by chance. A run of the suite makes about twenty such checks, so at 0.001
# a correct link failed about one CI run in fifty (test_link's 68 of 1000 pings lost at 10 % did);
# at 1e-6 one in fifty thousand. Each check's sample size still tells the bug it guards against (a
# direction's loss applied twice, a hop's loss missing) with power above 0.99.
CHANCE_ALPHA = 1e-6


def within_binomial(k: int, n: int, p: float, alpha: float = CHANCE_ALPHA) -> bool:
    """k events of n trials at probability p inside the exact two-sided binomial region at alpha."""
    from scipy.stats import binom
    lo, hi = binom.interval(1 - alpha, n, p)
    return lo <= k <= hi


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def pytest_configure(config):
    # a SIGTERM (CI's time limit, a shutdown) stops the session as Ctrl-C does: the fixtures'
    # teardowns still run, so labs and SSH hosts are removed (Python's default would just exit)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)


def lab_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {l.split()[0] for l in out.splitlines() if l.strip().startswith("qb-")
            and not l.startswith("qb-lkdev-")}


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def _someone_elses(ns: str) -> bool:
    """A namespace whose live owner is not this test process: a lab of another run on the host, or
    another process's kernel-feature probe (qb-probe-PID, kernels/features.py)."""
    import json
    name = ns[len("qb-"):]
    if name.startswith("probe-") and name[len("probe-"):].isdigit():
        pid = int(name[len("probe-"):])
    else:
        state = Path(os.environ.get("QUICBENCH_STATE", "/run/quicbench")) / "labs" / f"{name.rsplit('-', 1)[0]}.json"
        try:
            owner = json.loads(state.read_text()).get("owner") or {}
        except (OSError, ValueError):
            return False
        pid = owner.get("pid")
    return bool(pid) and Path(f"/proc/{pid}").exists() and not _descends_from(pid, os.getpid())


def labs_left(before: set[str]) -> set[str]:
    """Lab namespaces made since `before` that are still there and not another live process's (the
    labs of other runs and tests on the host, which may come and go meanwhile, are not ours)."""
    made = {ns for ns in lab_namespaces() - before if not _someone_elses(ns)}
    # listed again: a lab whose owner removed it while we looked (its namespaces go before its state
    # file) was not left behind
    return made & lab_namespaces()


@pytest.fixture
def no_leftovers():
    """Fail if the test leaves a lab namespace or state file behind."""
    before = lab_namespaces()
    yield
    left = labs_left(before)
    assert left == set(), f"namespaces left behind: {sorted(left)}"


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    """One content cache for the session: what two tests generate alike (a video ladder) is made once."""
    return tmp_path_factory.getbasetemp() / "cache"


def run_qb(*args: str, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    # wide enough that no message wraps, whatever the caller's terminal (pytest-xdist's workers say 80)
    e = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=timeout, env=e, **kw)


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def fetch(client, target, protocol, workload, trial_dir, timeout_s, options=None):
    """One transfer through a client driver, as the trial hands it over."""
    from quicbench.clients.base import FetchRequest
    return client.fetch(FetchRequest(target, protocol, workload, trial_dir, timeout_s, options))
