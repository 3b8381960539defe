"""`quicbench run` and `quicbench plan show`: a plan's trials, measured and stored."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.table import Table

from quicbench.cli.app import app, console, err, plan_app, reap, require_root
from quicbench.errors import QuicbenchError


def _parse_only(only: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in only:
        if "=" not in item:
            raise QuicbenchError(f"--only '{item}': use key=value, e.g. --only protocol=h3")
        k, v = item.split("=", 1)
        out.setdefault(k.strip(), []).extend(x.strip() for x in v.split(","))
    return out


def _load_plan(plan: Optional[Path]):
    from quicbench.model.plan import DEFAULT_PLAN, load_plan, plan_from_dict
    return load_plan(plan) if plan else plan_from_dict(DEFAULT_PLAN, source="default plan")


@app.command("run")
def run_cmd(
    plan: Optional[Path] = typer.Argument(None, help="Plan file (TOML); the built-in default plan if omitted."),
    out: Path = typer.Option(Path("runs"), "--out", "-o", help="Directory that holds run directories."),
    reps: Optional[int] = typer.Option(None, "--reps", min=1, help="Override the plan's repetitions."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue this run directory."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="With --resume: run failed trials again."),
    only: List[str] = typer.Option([], "--only", help="Restrict: condition=, protocol=, server=, workload=, size= (repeatable)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the trials and stop."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write the report at the end."),
    jobs: int = typer.Option(1, "--jobs", help="Up to N trials at once, each in its own lab, admitted while the "
                             "host has a core idle; rows record 'concurrent' (docs/scale.md)."),
    shard: Optional[str] = typer.Option(None, "--shard", help="Run shard I of N (I/N, 1 <= I <= N) of the plan's "
                                        "cells; auto/N takes I from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX."),
) -> None:
    """Run a plan: every trial measured, verified and stored in runs/<run-id>/."""
    from quicbench.model.shard import parse_shard
    shard_ = parse_shard(shard) if shard is not None else None
    if not 1 <= jobs <= 16:
        raise QuicbenchError(f"--jobs {jobs}: accepted: 1..16 concurrent labs")
    if retry_failed and not resume:
        raise QuicbenchError("--retry-failed needs --resume RUN_DIR: it runs a run's failed trials again")
    if resume and not (resume / "meta.json").is_file():
        raise QuicbenchError(f"--resume {resume}: not a quicbench run directory (no meta.json)")
    p = _load_plan(plan)
    only_map = _parse_only(only)
    from quicbench.model.plan import check_only
    from quicbench.run.preflight import check_plan
    check_only(p, only_map)
    source = str(plan) if plan else "default plan"
    check_plan(p, source)
    if jobs > 1 and p.calibrate:
        raise QuicbenchError(f"--jobs {jobs}: the plan calibrates its conditions (calibrate = true), which must "
                             f"measure the link alone; run it with --jobs 1")
    if dry_run:
        _show_plan(p, reps, only_map, shard_)
        return
    require_root()
    reap()
    from quicbench.run.runner import start_run
    try:
        store = start_run(p, out, console, resume=resume, reps=reps, only=only_map, retry_failed=retry_failed,
                          plan_source=str(plan) if plan else "", shard=shard_, jobs=jobs)
    except KeyboardInterrupt as e:
        if getattr(e, "run_complete", False) and report:
            _report_not_written(e.run_dir)        # type: ignore[attr-defined]
        raise
    rows = store.rows()
    console.print(summary_table(rows))
    failed = [r for r in rows if r.get("status") != "ok"]
    bound = [r for r in rows if r.get("cpu_bound")]
    if bound:
        where = sorted({f"{r['protocol']} {r['workload']} ({r.get('cpu_bound_by')})" for r in bound})
        console.print(f"[yellow]{len(bound)} trial(s) CPU-bound (an endpoint ran, or below the link's rate wanted, "
                      ">= 90% of a core): "
                      + "; ".join(where[:6]) + ("; ..." if len(where) > 6 else "") + "[/]")
    if failed:
        console.print(f"[red]{len(failed)} trial(s) failed[/]; reasons are in trials.jsonl")
    if report:
        from quicbench.report import write_report
        try:
            console.print(f"report: {write_report(store.dir)}")
        except KeyboardInterrupt:
            _report_not_written(store.dir)
            raise
        except Exception as e:  # noqa: BLE001 - a report error must not spoil a finished run
            err.print(f"[yellow]report not written ({e}); the data are complete: "
                      f"'quicbench report {store.dir}' tries again[/]")
    console.print(f"run directory: [bold]{store.dir}[/]")


def _report_not_written(run_dir: Path) -> None:
    err.print(f"[yellow]interrupted: the trials are complete but the report was not written; "
              f"'quicbench report {run_dir}' writes it[/]")


def _show_plan(p, reps: Optional[int], only_map: dict, shard=None) -> None:
    from quicbench.model.estimate import estimate_seconds
    from quicbench.model.plan import expand
    from quicbench.model.shard import select
    trials = select(expand(p, reps=reps, only=only_map), shard)
    t = Table(title=f"plan {p.name}{f' shard {shard}' if shard else ''}: {len(trials)} trials")
    for col in ("#", "condition", "workload", "protocol", "server", "rep"):
        t.add_column(col)
    for tr in trials[:200]:
        t.add_row(str(tr.seq), f"{tr.condition.name} ({tr.condition.short()})", tr.workload.label, tr.protocol,
                  tr.server, "warm-up" if tr.warmup else str(tr.rep))
    console.print(t)
    if len(trials) > 200:
        console.print(f"... and {len(trials) - 200} more")
    secs = estimate_seconds(p, trials)
    console.print(f"{len(trials)} trials, {len(p.conditions)} condition(s); estimated duration "
                  f"{secs / 60:.1f} min")


@plan_app.command("show")
def plan_show(plan: Optional[Path] = typer.Argument(None, help="Plan file (TOML)."),
              reps: Optional[int] = typer.Option(None, "--reps", min=1),
              only: List[str] = typer.Option([], "--only"),
              shard: Optional[str] = typer.Option(None, "--shard", help="Show shard I/N's trials only.")) -> None:
    """Print the expanded matrix, the number of trials and an estimated duration."""
    from quicbench.model.shard import parse_shard
    from quicbench.run.preflight import check_plan
    shard_ = parse_shard(shard) if shard is not None else None
    p = _load_plan(plan)
    check_plan(p, str(plan) if plan else "default plan")
    _show_plan(p, reps, _parse_only(only), shard_)


def summary_table(rows: list[dict[str, Any]]) -> Table:
    """Protocol x workload x condition: median goodput, median total time, CPU seconds."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if not r.get("warmup"):
            groups[(r.get("condition"), r.get("workload"), r.get("protocol"), r.get("server"))].append(r)
    t = Table(title="quicbench results (medians over repetitions)")
    for col in ("condition", "workload", "protocol", "server", "ok/n", "goodput Mbit/s", "total time s",
                "client CPU s", "server CPU s", "CPU-bound"):
        t.add_column(col, justify="right" if col not in ("condition", "workload", "protocol", "server") else "left")

    def med(rs, k):
        vals = [r[k] for r in rs if r.get(k) is not None and r.get("status") == "ok"]
        return statistics.median(vals) if vals else None

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    for (cond, wl, proto, server), rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        ok = sum(r.get("status") == "ok" for r in rs)
        t.add_row(str(cond), str(wl), str(proto), str(server), f"{ok}/{len(rs)}", fmt(med(rs, "goodput_mbps"), ".1f"),
                  fmt(med(rs, "total_time_s"), ".3f"), fmt(med(rs, "client_cpu_s"), ".3f"),
                  fmt(med(rs, "server_cpu_s"), ".3f"), str(sum(bool(r.get("cpu_bound")) for r in rs)))
    return t
