"""Lab backend `ssh`: client, router(s) and server are real hosts reached over SSH.

The inventory (lab/inventory.py, docs/hosts.md) names the hosts, their lab interfaces and
addresses. Everything that runs ``lab.cmd(node, argv)`` works unchanged: ``cmd`` returns a
local command that runs argv on the host. Three rooms:

* the transport (ssh_transport.py, with ssh_exec.py): connections, remote commands as process
  groups of their own, the files they read and write mirrored under
  ``<workdir>/<lab>/<node>/root/<local path>``, linkem's control socket forwarded;
* the hosts (ssh_hosts.py): the doctor (what each host has, checked before anything changes),
  --provision (apt packages, quicbench's own binaries copied from this controller), and the CPU
  readings a trial takes on them;
* the lab (here): what the lab changes on each host and how it is undone, the link driver the
  routers allow, the nodes' addresses and interfaces.

Host state. Every change (lab address, host route, offloads, ip_forward, congestion control,
root qdisc) is preceded by its undo line in ``undo.sh`` on the host. Teardown, and a dead-man
watchdog on every host (ended stdin or no heartbeat for ``deadman_s``: the controller is
gone), kill the groups, run the undo lines in reverse and remove the workdir.

Safety. An interface that carries the SSH session (``ip route get <controller>`` on the host)
is never a lab interface: such an inventory is refused before anything changes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from quicbench.errors import QuicbenchError
from quicbench.lab.base import CpuCounters, Lab, LabSpec, list_lab_states, owner_alive, owner_token, state_lock
from quicbench.lab.inventory import Inventory, load_inventory
from quicbench.lab.ssh_hosts import SshHosts, cpu_script, measurement_problem, parse_cpu_script
from quicbench.lab.ssh_transport import SshTransport, q
from quicbench.link import LINKS, LinkEmulator, RouterPorts, resolve_link
from quicbench.link.netem import unsupported as netem_unsupported
from quicbench.model.impairments import NETEM_SSH
from quicbench.model.conditions import Condition
from quicbench.paths import cache_dir
from quicbench.proc import process_alive, wait_ended


class SshLab(Lab):
    name = "ssh"
    remote = True
    concurrent_labs = "its labs are the inventory's one set of hosts"
    workload_kinds = ("objects",)

    def __init__(self, spec: LabSpec):
        super().__init__(spec)
        if not spec.inventory:
            raise QuicbenchError("--inventory: the ssh lab backend needs an inventory file (see docs/hosts.md)")
        self._inv: Inventory | None = None
        self._ssh: SshTransport | None = None
        self._hosts: SshHosts | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if not shutil.which("ssh"):
            return False, "no OpenSSH client: apt-get install openssh-client"
        return True, "real hosts over SSH (inventory)"

    # -- the inventory, the transport, the hosts ----------------------------------------
    @property
    def inv(self) -> Inventory:
        if self._inv is None:
            # a lab rebuilt from its state keeps the inventory it was made with
            self._inv = (Inventory.model_validate(self.state["inventory"]) if self.state.get("inventory")
                         else load_inventory(self.spec.inventory))
        return self._inv

    @property
    def ssh(self) -> SshTransport:
        if self._ssh is None:
            self._ssh = SshTransport(self.inv, self.spec.inventory, self.name, self.roots)
        return self._ssh

    @property
    def hosts(self) -> SshHosts:
        if self._hosts is None:
            self._hosts = SshHosts(self.ssh, self.spec, self.nodes)
        return self._hosts

    def where(self, node: str) -> str:
        return self.ssh.where(node)

    def roots(self) -> list[str]:
        """Local directories mirrored on the hosts (longest first)."""
        rs = {str(self.run_dir), str(cache_dir())}
        if self.spec.run_dir:
            rs.add(str(Path(self.spec.run_dir).resolve()))
        return sorted(rs, key=len, reverse=True)

    def doctor(self, binaries: dict[str, list[str]] | None = None) -> dict[str, dict[str, Any]]:
        return self.hosts.doctor(binaries)

    def provision(self, binaries: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        return self.hosts.provision(binaries)

    # -- commands -------------------------------------------------------------------------
    def cmd(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        self.check_node(node)
        argv = list(argv)
        name = os.path.basename(argv[0])
        if argv[0] == sys.executable:
            # the controller's interpreter (aioquic, a command endpoint's {python}): the host's Python
            name, argv[0] = "python3", self.hosts.python(node)
        else:
            argv[0] = self._binary(node, argv[0])
        sudo = self.ssh.sudo(node) if self.hosts.bins.needs_root(name) else []
        return self.ssh.command(node, argv, env, sudo)

    def collect(self, node: str, local_dir: Path, settle_s: float = 1.0) -> None:
        """Move the files the node's process has closed in the mirror of local_dir back into
        local_dir (SshTransport.pull_closed)."""
        self.ssh.pull_closed(node, local_dir, settle_s)

    def _binary(self, node: str, argv0: str) -> str:
        name = os.path.basename(argv0)
        found = (self.state.get("hosts", {}).get(node, {}).get("binaries") or {}).get(name)
        if found:
            return found
        bin_dir = self.inv.setting(node, "bin_dir")
        if bin_dir and self.hosts.bins.own(name):
            return f"{bin_dir.rstrip('/')}/{name}"
        return name

    def forward_socket(self, node: str, local: Path) -> None:
        """Make a unix socket of a lab process on the host reachable at its local path."""
        self.ssh.forward_socket(node, local)

    # -- nodes ---------------------------------------------------------------------------
    def interface(self, node: str, towards: str) -> str:
        self.check_node(node)
        h = self.inv.host(node)
        if node in ("client", "server"):
            return h.iface            # type: ignore[union-attr]
        return h.if_client if towards == "client" else h.if_server   # type: ignore[union-attr]

    def address(self, node: str) -> str:
        self.check_node(node)
        h = self.inv.host(node)
        return (h.address if node in ("client", "server") else h.ip_client).split("/")[0]  # type: ignore[union-attr]

    def routers(self) -> list[RouterPorts]:
        out = []
        nodes = self.nodes
        macs = self.state.get("macs", {})
        for idx, node in enumerate(nodes):
            if not node.startswith("router"):
                continue
            left, right = nodes[idx - 1], nodes[idx + 1]
            h = self.inv.host(node)
            out.append(RouterPorts(
                node=node, netns=f"{self.inv.setting(node, 'user')}@{h.host}",
                if_client=h.if_client, if_server=h.if_server,          # type: ignore[union-attr]
                peer_mac_client=macs.get(left, {}).get(self.interface(left, "server"), ""),
                peer_mac_server=macs.get(right, {}).get(self.interface(right, "client"), ""),
                ip_client=h.ip_client.split("/")[0], ip_server=h.ip_server.split("/")[0]))  # type: ignore[union-attr]
        return out

    def endpoint_cpu(self, server_pid: int | None) -> CpuCounters:
        """Read on the hosts: the server's remote process group (by the group id its wrapper
        recorded) and the client's and server's /proc/stat. A host that does not answer within
        5 s leaves its counters out (the row's CPU columns stay empty), never fails the trial."""
        pgfile = _pgfile(server_pid) if server_pid else None
        readers: dict[str, str] = {}     # host -> the node that reads it (the server's first)
        for node in ("server", "client"):
            readers.setdefault(self.inv.host(node).host, node)

        def read(node: str) -> tuple[Any, ...]:
            try:
                cp = self.ssh.sh(node, cpu_script(pgfile if node == "server" else None), check=False, timeout=5)
            except QuicbenchError:
                return None, None, None, [], []
            return parse_cpu_script(cp.stdout)

        with ThreadPoolExecutor(len(readers)) as pool:
            readings = dict(zip(readers, pool.map(read, readers.values())))
        server = readings[self.inv.host("server").host]
        return CpuCounters(server[0], {h: r[1] for h, r in readings.items() if r[1] is not None},
                           {h: r[2] for h, r in readings.items() if r[2] is not None},
                           {h: r[3] for h, r in readings.items() if r[3]}, server[4])

    def row_hosts(self) -> dict[str, Any]:
        return {"client_host": self.inv.host("client").host, "server_host": self.inv.host("server").host,
                "router_hosts": ",".join(self.inv.host(n).host for n in self.nodes if n.startswith("router"))}

    def host_facts(self) -> dict[str, Any] | None:
        return self.state.get("hosts")

    # -- link ------------------------------------------------------------------------------
    def router_abilities(self, hosts: dict[str, dict[str, Any]]) -> dict[str, RouterAbility]:
        """What each router host can shape with, from its doctor facts."""
        return {n: RouterAbility(self.where(n), self.ssh.field(n, "bin_dir"), bool(hosts.get(n, {}).get("netem")),
                                 "linkem" in hosts.get(n, {}).get("binaries", {}))
                for n in self.nodes if n.startswith("router")}

    def link_class(self, conditions: list[Condition]) -> type[LinkEmulator]:
        """netem where every router's kernel has it, else linkem (where the routers have it)."""
        name, self.link_passed_over = choose_link(self.spec.link, conditions, self.spec.offload,
                                                  self.router_abilities(self.state.get("hosts", {})))
        if name not in LINKS:
            return resolve_link(name)      # raises the unknown-name error
        return LINKS.get(name)

    # -- lifecycle --------------------------------------------------------------------------
    def _claim(self) -> None:
        with state_lock():
            for st in list_lab_states():
                if st["name"] == self.name:
                    if st.get("spec", {}).get("persistent") or owner_alive(st.get("owner")):
                        raise QuicbenchError(f"lab '{self.name}' already exists: pick another --name or run "
                                             f"'quicbench lab down {self.name}'")
                    type(self).from_state(st).down()
            self.state = {"owner": owner_token(), "status": "creating", "created": time.time(),
                          "inventory": json.loads(self.inv.model_dump_json()),
                          "namespaces": {n: f"{self.inv.setting(n, 'user')}@{self.inv.host(n).host}"
                                         for n in self.nodes},
                          "addresses": {n: self.inv.lab_addresses(n) for n in self.nodes}}
            self.save_state()

    def _create(self) -> None:
        # 1. check every host before anything changes on any of them
        facts = self.doctor()
        self.state["hosts"] = facts
        self.state["macs"] = {n: f["macs"] for n, f in facts.items()}
        self.save_state()
        # 2. the workdir, the cleanup script and the dead-man watchdogs, before the first change
        for n in self.nodes:
            d = self.ssh.labdir(n)
            self.ssh.sh(n, f"mkdir -p {q(d)}/pg {q(d)}/home && : > {q(d)}/undo.sh && cat > {q(d)}/cleanup.sh",
                    input=self._cleanup_script(n).encode())
        self._start_keeper()
        # 3. the lab's network on each host, every change preceded by its undo line
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for f in [pool.submit(self._configure, n, facts[n]) for n in self.nodes]:
                f.result()
        self.state["tcp_cc"] = self.spec.tcp_cc
        self.save_state()

    def _configure(self, node: str, facts: dict[str, Any]) -> None:
        steps: list[tuple[str, str]] = []     # (undo, do)
        sudo = " ".join(self.ssh.sudo(node))
        for ifname, addr in self.inv.lab_addresses(node).items():
            if not facts["up"].get(ifname):
                steps.append((f"ip link set {q(ifname)} down", f"ip link set {q(ifname)} up"))
            if addr not in facts["addresses"].get(ifname, []):
                steps.append((f"ip addr del {q(addr)} dev {q(ifname)}", f"ip addr add {q(addr)} dev {q(ifname)}"))
            # offloads as the spec says (off: every frame a wire packet), the host's values restored after
            old = dict(kv.split(":", 1) for kv in facts["offloads"].get(ifname, "").split(",") if ":" in kv)
            names = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                     "generic-receive-offload": "gro", "tx-udp-segmentation": "tx-udp-segmentation"}
            restore = " ".join(f"{names[k]} {v.split('[')[0]}" for k, v in old.items() if k in names)
            want = "on" if self.spec.offload else "off"
            if restore:
                steps.append((f"ethtool -K {q(ifname)} {restore}",
                              f"ethtool -K {q(ifname)} tso {want} gso {want} gro {want} tx-udp-segmentation {want} "
                              f"2>/dev/null || ethtool -K {q(ifname)} tso {want} gso {want} gro {want} 2>/dev/null || "
                              f"ethtool -K {q(ifname)} gso {want} gro {want}"))
        nodes = self.nodes
        idx = nodes.index(node)
        if node == "client":
            via = self.address("router")
            steps.append((f"ip route del {q(self.address('server') + '/32')} via {q(via)}",
                          f"ip route replace {q(self.address('server') + '/32')} via {q(via)} "
                          f"dev {q(self.interface(node, 'server'))}{self.initcwnd_option()}"))
        elif node == "server":
            via = self.inv.host(nodes[idx - 1]).ip_server.split("/")[0]      # type: ignore[union-attr]
            steps.append((f"ip route del {q(self.address('client') + '/32')} via {q(via)}",
                          f"ip route replace {q(self.address('client') + '/32')} via {q(via)} "
                          f"dev {q(self.interface(node, 'client'))}{self.initcwnd_option()}"))
        else:
            steps.append((f"sysctl -q -w {q('net.ipv4.ip_forward=' + str(facts['ip_forward']))}", ":"))
            for dev in (self.interface(node, "client"), self.interface(node, "server")):
                # the emulation's qdisc goes with the lab (the interface's default comes back)
                steps.append((f"tc qdisc del dev {q(dev)} root", ":"))
            if self.spec.hops == 2:
                if node == "router":
                    via = self.inv.host("router2").ip_client.split("/")[0]       # type: ignore[union-attr]
                    steps.append((f"ip route del {q(self.address('server') + '/32')} via {q(via)}",
                                  f"ip route replace {q(self.address('server') + '/32')} via {q(via)}"))
                else:
                    via = self.inv.host("router").ip_server.split("/")[0]        # type: ignore[union-attr]
                    steps.append((f"ip route del {q(self.address('client') + '/32')} via {q(via)}",
                                  f"ip route replace {q(self.address('client') + '/32')} via {q(via)}"))
        if node in ("client", "server") and facts["tcp_cc"] != self.spec.tcp_cc:
            steps.append((f"sysctl -q -w {q('net.ipv4.tcp_congestion_control=' + str(facts['tcp_cc']))}",
                          f"sysctl -q -w {q('net.ipv4.tcp_congestion_control=' + self.spec.tcp_cc)}"))
        undo = f"{self.ssh.labdir(node)}/undo.sh"
        script = ["set -e"]
        for un, do in steps:
            script.append(f"echo {q(f'{sudo} {un}'.strip())} >> {q(undo)}")
            script.append(f"{sudo} sh -c {q(do)}" if sudo else do)
        self.ssh.sh(node, "\n".join(script))

    def _cleanup_script(self, node: str) -> str:
        """Kill every recorded process group, undo every change (newest first), remove the workdir."""
        d = self.ssh.labdir(node)
        sudo = " ".join(self.ssh.sudo(node))
        return "\n".join([
            f"D={q(d)}",
            "for s in TERM KILL; do",
            f"  for f in \"$D\"/pg/*; do [ -f \"$f\" ] && {sudo} kill -$s -\"$(cat \"$f\")\" 2>/dev/null; done",
            "  [ $s = TERM ] && ls \"$D\"/pg/* >/dev/null 2>&1 && sleep 1",
            "done",
            "[ -f \"$D/undo.sh\" ] && tac \"$D/undo.sh\" | while IFS= read -r l; do sh -c \"$l\" >/dev/null 2>&1; done",
            f"cd / && {sudo} rm -rf \"$D\"",
            f"rmdir {q(os.path.dirname(d))} {q(os.path.dirname(os.path.dirname(d)))} 2>/dev/null",
            "true",
        ])

    def _watchdog(self, node: str) -> str:
        """Run on the host for the lab's life: ends (and cleans the host up) when the keeper's
        heartbeats stop, its stdin ends, or the SSH connection is gone."""
        d = self.ssh.labdir(node)
        n = int(self.inv.setting(node, "deadman_s"))
        # a hangup or a TERM (sshd or logind ending the session) cleans up too, never skips it
        return (f"c() {{ [ -f {q(d)}/cleanup.sh ] && sh {q(d)}/cleanup.sh >/dev/null 2>&1; exit 0; }}; "
                f"trap c HUP TERM INT; "
                f"while l=$(timeout {n} head -n 1) && [ -n \"$l\" ]; do :; done; c")

    def _start_keeper(self) -> None:
        owner = None if self.spec.persistent else self.state["owner"]
        self.state["keeper"] = self.ssh.keeper({n: [*self.ssh.ssh_argv(n), self._watchdog(n)] for n in self.nodes},
                                               owner)
        self.save_state()

    def kill_node_processes(self, node: str) -> None:
        d = self.ssh.labdir(node)
        sudo = " ".join(self.ssh.sudo(node))
        self.ssh.sh(node, f"for f in {q(d)}/pg/*; do [ -f \"$f\" ] && {sudo} kill -KILL -\"$(cat \"$f\")\" "
                      f"2>/dev/null; done; true", check=False)

    def _destroy(self) -> None:
        def clean(node: str) -> None:
            try:
                d = self.ssh.labdir(node)
                self.ssh.sh(node, f"[ -f {q(d)}/cleanup.sh ] && sh {q(d)}/cleanup.sh; true", check=False, timeout=60)
            except QuicbenchError as e:
                # an unreachable host: its watchdog cleans it up when the heartbeats stop; say so
                sys.stderr.write(f"{self.where(node)} not cleaned up from here ({e}); its dead-man watchdog "
                                 f"removes the lab there within {self.inv.setting(node, 'deadman_s'):g} s of "
                                 f"losing the controller\n")
        if self.state.get("inventory") or self.spec.inventory:
            with ThreadPoolExecutor(len(self.nodes)) as pool:
                list(pool.map(clean, self.nodes))
        keeper = self.state.get("keeper")
        if keeper and process_alive(keeper):
            os.kill(keeper, signal.SIGTERM)
            wait_ended([keeper], 25)
        self.ssh.close(self.nodes)


