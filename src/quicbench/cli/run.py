"""`quicbench run` and `quicbench plan show`: a plan's trials, measured and stored."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from quicbench.cli.app import KernelOpt, app, check_kernel, console, err, plan_app, reap, require_root, rerun_in_kernel
from quicbench.errors import QuicbenchError
import quicbench.clients  # noqa: F401 - the client drivers declare their capabilities to the model as they register


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
    kernel: str = KernelOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout (progress and "
                                 "messages go to stderr)."),
    backend: str = typer.Option("netns", "--backend", help="Lab backend: netns (this host) or ssh (real hosts)."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help="Backend ssh: the hosts (TOML, docs/hosts.md)."),
    provision: bool = typer.Option(False, "--provision", help="Backend ssh: install what the hosts miss "
                                   "(Debian packages, qb-load, linkem) before the run."),
    jobs: int = typer.Option(1, "--jobs", help="Up to N trials at once, each in its own lab, admitted while the "
                             "host has a core idle; rows record 'concurrent' (docs/scale.md)."),
    shard: Optional[str] = typer.Option(None, "--shard", help="Run shard I of N (I/N, 1 <= I <= N) of the plan's "
                                        "cells; auto/N takes I from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX."),
    until_decided: Optional[int] = typer.Option(None, "--until-decided", help="Add repetitions to the cells whose "
                                                "verdict is not yet 'different' or 'equivalent', a plan's worth at a "
                                                "time, up to MAX; every look tests at alpha / looks (docs/report.md)."),
) -> None:
    """Run a plan: every trial measured, verified and stored in runs/<run-id>/."""
    check_kernel(kernel)
    if kernel != "host" and backend != "netns":
        raise QuicbenchError(f"--kernel {kernel}: a kernel runs this host's namespace lab; with --backend "
                             f"{backend} the hosts' own kernels carry the lab: drop --kernel (accepted: host)")
    from quicbench.model.shard import parse_shard
    shard_ = parse_shard(shard) if shard is not None else None
    if not 1 <= jobs <= 16:
        raise QuicbenchError(f"--jobs {jobs}: accepted: 1..16 concurrent labs")
    if retry_failed and not resume:
        raise QuicbenchError("--retry-failed needs --resume RUN_DIR: it runs a run's failed trials again")
    if resume and not (resume / "meta.json").is_file():
        raise QuicbenchError(f"--resume {resume}: not a quicbench run directory (no meta.json)")
    if resume:
        backend, inventory, kernel = _resumed_testbed(resume, backend, inventory, kernel)
    p = _load_plan(plan)
    only_map = _parse_only(only)
    from quicbench.model.plan import check_only
    from quicbench.run.preflight import check_jobs, check_plan
    check_only(p, only_map)
    if resume:
        from quicbench.run.runner import check_resumable
        check_resumable(resume, p, only_map)     # its own plan and selection only
    source = str(plan) if plan else "default plan"
    checked = check_plan(p, source, only=only_map)
    from quicbench.content.objects import check_disk_space
    content = p.content()
    check_disk_space(dict(content.objects), seed=content.seed, realistic_page=content.realistic_page,
                     videos=list(content.videos))
    check_backend(backend, inventory, p)
    if any(c.background or c.latency_probe or c.rebind_at_s for c in p.conditions) and (
            backend != "netns" or kernel != "host"):
        raise QuicbenchError(f"conditions: background flows, the latency probe and NAT rebinding run in this "
                             f"host's namespace lab (one clock for the probe, nftables in the nodes); accepted "
                             f"with --backend netns --kernel host only (got --backend {backend} --kernel {kernel})")
    if provision and backend != "ssh":
        raise QuicbenchError("--provision: only the ssh backend installs anything (on its hosts)")
    check_jobs(jobs, backend)
    if resume and until_decided is None:
        # a run started with --until-decided goes on with it (its looks are fixed in meta.json)
        until_decided = _resumed_until_decided(resume)
    check_reps(reps)
    if until_decided is not None:
        if not 1 <= until_decided <= MAX_REPS:
            raise QuicbenchError(f"--until-decided {until_decided}: accepted: 1..{MAX_REPS} repetitions")
        least = reps or p.repetitions
        if until_decided < least:
            raise QuicbenchError(f"--until-decided {until_decided}: below the run's repetitions ({least}); "
                                 f"accepted: MAX >= {least}")
        if shard_ is not None:
            raise QuicbenchError("--until-decided: a shard sees part of the plan's cells and the looks need them "
                                 "all; accepted without --shard")
    # the plan is accepted: a condition beyond linkem's measured schedule is said, not refused
    if kernel == "host":      # inside another kernel the run there warns, with the link it has
        from quicbench.link.schedule import plan_schedule_warning
        selected = {t.condition.name for t in checked.trials}
        conditions = [c for c in p.conditions if c.name in selected]
        warning = plan_schedule_warning(p.link, conditions, p.offload, resolve_auto=backend == "netns")
        if warning:
            err.print(warning, style="yellow", markup=False, highlight=False)
    if dry_run:
        _show_plan(p, reps, only_map, shard_)
        return
    if backend == "netns":
        require_root()
    if resume and kernel != "host":
        # the run inside the kernel holds a lock the host cannot see: this process holds the
        # host's for it, so no host process writes the directory meanwhile (exits with the kernel)
        from quicbench.store import RunStore
        RunStore.open(resume).acquire()
    rerun_in_kernel(kernel)
    reap()
    if backend == "ssh":
        _check_hosts(p, inventory, reps, only_map, provision)
    from quicbench.run.runner import start_run
    # with --json stdout carries the summary alone: everything else goes to stderr
    out_console = err if as_json else console
    try:
        store = start_run(p, out, out_console, resume=resume, reps=reps, only=only_map, retry_failed=retry_failed,
                          plan_source=str(plan) if plan else "", backend=backend,
                          inventory=str(inventory.resolve()) if inventory else None, shard=shard_, jobs=jobs,
                          until_decided=_bound(_until_decided(until_decided, out_console), p) if until_decided else None)
    except KeyboardInterrupt as e:
        if getattr(e, "run_complete", False) and report:
            _report_not_written(e.run_dir)        # type: ignore[attr-defined]
        raise
    rows = store.rows()
    print_summary(store.dir, as_json)
    latest = {r.get("key"): r for r in rows}          # a retried trial counts by its last attempt
    failed = [r for r in latest.values() if r.get("status") != "ok"]
    if failed:
        out_console.print(f"[red]{len(failed)} trial(s) failed[/]; reasons are in trials.jsonl")
    if report:
        from quicbench.report import write_report
        try:
            out_console.print(f"report: {write_report(store.dir)}")
        except KeyboardInterrupt:
            _report_not_written(store.dir)
            raise
        except Exception as e:  # noqa: BLE001 - a report error must not spoil a finished run
            err.print(f"[yellow]report not written ({e}); the data are complete: "
                      f"'quicbench report {store.dir}' tries again[/]")
    out_console.print(f"run directory: [bold]{store.dir}[/]")
    if failed:            # the data are kept and the report written; scripts still learn of the failures
        raise typer.Exit(1)


def print_summary(run_dir: Path, as_json: bool = False, **method) -> None:
    """The run's summary: text for the terminal's width, or JSON for scripts (method: the
    statistics' overrides, else the plan's)."""
    import json

    from quicbench.analysis import load_run
    from quicbench.analysis.tables import method_for
    from quicbench.report.terminal import render, summary_data
    run = load_run(run_dir)
    data = summary_data(run, method_for(run.meta, **method))
    if as_json:
        print(json.dumps(data, indent=1))
    else:
        console.print(render(data, width=console.width), markup=False, highlight=False)


def check_backend(backend: str, inventory: Optional[Path], plan=None) -> None:
    """--backend and --inventory agree, and the inventory is valid (exit 2 before anything starts)."""
    from quicbench.lab import BACKENDS
    if backend not in BACKENDS:
        raise QuicbenchError(f"--backend: unknown lab backend '{backend}', accepted: {', '.join(BACKENDS.names())}")
    if backend == "ssh":
        if inventory is None:
            raise QuicbenchError("--inventory: the ssh backend needs an inventory file (see docs/hosts.md)")
        from quicbench.lab.inventory import load_inventory
        inv = load_inventory(inventory)
        if plan is not None:
            if plan.hops == 2 and inv.router2 is None:
                raise QuicbenchError(f"inventory {inventory}: router2: the plan has hops = 2 but the inventory "
                                     f"has no [router2] host")
            kinds = BACKENDS.get(backend).workload_kinds
            odd = sorted({w.kind for w in plan.workloads if kinds is not None and w.kind not in kinds})
            if odd:
                raise QuicbenchError(f"workloads: kind {', '.join(odd)} is not supported by the {backend} backend "
                                     f"yet; accepted: {', '.join(kinds or ())}")
    elif inventory is not None:
        raise QuicbenchError(f"--inventory: only the ssh backend reads an inventory (--backend is {backend})")


MAX_REPS = 1000       # --reps and --until-decided at most (a plan's repetitions have the same bound)


def check_reps(reps: Optional[int]) -> None:
    if reps is not None and not 1 <= reps <= MAX_REPS:
        raise QuicbenchError(f"--reps {reps}: accepted: 1..{MAX_REPS}")


def _resumed_until_decided(resume: Path) -> Optional[int]:
    from quicbench.store import RunLayout, read_meta
    seq = read_meta(RunLayout(resume)).get("sequential")
    got = seq.get("max_reps") if isinstance(seq, dict) else None
    return got if isinstance(got, int) and not isinstance(got, bool) else None


def _resumed_testbed(resume: Path, backend: str, inventory: Optional[Path], kernel: str):
    """A resume runs where the run ran: its backend, inventory and kernel come from meta.json. A
    different one asked for explicitly is refused (the defaults, netns and host, mean 'as it was')."""
    import os
    from quicbench.store import RunLayout, read_meta
    meta = read_meta(RunLayout(resume))          # a malformed meta.json: one line, exit 2
    if not isinstance(meta.get("plan"), dict):
        raise QuicbenchError(f"--resume {resume}: meta.json has no plan; not a run quicbench can resume")
    lab = meta.get("lab") if isinstance(meta.get("lab"), dict) else {}
    was_backend = lab.get("backend") or "netns"
    host = meta.get("host") if isinstance(meta.get("host"), dict) else {}
    was_kernel = host.get("kernel_driver") or "host"
    if backend != "netns" and backend != was_backend:
        raise QuicbenchError(f"--backend {backend}: the run {resume} ran with --backend {was_backend}; resume it "
                             f"with that (accepted: {was_backend})")
    if kernel != "host" and kernel != was_kernel:
        raise QuicbenchError(f"--kernel {kernel}: the run {resume} ran with --kernel {was_kernel}; resume it "
                             f"with that (accepted: {was_kernel})")
    if was_backend == "ssh" and inventory is None:
        if not lab.get("inventory"):
            raise QuicbenchError(f"--inventory: the run {resume} ran on SSH hosts; name their inventory")
        inventory = Path(lab["inventory"])
    inside = os.environ.get("QUICBENCH_KERNEL", "host") != "host"   # already in that kernel
    return was_backend, inventory, (kernel if inside or was_kernel == "host" else was_kernel)


def _until_decided(max_reps: int, out_console):
    """The runner's extend hook for --until-decided MAX: after each look, the next repetitions of
    the undecided cells (analysis/sequential.py), recorded in meta.json's `sequential`."""
    def factory(store, plan, selection):
        from quicbench.analysis.load import load_run
        from quicbench.analysis.sequential import design, undecided_cells
        from quicbench.analysis.tables import method_for
        from quicbench.model.shard import Selection
        from quicbench.run.runner import fresh_seqs
        meta = store.read_meta()
        seq = meta.get("sequential")
        if seq is None:
            seq = design(selection.reps or plan.repetitions, max_reps).as_meta(method_for(meta).alpha)
            store.update_meta(sequential=seq)
        elif seq.get("max_reps") != max_reps:
            raise QuicbenchError(f"--until-decided {max_reps}: the run was started with --until-decided "
                                 f"{seq.get('max_reps')}; resume it with that (its looks are fixed)")
        planned = Selection(reps=max_reps, only=selection.only).trials(plan)

        def extend():
            # the trials the last look added that a Ctrl-C or a kill cut are run before any new look
            recorded = {r.get("key") for r in store.rows()}
            cut = [t for t in planned if t.key in set(seq.get("pending", [])) and t.key not in recorded]
            if cut:
                out_console.print(f"until decided: {len(cut)} trial(s) of look {len(seq.get('looked', []))} "
                                  f"were cut; running them first")
                return fresh_seqs(cut, store.rows(), planned)
            run = load_run(store.dir)
            undecided = undecided_cells(run, method_for(run.meta))
            measured = run.trials
            reps = {(c, w): int(g["rep"].max()) for (c, w), g in measured.groupby(["condition", "workload"])}
            target = {cell: min(r + seq["step"], max_reps) for cell, r in reps.items()}
            todo = [t for t in planned if not t.warmup and (cell := (t.condition.name, t.workload.label)) in undecided
                    and reps.get(cell, 0) < t.rep <= target.get(cell, 0)]
            looked = [*seq.get("looked", []), {"look": len(seq.get("looked", [])) + 1, "undecided": len(undecided),
                                               "cells": sorted(f"{c} | {w}" for c, w in undecided),
                                               "trials_added": len(todo)}]
            seq["looked"] = looked
            seq["pending"] = [t.key for t in todo]
            store.update_meta(sequential=seq)
            at_max = sum(1 for cell in undecided if reps.get(cell, 0) >= max_reps)
            out_console.print(f"until decided, look {len(looked)} of {seq['looks']}: {len(undecided)} cell(s) "
                              f"undecided" + (f", {len(todo)} more trials" if todo else "")
                              + (f" ({at_max} at {max_reps} repetitions: they stay undecided)" if at_max else ""))
            return fresh_seqs(todo, store.rows(), planned)
        return extend
    return factory


