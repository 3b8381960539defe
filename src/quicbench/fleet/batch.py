"""Run one plan as N shards on a cluster: a Slurm array script or a Kubernetes Indexed Job.

quicbench schedules nothing itself: Slurm and Kubernetes place the shards, one lab per node,
and each shard runs ``quicbench run PLAN --shard auto/N`` (model/shard.py maps the array
task id or the job completion index to I). ``quicbench merge`` joins the shard runs.

* Slurm: ``--array=1-N``, so a task id *is* the shard index; ``--exclusive`` gives each task
  a whole node (one lab per node, nothing else measured beside it). ``submit`` runs
  ``sbatch --parsable`` and ``wait`` polls ``squeue`` until the array has left the queue,
  then asks ``sacct`` (when accounting is on) how each task ended.
* Kubernetes: an Indexed Job (completions = parallelism = N) whose pods are privileged (a lab
  makes network namespaces, veths and qdiscs), spread one per node (required pod
  anti-affinity on the hostname, plus a topology spread constraint), with the plan in a
  ConfigMap and the results on a PersistentVolumeClaim. The manifest is a ``v1/List`` written
  as JSON, which is YAML too: ``kubectl apply -f`` takes it.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import quicbench
from quicbench.errors import EnvironmentFault, QuicbenchError

SETUPS = ("make", "check", "none")
POLL_S = 2.0


def project_root() -> Path | None:
    """The checkout quicbench runs from (it has the Makefile of `make setup`), if any."""
    root = Path(quicbench.__file__).resolve().parents[2]
    return root if (root / "Makefile").is_file() and (root / "src" / "quicbench").is_dir() else None


def quicbench_command() -> str:
    """How a job calls this very quicbench: the venv's entry point, else this Python with the module."""
    exe = Path(sys.executable).parent / "quicbench"
    return shlex.quote(str(exe)) if exe.is_file() else f"{shlex.quote(sys.executable)} -m quicbench.cli.main"


def run_args(plan: Path | None, shards: int, out: str, reps: int | None, only: list[str]) -> list[str]:
    args = ["run"] + ([str(plan)] if plan else []) + ["--shard", f"auto/{shards}", "--out", out, "--no-report"]
    if reps:
        args += ["--reps", str(reps)]
    for o in only:
        args += ["--only", o]
    return args


def check_name(value: str, flag: str) -> str:
    """Slurm partitions, Kubernetes names and images: no whitespace, quotes or shell syntax."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*", value or ""):
        raise QuicbenchError(f"{flag} {value!r}: letters, digits and . _ : / @ + - only")
    return value


# -- Slurm ----------------------------------------------------------------------------------------
def sbatch_script(plan: Path | None, plan_name: str, shards: int, out: Path, partition: str | None = None,
                  setup: str = "make", reps: int | None = None, only: list[str] | None = None,
                  time_limit: str | None = None) -> str:
    """The sbatch array script: task i (1..N) runs shard i/N into OUT/shards, its log in OUT/logs."""
    if setup not in SETUPS:
        raise QuicbenchError(f"--setup {setup!r}: accepted: {', '.join(SETUPS)}")
    root = project_root()
    if setup == "make" and root is None:
        raise QuicbenchError("--setup make: quicbench is not running from a checkout with a Makefile; "
                             "use --setup check (quicbench doctor) or none")
    qb = quicbench_command()
    out = out.resolve()
    # #SBATCH lines are not shell: what they take is checked, not quoted
    if not re.fullmatch(r"[A-Za-z0-9._/@+:,=-]+", str(out)):
        raise QuicbenchError(f"--out {str(out)!r}: the Slurm script's log path accepts letters, digits and "
                             f". _ / @ + : , = - only (no spaces, quotes or control characters)")
    check_name(plan_name, "plan name")
    lines = ["#!/bin/bash",
             f"# quicbench plan '{plan_name}' as a Slurm array of {shards} shards (docs/scale.md); "
             f"written by 'quicbench slurm'.",
             f"#SBATCH --job-name=qb-{plan_name[:40]}",
             f"#SBATCH --array=1-{shards}",
             "#SBATCH --nodes=1",
             "#SBATCH --ntasks=1",
             "#SBATCH --exclusive",
             f"#SBATCH --output={out}/logs/shard-%a.log"]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if time_limit:
        lines.append(f"#SBATCH --time={time_limit}")
    lines += ["#",
              "# task ids 1..N are the shard indexes: 'quicbench run --shard auto/N' reads SLURM_ARRAY_TASK_ID",
              "# (an array 0..N-1 works too: SLURM_ARRAY_TASK_MIN is subtracted). --exclusive: one lab per node,",
              "# so a shard's measurements never share the machine with another shard.",
              "set -euo pipefail",
              'echo "quicbench shard ${SLURM_ARRAY_TASK_ID}/' + str(shards) + ' on $(hostname) at $(date -u +%FT%TZ)"']
    if setup == "make":
        lines += ["# the node installs what is missing and builds (idempotent; a no-op when up to date)",
                  f"make -C {shlex.quote(str(root))} setup"]
    elif setup == "check":
        lines += ["# the node must already have everything: stop here, saying what is missing, if not",
                  f"{qb} doctor"]
    if root is not None:
        lines.append(f"cd {shlex.quote(str(root))}")
    lines.append(f"exec {qb} " + " ".join(shlex.quote(a) for a in
                                          run_args(plan.resolve() if plan else None, shards,
                                                   str(out / "shards"), reps, only or [])))
    return "\n".join(lines) + "\n"


def _slurm(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise QuicbenchError(f"{argv[0]}: not installed (Debian: apt-get install slurm-client); "
                             f"or submit the script yourself with sbatch") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentFault(f"{argv[0]} did not answer in {timeout:.0f} s: is slurmctld up?") from None


def submit(script: Path) -> str:
    """sbatch --parsable: the job id."""
    p = _slurm(["sbatch", "--parsable", str(script)])
    if p.returncode != 0:
        raise EnvironmentFault(f"sbatch refused {script}: {(p.stderr or p.stdout).strip()}")
    return p.stdout.strip().split(";")[0]


@dataclass
class ArrayEnd:
    job_id: str
    seconds: float
    tasks: dict[str, str]     # task id -> state (sacct), empty when accounting is off


def wait(job_id: str, timeout_s: float | None = None, poll_s: float = POLL_S,
         progress: Callable[[str], None] | None = None) -> ArrayEnd:
    """Poll squeue until the array has left the queue; then the tasks' states from sacct, if it can tell."""
    start = time.monotonic()
    last = None
    while True:
        p = _slurm(["squeue", "-h", "-r", "-j", job_id, "-o", "%i %T"])
        lines = [l.split() for l in p.stdout.splitlines() if l.strip()]
        if p.returncode != 0 and "Invalid job id" not in p.stderr:
            raise EnvironmentFault(f"squeue -j {job_id}: {p.stderr.strip()}")
        if not lines:
            break
        now = ", ".join(f"{sum(1 for _, s in lines if s == st)} {st.lower()}"
                        for st in sorted({s for _, s in lines}))
        if progress and now != last:
            progress(f"job {job_id}: {now}")
            last = now
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise EnvironmentFault(f"job {job_id} still queued or running after {timeout_s:.0f} s "
                                   f"(--wait-timeout); it goes on: merge its shards when it ends")
        time.sleep(poll_s)
    tasks: dict[str, str] = {}
    p = _slurm(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "JobID,State,ExitCode"])
    if p.returncode == 0:
        for line in p.stdout.splitlines():
            parts = line.split("|")
            if len(parts) >= 2 and "_" in parts[0]:
                tasks[parts[0].split("_", 1)[1]] = parts[1] + (f" (exit {parts[2]})" if len(parts) > 2 else "")
    else:
        # no accounting: slurmctld still remembers finished jobs for MinJobAge seconds
        p = _slurm(["scontrol", "-o", "show", "job", job_id])
        for line in p.stdout.splitlines() if p.returncode == 0 else []:
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "ArrayTaskId" in f and "JobState" in f:
                tasks[f["ArrayTaskId"]] = f["JobState"] + (f" (exit {f['ExitCode']})" if "ExitCode" in f else "")
    return ArrayEnd(job_id, time.monotonic() - start, tasks)


