"""The `ssh` lab backend's transport: reaching the hosts, running commands there, moving files.

One multiplexed OpenSSH connection per host (ControlMaster), BatchMode, host keys checked
against the inventory's known_hosts or accepted on first use into a known_hosts file of the
lab's own. ``sh`` runs a setup script; ``command`` returns the local argv (ssh_exec.py) that
runs a lab process on the host as a process group of its own whose id is recorded under
``<workdir>/<lab>/<node>/pg``.

Files. Each local path under the lab's roots (the lab's state directory, the run directory,
the content cache) is mirrored on the host at ``<workdir>/<lab>/<node>/root/<local path>``:
``push`` copies a file or directory there (a text file that names other such paths is
rewritten to name their mirrors, and those are copied too), ``pull_closed`` brings back what a
long-running process closed in a mirrored directory; ssh_exec.py moves a command's outputs
back when it ends (a path that names nothing yet, an empty directory, or one named inside an
argument such as a JSON one). ``forward_socket`` makes a host's unix socket reachable at its
local path.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.lab.inventory import Inventory

EXEC = str(Path(__file__).with_name("ssh_exec.py"))
PUSH_TEXT_MAX = 1 << 20      # text files up to this size are scanned for paths to rewrite


def q(s: str) -> str:
    return shlex.quote(str(s))


def path_refs(text: str, roots: list[str]) -> list[str]:
    """The local paths under roots that a text (a config file, a JSON argument) names, longest
    first (a path ends at white space, a quote or , ; : < >)."""
    if not any(r in text for r in roots):
        return []
    pattern = "|".join(re.escape(r) for r in roots)
    # a root ends where the path does or at a '/': /runs/r1 is not a root of /runs/r10
    found = {m.rstrip("/.") for m in re.findall(rf"(?:{pattern})(?![^/\s\"',;:<>])(?:/[^\s\"',;:<>]*)?", text)}
    return sorted(found, key=len, reverse=True)


class SshTransport:
    """The SSH connections of one lab (named ``lab``) to the inventory's hosts; ``roots`` says
    which local directories are mirrored on the hosts (longest first)."""

    def __init__(self, inv: Inventory, inventory: str | None, lab: str, roots: Callable[[], list[str]]):
        self.inv = inv
        self.inventory = inventory          # the inventory file, as errors name it
        self.lab = lab
        self.roots = roots
        self._pushed: dict[tuple[str, str], Any] = {}
        self._masters: set[str] = set()

    # -- how errors name a host --------------------------------------------------------------
    def where(self, node: str) -> str:
        """How errors name a host: node (user@host:port)."""
        i = self.inv
        return f"host {node} ({i.setting(node, 'user')}@{i.host(node).host}:{i.setting(node, 'port')})"

    def field(self, node: str, key: str) -> str:
        return f"inventory {self.inventory}: {node}.{key}"

    # -- connections ---------------------------------------------------------------------------
    @property
    def ssh_dir(self) -> Path:
        # short: ControlPath is a unix socket path (at most 107 bytes)
        return Path("/tmp") / f"qbssh-{self.lab}"

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

    def master(self, node: str) -> None:
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
                raise QuicbenchError(self.error(node, log.read_text(errors="replace")))
        self._masters.add(node)

    def close(self, nodes: Sequence[str]) -> None:
        """End every host's connection and remove the lab's SSH directory."""
        for n in nodes:
            subprocess.run([*self.ssh_argv(n)[:-1], "-O", "exit", self.inv.host(n).host],
                           capture_output=True, timeout=10)
        self._masters.clear()
        shutil.rmtree(self.ssh_dir, ignore_errors=True)

    def error(self, node: str, stderr: str) -> str:
        """One line naming the host and the inventory field behind a failed login."""
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
        self.master(node)
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
                raise QuicbenchError(self.error(node, out.stderr))
            tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or [f"exit code {cp.returncode}"]
            raise QuicbenchError(f"{self.where(node)}: {script.splitlines()[0][:80]}: {tail[0]}")
        return out

    def sudo(self, node: str) -> list[str]:
        return [] if self.inv.setting(node, "user") == "root" else ["sudo", "-n"]

    # -- remote layout ---------------------------------------------------------------------------
    def labdir(self, node: str) -> str:
        return f"{self.inv.setting(node, 'workdir').rstrip('/')}/{self.lab}/{node}"

    def remote_root(self, node: str) -> str:
        return f"{self.labdir(node)}/root"

    def remote_path(self, node: str, local: str) -> str:
        """Where a local path is mirrored on the host; unix sockets go to a short directory
        (a socket path has at most 107 bytes)."""
        if local.endswith(".sock"):
            return f"{self.labdir(node)}/sock/{os.path.basename(local)}"
        return self.remote_root(node) + local

    def local_path(self, arg: str) -> str | None:
        """arg, when it is a path under one of the mirrored roots."""
        for r in self.roots():
            if arg == r or arg.startswith(r + "/"):
                return arg
        return None

    # -- lab processes ---------------------------------------------------------------------------
    def command(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None, sudo: list[str]) -> list[str]:
        """The local argv that runs argv (argv[0] as the host names it) on the host as a lab
        process: arguments that name existing local paths are pushed and name their mirrors, ones
        that name nothing yet are outputs, copied back when the command ends; env values that
        are local paths name directories made on the host."""
        self.master(node)
        root = self.remote_root(node)
        pulls: list[str] = []
        mkdirs: set[str] = set()
        out = [argv[0]]
        roots = self.roots()

        def mirror(local: str) -> None:
            if os.path.isdir(local) and not os.listdir(local):
                # an empty directory is where the command writes (a client's downloads): made
                # on the host, and what it holds copied back when the command ends
                mkdirs.add(root + local)
                pulls.append(local)
            elif os.path.exists(local):
                self.push(node, Path(local))
            elif local.endswith(".sock"):
                mkdirs.add(os.path.dirname(self.remote_path(node, local)))
            else:
                pulls.append(local)
                mkdirs.add(os.path.dirname(root + local))

        for a in argv[1:]:
            key, sep, val = a.partition("=") if a.startswith("-") and "=" in a else ("", "", a)
            local = self.local_path(val)
            if local is None:
                # an argument that names local paths inside it (aioquic's --args-json): each is
                # mirrored, and the argument names the mirrors
                refs = path_refs(a, roots)
                for ref in refs:
                    mirror(ref)
                for r in roots if refs else ():
                    a = a.replace(r, root + r)
                out.append(a)
                continue
            mirror(local)
            out.append(key + sep + self.remote_path(node, local))
        extra = []
        for k, v in (env or {}).items():
            local = self.local_path(v)
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
        # nothing runs unrecorded: without its group id on file (the lab going down removed the
        # directory) the command does not start
        inner = f"echo $$ > {q(pgfile)} || exit 97; exec \"$@\""
        remote = (f"mkdir -p {q(d + '/pg')} {q(home)} {' '.join(q(m) for m in sorted(mkdirs))} && "
                  f"{shlex.join([*sudo, *env_argv, 'setsid', '-w', 'sh', '-c', inner, 'qb', *out])}; "
                  f"rc=$?; rm -f {q(pgfile)}; exit $rc")
        spec = {"ssh": self.ssh_argv(node), "remote": remote, "pgfile": pgfile, "pull": pulls,
                "remote_root": root, "sudo": sudo}
        return [sys.executable, EXEC, "run", json.dumps(spec)]

    def keeper(self, argvs: dict[str, list[str]], owner: dict[str, int] | None) -> int:
        """Start the keeper (ssh_exec.py): it holds each node's argv (an ssh running a watchdog)
        open with heartbeats while owner lives. Returns its pid."""
        spec = {"owner": owner, "hosts": [{"node": n, "argv": argv} for n, argv in argvs.items()]}
        self.ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        log = open(self.ssh_dir / "keeper.log", "ab")
        proc = subprocess.Popen([sys.executable, EXEC, "keeper", json.dumps(spec)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
        log.close()
        return proc.pid

    # -- files ---------------------------------------------------------------------------------
    def push(self, node: str, path: Path) -> None:
        """Copy a local file or directory to its mirror on the host (once, while unchanged)."""
        st = path.stat()
        sig = (st.st_mtime_ns, st.st_size)
        if self._pushed.get((node, str(path))) == sig:
            return
        root = self.remote_root(node)
        roots = self.roots()
        if path.is_file() and st.st_size <= PUSH_TEXT_MAX:
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                text = None
            refs = path_refs(text, roots) if text is not None else []
            if text is not None and refs:
                # a config that names local paths: those are mirrored too, and the copy names the mirrors
                for ref in refs:
                    if ref == str(path):
                        continue
                    if os.path.exists(ref):
                        self.push(node, Path(ref))
                    else:
                        self.sh(node, f"mkdir -p {q(os.path.dirname(root + ref))}")
                for r in roots:
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

    def install(self, node: str, dest: str, data: bytes, mode: str = "755") -> None:
        """Write data to dest on the host (made whole under a temporary name, then renamed)."""
        self.sh(node, f"mkdir -p {q(os.path.dirname(dest))} && cat > {q(dest)}.tmp && chmod {mode} {q(dest)}.tmp "
                      f"&& mv {q(dest)}.tmp {q(dest)}", input=data, timeout=300)

    def pull_closed(self, node: str, local_dir: Path, settle_s: float = 1.0) -> None:
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

    def forward_socket(self, node: str, local: Path) -> None:
        """Make a unix socket of a lab process on the host reachable at its local path."""
        local.unlink(missing_ok=True)
        cp = subprocess.run([*self.ssh_argv(node)[:-1], "-O", "forward", "-L",
                             f"{local}:{self.remote_path(node, str(local))}", self.inv.host(node).host],
                            capture_output=True, text=True, timeout=10)
        if cp.returncode != 0:
            raise QuicbenchError(f"{self.where(node)}: cannot forward {local}: {cp.stderr.strip()}")
