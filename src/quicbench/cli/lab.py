"""`quicbench lab ...` and `quicbench link calibrate`: labs that outlive a command, and link checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from quicbench.cli import condflags as cf
from quicbench.cli.app import console, lab_app, link_app, reap, require_root
from quicbench.errors import QuicbenchError

OWNER_STOP_S = 60     # lab down --force: how long the owning run gets to stop cleanly


def _live_owner(state: dict[str, Any]) -> dict[str, Any] | None:
    """The owner of a lab that a live run holds (None for `lab up` labs and dead owners)."""
    from quicbench.lab.base import owner_alive
    if (state.get("spec") or {}).get("persistent"):
        return None
    owner = state.get("owner")
    return owner if owner_alive(owner) else None


def _owned_error(name: str, state: dict[str, Any], what: str) -> QuicbenchError:
    owner = state["owner"]
    run_dir = (state.get("spec") or {}).get("run_dir") or "a run"
    return QuicbenchError(f"lab '{name}' belongs to the live run {run_dir} (process {owner['pid']}): {what}")


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
    backend: str = typer.Option("netns", "--backend", help="Lab backend: netns (this host) or ssh (real hosts)."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help="Backend ssh: the hosts (TOML, docs/hosts.md)."),
    provision: bool = typer.Option(False, "--provision", help="Backend ssh: install what the hosts miss "
                                   "(Debian packages, qb-load, linkem) first."),
) -> None:
    """Create a lab that stays up until `quicbench lab down NAME` (condition flags optional)."""
    from quicbench.cli.run import check_backend
    check_backend(backend, inventory)
    if hops == 2 and backend == "ssh":
        from quicbench.lab.inventory import load_inventory
        if load_inventory(inventory).router2 is None:
            raise QuicbenchError(f"inventory {inventory}: router2: --hops 2 needs a [router2] host")
    if backend == "netns":
        require_root()
    reap()
    from quicbench.lab import LabSpec, make_lab
    cond = cf.condition_from_flags("cli", delay, jitter, jitter_dist, loss, rate, queue_ms, spikes, trace, up, down)
    spec = LabSpec(name=name, hops=hops, tcp_cc=tcp_cc, link=link, offload=offload, persistent=True,
                   condition=cond, backend=backend, inventory=str(inventory.resolve()) if inventory else None,
                   )
    if provision:
        if backend != "ssh":
            raise QuicbenchError("--provision: only the ssh backend installs anything (on its hosts)")
        from quicbench.lab.ssh import check_hosts
        check_hosts(spec.model_copy(update={"name": f"k{name}"[:16]}), provision=True)
    lab = make_lab(spec)
    lab.up()
    console.print(f"lab [bold]{name}[/] is up: client {lab.address('client')} → server {lab.address('server')}"
                  f" (link {lab.link_name}, TCP {tcp_cc}, condition: {cond.short()})")


@lab_app.command("set")
def lab_set(
    name: str = typer.Argument(..., help="Lab name."),
    delay: cf.Delay = None, jitter: cf.Jitter = None, jitter_dist: cf.JitterDist = None, loss: cf.Loss = None,
    rate: cf.Rate = None, queue_ms: cf.QueueMs = None, spikes: cf.Spikes = None, trace: cf.Trace = None,
    up: cf.Up = [], down: cf.Down = [],
) -> None:
    """Change a running lab's condition (unspecified values go back to none)."""
    require_root()
    from quicbench.lab import load_lab
    cond = cf.condition_from_flags("cli", delay, jitter, jitter_dist, loss, rate, queue_ms, spikes, trace, up, down)
    lab = load_lab(name)
    if _live_owner(lab.state):
        raise _owned_error(name, lab.state, "its trials are labelled with the run's conditions, so it cannot be "
                                            "changed from outside; use 'quicbench lab up' for a lab of your own")
    lab.set_condition(cond)
    console.print(f"lab {name}: {cond.short()} (link {lab.link_name})")