def _pgfile(local_pid: int) -> str | None:
    """The remote group-id file of a command started through lab.cmd() (ssh_exec's spec, the
    last argument of the local wrapper process)."""
    try:
        args = Path(f"/proc/{local_pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        return json.loads(args[-1]).get("pgfile")
    except (OSError, ValueError, AttributeError, IndexError):
        return None


class RouterAbility(NamedTuple):
    where: str            # how errors name the host
    field: str            # its inventory field where linkem is looked up (bin_dir)
    netem: bool           # its kernel has sch_netem
    linkem: bool          # it has linkem


def choose_link(name: str, conditions: list[Condition], offload: bool,
                routers: dict[str, RouterAbility]) -> tuple[str, dict[str, str]]:
    """The link driver the router hosts can apply the conditions with, and why `auto` passed over
    the ones before it: netem where every router's kernel has it and it implements every
    condition (the SSH hosts' netem, model.impairments), else linkem where every router has it,
    else plain forwarding for conditions that impair nothing. A condition no router can apply is
    refused naming the router host, its inventory field and the condition's field."""
    no_netem = [r for r in routers.values() if not r.netem]
    no_linkem = [r for r in routers.values() if not r.linkem]
    unsupported = next(((c, w) for c in conditions if (w := netem_unsupported(c, NETEM_SSH))), None)
    if name == "auto":
        why_not_netem = (f"{no_netem[0].where} has no sch_netem in its kernel" if no_netem else
                         unsupported[1] if unsupported else ("offload = true" if offload else None))
        if why_not_netem is None:
            return "netem", {}
        passed = {"netem": why_not_netem}
        if not no_linkem:
            return "linkem", passed
        passed["linkem"] = f"no 'linkem' on {no_linkem[0].where}"
        plain = LINKS.get("plain")

        def netem_cannot(c: Condition) -> str:
            return "; ".join(w for w in (no_netem and f"{no_netem[0].where} has no sch_netem in its kernel",
                                         netem_unsupported(c, NETEM_SSH), offload and "offload = true") if w)
        # the first condition that impairs and netem cannot apply, else the first that impairs
        impairing = [c for c in conditions if plain.supports(c)]
        cond = next((c for c in impairing if netem_cannot(c)), impairing[0] if impairing else None)
        if cond is not None:
            r = no_linkem[0]
            raise QuicbenchError(f"{r.field}: condition '{cond.name}' cannot be applied on {r.where}: not "
                                 f"with netem ({netem_cannot(cond) or why_not_netem}) and it has no 'linkem'; put "
                                 f"linkem in bin_dir or run with --provision")
        return "plain", passed
    if name == "netem" and no_netem:
        raise QuicbenchError(f"link netem: {no_netem[0].where} has no sch_netem in its kernel: use link linkem")
    if name == "netem" and unsupported and routers:
        raise QuicbenchError(f"link netem: condition '{unsupported[0].name}' on "
                             f"{next(iter(routers.values())).where}: {unsupported[1]}")
    if name == "linkem" and no_linkem:
        raise QuicbenchError(f"{no_linkem[0].field}: link linkem: no 'linkem' on {no_linkem[0].where}")
    return name, {}


def check_hosts(spec: LabSpec, provision: bool = False, conditions: list[Condition] | None = None,
                measurements: tuple[bool, bool, dict[str, dict[str, bool]]] | None = None) -> dict[str, dict[str, Any]]:
    """The doctor of an ssh lab without creating it: every host reachable, its interfaces and
    binaries in place, a link driver the routers can apply the conditions with, and what the plan
    asks of the server host (measurements: qlog, verify_cc and what its h3 servers can, as
    ssh_hosts.measurement_problem takes them) in reach; else a QuicbenchError naming the host and
    the field. With provision, what the hosts miss is installed first."""
    lab = SshLab(spec)
    try:
        if measurements is not None:
            problem = measurement_problem(*measurements)
            if problem:
                raise QuicbenchError(f"{lab.ssh.field('server', 'host')}: {lab.where('server')}: {problem[1]}")
        if provision:
            lab.provision()
        facts = lab.doctor()
        choose_link(spec.link, conditions or [spec.condition], spec.offload, lab.router_abilities(facts))
        return facts
    finally:
        lab.ssh.close(lab.nodes)
