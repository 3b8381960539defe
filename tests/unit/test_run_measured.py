"""run_measured: the client process is measured to its end, killed at the deadline, and never
outlives an interrupted wait (real processes, no lab needed)."""

import os
import signal
import sys
import threading
import uuid

import pytest

from quicbench.clients.base import run_measured
from quicbench.proc import process_alive


class Interrupted(Exception):
    pass


def running_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds marker."""
    pids = []
    for d in os.scandir("/proc"):
        try:
            if d.name.isdigit() and marker.encode() in open(f"/proc/{d.name}/cmdline", "rb").read() \
                    and process_alive(int(d.name)):
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def test_exit_code_and_cpu_of_the_child():
    rc, cpu, wall, struck = run_measured(["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3"], 30)
    assert rc == 3 and not struck
    assert cpu > 0 and wall >= cpu * 0.5


def test_deadline_kills_the_child():
    rc, _, wall, struck = run_measured(["sleep", "30"], 0.3)
    assert struck and rc == -signal.SIGKILL
    assert wall < 10


def test_interrupted_wait_kills_and_reaps_the_child():
    marker = f"qb-test-{uuid.uuid4().hex}"
    argv = [sys.executable, "-c", "import time; time.sleep(30)", marker]
    before = set(threading.enumerate())

    def interrupt(signum, frame):
        raise Interrupted()

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(Interrupted):
            run_measured(argv, 60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert running_with(marker) == []
    # the deadline timer does not linger (it would keep the interpreter alive at exit)
    leftover = [t for t in set(threading.enumerate()) - before if t.is_alive() and not t.daemon]
    assert leftover == []
