"""`quicbench merge`, `quicbench slurm` and `quicbench k8s`: one plan on many machines (docs/scale.md)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from quicbench.cli.app import app, console, err
from quicbench.errors import QuicbenchError

SHOWN = 10   # lines of duplicates or missing keys printed; meta.json has them all


@app.command("merge")
def merge_cmd(
    run_dirs: List[Path] = typer.Argument(..., help="Run directories to merge (e.g. DIR/shards/*)."),
    out: Path = typer.Option(..., "--out", "-o", help="The merged run directory (new, or empty)."),
    force: bool = typer.Option(False, "--force", help="Merge runs of different plans or versions; recorded in meta.json."),
) -> None:
    """Merge shard runs of one plan into one run that report and compare read (exit 1 if trials are
    missing, a row is torn or an input's run did not end)."""
    from quicbench.fleet.merge import merge_runs
    res = merge_runs(run_dirs, out, force=force)
    print_merge(res)
    if res.problems:
        raise typer.Exit(1)


def print_merge(res) -> None:
    for m in res.mismatches:
        err.print(f"[yellow]--force: {m}[/]", highlight=False)
    for d in res.duplicates[:SHOWN]:
        err.print(f"[yellow]duplicate {d['key']}: kept the row of {d['kept']} ({d['kept_status']}, latest), "
                  f"dropped {', '.join(d['dropped'])}[/]", highlight=False)
    if len(res.duplicates) > SHOWN:
        err.print(f"[yellow]... {len(res.duplicates) - SHOWN} more duplicates (meta.json: merge.duplicates)[/]")
    console.print(f"merged {len(res.inputs)} run(s) from {len(res.hosts)} host(s) ({', '.join(res.hosts)}): "
                  f"{res.trials} trials ({res.ok} ok), {len(res.duplicates)} duplicate(s) dropped, "
                  f"{len(res.missing)} missing", highlight=False)
    for t in res.torn[:SHOWN]:
        err.print(f"[red]torn line {t}[/]: not a row (a write cut short), skipped", highlight=False)
    if len(res.torn) > SHOWN:
        err.print(f"[red]... {len(res.torn) - SHOWN} more torn lines (meta.json: merge.torn_lines)[/]")
    for u in res.unfinished:
        err.print(f"[red]unfinished input {u}[/]: its run did not end; resume it (quicbench run PLAN --resume "
                  f"DIR) and merge again — the merged run is marked incomplete", highlight=False)
    if res.missing:
        err.print(f"[red]{len(res.missing)} trial(s) of the plan are in no input:[/] "
                  + ", ".join(res.missing[:SHOWN]) + (" ..." if len(res.missing) > SHOWN else ""), highlight=False)
        if res.rerun:
            err.print("re-run " + ", ".join(f"--shard {s} ({n} trials)" for s, n in sorted(res.rerun.items()))
                      + " and merge again", highlight=False)
    console.print(f"merged run: [bold]{res.out}[/] ('quicbench report {res.out}')")


def _plan_for_cluster(plan: Optional[Path], shards: int, reps: Optional[int], only: List[str]):
    """The plan checked as `run` checks it (bad input fails here, before anything is written)."""
    from quicbench.cli.run import _load_plan, _parse_only
    from quicbench.model.plan import check_only
    if not 1 <= shards <= 10_000:
        raise QuicbenchError(f"--shards {shards}: accepted: 1..10000")
    from quicbench.cli.run import check_reps
    check_reps(reps)
    p = _load_plan(plan)
    check_only(p, _parse_only(only))
    return p


@app.command("slurm")
def slurm_cmd(
    plan: Optional[Path] = typer.Argument(None, help="Plan file (TOML); the built-in default plan if omitted."),
    shards: int = typer.Option(..., "--shards", help="Number of shards = array tasks (one node each)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Directory for the script, logs, shards and the merged run "
                                       "(default runs/slurm-<time>)."),
    partition: Optional[str] = typer.Option(None, "--partition", help="Slurm partition."),
    setup: str = typer.Option("make", "--setup", help="What a task does first: make (make setup), check (quicbench doctor) or none."),
    time_limit: Optional[str] = typer.Option(None, "--time", help="Slurm time limit per task (e.g. 2:00:00)."),
    reps: Optional[int] = typer.Option(None, "--reps", min=1, help="Override the plan's repetitions."),
    only: List[str] = typer.Option([], "--only", help="Restrict the plan, as for run."),
    do_submit: bool = typer.Option(False, "--submit", help="Submit it, wait for the array, then merge the shards."),
    wait_timeout: Optional[float] = typer.Option(None, "--wait-timeout", min=1, help="With --submit: stop waiting after this many seconds."),
) -> None:
    """Write an sbatch array script that runs the plan as N shards (and with --submit: run, wait, merge)."""
    import time as _time

    from quicbench.fleet import batch
    from quicbench.fleet.merge import merge_runs
    from quicbench.run.preflight import check_plan
    p = _plan_for_cluster(plan, shards, reps, only)
    check_plan(p, str(plan) if plan else "default plan")
    if partition is not None:
        batch.check_name(partition, "--partition")
    if time_limit is not None and not __import__("re").fullmatch(r"[0-9:-]+", time_limit):
        raise QuicbenchError(f"--time {time_limit!r}: a Slurm time such as 30, 2:00:00 or 1-00:00:00")
    out = out or Path("runs") / _time.strftime("slurm-%Y%m%d-%H%M%S")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise QuicbenchError(f"--out {out}: exists and is not an empty directory; choose a new one")
    text = batch.sbatch_script(plan, p.name, shards, out, partition=partition, setup=setup, reps=reps, only=only,
                               time_limit=time_limit)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "shards").mkdir(exist_ok=True)
    script = out / "quicbench.sbatch"
    script.write_text(text)
    script.chmod(0o755)
    console.print(f"sbatch script: [bold]{script}[/] ({shards} array tasks); shards go to {out / 'shards'}")
    if not do_submit:
        console.print(f"submit: sbatch {script}; then: quicbench merge {out / 'shards'}/* --out {out / 'merged'}",
                      highlight=False)
        return
    job = batch.submit(script)
    (out / "job_id").write_text(job + "\n")
    console.print(f"submitted job {job}; waiting for its {shards} tasks", highlight=False)
    try:
        end = batch.wait(job, timeout_s=wait_timeout, progress=lambda s: console.print(s, highlight=False))
    except KeyboardInterrupt:
        err.print(f"stopped waiting; job {job} goes on (scancel {job} stops it). When it ends: "
                  f"quicbench merge {out / 'shards'}/* --out {out / 'merged'}")
        raise
    console.print(f"job {job} left the queue after {end.seconds:.0f} s"
                  + (": " + ", ".join(f"task {t} {s}" for t, s in sorted(end.tasks.items())) if end.tasks else ""),
                  highlight=False)
    dirs = sorted(d for d in (out / "shards").iterdir() if (d / "meta.json").is_file())
    if not dirs:
        raise QuicbenchError(f"job {job}: no shard wrote a run directory in {out / 'shards'}; see {out / 'logs'}")
    res = merge_runs(dirs, out / "merged")
    print_merge(res)
    if res.missing:
        raise typer.Exit(1)


