"""The quicbench command line (typer + rich)."""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import typer
from typer.exceptions import TyperException
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from quicbench import __version__
from quicbench.cli import condflags as cf
from quicbench.errors import QuicbenchError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Compare HTTP/1.1, HTTP/2 and HTTP/3 under emulated network conditions.")
lab_app = typer.Typer(no_args_is_help=True, help="Create, inspect, use and remove labs.")
app.add_typer(lab_app, name="lab")
console = Console()
err = Console(stderr=True)


def _sigterm_as_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    """Entry point: every QuicbenchError becomes one line on stderr and exit code 2."""
    signal.signal(signal.SIGTERM, _sigterm_as_exit)
    # a shell starts background jobs with SIGINT ignored: take it back, so Ctrl-C (or kill -INT)
    # always stops a run cleanly
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # 'kill -USR1 PID' prints every thread's stack to stderr: where a stuck run is stuck
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        rc = app(standalone_mode=False)
    except QuicbenchError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        sys.exit(2)
    except ValidationError as e:
        err.print(f"[bold red]error:[/] {format_validation_error(e)}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except typer.Abort:
        sys.exit(130)
    except TyperException as e:   # usage errors: bad option, missing argument, ...
        show = getattr(e, "show", None)
        if show:
            show()
        else:
            err.print(f"error: {e}")
        sys.exit(getattr(e, "exit_code", 2) or 2)
    sys.exit(rc if isinstance(rc, int) else 0)


def format_validation_error(e: ValidationError, source: str | None = None) -> str:
    parts = []
    for d in e.errors():
        loc = ".".join(str(x) for x in d["loc"] if not str(x).startswith("function-"))
        msg = d["msg"].removeprefix("Value error, ")
        got = d.get("input")
        tail = f" (got {got!r})" if got is not None and not isinstance(got, (dict, list)) else ""
        parts.append(f"{loc}: {msg}{tail}" if loc else f"{msg}{tail}")
    prefix = f"{source}: " if source else ""
    return prefix + "; ".join(parts)


def require_root() -> None:
    if os.geteuid() != 0:
        raise QuicbenchError("quicbench needs root for network namespaces: run as root (or with sudo)")


KernelOpt = typer.Option("host", "--kernel", help="Kernel to run in: host (this machine's) or uml "
                         "(User-Mode Linux: the kernel's netem, tbf and htb on any host; slow: tens of Mbit/s).")


def _argv_without_kernel(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--kernel":
            skip = True
        elif not a.startswith("--kernel="):
            out.append(a)
    return out


def _in_kernel(kernel: str) -> int | None:
    """With a kernel other than host: run this same command line inside it and return its exit
    code (the caller exits with it); None means go on here."""
    from quicbench.kernels import get_kernel
    k = get_kernel(kernel)
    if k.name == "host":
        return None
    ok, why = k.available()
    if not ok:
        raise QuicbenchError(f"kernel '{kernel}' is not usable here: {why}")
    argv = [sys.executable, "-m", "quicbench.cli.main", *_argv_without_kernel(sys.argv[1:])]
    return k.run(argv, dict(os.environ), os.getcwd())


def _reap() -> None:
    from quicbench.lab import reap_dead_labs
    for name in reap_dead_labs():
        err.print(f"[yellow]reaped lab '{name}' left behind by a killed process[/]")


# ---------------------------------------------------------------------------------- lab
@lab_app.command("up")
def lab_up(
    name: str = typer.Option("lab", "--name", "-n", help="Lab name (namespaces are qb-NAME-NODE)."),
    hops: int = typer.Option(1, help="Router hops between client and server (1 or 2)."),
    tcp_cc: str = typer.Option("cubic", "--cc", help="TCP congestion control in every node."),
    link: str = typer.Option("auto", help="Link emulator: auto, plain, linkem, netem."),
    offload: bool = typer.Option(False, "--offload", help="TSO/GSO/GRO on (GSO super-frames; linkem "
                                 "cuts them per wire packet). Default off: every frame is a wire packet."),
    delay: cf.Delay = None, jitter: cf.Jitter = None, jitter_dist: cf.JitterDist = None, loss: cf.Loss = None,
    rate: cf.Rate = None, queue_ms: cf.QueueMs = None, spikes: cf.Spikes = None, trace: cf.Trace = None,
    up: cf.Up = [], down: cf.Down = [],
) -> None:
    """Create a lab that stays up until `quicbench lab down NAME` (condition flags optional)."""
    require_root()
    _reap()
    from quicbench.lab import LabSpec, make_lab
    cond = cf.condition_from_flags("cli", delay, jitter, jitter_dist, loss, rate, queue_ms, spikes, trace, up, down)
    lab = make_lab(LabSpec(name=name, hops=hops, tcp_cc=tcp_cc, link=link, offload=offload, persistent=True,
                           condition=cond))
    lab.up()
    console.print(f"lab [bold]{name}[/] is up: client {lab.address('client')} → server {lab.address('server')}"
                  f" (link {lab.state['link']['name']}, TCP {tcp_cc}, condition: {cond.short()})")


@lab_app.command("set")
def lab_set(
    name: str = typer.Argument(..., help="Lab name."),
    delay: cf.Delay = None, jitter: cf.Jitter = None, jitter_dist: cf.JitterDist = None, loss: cf.Loss = None,
    rate: cf.Rate = None, queue_ms: cf.QueueMs = None, spikes: cf.Spikes = None, trace: cf.Trace = None,
    up: cf.Up = [], down: cf.Down = [],
) -> None:
    """Change a running lab's condition (unspecified values go back to none)."""
    require_root()
    from quicbench.lab.base import load_lab
    lab = load_lab(name)
    cond = cf.condition_from_flags("cli", delay, jitter, jitter_dist, loss, rate, queue_ms, spikes, trace, up, down)
    lab.link.apply(cond)
    lab.spec.condition = cond
    lab.save_state()
    console.print(f"lab {name}: {cond.short()} (link {lab.state['link']['name']})")


link_app = typer.Typer(no_args_is_help=True, help="Link emulation: calibrate a condition, crosscheck linkem with netem.")
app.add_typer(link_app, name="link")


@link_app.command("calibrate")
def link_calibrate(
    link: str = typer.Option("auto", help="Link emulator: auto, plain, linkem, netem."),
    kernel: str = KernelOpt,
    pings: int = typer.Option(200, help="Pings (10 ms apart)."),
    seconds: float = typer.Option(3.0, help="iperf3 seconds (0 skips iperf3)."),
    as_json: bool = typer.Option(False, "--json"),
    delay: cf.Delay = None, jitter: cf.Jitter = None, jitter_dist: cf.JitterDist = None, loss: cf.Loss = None,
    rate: cf.Rate = None, queue_ms: cf.QueueMs = None, spikes: cf.Spikes = None, trace: cf.Trace = None,
    up: cf.Up = [], down: cf.Down = [],
) -> None:
    """Apply a condition in a fresh lab and measure it with ping and iperf3: configured vs measured."""
    from quicbench.kernels import get_kernel
    get_kernel(kernel)   # an unknown name fails before anything runs
    require_root()
    rc = _in_kernel(kernel)
    if rc is not None:
        raise SystemExit(rc)
    _reap()
    import secrets
    from quicbench.run.calibrate import calibrate
    from quicbench.lab import LabSpec, make_lab
    cond = cf.condition_from_flags("cli", delay, jitter, jitter_dist, loss, rate, queue_ms, spikes, trace, up, down)
    with make_lab(LabSpec(name=f"c{secrets.token_hex(3)}", link=link, condition=cond)) as lab:
        res = calibrate(lab, cond, pings=pings, iperf_seconds=seconds)
        res["link"] = lab.state["link"]
    if as_json:
        print(json.dumps(res, indent=2))
        return
    t = Table("quantity", "configured", "measured", "verdict", title=f"calibration: {cond.short()} "
              f"(link {res['link']['name']})")
    c, p = res["configured"], res["ping"]
    t.add_row("RTT p50 (ms)", f"{c['rtt_ms']:.3f}", f"{p['rtt_p50_ms']}" if p["rtt_p50_ms"] is None
              else f"{p['rtt_p50_ms']:.3f} (p99 {p['rtt_p99_ms']:.3f})", res["verdicts"]["rtt"])
    t.add_row("round-trip loss (%)", f"{c['loss_pct']:.2f}", f"{p['loss_pct']:.2f} of {p['sent']}",
              res["verdicts"]["loss"])
    if "iperf3" in res:
        gp = res["iperf3"].get("goodput_mbps")
        t.add_row("TCP goodput (Mbit/s)", "-" if c["rate_mbit"] is None else f"{c['rate_mbit']:g}",
                  "-" if gp is None else f"{gp:.1f}", res["verdicts"].get("goodput", ""))
    console.print(t)
    if not res["ok"]:
        raise SystemExit(1)


@link_app.command("crosscheck")
def link_crosscheck(
    count: int = typer.Option(2000, help="Probe datagrams per direction and phase."),
    pps: float = typer.Option(500, help="Probe datagrams per second."),
    size: int = typer.Option(64, help="Probe UDP payload bytes."),
    as_json: bool = typer.Option(False, "--json"),
    delay: cf.Delay = None, jitter: cf.Jitter = None, jitter_dist: cf.JitterDist = None, loss: cf.Loss = None,
    rate: cf.Rate = None, queue_ms: cf.QueueMs = None, spikes: cf.Spikes = None, trace: cf.Trace = None,
    up: cf.Up = [], down: cf.Down = [],
) -> None:
    """The same probe traffic through linkem (this kernel) and netem (User-Mode Linux): one-way
    delay (KS test), loss, duplicates and reordering compared, each side's noise floor measured."""
    require_root()
    _reap()
    from quicbench.run.crosscheck import crosscheck
    cond = cf.condition_from_flags("cli", delay, jitter, jitter_dist, loss, rate, queue_ms, spikes, trace, up, down)
    res = crosscheck(cond, count=count, pps=pps, size=size)
    if as_json:
        print(json.dumps(res, indent=2))
    else:
        t = Table("direction", "metric", "linkem (host)", "netem (UML)", "verdict",
                  title=f"crosscheck: {cond.short()} ({count} datagrams at {pps:g}/s per direction)")
        for d in ("up", "down"):
            v = res["verdicts"][d]
            fl = v["floor_excess_p50_ms"]
            t.add_row(d, "noise floor p50 (ms over delay)", f"{fl[0]:+.3f}", f"{fl[1]:+.3f}", "")
            o = v["owd"]
            if "p50_ms" in o:
                t.add_row(d, "one-way delay p50 / p95 (ms)", f"{o['p50_ms'][0]:.2f} / {o['p95_ms'][0]:.2f}",
                          f"{o['p50_ms'][1]:.2f} / {o['p95_ms'][1]:.2f}",
                          f"{o['verdict']}: KS D {o['ks_d']:.3f} p {o['ks_p']:.3g}")
            else:
                t.add_row(d, "one-way delay", "", "", o["verdict"])
            for m in ("loss", "duplicates", "reorder"):
                a, b = v[m]["values"]
                t.add_row(d, m + " (%)", f"{100 * a:.2f}", f"{100 * b:.2f}", v[m]["verdict"])
        console.print(t)
    if not res["ok"]:
        raise SystemExit(1)


@lab_app.command("status")
def lab_status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List running labs: names, namespaces, addresses, link."""
    from quicbench.lab import list_lab_states
    states = list_lab_states()
    if as_json:
        print(json.dumps([{k: v for k, v in s.items()} for s in states], indent=2))
        return
    if not states:
        console.print("no labs")
        return
    t = Table("lab", "status", "nodes (namespace: addresses)", "link", "TCP cc")
    for s in states:
        nodes = "\n".join(f"{node} ({ns}): {', '.join(s['addresses'].get(node, {}).values())}"
                          for node, ns in s["namespaces"].items())
        t.add_row(s["name"], s.get("status", "?"), nodes, (s.get("link") or {}).get("name", "-"),
                  s.get("tcp_cc", "-"))
    console.print(t)


@lab_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def lab_exec(ctx: typer.Context, name: str = typer.Argument(..., help="Lab name."),
             node: str = typer.Argument(..., help="client, router, router2 or server.")) -> None:
    """Run any command inside a node: quicbench lab exec NAME client -- ping -c3 SERVER."""
    require_root()
    from quicbench.lab.base import load_lab
    lab = load_lab(name)
    argv = [a for a in ctx.args if a != "--"] or [os.environ.get("SHELL", "/bin/sh")]
    env = dict(os.environ, QB_LAB=name, QB_NODE=node, QB_SERVER=lab.address("server"),
               QB_CLIENT=lab.address("client"))
    raise SystemExit(subprocess.call(lab.cmd(node, argv), env=env))


@lab_app.command("down")
def lab_down(name: Optional[str] = typer.Argument(None, help="Lab name."),
             all_: bool = typer.Option(False, "--all", help="Remove every lab, and stray qb-* namespaces.")) -> None:
    """Remove a lab (or all labs) with everything that runs inside."""
    require_root()
    from quicbench.lab import list_lab_states
    from quicbench.lab.base import load_lab
    from quicbench.lab.netns import orphan_namespaces
    from quicbench.proc import run
    if not name and not all_:
        raise QuicbenchError("say which lab: 'quicbench lab down NAME' or 'quicbench lab down --all'")
    names = [s["name"] for s in list_lab_states()] if all_ else [name]
    for n in names:
        load_lab(n).down()
        console.print(f"lab {n} removed")
    if all_:
        for ns in orphan_namespaces():
            run(["ip", "netns", "del", ns], check=False)
            console.print(f"stray namespace {ns} removed")


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
) -> None:
    """Run a plan: every trial measured, verified and stored in runs/<run-id>/."""
    from quicbench.kernels import get_kernel
    get_kernel(kernel)   # an unknown name fails before anything runs
    p = _load_plan(plan)
    only_map = _parse_only(only)
    if dry_run:
        _show_plan(p, reps, only_map)
        return
    require_root()
    rc = _in_kernel(kernel)
    if rc is not None:
        raise SystemExit(rc)
    _reap()
    from quicbench.run.runner import start_run, summary_table
    store = start_run(p, out, console, resume=resume, reps=reps, only=only_map, retry_failed=retry_failed)
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
        except Exception as e:  # noqa: BLE001 - a report error must not spoil a finished run
            err.print(f"[yellow]report not written ({e}); the data are complete: "
                      f"'quicbench report {store.dir}' tries again[/]")
    console.print(f"run directory: [bold]{store.dir}[/]")


def _show_plan(p, reps: Optional[int], only_map: dict) -> None:
    from quicbench.model.plan import expand
    trials = expand(p, reps=reps, only=only_map)
    t = Table(title=f"plan {p.name}: {len(trials)} trials")
    for col in ("#", "condition", "workload", "protocol", "server", "rep"):
        t.add_column(col)
    for tr in trials[:200]:
        t.add_row(str(tr.seq), f"{tr.condition.name} ({tr.condition.short()})", tr.workload.label, tr.protocol,
                  tr.server, "warm-up" if tr.warmup else str(tr.rep))
    console.print(t)
    if len(trials) > 200:
        console.print(f"... and {len(trials) - 200} more")
    from quicbench.model.estimate import estimate_seconds
    secs = estimate_seconds(p, trials)
    console.print(f"{len(trials)} trials, {len(p.conditions)} condition(s); estimated duration "
                  f"{secs / 60:.1f} min")


plan_app = typer.Typer(no_args_is_help=True, help="Inspect plans.")
app.add_typer(plan_app, name="plan")


@plan_app.command("show")
def plan_show(plan: Optional[Path] = typer.Argument(None, help="Plan file (TOML)."),
              reps: Optional[int] = typer.Option(None, "--reps", min=1),
              only: List[str] = typer.Option([], "--only")) -> None:
    """Print the expanded matrix, the number of trials and an estimated duration."""
    _show_plan(_load_plan(plan), reps, _parse_only(only))


@app.command("doctor")
def doctor_cmd() -> None:
    """Check kernel features and binaries, with the fix for each missing piece."""
    from quicbench.cli.doctor import checks
    t = Table("check", "status", "detail / fix")
    bad = 0
    for name, ok, detail in checks():
        t.add_row(name, "[green]ok[/]" if ok else "[red]missing[/]", detail)
        bad += not ok
    console.print(t)
    if bad:
        raise SystemExit(1)


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory (runs/<run-id>)."),
    fmt: str = typer.Option("html", "--format", help="html (report.html, summary.csv, trials.parquet) or md."),
    test: str = typer.Option("welch", "--test", help="welch (Welch's t-test) or mwu (Mann-Whitney U)."),
    holm: bool = typer.Option(False, "--holm", help="Holm correction across the comparisons."),
) -> None:
    """Write the report of a run: Table 1, Figs. 11/12, heatmaps, CVart views, honesty panel."""
    from quicbench.report import report_markdown, write_report
    correction = "holm" if holm else "none"
    if fmt == "md":
        print(report_markdown(run_dir, test=test, correction=correction))
        return
    if fmt != "html":
        raise QuicbenchError(f"--format '{fmt}': accepted: html, md")
    console.print(f"report: {write_report(run_dir, test=test, correction=correction)}")


@app.command("compare")
def compare_cmd(
    run_a: Path = typer.Argument(..., help="First run directory."),
    run_b: Path = typer.Argument(..., help="Second run directory."),
    fmt: str = typer.Option("html", "--format", help="html (RUN_A/compare.html) or md."),
    test: str = typer.Option("welch", "--test", help="welch or mwu."),
) -> None:
    """The same cells of two runs side by side, with differences and significance."""
    from quicbench.report import compare_runs
    out = compare_runs(run_a, run_b, fmt, test=test)
    if fmt == "md":
        print(out)
    else:
        console.print(f"comparison: {out}")


@app.command("version")
def version() -> None:
    """Print the quicbench version."""
    console.print(f"quicbench {__version__}")


if __name__ == "__main__":
    main()
