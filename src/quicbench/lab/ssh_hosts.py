"""The `ssh` lab backend's hosts: what each has (the doctor), what --provision installs, what
they read for a trial.

The doctor reaches every host before anything changes on any of them and checks its lab
interfaces (present, not carrying the SSH session), its binaries (quicbench's own ones the
controller's build) and its TCP congestion control; it records kernel, versions, offloads,
netem and the clock offset to the controller. ``provision`` installs what a host misses:
Debian packages with apt-get, quicbench's own binaries copied from this controller.

What a binary is comes from the lab's own tools below, else from what its driver declared
(``LabSpec.binary_facts``: Debian package, root, version flags, built by quicbench).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.lab.base import LabSpec
from quicbench.lab.ssh_transport import SshTransport, q

# the lab's own tools; the endpoints' binaries are described by their drivers (LabSpec.binary_facts)
# binaries quicbench builds itself: looked up in the host's bin_dir first
OWN_TOOLS = ("linkem",)
# what needs root on a host (a non-root SSH user gets `sudo -n` for these): network
# configuration and raw sockets (linkem, tcpdump)
ROOT_TOOLS = {"ip", "tc", "sysctl", "ethtool", "linkem", "tcpdump"}
# what --provision installs for a missing tool: the Debian package that has it
TOOL_PACKAGES = {"tc": "iproute2", "ip": "iproute2", "ss": "iproute2", "ethtool": "ethtool", "iperf3": "iperf3",
                 "ping": "iputils-ping", "tcpdump": "tcpdump"}
TOOL_VERSION_ARGS = {"linkem": "--version", "tc": "-V", "iperf3": "--version"}


def lab_tools(node: str) -> list[str]:
    """What every host of the node's kind needs for the lab itself."""
    return ["tc", "ip", "ethtool"] if node.startswith("router") else ["ip", "ethtool"] + (["ss"] if node == "server"
                                                                                             else [])


class BinaryFacts:
    """What a binary is, for a lab on other hosts: the lab's own tools, else what its driver says."""

    def __init__(self, facts: dict[str, dict[str, Any]]):
        self.facts = facts

    def needs_root(self, name: str) -> bool:
        return name in ROOT_TOOLS or bool(self.facts.get(name, {}).get("root"))

    def own(self, name: str) -> bool:
        """Built by quicbench: the controller's build, looked up in the host's bin_dir first."""
        return name in OWN_TOOLS or bool(self.facts.get(name, {}).get("own"))

    def package(self, name: str) -> str | None:
        return TOOL_PACKAGES.get(name) or self.facts.get(name, {}).get("package")

    def version_cmd(self, name: str) -> str | None:
        """The arguments that make the binary print its version; None: it has none (a jar)."""
        args = TOOL_VERSION_ARGS.get(name)
        facts = self.facts.get(name)
        if facts is not None:
            args = " ".join(q(a) for a in facts.get("version_args") or ())
        return args or None

    def release(self, name: str) -> str | None:
        """The Debian release its package comes from when not the host's own (bookworm-backports)."""
        return self.facts.get(name, {}).get("release")

    def driver_package(self, name: str) -> str | None:
        """The Debian package of an endpoint's binary (a driver's, not the lab's own tools): a
        host must have the controller's version of it, whose stack the rows name."""
        f = self.facts.get(name, {})
        return None if f.get("own") or f.get("python") else f.get("package")

    def python_packages(self, name: str) -> dict[str, str] | None:
        """For a driver run by the controller's Python (aioquic): the packages (name -> this
        controller's version) the host's Python must have; None for other binaries."""
        return self.facts.get(name, {}).get("python")

    def own_digest(self, name: str) -> str | None:
        """sha256 of this controller's build of one of quicbench's own files that prints no
        version (the netty jar); None for other binaries or when this controller has none."""
        if not self.own(name) or self.version_cmd(name) is not None:
            return None
        from quicbench.paths import find_binary
        try:
            local = find_binary(name, "")
        except QuicbenchError:
            return None
        return _sha256_of(local)

    def own_version(self, name: str) -> str | None:
        """What this controller's build of one of quicbench's own binaries (linkem, qb-load, a
        stack it builds) says of its version, as a host's doctor reads it (first line, stderr
        too); None for other binaries, or when this controller has none."""
        if not self.own(name) or self.version_cmd(name) is None:
            return None
        from quicbench.paths import find_binary
        try:
            local = find_binary(name, "")
        except QuicbenchError:
            return None
        return _first_line_of(local, self.version_cmd(name))


