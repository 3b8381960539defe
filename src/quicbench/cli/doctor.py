"""`quicbench doctor`: what this host has, and the fix for each missing piece."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import typer

from quicbench.kernels.features import probe
from quicbench.paths import bin_dir
import quicbench.clients  # noqa: F401 - the client drivers declare their capabilities to the model as they register

BINARIES = [
    # (binary, needed for, fix)
    ("ip", "labs", "apt-get install iproute2"),
    ("tc", "kernel link emulation (netem, tbf)", "apt-get install iproute2"),
    ("ethtool", "turning offloads off", "apt-get install ethtool"),
    ("ping", "link calibration", "apt-get install iputils-ping"),
    ("iperf3", "link calibration and benchmarks", "apt-get install iperf3"),
    ("tcpdump", "packet captures", "make capture (apt-get install tcpdump)"),
    ("nft", "firewall rules in the lab", "apt-get install nftables"),
    ("ss", "server readiness checks", "apt-get install iproute2"),
    ("caddy", "servers 'caddy' (build/bin: current) and 'caddy-2.6' (Debian's)", "make setup (builds Caddy; "
     "make servers for Debian's 2.6)"),
    ("qb-load", "the load client", "make setup (builds loadclient/)"),
    ("linkem", "link emulator 'linkem'", "make setup (builds linkem/)"),
    ("quicbench-h3server", "server 'quinn' (HTTP/3 on quinn + h3)", "make quinn (builds h3server/)"),
    ("qb-replay", "server 'replay' (recorded pages, docs/pages.md)", "make replay (builds loadclient/cmd/qb-replay)"),
    ("chromium", "browser page loads", "make browser (Debian's chromium; never a downloaded browser)"),
    ("firefox-esr", "page loads and video in Firefox (browser = \"firefox\")",
     "make firefox (Debian's firefox-esr; never a downloaded browser)"),
    ("certutil", "the lab's CA in each Firefox profile", "make firefox (apt-get install libnss3-tools)"),
]


def _version(path: str, flag: str = "--version") -> str:
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=5)
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[0][:80] if text else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def checks(boot_uml: bool = True) -> list[tuple[str, bool, str]]:
    """(check, ok, detail or fix) for this host; boot_uml: boot User-Mode Linux once to see that
    it runs here (a few seconds), not only that its files are installed."""
    out: list[tuple[str, bool, str]] = []
    out.append(("root", os.geteuid() == 0, "needed for network namespaces" if os.geteuid() else "running as root"))
    k = probe()
    out.append(("kernel: network namespaces", k["netns"], "ip netns add works" if k["netns"] else
                "needs CONFIG_NET_NS and root"))
    out.append(("kernel: veth", k["veth"], "veth pairs" if k["veth"] else "needs CONFIG_VETH (modprobe veth)"))
    out.append(("kernel: netem", True, "present: link 'auto' uses netem" if k["netem"] else
                "absent (no sch_netem): link 'auto' uses linkem, the user-space emulator"))
    from quicbench.kernels import UmlKernel
    uml = UmlKernel()
    ok, why = uml.available()
    if ok:
        v = uml.version()
        detail = (f"User-Mode Linux {v['version']} with qdiscs {', '.join(v['qdiscs'])}: "
                  "--kernel uml runs the kernel's netem (slow: tens of Mbit/s)")
        if boot_uml:
            boots, how = uml.boots()
            detail += f"; {how}" if boots else f"; but it does not run on this host: {how}"
    else:
        detail = f"optional, for --kernel uml (the kernel's netem on any host): {why}"
    out.append(("kernel: uml", True, detail))
    out.append(("kernel: tbf", k["tbf"], "rate limiting" if k["tbf"] else "needs CONFIG_NET_SCH_TBF"))
    out.append(("kernel: htb", k["htb"], "rate limiting" if k["htb"] else "needs CONFIG_NET_SCH_HTB"))
    out.append(("kernel: TUN", k["tun"], "/dev/net/tun" if k["tun"] else "needs CONFIG_TUN"))
    try:
        avail = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    except OSError:
        avail = []
    out.append(("kernel: TCP cubic", "cubic" in avail, "available: " + " ".join(avail)))
    for name, why, fix in BINARIES:
        local = bin_dir() / name
        path = str(local) if local.exists() else shutil.which(name)
        if path:
            ver = _version(path, "version" if name == "caddy" else ("-V" if name in ("ip", "ping", "tc") else "--version"))
            out.append((name, True, f"{path} {ver}".strip()))
        else:
            out.append((name, False, f"needed for {why}: {fix}"))
    try:
        import playwright  # noqa: F401
        from importlib.metadata import version
        out.append(("python: playwright", True, f"{version('playwright')} (drives /usr/bin/chromium)"))
    except ImportError:
        out.append(("python: playwright", False, "needed for browser page loads: make browser (pip install playwright)"))
    from quicbench.clients.browser.firefox import FIREFOX, puppeteer_version
    ppt = puppeteer_version()
    out.append(("npm: puppeteer-core", ppt is not None, f"{ppt} (drives {FIREFOX} over WebDriver BiDi)" if ppt else
                "needed for Firefox page loads and video: make firefox (npm ci in firefox/)"))
    out += stack_checks()
    return out


def stack_checks() -> list[tuple[str, bool, str]]:
    """Every registered server (sender) and client (receiver) with its stack and versions, or why it
    cannot run here with the fix: a result is the implementation's as much as the protocol's
    (docs/stacks.md)."""
    from quicbench.clients import CLIENTS
    from quicbench.registry import driver_stack
    from quicbench.servers import SERVERS
    out: list[tuple[str, bool, str]] = []
    for kind, registry in (("server", SERVERS), ("client", CLIENTS)):
        for dname, cls in registry.items():
            if dname == "command":
                continue    # a contract a plan fills in, nothing installed (docs/endpoints.md)
            ok, why = cls.available()
            quic = ""
            if "h3" in cls.protocols:
                app = "h3" if cls.quic_app == "h3" else f"{cls.quic_app}, transport-only"
                quic = f"[{cls.quic_stack or '?'}: {app}] "
            if not ok:
                targets = [f"make {p}" for p in getattr(cls, "provisions", ())]
                later = ("" if not targets else " (provided on first use by a plan that needs it)"
                         if all(t in why for t in targets)
                         else f" (provided on first use by a plan that needs it: {' and '.join(targets)})")
                out.append((f"{kind} {dname}", False, f"{quic}{why}{later}"))
                continue
            cc = ""
            if kind == "server" and "h3" in cls.protocols:     # the plan's quic_cc (docs/plans.md)
                cc = (f"; quic_cc: {', '.join(cls.quic_ccs)}" if cls.quic_ccs else
                      f"; quic_cc: fixed ({cls.quic_cc_builtin})" if cls.quic_cc_builtin else "")
            kinds = f"; runs {', '.join(cls.workload_kinds)}" if kind == "client" and cls.workload_kinds else ""
            out.append((f"{kind} {dname}", True,
                        f"{quic}{driver_stack(cls)}; {', '.join(sorted(cls.protocols))}{cc}{kinds}"))
    return out


def remote_doctor(inventory: Path, provision: bool, as_json: bool) -> None:
    """The ssh backend's hosts: reachable, interfaces safe, binaries, kernel, clock offset."""
    import json
    import secrets

    from rich.table import Table

    from quicbench.cli.app import console
    from quicbench.lab import LabSpec
    from quicbench.lab.inventory import load_inventory
    from quicbench.lab.ssh import check_hosts
    from quicbench.model.plan import DEFAULT_PLAN, expand, plan_from_dict
    from quicbench.run.session import needed_binaries
    inv = load_inventory(inventory)
    default = plan_from_dict(DEFAULT_PLAN, source="default plan")     # its drivers: what `make run` needs
    facts = check_hosts(LabSpec(name=f"d{secrets.token_hex(3)}", backend="ssh", inventory=str(inventory.resolve()),
                                hops=2 if inv.router2 else 1, **needed_binaries(expand(default), default.client_commands,
                                                                 default.server_commands)),
                        provision=provision)
    if as_json:
        print(json.dumps(facts, indent=2))
        return
    t = Table("host", "kernel", "netem", "binaries", "offloads", "clock offset", "SSH via")
    for node, f in facts.items():
        t.add_row(f"{node} {f['user']}@{f['host']}", f.get("kernel") or "?",
                  "-" if "netem" not in f else ("yes" if f["netem"] else "no (linkem)"),
                  "\n".join(f"{b} {f['versions'].get(b, '')}".strip() for b in f["binaries"]),
                  "\n".join(f"{i}: {v}" for i, v in f["offloads"].items()),
                  f"{f['clock_offset_s'] * 1000:+.1f} ms ± {f['clock_offset_uncertainty_s'] * 1000:.1f}",
                  f.get("ssh_iface") or "?")
    console.print(t)


def doctor_cmd(
    backend: str = typer.Option("netns", "--backend", help="netns: this host; ssh: the hosts of --inventory."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help="Backend ssh: the hosts (TOML, docs/hosts.md)."),
    provision: bool = typer.Option(False, "--provision", help="Backend ssh: install what the hosts miss first."),
    as_json: bool = typer.Option(False, "--json", help="Backend ssh: print the hosts' facts as JSON."),
) -> None:
    """Check kernel features and binaries, with the fix for each missing piece (or the ssh backend's hosts)."""
    from rich.markup import escape
    from rich.table import Table

    from quicbench.cli.app import console
    from quicbench.cli.run import check_backend
    check_backend(backend, inventory)
    if backend == "ssh":
        remote_doctor(inventory, provision, as_json)
        return
    t = Table("check", "status", "detail / fix")
    bad = 0
    for name, ok, detail in checks():
        t.add_row(name, "[green]ok[/]" if ok else "[red]missing[/]", escape(detail))   # details are text, not markup
        bad += not ok
    console.print(t)
    if bad:
        raise SystemExit(1)


def _register() -> None:
    from quicbench.cli.app import app
    app.command("doctor")(doctor_cmd)


_register()