@app.command("k8s")
def k8s_cmd(
    plan: Path = typer.Argument(..., help="Plan file (TOML): it goes into a ConfigMap."),
    shards: int = typer.Option(..., "--shards", help="Number of shards = job completions (one node each)."),
    image: str = typer.Option("quicbench:latest", "--image", help="Container image with quicbench and its dependencies."),
    pvc: str = typer.Option("quicbench-results", "--pvc", help="PersistentVolumeClaim for the results (ReadWriteMany across nodes)."),
    name: Optional[str] = typer.Option(None, "--name", help="Job name (default qb-<plan name>)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", help="Kubernetes namespace."),
    parallelism: Optional[int] = typer.Option(None, "--parallelism", min=1, help="Shards at once (default all)."),
    caps: bool = typer.Option(False, "--caps", help="NET_ADMIN + SYS_ADMIN instead of a privileged container."),
    reps: Optional[int] = typer.Option(None, "--reps", min=1, help="Override the plan's repetitions."),
    only: List[str] = typer.Option([], "--only", help="Restrict the plan, as for run."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the manifest here (default: stdout)."),
) -> None:
    """Write a Kubernetes Indexed Job manifest (JSON, which is YAML) that runs the plan as N shards."""
    from quicbench.fleet import batch
    p = _plan_for_cluster(plan, shards, reps, only)
    batch.check_name(image, "--image")
    batch.check_name(pvc, "--pvc")
    for flag, v in (("--name", name), ("--namespace", namespace)):
        if v is not None and not __import__("re").fullmatch(r"[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?", v):
            raise QuicbenchError(f"{flag} {v!r}: a DNS label (lower-case letters, digits, '-'; at most 52)")
    text = batch.manifest_text(batch.k8s_manifest(plan.read_text(), p.name, shards, image, pvc, name=name,
                                                  parallelism=parallelism, namespace=namespace,
                                                  privileged=not caps, reps=reps, only=only))
    if out is None:
        print(text, end="")
        return
    if out.exists():
        raise QuicbenchError(f"--out {out}: exists; choose a new file")
    out.write_text(text)
    console.print(f"manifest: [bold]{out}[/] (kubectl apply -f {out}); then quicbench merge the shards of the PVC",
                  highlight=False)