@functools.lru_cache(maxsize=None)
def _sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def local_package_version(package: str) -> str | None:
    """The version of a Debian package installed on this controller (None: not installed)."""
    try:
        cp = subprocess.run(["dpkg-query", "-W", "-f", "${Status} ${Version}", package], capture_output=True,
                            text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return installed_version(cp.stdout) if cp.returncode == 0 else None


def installed_version(status_version: str) -> str | None:
    """The version from dpkg-query's '${Status} ${Version}' when the package is installed, else None."""
    status, _, version = status_version.rpartition(" ")
    return version if status.endswith("installed") and "not-installed" not in status else None


@functools.lru_cache(maxsize=None)
def _first_line_of(binary: str, args: str) -> str:
    """The first line a local binary prints (stderr too) when run with args: asked once per run of
    quicbench, however many hosts and checks compare against it."""
    cp = subprocess.run(f"{q(binary)} {args} 2>&1 | head -n1", shell=True, capture_output=True, text=True,
                        timeout=20)
    return cp.stdout.rstrip("\n")


def package_problem(package: str, here: str | None, there: str | None) -> str | None:
    """Why a host's Debian package cannot stand for the controller's (whose version the rows
    name): another version. None when they match, or when either side does not know it."""
    if here is None or there is None or here == there:
        return None
    return (f"Debian's {package} is {there} there, {here} on this controller (rows name this controller's stack): "
            f"install {package}={here} there or run with --provision")


def python_problem(line: str, packages: dict[str, str]) -> tuple[str | None, dict[str, str]]:
    """From the last line of the host's Python probe ('aioquic=1.2.0 ...' or the error it raised):
    (why it cannot stand for the controller's, else None; the versions it has)."""
    there = dict(kv.split("=", 1) for kv in line.split() if "=" in kv and kv.split("=", 1)[0] in packages)
    if set(there) != set(packages):
        return (line or "no answer"), there
    other = [f"{p} {there[p]} (this controller: {v})" for p, v in packages.items() if there[p] != v]
    return ("it has " + ", ".join(other) if other else None), there


def measurement_problem(qlog: bool, verify_cc: bool, servers: dict[str, dict[str, bool]]) -> tuple[str, str] | None:
    """(the plan's field, why) for the first measurement the plan asks of its server host that the
    h3 servers it runs there cannot provide, else None. servers: name -> {"qlog": writes a qlog
    per connection, "reports_cc": reports the congestion controller it runs}."""
    for name, can in sorted(servers.items()):
        if qlog and not can.get("qlog"):
            return "qlog", (f"qlog = true: server {name} writes no qlog (its loss recovery would be missing from "
                            f"the rows); drop qlog or run a server that writes one")
        if verify_cc and not can.get("reports_cc"):
            return "verify_cc", (f"verify_cc = true: server {name} reports no congestion controller (quic_cc_seen "
                                 f"would stay empty); drop verify_cc or run a server that reports one")
    return None


class SshHosts:
    """The doctor and --provision of a lab's hosts (nodes), over its transport."""

    def __init__(self, ssh: SshTransport, spec: LabSpec, nodes: list[str]):
        self.ssh = ssh
        self.spec = spec
        self.nodes = nodes
        self.bins = BinaryFacts(spec.binary_facts)

    @property
    def inv(self):
        return self.ssh.inv

    def provision_dir(self, node: str) -> str:
        """Where --provision puts quicbench's own binaries when the host has no bin_dir (kept
        after the lab: an install, not a lab file)."""
        return self.inv.setting(node, "bin_dir") or f"{self.inv.setting(node, 'workdir').rstrip('/')}/bin"

    # -- the doctor: what each host has, checked before anything changes -----------------
    def doctor(self, binaries: dict[str, list[str]] | None = None) -> dict[str, dict[str, Any]]:
        """Reach every host, check its lab interfaces (present, not carrying SSH) and binaries,
        and record kernel, versions, offloads, netem and the clock offset to the controller."""
        binaries = binaries if binaries is not None else self.spec.binaries
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            futures = {n: pool.submit(self._doctor_host, n, binaries.get(n, [])) for n in self.nodes}
            facts = {}
            for n in self.nodes:                 # the first node's error wins, in lab order
                facts[n] = futures[n].result()
        return facts

    def _doctor_host(self, node: str, want: list[str]) -> dict[str, Any]:
        ssh = self.ssh
        ifaces = self.inv.lab_ifaces(node)
        bin_dir = self.inv.setting(node, "bin_dir") or ""
        want = list(dict.fromkeys(want + lab_tools(node)))
        # a stack run by the controller's Python runs on the host's (the inventory's `python`)
        pythons = {b: pk for b in want if (pk := self.bins.python_packages(b)) is not None}
        want = [b for b in want if b not in pythons]
        # looked up, not required: the link driver is chosen from what the routers have
        optional = [b for b in (["linkem"] if node.startswith("router") else ["ping", "iperf3"]) if b not in want]
        script = "\n".join([
            "echo \"ssh_connection=$SSH_CONNECTION\"",
            "echo \"kernel=$(uname -r)\"", "echo \"uid=$(id -u)\"",
            "echo \"cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control)\"",
            "echo \"cc_available=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control)\"",
            "echo \"ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)\"",
            "echo \"route=$(ip -o route get \"${SSH_CONNECTION%% *}\" 2>&1 | head -n1)\"",
            "echo \"links=$(ip -j addr show 2>/dev/null | tr -d '\\n')\"",
            "echo \"systemd=$([ -d /run/systemd/system ] && echo yes || echo no)\"",
            # quicbench's own binaries from bin_dir (else where --provision puts them), else PATH;
            # a Debian package's from PATH (bin_dir's caddy is quicbench's, never Debian's 2.6)
            *[(f"p={q(bin_dir + '/' + b)}; w={q(self.provision_dir(node) + '/' + b)}; "
               f"if [ -n {q(bin_dir)} ] && [ -x \"$p\" ]; then echo \"bin.{b}=$p\"; "
               f"elif [ -x \"$w\" ]; then echo \"bin.{b}=$w\"; else " if self.bins.own(b) else "")
              + f"echo \"bin.{b}=$(command -v {q(b)} || PATH=$PATH:/usr/sbin:/sbin command -v {q(b)})\""
              + ("; fi" if self.bins.own(b) else "")
              for b in want + optional],
            *[f"echo \"offload.{i}=$(ethtool -k {q(i)} 2>/dev/null | grep -E '^[[:space:]]*(tcp-segmentation-offload|"
              f"generic-segmentation-offload|generic-receive-offload|tx-udp-segmentation):' | tr -d ' \\t' | tr '\\n' ',')\""
              for i in ifaces.values()],
            f"echo \"python=$({q(self.inv.setting(node, 'python') or 'python3')} --version 2>&1 | head -n1)\"",
            "echo \"time=$(date +%s.%N)\"",
        ])
        t0 = time.time()
        out = ssh.sh(node, script).stdout
        t1 = time.time()
        kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        facts: dict[str, Any] = {
            "host": self.inv.host(node).host, "user": self.inv.setting(node, "user"), "kernel": kv.get("kernel"),
            "root": kv.get("uid") == "0", "tcp_cc": kv.get("cc"), "ip_forward": kv.get("ip_forward"),
            "systemd": kv.get("systemd") == "yes", "ssh_route": kv.get("route"), "python": kv.get("python"),
            "clock_offset_s": float(kv["time"]) - (t0 + t1) / 2 if kv.get("time") else None,
            "clock_offset_uncertainty_s": (t1 - t0) / 2,
            "binaries": {b[4:]: v for b, v in kv.items() if b.startswith("bin.") and v},
            "offloads": {k[8:]: v.strip(",") for k, v in kv.items() if k.startswith("offload.")},
        }
        try:
            links = json.loads(kv.get("links") or "[]")
        except json.JSONDecodeError:
            links = []
        by_name = {l["ifname"]: l for l in links}
        ssh_dev = None
        m = re.search(r"\bdev (\S+)", kv.get("route", ""))
        if m:
            ssh_dev = m.group(1)
        facts["ssh_iface"] = ssh_dev
        for fld, ifname in ifaces.items():
            if ifname not in by_name:
                raise QuicbenchError(f"{ssh.field(node, fld)}: no interface '{ifname}' on {ssh.where(node)}; "
                                     f"it has: {', '.join(sorted(by_name)) or 'none'}")
            if ifname == ssh_dev:
                raise QuicbenchError(
                    f"{ssh.field(node, fld)}: '{ifname}' carries the SSH session from the controller "
                    f"({kv.get('ssh_connection', '').split(' ')[0]}) on {ssh.where(node)}: quicbench never "
                    f"shapes, readdresses or takes down that interface; name the lab interface instead")
        facts["macs"] = {i: by_name[i].get("address", "") for i in ifaces.values()}
        facts["addresses"] = {i: [f"{a['local']}/{a['prefixlen']}" for a in by_name[i].get("addr_info", [])
                                  if a.get("family") == "inet"] for i in ifaces.values()}
        facts["up"] = {i: "UP" in by_name[i].get("flags", []) for i in ifaces.values()}
        for b in want:
            if b not in facts["binaries"]:
                fld = "bin_dir" if self.bins.own(b) else "host"
                where = (f"not in bin_dir {bin_dir} nor on PATH" if bin_dir else "not on PATH")
                raise QuicbenchError(f"{ssh.field(node, fld)}: no '{b}' on {ssh.where(node)} ({where}); "
                                     f"install it (docs/hosts.md) or run with --provision")
        if node in ("client", "server") and self.spec.tcp_cc not in (kv.get("cc_available") or "").split():
            raise QuicbenchError(f"{ssh.field(node, 'host')}: TCP congestion control '{self.spec.tcp_cc}' is not "
                                 f"available on {ssh.where(node)}: it has {kv.get('cc_available')}")
        if node.startswith("router"):
            facts["netem"] = self.probe_netem(node)
        facts["versions"] = self.versions(node, facts["binaries"])
        facts["digests"] = self.digests(node, facts["binaries"])
        for b, path in facts["binaries"].items():
            here = self.bins.own_version(b)
            if here is not None and b in facts["versions"] and facts["versions"][b] != here:
                raise QuicbenchError(f"{ssh.field(node, 'bin_dir')}: '{b}' on {ssh.where(node)} ({path}) is not this "
                                     f"controller's build: it says {facts['versions'][b]!r}, this one "
                                     f"{here!r} (rows would name a stack the host did not run); put the same "
                                     f"build in bin_dir or run with --provision")
            here = self.bins.own_digest(b)
            if here is not None and facts["digests"].get(b) != here:
                raise QuicbenchError(f"{ssh.field(node, 'bin_dir')}: '{b}' on {ssh.where(node)} ({path}) is not this "
                                     f"controller's build (its sha256 differs); put the same build in bin_dir or "
                                     f"run with --provision")
        packages = {b: pkg for b in want if (pkg := self.bins.driver_package(b))}
        facts["packages"] = self.package_versions(node, sorted(set(packages.values())))
        for b, pkg in packages.items():
            problem = package_problem(pkg, local_package_version(pkg), facts["packages"].get(pkg))
            if problem:
                raise QuicbenchError(f"{ssh.field(node, 'host')}: '{b}' on {ssh.where(node)}: {problem}")
        for b, pkgs in pythons.items():
            facts.setdefault("python_packages", {}).update(self.check_python(node, b, pkgs))
        return facts

    def python(self, node: str) -> str:
        """The host's Python for stacks quicbench runs with its own interpreter (aioquic)."""
        return self.inv.setting(node, "python") or "python3"

    def check_python(self, node: str, name: str, packages: dict[str, str]) -> dict[str, str]:
        """The host's Python runs quicbench's module for the stack (name) with the controller's
        versions of its packages, or the run is refused naming the host's `python` and the fix."""
        module = self.bins.facts.get(name, {}).get("module", "quicbench")
        probe = (f"import sys, importlib, importlib.metadata as m; importlib.import_module({module!r}); "
                 f"print(' '.join(p + '=' + m.version(p) for p in sys.argv[1:]))")
        py = self.python(node)
        cp = self.ssh.sh(node, f"{q(py)} -c {q(probe)} {' '.join(q(p) for p in packages)} 2>&1 | tail -n1",
                         check=False)
        problem, there = python_problem(cp.stdout.strip(), packages)
        if problem:
            venv = f"{self.inv.setting(node, 'workdir').rstrip('/')}/venv"
            pins = " ".join(q(f"{p}=={v}") for p, v in packages.items() if p != "quicbench")
            raise QuicbenchError(
                f"{self.ssh.field(node, 'python')}: {self.ssh.where(node)}: its Python ({py}) cannot run {module} "
                f"as this controller does: {problem}; make one there (python3 -m venv {venv} && {venv}/bin/pip "
                f"install {pins} <this quicbench checkout>) and set {node}.python = \"{venv}/bin/python\" "
                f"(--provision installs no Python packages)")
        return there

    def digests(self, node: str, bins: dict[str, str]) -> dict[str, str]:
        """sha256 of quicbench's own files that print no version (the netty jar) on the host."""
        want = {b: p for b, p in bins.items() if self.bins.own(b) and self.bins.version_cmd(b) is None}
        if not want:
            return {}
        out = self.ssh.sh(node, "\n".join(f"echo \"d.{b}=$(sha256sum {q(p)} 2>/dev/null | cut -d' ' -f1)\""
                                          for b, p in want.items()), check=False).stdout
        return {k[2:]: v for k, v in (l.split("=", 1) for l in out.splitlines() if l.startswith("d.")) if v}

    def package_versions(self, node: str, packages: list[str]) -> dict[str, str]:
        """Debian package -> the version installed on the host (missing: not installed, or no dpkg)."""
        if not packages:
            return {}
        out = self.ssh.sh(node, "\n".join(f"echo \"k.{p}=$(dpkg-query -W -f '${{Status}} ${{Version}}' {q(p)} "
                                          f"2>/dev/null)\"" for p in packages), check=False).stdout
        found = {}
        for line in out.splitlines():
            if line.startswith("k.") and "=" in line:
                pkg, _, st = line[2:].partition("=")
                if (version := installed_version(st)) is not None:
                    found[pkg] = version
        return found

    def probe_netem(self, node: str) -> bool:
        """netem in the host's kernel, tried in a throwaway network namespace (nothing of the
        host's own interfaces is touched)."""
        sudo = " ".join(self.ssh.sudo(node))
        cp = self.ssh.sh(node, f"{sudo} unshare -n sh -c 'ip link add p0 type veth peer name p1 && ip link set p0 up "
                               f"&& tc qdisc add dev p0 root netem delay 1ms' >/dev/null 2>&1 && echo yes || echo no",
                         check=False)
        return cp.stdout.strip() == "yes"

    def versions(self, node: str, bins: dict[str, str]) -> dict[str, str]:
        cmds = {b: c for b in bins if (c := self.bins.version_cmd(b)) is not None}
        parts = [f"echo \"v.{b}=$({q(p)} {cmds[b]} 2>&1 | head -n1)\"" for b, p in bins.items() if b in cmds]
        if not parts:
            return {}
        out = self.ssh.sh(node, "\n".join(parts), check=False).stdout
        return {k[2:]: v for k, v in (l.split("=", 1) for l in out.splitlines() if l.startswith("v."))}

    # -- --provision -----------------------------------------------------------------------------
    def provision(self, binaries: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Install what the hosts miss: Debian packages with apt-get (at the controller's version
        where a stack's package is there in another), quicbench's own binaries copied from this
        controller. Returns what was installed per node."""
        from quicbench.paths import find_binary
        ssh = self.ssh
        binaries = binaries if binaries is not None else self.spec.binaries
        done: dict[str, list[str]] = {}
        for node in self.nodes:
            want = list(binaries.get(node, [])) + (["tc", "ip", "ethtool", "linkem"] if node.startswith("router")
                                                   else ["ip", "ethtool", "ping", "iperf3"])
            if node == "client":
                want.append("qb-load")
            want = [b for b in dict.fromkeys(want) if self.bins.python_packages(b) is None]
            bin_dir = self.inv.setting(node, "bin_dir") or ""
            probe = "; ".join((f"[ -x {q(bin_dir + '/' + b)} ] || [ -x {q(self.provision_dir(node) + '/' + b)} ] || "
                               if self.bins.own(b) else "")
                              + f"PATH=$PATH:/usr/sbin:/sbin command -v {q(b)} >/dev/null || echo {q(b)}" for b in want)
            missing = ssh.sh(node, probe).stdout.split()
            # quicbench's own binaries that the host has in another build are replaced too
            for b in want:
                if b in missing or not self.bins.own(b):
                    continue
                found = (f"p={q(bin_dir + '/' + b)}; [ -x \"$p\" ] || p={q(self.provision_dir(node) + '/' + b)}; "
                         f"[ -x \"$p\" ] || p=$(command -v {q(b)}); ")
                if (here := self.bins.own_version(b)) is not None:
                    there = ssh.sh(node, found + f"\"$p\" {self.bins.version_cmd(b)} 2>&1 | head -n1", check=False)
                elif (here := self.bins.own_digest(b)) is not None:
                    there = ssh.sh(node, found + "sha256sum \"$p\" | cut -d' ' -f1", check=False)
                else:
                    continue
                if there.stdout.rstrip("\n") != here:
                    missing.append(b)
            # a stack's Debian package in another version than the controller's: the controller's
            packages = {b: pkg for b in want if b not in missing and (pkg := self.bins.driver_package(b))}
            there = self.package_versions(node, sorted(set(packages.values())))
            pins = {pkg: here for pkg in packages.values()
                    if package_problem(pkg, here := local_package_version(pkg), there.get(pkg))}
            pkgs = sorted({p for b in missing if (p := self.bins.package(b))} | set(pins))
            if pkgs:
                self.apt_install(node, {p: pins.get(p) for p in pkgs},
                                 {p: r for b in [*missing, *packages] if (p := self.bins.package(b))
                                  and (r := self.bins.release(b))})
            for b in (b for b in missing if self.bins.own(b)):
                ssh.install(node, f"{self.provision_dir(node)}/{b}",
                            Path(find_binary(b, "run 'make setup-all' on the controller")).read_bytes())
            done[node] = pkgs + [b for b in missing if self.bins.own(b)]
        return done

    def apt_install(self, node: str, packages: dict[str, str | None], releases: dict[str, str]) -> None:
        """apt-get install on the host: packages (-> the version to install, None: the newest),
        each from its Debian release where it names one (bookworm-backports: its apt source added
        as scripts/install-deps.sh adds it, services kept from starting as there)."""
        sudo = " ".join(self.ssh.sudo(node))
        script = [f": apt-get install {' '.join(sorted(packages))}", "set -e", "export DEBIAN_FRONTEND=noninteractive",
                  # the packages' services (nginx, apache2) must not start: quicbench starts its own
                  f"if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\\nexit 101\\n' | {sudo} tee "
                  f"/usr/sbin/policy-rc.d >/dev/null && {sudo} chmod +x /usr/sbin/policy-rc.d && "
                  f"trap '{sudo} rm -f /usr/sbin/policy-rc.d' EXIT; fi"]
        for release in sorted(set(releases.values())):
            src = f"/etc/apt/sources.list.d/{release}.sources"
            body = (f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {release}\nComponents: main\n"
                    f"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
            script.append(f"grep -rqs {q(release)} /etc/apt/sources.list /etc/apt/sources.list.d/ || "
                          f"printf %s {q(body)} | {sudo} tee {q(src)} >/dev/null")
        script.append(f"{sudo} apt-get update -qq")
        for release in [None, *sorted(set(releases.values()))]:
            group = [p + (f"={v}" if v else "") for p, v in sorted(packages.items()) if releases.get(p) == release]
            if group:
                script.append(f"{sudo} apt-get install -y -qq --no-install-recommends "
                              f"{'-t ' + q(release) + ' ' if release else ''}{' '.join(q(g) for g in group)}")
        self.ssh.sh(node, "\n".join(script), timeout=900)


# One reading on a host: "group RUN_NS WAIT_NS CHILD_TICKS CLK_TCK" for the process group whose
# id the file PGFILE holds (its live members' threads' schedstat; the leader's reaped children's
# utime+stime), then "machine BUSY TOTAL CPUS" from /proc/stat (busy: all but idle and iowait),
# then "softirq WAIT_NS": the run-queue wait of the host's softirq threads (ksoftirqd/N).
# POSIX sh and awk: no Python needed on the host.
CPU_SCRIPT = r"""
f=__PGFILE__
if [ -n "$f" ] && pg=$(cat "$f" 2>/dev/null) && [ -n "$pg" ]; then
  pids=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v pg="$pg" '{p=$1; s=$0; sub(/^.*\) /, "", s); split(s, f, " "); if (f[1] != "Z" && f[3] == pg) print p}')
  sched=$(for p in $pids; do cat /proc/$p/task/*/schedstat 2>/dev/null; done | awk '{r+=$1; w+=$2} END {printf "%.0f %.0f", r, w}')
  kids=$(awk '{s=$0; sub(/^.*\) /, "", s); split(s, f, " "); print f[14]+f[15]}' /proc/$pg/stat 2>/dev/null)
  [ -n "$pids" ] && echo "group $sched ${kids:-0} $(getconf CLK_TCK)"
  [ -n "$pids" ] && echo "servercpus $(for p in $pids; do cat /proc/$p/task/*/stat 2>/dev/null; done | awk '{s=$0; sub(/^.*\) /, "", s); split(s, f, " "); print f[37]}' | sort -un | tr '\n' ' ')"
fi
awk '/^cpu[0-9]/ {printf "percpu %s %s\n", $8, $9}' /proc/stat
awk '/^cpu / {b=$2+$3+$4+$7+$8+$9; t=b+$5+$6} /^cpu[0-9]/ {n++} END {printf "machine %.0f %.0f %d\n", b, t, n}' /proc/stat
for p in /proc/[0-9]*; do read -r c < $p/comm || continue; case $c in ksoftirqd/*) cat $p/schedstat;; esac; done 2>/dev/null | awk '{w+=$2; n++} END {if (n) printf "softirq %.0f\n", w}'
"""


def cpu_script(pgfile: str | None) -> str:
    return CPU_SCRIPT.replace("__PGFILE__", shlex.quote(pgfile or ""))


def parse_cpu_script(out: str) -> tuple[tuple[float, float] | None, tuple[int, int, int] | None, float | None,
                                        list[tuple[int, int]], list[int]]:
    """(server group (run s, wait s), machine (busy, total, CPUs), softirq threads' wait s,
    per CPU (softirq ticks, steal ticks), the CPUs the server's processes last ran on) from
    cpu_script's output."""
    group = machine = softirq = None
    per_cpu: list[tuple[int, int]] = []
    server_cpus: list[int] = []
    for line in out.splitlines():
        f = line.split()
        try:
            if f[:1] == ["percpu"] and len(f) == 3:
                per_cpu.append((int(f[1]), int(f[2])))
            elif f[:1] == ["servercpus"]:
                server_cpus = sorted({int(x) for x in f[1:]})
            elif f[:1] == ["group"] and len(f) == 5:
                group = (int(f[1]) / 1e9 + int(f[3]) / int(f[4]), int(f[2]) / 1e9)
            elif f[:1] == ["machine"] and len(f) == 4 and int(f[3]) > 0:
                machine = (int(f[1]), int(f[2]), int(f[3]))
            elif f[:1] == ["softirq"] and len(f) == 2:
                softirq = int(f[1]) / 1e9
        except (ValueError, ZeroDivisionError):
            continue
    return group, machine, softirq, per_cpu, server_cpus
