"""A throw-away single-node Slurm cluster on this machine, for the Slurm test.

Everything lives in one temporary directory: a munge key and munged on its own socket, a
slurm.conf (ClusterName, SlurmctldHost=localhost, NodeName=localhost with this machine's CPUs
and half its memory, PartitionName=debug, select/linear, proctrack/linuxproc, task/none, state
and spool directories, free ports), and slurmctld -D and slurmd -D as child processes.
``SLURM_CONF`` points the Slurm commands at it. ``stop()`` ends the three daemons (by their
pids) and removes the directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo")


def missing_binaries() -> list[str]:
    return [b for b in DAEMONS if shutil.which(b) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mem_mb() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 // 2
    return 1024


class SlurmCluster:
    def __init__(self) -> None:
        # short path: munge's socket path must fit a sockaddr_un
        self.dir = Path(tempfile.mkdtemp(prefix="qb-slurm-", dir="/tmp"))
        self.procs: list[subprocess.Popen] = []
        self.conf = self.dir / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self, timeout: float = 60) -> "SlurmCluster":
        t0 = time.monotonic()
        d = self.dir
        for sub in ("state", "spool", "munge"):
            (d / sub).mkdir()
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (d / "munge").chmod(0o700)
        sock = d / "munge" / "sock"
        self._spawn(["munged", "-F", "-f", f"--socket={sock}", f"--key-file={key}",
                     f"--log-file={d / 'munge' / 'log'}", f"--pid-file={d / 'munge' / 'pid'}",
                     f"--seed-file={d / 'munge' / 'seed'}"], "munged")
        self._wait_for(lambda: sock.exists(), timeout, "munged's socket")
        cpus = os.cpu_count() or 1
        self.conf.write_text("\n".join([
            "ClusterName=qbtest",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={sock}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/linear",
            "SchedulerType=sched/backfill",
            "MpiDefault=none",
            "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "MinJobAge=600",
            f"NodeName=localhost CPUs={cpus} RealMemory={_mem_mb()} State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        ]) + "\n")
        self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld")
        self._spawn(["slurmd", "-D", "-N", "localhost", "-f", str(self.conf)], "slurmd")
        self._wait_for(self._node_idle, timeout, "the node to be idle in sinfo")
        self.started_in = time.monotonic() - t0
        return self

    def _spawn(self, argv: list[str], name: str) -> None:
        log = open(self.dir / f"{name}.stdout", "wb")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                           start_new_session=True))

    def _node_idle(self) -> bool:
        p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, env=self.env)
        return p.returncode == 0 and "localhost idle" in p.stdout

    def _wait_for(self, ok, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ok():
                return
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}:\n{self.logs()}")
            time.sleep(0.2)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}:\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for f in sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("*.stdout")):
            out.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def stop(self) -> None:
        """End the daemons this cluster started (by pid, slurmd first), then remove its directory."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)