def _bound(factory, plan):
    """The runner's until_decided hook (store, selection) with the plan its looks expand."""
    return lambda store, selection: factory(store, plan, selection)


def _check_hosts(p, inventory: Path, reps, only_map, provision: bool = False) -> None:
    """Every host reachable, its interfaces and binaries in place, before a run directory exists."""
    from quicbench.lab import LabSpec
    from quicbench.lab.ssh import check_hosts
    from quicbench.model.plan import expand
    from quicbench.run.session import needed_binaries
    from quicbench.servers import Server, server_class
    import secrets
    trials = expand(p, reps=reps, only=only_map)
    # what the plan asks of the server host that its h3 servers may not provide
    h3 = {t.server: server_class(t.server, p.server_commands) for t in trials if t.protocol == "h3"}
    can = {name: {"qlog": bool(cls.qlog_env or cls.qlog_option), "reports_cc": cls.reported_cc is not Server.reported_cc}
           for name, cls in h3.items()}
    check_hosts(LabSpec(name=f"k{secrets.token_hex(3)}", backend="ssh", hops=p.hops, tcp_cc=p.tcp_ccs[0],
                        link=p.link, offload=p.offload, inventory=str(inventory.resolve()),
                        **needed_binaries(trials, p.client_commands, p.server_commands)), provision=provision,
                conditions=list(p.conditions), measurements=(p.qlog is True, p.verify_cc, can))