@link_app.command("calibrate")
def link_calibrate(
    link: str = typer.Option("auto", help="Link emulator: auto, plain, linkem, netem."),
    pings: int = typer.Option(200, help="Pings (10 ms apart)."),
    seconds: float = typer.Option(3.0, help="iperf3 seconds (0 skips iperf3)."),
    as_json: bool = typer.Option(False, "--json"),
    delay: cf.Delay = None, jitter: cf.Jitter = None, jitter_dist: cf.JitterDist = None, loss: cf.Loss = None,
    rate: cf.Rate = None, queue_ms: cf.QueueMs = None, spikes: cf.Spikes = None, trace: cf.Trace = None,
    up: cf.Up = [], down: cf.Down = [],
) -> None:
    """Apply a condition in a fresh lab and measure it with ping and iperf3: configured vs measured."""
    require_root()
    reap()
    import secrets
    from quicbench.lab import LabSpec, make_lab
    from quicbench.run.calibrate import calibrate
    cond = cf.condition_from_flags("cli", delay, jitter, jitter_dist, loss, rate, queue_ms, spikes, trace, up, down)
    with make_lab(LabSpec(name=f"c{secrets.token_hex(3)}", link=link, condition=cond)) as lab:
        res = calibrate(lab, cond, pings=pings, iperf_seconds=seconds)
        res["link"] = lab.link.describe()
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


def lab_rows() -> list[dict[str, Any]]:
    """Every recorded lab with its status: 'up', or 'dead' when its owning process is gone."""
    from quicbench.lab import list_lab_states
    from quicbench.lab.base import owner_alive
    out = []
    for s in list_lab_states():
        s = dict(s)
        persistent = (s.get("spec") or {}).get("persistent")
        if not persistent and not owner_alive(s.get("owner")):
            s["status"] = "dead (its process is gone; removed by the next run or 'lab down')"
        elif _live_owner(s):
            s["status"] = f"{s.get('status', '?')} (owned by run process {s['owner']['pid']})"
        out.append(s)
    return out


@lab_app.command("status")
def lab_status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List labs: names, status, namespaces, addresses, link."""
    states = lab_rows()
    if as_json:
        print(json.dumps(states, indent=2))
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
    from quicbench.lab import load_lab
    lab = load_lab(name)
    argv = [a for a in ctx.args if a != "--"] or [os.environ.get("SHELL", "/bin/sh")]
    env = dict(os.environ, QB_LAB=name, QB_NODE=node, QB_SERVER=lab.address("server"),
               QB_CLIENT=lab.address("client"))
    raise SystemExit(subprocess.call(lab.cmd(node, argv), env=env))


def _stop_owner(name: str, state: dict[str, Any]) -> None:
    """Ask the run that owns a lab to stop (as Ctrl-C does: trial stopped, run resumable) and wait."""
    from quicbench.proc import process_alive
    pid = state["owner"]["pid"]
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + OWNER_STOP_S
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if process_alive(pid):
        raise QuicbenchError(f"lab '{name}': its run (process {pid}) did not stop within {OWNER_STOP_S} s")
    console.print(f"the run owning lab {name} (process {pid}) stopped; it can be resumed")


@lab_app.command("down")
def lab_down(name: Optional[str] = typer.Argument(None, help="Lab name."),
             all_: bool = typer.Option(False, "--all", help="Remove every lab not held by a live run "
                                       "(and stray qb-* namespaces)."),
             force: bool = typer.Option(False, "--force", help="Also labs of live runs: the run is stopped "
                                        "first, cleanly and resumable.")) -> None:
    """Remove a lab (or all labs) with everything that runs inside."""
    require_root()
    from quicbench.lab import list_lab_states, load_lab
    from quicbench.lab.netns import orphan_namespaces
    from quicbench.proc import run
    if not name and not all_:
        raise QuicbenchError("say which lab: 'quicbench lab down NAME' or 'quicbench lab down --all'")
    states = {s["name"]: s for s in list_lab_states()}
    if name and name not in states:
        load_lab(name)   # raises the 'no lab named' error with the list of labs
    for n in (sorted(states) if all_ else [name]):
        st = states.get(n)
        if st is None:
            continue
        if _live_owner(st):
            if not force:
                if all_:
                    console.print(f"lab {n} skipped: it belongs to a live run (process {st['owner']['pid']}); "
                                  f"--force stops that run first")
                    continue
                raise _owned_error(n, st, "removing it would fail the run's trials; stop the run "
                                          "(Ctrl-C) or pass --force to stop it cleanly first")
            _stop_owner(n, st)
            if not (load_lab_state_exists(n)):
                console.print(f"lab {n} removed")
                continue
        load_lab(n).down()
        console.print(f"lab {n} removed")
    if all_:
        for ns in orphan_namespaces():
            run(["ip", "netns", "del", ns], check=False)
            console.print(f"stray namespace {ns} removed")


def load_lab_state_exists(name: str) -> bool:
    from quicbench.lab.base import labs_dir
    return (labs_dir() / f"{name}.json").exists()
