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
from quicbench.cli.app import (KernelOpt, check_kernel, console, err, lab_app, link_app, reap, require_root,
                               rerun_in_kernel)
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
@cf.condition_options
def lab_up(
    name: str = typer.Option("lab", "--name", "-n", help="Lab name (namespaces are qb-NAME-NODE)."),
    hops: int = typer.Option(1, help="Router hops between client and server (1 or 2)."),
    tcp_cc: str = typer.Option("cubic", "--cc", help="TCP congestion control in every node."),
    initcwnd: Optional[int] = typer.Option(None, "--initcwnd", min=1, max=1000, help="TCP's initial congestion "
                                           "window (segments) of the client and the server; default the kernel's 10."),
    link: str = typer.Option("auto", help="Link emulator: auto, plain, linkem, netem."),
    offload: bool = typer.Option(False, "--offload", help="TSO/GSO/GRO on (GSO super-frames; linkem "
                                 "cuts them per wire packet). Default off: every frame is a wire packet."),
    flags: cf.Flags = None,
    serve: Optional[str] = typer.Option(None, "--serve", help="Also serve content until 'lab down': caddy "
                                        "(h1, h2, h3), ngtcp2, quinn, quiche or aioquic (h3), nginx or apache (h1, h2)."),
    content: Optional[Path] = typer.Option(None, "--content", help="With --serve: a directory of your own "
                                           "files to serve (instead of generated objects)."),
    sizes: str = typer.Option("10KB,1MB", "--sizes", help="With --serve and no --content: generated objects "
                              "of these sizes, 10 copies each (SIZE/obj-N.bin)."),
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
    cond = cf.condition_from_flags("cli", flags)
    serving = _check_serve(serve, content, sizes) if (serve or content) else None
    reap()
    from quicbench.lab import LabSpec, make_lab
    spec = LabSpec(name=name, hops=hops, tcp_cc=tcp_cc, tcp_initcwnd=initcwnd, link=link, offload=offload,
                   persistent=True,
                   condition=cond, backend=backend, inventory=str(inventory.resolve()) if inventory else None)
    if provision:
        if backend != "ssh":
            raise QuicbenchError("--provision: only the ssh backend installs anything (on its hosts)")
        from quicbench.lab.ssh import check_hosts
        check_hosts(spec.model_copy(update={"name": f"k{name}"[:16]}), provision=True)
    lab = make_lab(spec)
    lab.up()
    console.print(f"lab [bold]{name}[/] is up: client {lab.address('client')} → server {lab.address('server')}"
                  f" (link {lab.link_name}, TCP {tcp_cc}{f' initcwnd {initcwnd}' if initcwnd else ''}, "
                  f"condition: {cond.short()})", highlight=False)
    if serving is not None:
        try:
            info = _serve(lab, *serving)
        except BaseException:
            lab.down()          # nothing is left of a lab whose server did not start
            raise
        for line in serve_instructions(name, info):
            console.print(line, markup=False, highlight=False)


def _check_serve(serve: str | None, content: Path | None, sizes: str) -> tuple:
    """--serve, --content, --sizes checked before anything starts: (server class, content dir, sizes)."""
    from quicbench.model.units import parse_size
    from quicbench.servers import SERVERS
    names = [n for n in SERVERS.names() if n != "command"]
    if not serve:
        raise QuicbenchError(f"--content needs --serve SERVER, accepted: {', '.join(names)}")
    if serve not in names:
        raise QuicbenchError(f"--serve '{serve}': unknown server, accepted: {', '.join(names)}")
    cls = SERVERS.get(serve)
    ok, why = cls.available()
    if not ok:
        raise QuicbenchError(f"--serve {serve}: {why}")
    if content is not None and not content.is_dir():
        raise QuicbenchError(f"--content '{content}': not a directory")
    if content is not None:
        from quicbench.content.objects import ContentSet
        try:
            ContentSet(root=content.resolve(), manifest={}).check_served_files()
        except QuicbenchError as e:
            raise QuicbenchError(f"--content: {e}") from None
    parsed = []
    if content is None:
        for item in sizes.split(","):
            try:
                parsed.append(parse_size(item.strip()))
            except QuicbenchError as e:
                raise QuicbenchError(f"--sizes '{sizes}': {e}; e.g. --sizes 10KB,1MB") from None
    return cls, content, parsed


def _serve(lab, cls, content_dir: Path | None, sizes: list[int]) -> dict[str, Any]:
    """Start the server in the lab's server node, detached (it outlives this command; the lab's
    teardown stops it), and record it in the lab state."""
    from quicbench.content.objects import ContentSet, generate
    from quicbench.tls import LAB_HOSTNAME, make_tls
    workdir = lab.run_dir / "serve"
    tls = make_tls(workdir / "tls", LAB_HOSTNAME, ips=[lab.address("server")])
    if content_dir is not None:
        content = ContentSet(root=content_dir.resolve(), manifest={})
        paths = sorted(str(p.relative_to(content.root)) for p in content.root.rglob("*") if p.is_file())[:1]
    else:
        content = generate({size: 10 for size in sizes})
        paths = [content.path_template(sizes[0]).replace("{i}", "1").lstrip("/")]
    srv = cls(lab, workdir / cls.name, content, tls, port=443)
    srv.start()
    info = {"server": cls.name, "pid": srv.pid, "protocols": sorted(cls.protocols), "host": LAB_HOSTNAME,
            "address": lab.address("server"), "port": 443, "root": str(content.root),
            "url": f"https://{LAB_HOSTNAME}/" + (paths[0] if paths else ""),
            "ca": str(tls.ca_cert), "spki_sha256": tls.spki_sha256_b64, "log": str(srv.workdir)}
    lab.state["serve"] = info
    lab.save_state()
    srv.proc = None         # detached: this command exits, the server keeps serving until 'lab down'
    return info


def serve_instructions(name: str, info: dict[str, Any]) -> list[str]:
    """What `lab up --serve` prints: the URL, the CA, the SPKI hash and commands to paste."""
    import shlex
    import sys

    from quicbench.clients.browser.driver import CHROMIUM, chromium_flags
    from quicbench.paths import REPO_ROOT
    host, addr, port, url, ca = info["host"], info["address"], info["port"], info["url"], info["ca"]
    import shutil
    qb = "quicbench" if shutil.which("quicbench") else shlex.quote(os.path.abspath(sys.argv[0]))
    exec_ = f"{qb} lab exec {name} client --"
    lines = [f"serving {info['root']} with {info['server']} ({', '.join(info['protocols'])}) until "
             f"'quicbench lab down {name}'",
             f"  URL:  {url}  (the host name resolves to {addr} only in the lab: use --resolve)",
             f"  CA:   {ca}",
             f"  SPKI: {info['spki_sha256']}  (sha256, base64: Chromium's --ignore-certificate-errors-spki-list)",
             "paste:"]
    curl = f"curl -sS -o /dev/null -w '%{{http_version}} %{{size_download}} bytes\\n' " \
           f"--resolve {host}:{port}:{addr} --cacert {ca}"
    for proto, flag in (("h1", "--http1.1"), ("h2", "--http2")):
        if proto in info["protocols"]:
            lines.append(f"  {exec_} {curl} {flag} {url}")
    if "h3" in info["protocols"]:
        tool = REPO_ROOT / "tools" / "clients" / "curl_get.py"
        lines.append(f"  {exec_} {sys.executable} {tool} --proto h3 --connect {addr}:{port} --ca {ca} {url}")
        if os.access("/usr/bin/gtlsclient", os.X_OK):     # ngtcp2's client (it verifies no certificate)
            lines.append(f"  {exec_} /usr/bin/gtlsclient --exit-on-all-streams-close --no-quic-dump "
                         f"--no-http-dump --sni={host} {addr} {port} {url}")
    proto = "h3" if "h3" in info["protocols"] else "h2"
    flags = " ".join(shlex.quote(f) for f in chromium_flags(proto, host, port, addr, info["spki_sha256"]))
    lines.append(f"  {exec_} {CHROMIUM} {flags} --dump-dom https://{host}/")
    lines.append(f"  {exec_} sh          (a shell in the client node; $QB_SERVER is {addr})")
    return lines


@lab_app.command("set")
@cf.condition_options
def lab_set(
    name: str = typer.Argument(..., help="Lab name."),
    flags: cf.Flags = None,
) -> None:
    """Change a running lab's condition (unspecified values go back to none)."""
    require_root()
    from quicbench.lab import load_lab
    cond = cf.condition_from_flags("cli", flags)
    lab = load_lab(name)
    if _live_owner(lab.state):
        raise _owned_error(name, lab.state, "its trials are labelled with the run's conditions, so it cannot be "
                                            "changed from outside; use 'quicbench lab up' for a lab of your own")
    lab.set_condition(cond)
    console.print(f"lab {name}: {cond.short()} (link {lab.link_name})")


@link_app.command("calibrate")
@cf.condition_options
def link_calibrate(
    link: str = typer.Option("auto", help="Link emulator: auto, plain, linkem, netem."),
    kernel: str = KernelOpt,
    pings: int = typer.Option(200, help="Pings (10 ms apart)."),
    seconds: float = typer.Option(3.0, help="iperf3 seconds (0 skips iperf3)."),
    as_json: bool = typer.Option(False, "--json"),
    flags: cf.Flags = None,
) -> None:
    """Apply a condition in a fresh lab and measure it with ping and iperf3: configured vs measured."""
    check_kernel(kernel)
    require_root()
    rerun_in_kernel(kernel)
    reap()
    import secrets
    from quicbench.lab import LabSpec, make_lab
    from quicbench.run.calibrate import calibrate
    cond = cf.condition_from_flags("cli", flags)
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


@link_app.command("crosscheck")
@cf.condition_options
def link_crosscheck(
    count: int = typer.Option(2000, help="Probe datagrams per direction and phase."),
    pps: float = typer.Option(500, help="Probe datagrams per second."),
    size: int = typer.Option(64, help="Probe UDP payload bytes."),
    goodput_reps: int = typer.Option(3, "--goodput-reps", min=0, max=50,
                                     help="Repetitions of the goodput comparison (TCP with iperf3, h2 and h3 "
                                          "with quicbench's runner); 0: the probe alone."),
    as_json: bool = typer.Option(False, "--json"),
    plan: Optional[Path] = typer.Option(None, "--plan", help="Crosscheck this plan's conditions (instead of the "
                                        "condition flags)."),
    only: Optional[str] = typer.Option(None, "--only", help="With --plan: these conditions (comma-separated)."),
    flags: cf.Flags = None,
) -> None:
    """The same probe traffic through linkem (this kernel) and netem (User-Mode Linux): one-way
    delay (KS test), loss, duplicates and reordering compared, each side's noise floor measured;
    then TCP, h2 and h3 goodput through both."""
    require_root()
    reap()
    from quicbench.run.crosscheck import crosscheck
    if plan is not None:
        from quicbench.model.plan import load_plan
        names = [x.strip() for x in (only or "").split(",") if x.strip()]
        conds = [c for c in load_plan(plan).conditions if not names or c.name in names]
        unknown = set(names) - {c.name for c in conds}
        if unknown:
            raise QuicbenchError(f"--only {','.join(sorted(unknown))}: not a condition of {plan}")
    else:
        conds = [cf.condition_from_flags("cli", flags)]
    results = []
    for cond in conds:
        note = None
        from quicbench.link.netem import unsupported
        if unsupported(cond) and "rate" in (unsupported(cond) or ""):
            # netem cannot reorder under a rate; a rate far above the probe's (tens of kbit/s) shapes
            # nothing the probe sends, so the condition is compared without it, as the seeds' LAN
            cond = _without_rate(cond)
            note = "rate left out: netem does not reorder under a rate, and the probe stays far below it"
            (err if as_json else console).print(f"[yellow]{cond.name}: {note}[/]")   # --json: stdout is JSON alone
        res = crosscheck(cond, count=count, pps=pps, size=size, goodput_reps=goodput_reps)
        res["condition"] = {"name": cond.name, "desc": cond.short(), "note": note}
        results.append(res)
        if not as_json:
            console.print(_crosscheck_table(res, cond, count, pps))
    if as_json:
        print(json.dumps(results if plan is not None else results[0], indent=2))
    if not all(r["ok"] for r in results):
        raise SystemExit(1)


def _without_rate(cond):
    """The condition without its rate and what needs a rate (the impairment table says what)."""
    from quicbench.model.conditions import Condition
    from quicbench.model.impairments import TABLE, without
    data = cond.model_dump(mode="json", exclude_defaults=True)
    for hop in data.get("hops", []):
        for d in ("up", "down"):
            if d in hop:
                hop[d] = without(TABLE, hop[d], "rate_mbit")
    return Condition.model_validate(data)


def _crosscheck_table(res: dict[str, Any], cond, count: int, pps: float) -> Table:
    from quicbench.run.crosscheck import COLUMNS, table_rows
    t = Table(*COLUMNS, title=f"crosscheck {cond.name}: {cond.short()} ({count} datagrams at {pps:g}/s per direction)")
    for row in table_rows(res):
        t.add_row(*row)
    return t


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
        status = s.get("status", "?")
        if s.get("serve"):
            # a `lab up --serve` lab: what it serves, where
            status += f"\nserving {s['serve']['url']} ({s['serve']['server']}: {', '.join(s['serve']['protocols'])})"
        t.add_row(s["name"], status, nodes, (s.get("link") or {}).get("name", "-"), s.get("tcp_cc", "-"))
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
            busy = run(["ip", "netns", "pids", ns], check=False).stdout.split()
            if busy and not force:
                # another quicbench (another state directory) may be using it
                console.print(f"stray namespace {ns} skipped: {len(busy)} process(es) run inside; --force removes it")
                continue
            run(["ip", "netns", "del", ns], check=False)
            console.print(f"stray namespace {ns} removed")


def load_lab_state_exists(name: str) -> bool:
    from quicbench.lab.base import labs_dir
    return (labs_dir() / f"{name}.json").exists()