def _report_not_written(run_dir: Path) -> None:
    err.print(f"[yellow]interrupted: the trials are complete but the report was not written; "
              f"'quicbench report {run_dir}' writes it[/]")


def _show_plan(p, reps: Optional[int], only_map: dict, shard=None) -> None:
    from quicbench.model.estimate import estimate_seconds
    from quicbench.model.plan import expand
    from quicbench.model.shard import select
    trials = select(expand(p, reps=reps, only=only_map), shard)
    t = Table(title=f"plan {p.name}{f' shard {shard}' if shard else ''}: {len(trials)} trials")
    clients = len({tr.client for tr in trials}) > 1
    ccs = any(tr.quic_cc or tr.sweeps_tcp_cc for tr in trials)     # the plan sets quic_cc or sweeps tcp_cc
    for col in ("#", "condition", "workload", "protocol", "server", *(["cc"] if ccs else []),
                *(["client"] if clients else []), "rep"):
        t.add_column(col)
    for tr in trials[:200]:
        cc = (tr.quic_cc or "default") if tr.protocol == "h3" else (tr.tcp_cc or "")
        t.add_row(str(tr.seq), f"{tr.condition.name} ({tr.condition.short()})", tr.workload.label, tr.protocol,
                  tr.server, *([cc] if ccs else []), *([tr.client] if clients else []),
                  "warm-up" if tr.warmup else str(tr.rep))
    console.print(t)
    if len(trials) > 200:
        console.print(f"... and {len(trials) - 200} more")
    secs = estimate_seconds(p, trials)
    conditions = len({tr.condition.name for tr in trials})     # the ones --only and --shard kept
    console.print(f"{len(trials)} trials, {conditions} condition(s); estimated duration "
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
    check_reps(reps)
    p = _load_plan(plan)
    check_plan(p, str(plan) if plan else "default plan")
    _show_plan(p, reps, _parse_only(only), shard_)
