"""process_alive: a zombie (exited, not yet reaped) is not alive, though /proc still lists it."""

import os
import subprocess
import time

from quicbench.proc import process_alive


def test_running_then_zombie_then_gone():
    p = subprocess.Popen(["sleep", "30"])
    assert process_alive(p.pid)
    p.kill()
    deadline = time.monotonic() + 5
    while process_alive(p.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not process_alive(p.pid)
    assert os.path.exists(f"/proc/{p.pid}")     # the zombie is still there, unreaped
    p.wait()
    assert not process_alive(p.pid)