# -- Kubernetes -----------------------------------------------------------------------------------
def k8s_manifest(plan_text: str, plan_name: str, shards: int, image: str, pvc: str, name: str | None = None,
                 parallelism: int | None = None, namespace: str | None = None, privileged: bool = True,
                 reps: int | None = None, only: list[str] | None = None) -> dict[str, Any]:
    """A v1 List: a ConfigMap with the plan and an Indexed Job of N shards writing to a PVC."""
    check_name(plan_name, "plan name")
    job = name or "qb-" + (re.sub(r"[^a-z0-9-]", "-", plan_name.lower())[:40].strip("-") or "plan")
    labels = {"app.kubernetes.io/name": "quicbench", "quicbench/job": job}
    meta = {"name": job, "labels": labels} | ({"namespace": namespace} if namespace else {})
    out = f"/results/{job}/shards"
    args = run_args(Path("/plan/plan.toml"), shards, out, reps, only or [])
    security = ({"privileged": True} if privileged else
                {"capabilities": {"add": ["NET_ADMIN", "SYS_ADMIN"]}})   # netns, veth, qdiscs, sysctls
    pod = {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "Never",
            # one lab per node: no two shards on one machine
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"quicbench/job": job}},
                 "topologyKey": "kubernetes.io/hostname"}]}},
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"quicbench/job": job}}}],
            "containers": [{
                "name": "quicbench", "image": image, "command": ["quicbench"], "args": args,
                "env": [{"name": "JOB_COMPLETION_INDEX",   # 0-based; --shard auto/N adds 1
                         "valueFrom": {"fieldRef": {
                             "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "securityContext": security,
                "volumeMounts": [{"name": "plan", "mountPath": "/plan", "readOnly": True},
                                 {"name": "results", "mountPath": "/results"}],
            }],
            "volumes": [{"name": "plan", "configMap": {"name": f"{job}-plan"}},
                        {"name": "results", "persistentVolumeClaim": {"claimName": pvc}}],
        },
    }
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{job}-plan"},
         "data": {"plan.toml": plan_text}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
         "spec": {"completionMode": "Indexed", "completions": shards,
                  "parallelism": min(parallelism or shards, shards),
                  "backoffLimit": shards,   # a failed shard is retried, once per shard on average
                  "template": pod}},
    ]}


def manifest_text(manifest: dict[str, Any]) -> str:
    header = ("# quicbench shards as a Kubernetes Indexed Job (docs/scale.md). JSON is YAML: "
              "kubectl apply -f this file\n")
    return header + json.dumps(manifest, indent=2) + "\n"
