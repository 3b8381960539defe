"""Lab backend `ssh`: client, router(s) and server are real hosts reached over SSH.

The inventory (lab/inventory.py, docs/hosts.md) names the hosts, their lab interfaces and
addresses. Everything that runs ``lab.cmd(node, argv)`` works unchanged: ``cmd`` returns a
local command (ssh_exec.py) that runs argv on the host through the OpenSSH client, over one
multiplexed connection per host (ControlMaster), BatchMode, host keys checked against the
inventory's known_hosts or accepted on first use into a known_hosts file of the lab's own.

Files. quicbench hands local paths to remote commands (qb-load's --requests/--manifest/--ca,
server configs, linkem's config and control socket). Each local path under the lab's roots
(the lab's state directory, the run directory, the content cache) is mirrored on the host at
``<workdir>/<lab>/<node>/root/<local path>``: an argument that names an existing file or
directory is copied in before the command (text files that name other such paths are
rewritten and those copied too), one that names nothing yet is an output, copied back when
the command ends. linkem's control socket is forwarded over the SSH connection.

Processes. Every remote command runs as its own process group whose id is recorded under
``<workdir>/<lab>/<node>/pg``; SIGTERM of the local command kills the remote group, and
teardown kills every recorded group.

Host state. Every change (lab address, host route, offloads, ip_forward, congestion control,
root qdisc) is preceded by its undo line in ``undo.sh`` on the host. Teardown, and a dead-man
watchdog on every host (ended stdin or no heartbeat for ``deadman_s``: the controller is
gone), kill the groups, run the undo lines in reverse and remove the workdir.

Safety. An interface that carries the SSH session (``ip route get <controller>`` on the host)
is never a lab interface: such an inventory is refused before anything changes.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.lab.base import CpuCounters, Lab, LabSpec, list_lab_states, owner_alive, owner_token, state_lock
from quicbench.lab.inventory import Inventory, load_inventory
from quicbench.link import LINKS, LinkEmulator, RouterPorts, resolve_link
from quicbench.link.netem import unsupported as netem_unsupported
from quicbench.model.impairments import NETEM_SSH
from quicbench.model.conditions import Condition
from quicbench.paths import cache_dir
from quicbench.proc import process_alive, wait_ended

EXEC = str(Path(__file__).with_name("ssh_exec.py"))
# the lab's own tools; the endpoints' binaries are described by their drivers (LabSpec.binary_facts)
# binaries quicbench builds itself: looked up in the host's bin_dir first
OWN_TOOLS = ("linkem",)
# what needs root on a host (a non-root SSH user gets `sudo -n` for these): network
# configuration and raw sockets (linkem, tcpdump)
ROOT_TOOLS = {"ip", "tc", "sysctl", "ethtool", "linkem", "tcpdump"}
PUSH_TEXT_MAX = 1 << 20      # text files up to this size are scanned for paths to rewrite
# what --provision installs for a missing tool: the Debian package that has it
TOOL_PACKAGES = {"tc": "iproute2", "ip": "iproute2", "ss": "iproute2", "ethtool": "ethtool", "iperf3": "iperf3",
                 "ping": "iputils-ping", "tcpdump": "tcpdump"}
TOOL_VERSION_ARGS = {"linkem": "--version", "tc": "-V", "iperf3": "--version"}


def q(s: str) -> str:
    return shlex.quote(str(s))


class SshLab(Lab):
    name = "ssh"
    remote = True
    concurrent_labs = "its labs are the inventory's one set of hosts"

    def __init__(self, spec: LabSpec):
        super().__init__(spec)
        if not spec.inventory:
            raise QuicbenchError("--inventory: the ssh lab backend needs an inventory file (see docs/hosts.md)")
        self._inv: Inventory | None = None
        self._pushed: dict[tuple[str, str], Any] = {}
        self._masters: set[str] = set()

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if not shutil.which("ssh"):
            return False, "no OpenSSH client: apt-get install openssh-client"
        return True, "real hosts over SSH (inventory)"

    # -- the inventory ------------------------------------------------------------------
    @property
    def inv(self) -> Inventory:
        if self._inv is None:
            # a lab rebuilt from its state keeps the inventory it was made with
            self._inv = (Inventory.model_validate(self.state["inventory"]) if self.state.get("inventory")
                         else load_inventory(self.spec.inventory))
        return self._inv

    def where(self, node: str) -> str:
        """How errors name a host: node (user@host:port)."""
        i = self.inv
        return f"host {node} ({i.setting(node, 'user')}@{i.host(node).host}:{i.setting(node, 'port')})"

    def field(self, node: str, key: str) -> str:
        return f"inventory {self.spec.inventory}: {node}.{key}"

    # -- ssh ------------------------------------------------------------------------------
    @property
    def ssh_dir(self) -> Path:
        # short: ControlPath is a unix socket path (at most 107 bytes)
        return Path("/tmp") / f"qbssh-{self.name}"

    def ssh_argv(self, node: str, master: str = "no") -> list[str]:
        """ssh's argv up to the host (ssh takes an option's first value: master says which)."""
        i = self.inv
        argv = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                "-o", f"ControlPath={self.ssh_dir}/c-{node}", "-o", f"ControlMaster={master}",
                "-o", "ConnectTimeout=5", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-p", str(i.setting(node, "port")), "-l", i.setting(node, "user")]
        known = i.setting(node, "known_hosts")
        if known:
            argv += ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={Path(known).expanduser()}"]
        else:
            argv += ["-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={self.ssh_dir}/known_hosts"]
        key = i.setting(node, "key")
        if key:
            argv += ["-i", str(Path(key).expanduser()), "-o", "IdentitiesOnly=yes"]
        return argv + [i.host(node).host]

    def _master(self, node: str) -> None:
        """One SSH connection per host for the lab's life; every command rides on it."""
        if node in self._masters:
            return
        self.ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        check = subprocess.run([*self.ssh_argv(node)[:-1], "-O", "check", self.inv.host(node).host],
                               capture_output=True, timeout=10)
        if check.returncode != 0:
            log = self.ssh_dir / f"master-{node}.log"
            with open(log, "wb") as f:
                cp = subprocess.run([*self.ssh_argv(node, master="yes")[:-1], "-o", "ControlPersist=10",
                                     "-N", "-f", self.inv.host(node).host],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f, timeout=30)
            if cp.returncode != 0:
                raise QuicbenchError(self._ssh_error(node, log.read_text(errors="replace")))
        self._masters.add(node)

    def _ssh_error(self, node: str, stderr: str) -> str:
        lines = [l for l in stderr.strip().splitlines() if l.strip()]
        last = lines[-1] if lines else "no answer"
        if "Permission denied" in stderr:
            key = self.inv.setting(node, "key")
            return (f"{self.field(node, 'key')}: {self.where(node)} refused the login with "
                    f"{'key ' + key if key else 'the SSH agent'} ({last})")
        if "Host key verification failed" in stderr or "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr:
            return f"{self.field(node, 'known_hosts')}: {self.where(node)}: host key not accepted ({last})"
        return f"{self.field(node, 'host')}: cannot reach {self.where(node)} over SSH ({last})"

    def sh(self, node: str, script: str, *, check: bool = True, timeout: float = 60,
           input: bytes | None = None) -> subprocess.CompletedProcess[str]:
        """Run a shell script on the host (not as a lab process: for setup, checks and cleanup)."""
        self._master(node)
        try:
            cp = subprocess.run([*self.ssh_argv(node), script], capture_output=True, timeout=timeout,
                                input=input if input is not None else b"")
        except subprocess.TimeoutExpired:
            raise QuicbenchError(f"{self.field(node, 'host')}: {self.where(node)} did not answer within "
                                 f"{timeout:.0f} s") from None
        out = subprocess.CompletedProcess(cp.args, cp.returncode, cp.stdout.decode(errors="replace"),
                                          cp.stderr.decode(errors="replace"))
        if check and cp.returncode != 0:
            if cp.returncode == 255:
                raise QuicbenchError(self._ssh_error(node, out.stderr))
            tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or [f"exit code {cp.returncode}"]
            raise QuicbenchError(f"{self.where(node)}: {script.splitlines()[0][:80]}: {tail[0]}")
        return out

    # -- remote layout ----------------------------------------------------------------------
    def labdir(self, node: str) -> str:
        return f"{self.inv.setting(node, 'workdir').rstrip('/')}/{self.name}/{node}"

    def remote_root(self, node: str) -> str:
        return f"{self.labdir(node)}/root"

    def roots(self) -> list[str]:
        """Local directories mirrored on the hosts (longest first)."""
        rs = {str(self.run_dir), str(cache_dir())}
        if self.spec.run_dir:
            rs.add(str(Path(self.spec.run_dir).resolve()))
        return sorted(rs, key=len, reverse=True)

    def remote_path(self, node: str, local: str) -> str:
        """Where a local path is mirrored on the host; unix sockets go to a short directory
        (a socket path has at most 107 bytes)."""
        if local.endswith(".sock"):
            return f"{self.labdir(node)}/sock/{os.path.basename(local)}"
        return self.remote_root(node) + local

    def _local_path(self, arg: str) -> str | None:
        for r in self.roots():
            if arg == r or arg.startswith(r + "/"):
                return arg
        return None

    def sudo(self, node: str) -> list[str]:
        return [] if self.inv.setting(node, "user") == "root" else ["sudo", "-n"]

    # -- commands -------------------------------------------------------------------------
    def cmd(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        self.check_node(node)
        self._master(node)
        argv = list(argv)
        name = os.path.basename(argv[0])
        argv[0] = self._binary(node, argv[0])
        root = self.remote_root(node)
        pulls: list[str] = []
        mkdirs: set[str] = set()
        out = [argv[0]]
        for a in argv[1:]:
            key, sep, val = a.partition("=") if a.startswith("-") and "=" in a else ("", "", a)
            local = self._local_path(val)
            if local is None:
                out.append(a)
                continue
            if os.path.exists(local):
                self._push(node, Path(local))
            elif local.endswith(".sock"):
                mkdirs.add(os.path.dirname(self.remote_path(node, local)))
            else:
                pulls.append(local)
                mkdirs.add(os.path.dirname(root + local))
            out.append(key + sep + self.remote_path(node, local))
        extra = []
        for k, v in (env or {}).items():
            local = self._local_path(v)
            if local is not None:        # a directory the process writes into: made on the host
                v = self.remote_path(node, local)
                mkdirs.add(v)
            extra.append(f"{k}={v}")
        token = secrets.token_hex(6)
        d = self.labdir(node)
        pgfile = f"{d}/pg/{token}"
        home = f"{d}/home"
        env_argv = ["env", f"HOME={home}", f"XDG_CONFIG_HOME={home}/.config", f"XDG_DATA_HOME={home}/.local/share",
                    *extra]
        sudo = self.sudo(node) if self._needs_root(name) else []
        # nothing runs unrecorded: without its group id on file (the lab going down removed the
        # directory) the command does not start
        inner = f"echo $$ > {q(pgfile)} || exit 97; exec \"$@\""
        remote = (f"mkdir -p {q(d + '/pg')} {q(home)} {' '.join(q(m) for m in sorted(mkdirs))} && "
                  f"{shlex.join([*sudo, *env_argv, 'setsid', '-w', 'sh', '-c', inner, 'qb', *out])}; "
                  f"rc=$?; rm -f {q(pgfile)}; exit $rc")
        spec = {"ssh": self.ssh_argv(node), "remote": remote, "pgfile": pgfile, "pull": pulls,
                "remote_root": root, "sudo": sudo}
        return [sys.executable, EXEC, "run", json.dumps(spec)]

    def collect(self, node: str, local_dir: Path, settle_s: float = 1.0) -> None:
        """Move the files the node's process has closed in the mirror of local_dir back into
        local_dir: once no file there ends in ``.part`` (a stack's qlog still being written),
        settle_s at most, every regular file is sent as one tar stream and removed on the host."""
        remote = self.remote_path(node, str(local_dir))
        tenths = max(1, int(settle_s * 10))
        script = (f"cd {q(remote)} 2>/dev/null || exit 0; i=0; while ls *.part >/dev/null 2>&1 && "
                  f"[ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; set --; for f in *; do "
                  f"[ -f \"$f\" ] && case \"$f\" in *.part) ;; *) set -- \"$@\" \"$f\" ;; esac; done; "
                  f"[ $# -gt 0 ] && tar -cf - \"$@\" && rm -f \"$@\"; true")
        local_dir.mkdir(parents=True, exist_ok=True)
        get = subprocess.Popen([*self.ssh_argv(node), script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
        subprocess.run(["tar", "-C", str(local_dir), "-xf", "-", "--no-same-owner", "--warning=no-timestamp"],
                       stdin=get.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        get.wait(timeout=120)

    def _binary(self, node: str, argv0: str) -> str:
        name = os.path.basename(argv0)
        found = (self.state.get("hosts", {}).get(node, {}).get("binaries") or {}).get(name)
        if found:
            return found
        bin_dir = self.inv.setting(node, "bin_dir")
        if bin_dir and self._own(name):
            return f"{bin_dir.rstrip('/')}/{name}"
        return name

    def _push(self, node: str, path: Path) -> None:
        """Copy a local file or directory to its mirror on the host (once, while unchanged)."""
        st = path.stat()
        sig = (st.st_mtime_ns, st.st_size)
        if self._pushed.get((node, str(path))) == sig:
            return
        root = self.remote_root(node)
        if path.is_file() and st.st_size <= PUSH_TEXT_MAX:
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                text = None
            if text is not None and any(r in text for r in self.roots()):
                # a config that names local paths: those are mirrored too, and the copy names the mirrors
                pattern = "|".join(re.escape(r) for r in self.roots())
                for m in sorted(set(re.findall(rf"(?:{pattern})(?:/[^\s\"',;:<>]*)?", text)), key=len, reverse=True):
                    ref = m.rstrip("/.")
                    if ref == str(path):
                        continue
                    if os.path.exists(ref):
                        self._push(node, Path(ref))
                    else:
                        self.sh(node, f"mkdir -p {q(os.path.dirname(root + ref))}")
                for r in self.roots():
                    text = text.replace(r, root + r)
                dest = root + str(path)
                self.sh(node, f"mkdir -p {q(os.path.dirname(dest))} && cat > {q(dest)}", input=text.encode())
                self._pushed[(node, str(path))] = sig
                return
        rel = str(path).lstrip("/")
        tar = subprocess.Popen(["tar", "-C", "/", "-cf", "-", rel], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        cp = subprocess.run([*self.ssh_argv(node), f"mkdir -p {q(root)} && tar -C {q(root)} -xf -"],
                            stdin=tar.stdout, capture_output=True, timeout=600)
        tar.wait()
        if cp.returncode != 0 or tar.returncode != 0:
            raise QuicbenchError(f"{self.where(node)}: copying {path} to {root} failed: "
                                 f"{(cp.stderr or b'').decode(errors='replace').strip()[-200:]}")
        self._pushed[(node, str(path))] = sig

    def forward_socket(self, node: str, local: Path) -> None:
        """Make a unix socket of a lab process on the host reachable at its local path."""
        local.unlink(missing_ok=True)
        cp = subprocess.run([*self.ssh_argv(node)[:-1], "-O", "forward", "-L",
                             f"{local}:{self.remote_path(node, str(local))}", self.inv.host(node).host],
                            capture_output=True, text=True, timeout=10)
        if cp.returncode != 0:
            raise QuicbenchError(f"{self.where(node)}: cannot forward {local}: {cp.stderr.strip()}")

    # -- nodes ---------------------------------------------------------------------------
    def interface(self, node: str, towards: str) -> str:
        self.check_node(node)
        h = self.inv.host(node)
        if node in ("client", "server"):
            return h.iface            # type: ignore[union-attr]
        return h.if_client if towards == "client" else h.if_server   # type: ignore[union-attr]

    def _ifaces(self, node: str) -> dict[str, str]:
        """field -> interface name of node's lab interfaces."""
        h = self.inv.host(node)
        if node in ("client", "server"):
            return {"iface": h.iface}          # type: ignore[union-attr]
        return {"if_client": h.if_client, "if_server": h.if_server}   # type: ignore[union-attr]

    def _addrs(self, node: str) -> dict[str, str]:
        """interface -> lab address with prefix."""
        h = self.inv.host(node)
        if node in ("client", "server"):
            return {h.iface: h.address}        # type: ignore[union-attr]
        return {h.if_client: h.ip_client, h.if_server: h.ip_server}   # type: ignore[union-attr]

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
                cp = self.sh(node, cpu_script(pgfile if node == "server" else None), check=False, timeout=5)
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
        ifaces = self._ifaces(node)
        bin_dir = self.inv.setting(node, "bin_dir") or ""
        want = list(dict.fromkeys(want + (["tc", "ip", "ethtool"] if node.startswith("router") else ["ip", "ethtool"])
                                  + (["ss"] if node == "server" else [])))
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
            *[f"p={q(bin_dir + '/' + b)}; w={q(self.provision_dir(node) + '/' + b)}; "
              f"if [ -n {q(bin_dir)} ] && [ -x \"$p\" ]; then echo \"bin.{b}=$p\"; "
              f"elif [ -x \"$w\" ]; then echo \"bin.{b}=$w\"; "
              f"else echo \"bin.{b}=$(command -v {q(b)} || PATH=$PATH:/usr/sbin:/sbin command -v {q(b)})\"; fi"
              for b in want + optional],
            *[f"echo \"offload.{i}=$(ethtool -k {q(i)} 2>/dev/null | grep -E '^[[:space:]]*(tcp-segmentation-offload|"
              f"generic-segmentation-offload|generic-receive-offload|tx-udp-segmentation):' | tr -d ' \\t' | tr '\\n' ',')\""
              for i in ifaces.values()],
            f"echo \"python=$({q(self.inv.setting(node, 'python') or 'python3')} --version 2>&1 | head -n1)\"",
            "echo \"time=$(date +%s.%N)\"",
        ])
        t0 = time.time()
        out = self.sh(node, script).stdout
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
                raise QuicbenchError(f"{self.field(node, fld)}: no interface '{ifname}' on {self.where(node)}; "
                                     f"it has: {', '.join(sorted(by_name)) or 'none'}")
            if ifname == ssh_dev:
                raise QuicbenchError(
                    f"{self.field(node, fld)}: '{ifname}' carries the SSH session from the controller "
                    f"({kv.get('ssh_connection', '').split(' ')[0]}) on {self.where(node)}: quicbench never "
                    f"shapes, readdresses or takes down that interface; name the lab interface instead")
        facts["macs"] = {i: by_name[i].get("address", "") for i in ifaces.values()}
        facts["addresses"] = {i: [f"{a['local']}/{a['prefixlen']}" for a in by_name[i].get("addr_info", [])
                                  if a.get("family") == "inet"] for i in ifaces.values()}
        facts["up"] = {i: "UP" in by_name[i].get("flags", []) for i in ifaces.values()}
        for b in want:
            if b not in facts["binaries"]:
                fld = "bin_dir" if self._own(b) else "host"
                where = (f"not in bin_dir {bin_dir} nor on PATH" if bin_dir else "not on PATH")
                raise QuicbenchError(f"{self.field(node, fld)}: no '{b}' on {self.where(node)} ({where}); "
                                     f"install it (docs/hosts.md) or run with --provision")
        if node in ("client", "server") and self.spec.tcp_cc not in (kv.get("cc_available") or "").split():
            raise QuicbenchError(f"{self.field(node, 'host')}: TCP congestion control '{self.spec.tcp_cc}' is not "
                                 f"available on {self.where(node)}: it has {kv.get('cc_available')}")
        if node.startswith("router"):
            facts["netem"] = self._probe_netem(node)
        facts["versions"] = self._versions(node, facts["binaries"])
        for b, path in facts["binaries"].items():
            here = self._own_version(b)
            if here is not None and b in facts["versions"] and facts["versions"][b] != here:
                raise QuicbenchError(f"{self.field(node, 'bin_dir')}: '{b}' on {self.where(node)} ({path}) is not this "
                                     f"controller's build: it says {facts['versions'][b]!r}, this one "
                                     f"{here!r} (rows would name a stack the host did not run); put the same "
                                     f"build in bin_dir or run with --provision")
        return facts

    def _version_cmd(self, name: str) -> str | None:
        args = TOOL_VERSION_ARGS.get(name)
        facts = self.spec.binary_facts.get(name)
        if facts is not None:
            args = " ".join(q(a) for a in facts.get("version_args") or ())
        return args

    def _own_version(self, name: str) -> str | None:
        """What this controller's build of one of quicbench's own binaries (linkem, qb-load, a
        stack it builds) says of its version, as a host's doctor reads it (first line, stderr
        too); None for other binaries, or when this controller has none."""
        if not self._own(name) or self._version_cmd(name) is None:
            return None
        from quicbench.paths import find_binary
        try:
            local = find_binary(name, "")
        except QuicbenchError:
            return None
        return _first_line_of(local, self._version_cmd(name))

    def provision_dir(self, node: str) -> str:
        """Where --provision puts quicbench's own binaries when the host has no bin_dir (kept
        after the lab: an install, not a lab file)."""
        return self.inv.setting(node, "bin_dir") or f"{self.inv.setting(node, 'workdir').rstrip('/')}/bin"

    def provision(self, binaries: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Install what the hosts miss: Debian packages with apt-get, quicbench's own binaries
        (qb-load, linkem) copied from this controller. Returns what was installed per node."""
        from quicbench.paths import find_binary
        binaries = binaries if binaries is not None else self.spec.binaries
        done: dict[str, list[str]] = {}
        for node in self.nodes:
            want = list(binaries.get(node, [])) + (["tc", "ip", "ethtool", "linkem"] if node.startswith("router")
                                                   else ["ip", "ethtool", "ping", "iperf3"])
            if node == "client":
                want.append("qb-load")
            want = list(dict.fromkeys(want))
            bin_dir = self.inv.setting(node, "bin_dir") or ""
            probe = "; ".join(f"[ -x {q(bin_dir + '/' + b)} ] || [ -x {q(self.provision_dir(node) + '/' + b)} ] || "
                              f"PATH=$PATH:/usr/sbin:/sbin command -v {q(b)} >/dev/null || echo {q(b)}" for b in want)
            missing = self.sh(node, probe).stdout.split()
            # quicbench's own binaries that the host has in another build are replaced too
            for b in want:
                here = self._own_version(b) if b not in missing else None
                if here is not None:
                    found = (f"p={q(bin_dir + '/' + b)}; [ -x \"$p\" ] || p={q(self.provision_dir(node) + '/' + b)}; "
                             f"[ -x \"$p\" ] || p=$(command -v {q(b)}); \"$p\" {self._version_cmd(b)} 2>&1 | head -n1")
                    if self.sh(node, found, check=False).stdout.rstrip("\n") != here:
                        missing.append(b)
            sudo = " ".join(self.sudo(node))
            pkgs = sorted({p for b in missing if (p := self._package(b))})
            if pkgs:
                self.sh(node, f"export DEBIAN_FRONTEND=noninteractive; {sudo} apt-get update -qq && "
                              f"{sudo} apt-get install -y -qq --no-install-recommends {' '.join(pkgs)}", timeout=900)
            for b in (b for b in missing if self._own(b)):
                dest = f"{self.provision_dir(node)}/{b}"
                self.sh(node, f"mkdir -p {q(os.path.dirname(dest))} && cat > {q(dest)}.tmp && chmod 755 {q(dest)}.tmp "
                              f"&& mv {q(dest)}.tmp {q(dest)}",
                        input=Path(find_binary(b, "run 'make setup-all' on the controller")).read_bytes(), timeout=300)
            done[node] = pkgs + [b for b in missing if self._own(b)]
        return done

    # -- what a binary is: the lab's own tools, else what its driver says ----------------------
    def _needs_root(self, name: str) -> bool:
        return name in ROOT_TOOLS or bool(self.spec.binary_facts.get(name, {}).get("root"))

    def _own(self, name: str) -> bool:
        return name in OWN_TOOLS or bool(self.spec.binary_facts.get(name, {}).get("own"))

    def _package(self, name: str) -> str | None:
        return TOOL_PACKAGES.get(name) or self.spec.binary_facts.get(name, {}).get("package")

    def _probe_netem(self, node: str) -> bool:
        """netem in the host's kernel, tried in a throwaway network namespace (nothing of the
        host's own interfaces is touched)."""
        sudo = " ".join(self.sudo(node))
        cp = self.sh(node, f"{sudo} unshare -n sh -c 'ip link add p0 type veth peer name p1 && ip link set p0 up && "
                           f"tc qdisc add dev p0 root netem delay 1ms' >/dev/null 2>&1 && echo yes || echo no",
                     check=False)
        return cp.stdout.strip() == "yes"

    def _versions(self, node: str, bins: dict[str, str]) -> dict[str, str]:
        cmds = {b: c for b in bins if (c := self._version_cmd(b)) is not None}
        parts = [f"echo \"v.{b}=$({q(p)} {cmds[b]} 2>&1 | head -n1)\"" for b, p in bins.items() if b in cmds]
        if not parts:
            return {}
        out = self.sh(node, "\n".join(parts), check=False).stdout
        return {k[2:]: v for k, v in (l.split("=", 1) for l in out.splitlines() if l.startswith("v."))}

    # -- link ------------------------------------------------------------------------------
    def link_class(self, conditions: list[Condition]) -> type[LinkEmulator]:
        """netem where every router's kernel has it, else linkem (where the routers have it)."""
        hosts = self.state.get("hosts", {})
        routers = [n for n in self.nodes if n.startswith("router")]
        name = self.spec.link
        no_netem = [n for n in routers if not hosts.get(n, {}).get("netem")]
        no_linkem = [n for n in routers if "linkem" not in hosts.get(n, {}).get("binaries", {})]
        if name == "auto":
            netem, linkem = LINKS.get("netem"), LINKS.get("linkem")
            # the SSH hosts' netem, as the impairment table grants it (model.impairments)
            unsupported = next((w for c in conditions if (w := netem_unsupported(c, NETEM_SSH))), None)
            why_not_netem = (f"{self.where(no_netem[0])} has no sch_netem in its kernel" if no_netem else
                             unsupported or ("offload = true" if self.spec.offload else None))
            if why_not_netem is None:
                return netem
            self.link_passed_over = {"netem": why_not_netem}
            if not no_linkem:
                return linkem
            self.link_passed_over["linkem"] = f"no 'linkem' on {self.where(no_linkem[0])}"
            return resolve_link("plain", conditions, self.spec.offload)
        if name == "netem" and no_netem:
            raise QuicbenchError(f"link netem: {self.where(no_netem[0])} has no sch_netem in its kernel: use link linkem")
        if name == "linkem" and no_linkem:
            raise QuicbenchError(f"{self.field(no_linkem[0], 'bin_dir')}: link linkem: no 'linkem' on "
                                 f"{self.where(no_linkem[0])}")
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
                          "addresses": {n: self._addrs(n) for n in self.nodes}}
            self.save_state()

    def _create(self) -> None:
        # 1. check every host before anything changes on any of them
        facts = self.doctor()
        self.state["hosts"] = facts
        self.state["macs"] = {n: f["macs"] for n, f in facts.items()}
        self.save_state()
        # 2. the workdir, the cleanup script and the dead-man watchdogs, before the first change
        for n in self.nodes:
            d = self.labdir(n)
            self.sh(n, f"mkdir -p {q(d)}/pg {q(d)}/home && : > {q(d)}/undo.sh && cat > {q(d)}/cleanup.sh",
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
        sudo = " ".join(self.sudo(node))
        for ifname, addr in self._addrs(node).items():
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
        undo = f"{self.labdir(node)}/undo.sh"
        script = ["set -e"]
        for un, do in steps:
            script.append(f"echo {q(f'{sudo} {un}'.strip())} >> {q(undo)}")
            script.append(f"{sudo} sh -c {q(do)}" if sudo else do)
        self.sh(node, "\n".join(script))

    def _cleanup_script(self, node: str) -> str:
        """Kill every recorded process group, undo every change (newest first), remove the workdir."""
        d = self.labdir(node)
        sudo = " ".join(self.sudo(node))
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
        d = self.labdir(node)
        n = int(self.inv.setting(node, "deadman_s"))
        # a hangup or a TERM (sshd or logind ending the session) cleans up too, never skips it
        return (f"c() {{ [ -f {q(d)}/cleanup.sh ] && sh {q(d)}/cleanup.sh >/dev/null 2>&1; exit 0; }}; "
                f"trap c HUP TERM INT; "
                f"while l=$(timeout {n} head -n 1) && [ -n \"$l\" ]; do :; done; c")

    def _start_keeper(self) -> None:
        spec = {"owner": None if self.spec.persistent else self.state["owner"],
                "hosts": [{"node": n, "argv": [*self.ssh_argv(n), self._watchdog(n)]} for n in self.nodes]}
        log = open(self.ssh_dir / "keeper.log", "ab")
        proc = subprocess.Popen([sys.executable, EXEC, "keeper", json.dumps(spec)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
        log.close()
        self.state["keeper"] = proc.pid
        self.save_state()

    def kill_node_processes(self, node: str) -> None:
        d = self.labdir(node)
        sudo = " ".join(self.sudo(node))
        self.sh(node, f"for f in {q(d)}/pg/*; do [ -f \"$f\" ] && {sudo} kill -KILL -\"$(cat \"$f\")\" "
                      f"2>/dev/null; done; true", check=False)

    def _destroy(self) -> None:
        def clean(node: str) -> None:
            try:
                d = self.labdir(node)
                self.sh(node, f"[ -f {q(d)}/cleanup.sh ] && sh {q(d)}/cleanup.sh; true", check=False, timeout=60)
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
        for n in self.nodes:
            subprocess.run([*self.ssh_argv(n)[:-1], "-O", "exit", self.inv.host(n).host],
                           capture_output=True, timeout=10)
        self._masters.clear()
        shutil.rmtree(self.ssh_dir, ignore_errors=True)


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


@functools.lru_cache(maxsize=None)
def _first_line_of(binary: str, args: str) -> str:
    """The first line a local binary prints (stderr too) when run with args: asked once per run of
    quicbench, however many hosts and checks compare against it."""
    cp = subprocess.run(f"{q(binary)} {args} 2>&1 | head -n1", shell=True, capture_output=True, text=True,
                        timeout=20)
    return cp.stdout.rstrip("\n")


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


def _pgfile(local_pid: int) -> str | None:
    """The remote group-id file of a command started through lab.cmd() (ssh_exec's spec, the
    last argument of the local wrapper process)."""
    try:
        args = Path(f"/proc/{local_pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        return json.loads(args[-1]).get("pgfile")
    except (OSError, ValueError, AttributeError, IndexError):
        return None


def check_hosts(spec: LabSpec, provision: bool = False) -> dict[str, dict[str, Any]]:
    """The doctor of an ssh lab without creating it: every host reachable, its interfaces and
    binaries in place (raises a QuicbenchError naming the host and the field). With provision,
    what the hosts miss is installed first."""
    lab = SshLab(spec)
    try:
        if provision:
            lab.provision()
        return lab.doctor()
    finally:
        for n in lab.nodes:
            subprocess.run([*lab.ssh_argv(n)[:-1], "-O", "exit", lab.inv.host(n).host],
                           capture_output=True, timeout=10)
        shutil.rmtree(lab.ssh_dir, ignore_errors=True)
