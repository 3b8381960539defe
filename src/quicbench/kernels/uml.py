"""`uml`: run a command inside User-Mode Linux, a Linux kernel that is a user process.

Debian's `user-mode-linux` package (/usr/bin/linux.uml, kernel 6.1) ships sch_netem, sch_tbf,
sch_htb, ifb and veth as modules, so a host kernel without them (CONFIG_NET_SCH_NETEM=n, as on
the development machine) can still run the kernel's netem. The UML kernel boots with the
host's root file system (hostfs, read-write) in about 2-6 s, runs a generated init script that
mounts /proc, /sys and a private /run (so quicbench's state dir /run/quicbench and `ip netns`
are the instance's own), loads the modules with insmod, brings lo up, changes to the caller's
directory and runs the command with the caller's environment. Its exit code comes back through
a file in a private temporary directory; the kernel then powers off.

Output: the command's stdout and stderr are UML consoles 0 and 1, wired to pipes that this
process copies live to its own stdout and stderr; the kernel's messages are silenced (`quiet
loglevel=0`). Ctrl-C / SIGTERM: a stop file asks the instance to SIGINT everything inside
(quicbench tears its lab down and marks the run interrupted), then after a grace period the
UML process group is killed; a watchdog process kills the UML process group should the caller be SIGKILLed. The
temporary directory (init script, exit code, UML's umid dir and memory file) is removed on
every exit path, and stale ones of dead callers are removed by the next run.

Inside UML there is one (slow) CPU: tens of Mbit/s, timer noise of a few hundred µs.

UML 6.1 keeps a guest task's FPU state in the XSAVE size it was built with (Debian's: 2,696
bytes, up to AVX-512) and the host refuses to restore a partial state, so on a host with a larger
one (AMX: 11,008 bytes) it panics at its first process. UML runs with uml-xstate.so preloaded
(built from uml_xstate.c by `make uml`), which hands the host the whole state, one copy per
guest task.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.kernels.base import Kernel
from quicbench.paths import bin_dir

BINARY = Path("/usr/bin/linux.uml")
MODULE_ROOT = Path("/usr/lib/uml/modules")
INSMOD = ("/usr/sbin/insmod", "/sbin/insmod")
FIX = "run 'make uml' (apt-get install user-mode-linux kmod)"
# Loaded in this order (dependencies from modules.dep first); the lab needs veth and IPv6
# (it writes IPv6 sysctls), the netem driver sch_netem; tbf, htb and ifb come along if present.
REQUIRED_MODULES = ("veth", "sch_netem", "ipv6")
OPTIONAL_MODULES = ("sch_tbf", "sch_htb", "ifb")
QDISC_MODULES = ("sch_netem", "sch_tbf", "sch_htb")
# the FPU-state wrapper UML runs with (uml_xstate.c; `make uml`)
XSTATE_SHIM = "uml-xstate.so"
TMP_PREFIX = "qb-uml-"
STOP_GRACE_S = 20.0


def _module_dir() -> Path | None:
    """The module directory matching /usr/bin/linux.uml's version (the newest if unsure)."""
    if not MODULE_ROOT.is_dir():
        return None
    dirs = sorted((p for p in MODULE_ROOT.iterdir() if (p / "modules.dep").exists()), key=lambda p: p.name)
    if not dirs:
        return None
    try:
        ver = subprocess.run([str(BINARY), "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        ver = ""
    for d in dirs:
        if d.name == ver:
            return d
    return dirs[-1]


def _modules(mdir: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (path relative to mdir, dependency paths) from modules.dep."""
    out: dict[str, tuple[str, list[str]]] = {}
    for line in (mdir / "modules.dep").read_text().splitlines():
        if ":" not in line:
            continue
        path, deps = line.split(":", 1)
        name = Path(path).name.split(".ko")[0].replace("-", "_")
        out[name] = (path, deps.split())
    return out


def load_order(mdir: Path, names: list[str]) -> list[str]:
    """Module paths (relative to mdir) to insmod, dependencies first, each once."""
    mods = _modules(mdir)
    by_path = {p: deps for p, deps in mods.values()}
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for dep in reversed(by_path.get(path, [])):   # modules.dep lists the deepest last
            visit(dep)
        order.append(path)

    for n in names:
        key = n.replace("-", "_")
        if key in mods:
            visit(mods[key][0])
    return order


def _insmod() -> str | None:
    return next((p for p in INSMOD if os.access(p, os.X_OK)), None)


def _reap_stale() -> None:
    """Remove temporary directories of UML runs whose caller died (pid file names it)."""
    for d in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"):
        try:
            pid = int((d / "caller.pid").read_text())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(Path("/dev/shm") / d.name, ignore_errors=True)


# Kills the UML process group and removes the temporary directories when the caller dies
# (its stdin, a pipe only the caller holds, ends); exits quietly when the caller says "done".
# UML's main process alone would not do: killed, it leaves its helper processes running.
WATCHDOG = """
import os, shutil, signal, sys
if sys.stdin.buffer.read() != b"done":
    try:
        os.killpg(int(sys.argv[1]), signal.SIGKILL)
    except OSError:
        pass
    for d in sys.argv[2:]:
        shutil.rmtree(d, ignore_errors=True)
"""


def _copy(src: int, dst) -> None:
    """Copy a pipe to a file object until EOF, as the bytes come."""
    while True:
        try:
            data = os.read(src, 65536)
        except OSError:
            break
        if not data:
            break
        try:
            dst.write(data)
            dst.flush()
        except (OSError, ValueError):
            pass
    os.close(src)


class UmlKernel(Kernel):
    name = "uml"
    provisions = ("uml",)

    def available(self) -> tuple[bool, str]:
        if not BINARY.exists():
            return False, f"no User-Mode Linux kernel ({BINARY}): {FIX}"
        if _insmod() is None:
            return False, f"no insmod (package kmod): {FIX}"
        mdir = _module_dir()
        if mdir is None:
            return False, f"no UML modules under {MODULE_ROOT}: {FIX}"
        mods = _modules(mdir)
        missing = [m for m in REQUIRED_MODULES if m not in mods]
        if missing:
            return False, f"UML modules missing in {mdir}: {', '.join(missing)} ({FIX})"
        if not (bin_dir() / XSTATE_SHIM).is_file():
            return False, f"no {bin_dir() / XSTATE_SHIM} (UML's FPU-state wrapper): run 'make uml'"
        return True, f"User-Mode Linux {mdir.name}"

    def version(self) -> dict[str, Any]:
        mdir = _module_dir()
        if mdir is None:
            return {"kernel": "uml", "version": None, "module_dir": None, "qdiscs": []}
        mods = _modules(mdir)
        return {"kernel": "uml", "version": mdir.name, "binary": str(BINARY), "module_dir": str(mdir),
                "qdiscs": [m.removeprefix("sch_") for m in QDISC_MODULES if m in mods],
                "modules": [m for m in (*REQUIRED_MODULES, *OPTIONAL_MODULES) if m in mods],
                "preload": XSTATE_SHIM}

    def boots(self) -> tuple[bool, str]:
        """Boot UML once and run `true` inside (a few seconds): whether this host can run it at
        all, which its files alone do not say (a host's CPU can make it panic at its first process)."""
        out = io.BytesIO()
        t0 = time.monotonic()
        try:
            rc = self.run(["true"], {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, "/", mem="256M", stdout=out, stderr=out)
        except QuicbenchError as e:
            return False, str(e)
        if rc != 0:
            return False, f"`true` inside it exited {rc}: {out.getvalue().decode(errors='replace')[-200:]}"
        return True, f"boots and runs a command in {time.monotonic() - t0:.1f} s"

    def init_script(self, argv: list[str], env: dict[str, str], cwd: str, tmp: Path,
                    stdout_tty: bool, stderr_tty: bool) -> str:
        mdir = _module_dir()
        assert mdir is not None
        mods = _modules(mdir)
        wanted = [m for m in (*REQUIRED_MODULES, *OPTIONAL_MODULES) if m in mods]
        insmod = _insmod()
        env = {**env, "QUICBENCH_STATE": "/run/quicbench", "QUICBENCH_KERNEL": "uml"}
        env_args = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items() if "\0" not in k + v)
        # the command records its pid (Ctrl-C: the watcher sends it SIGINT) and runs with the
        # caller's environment only
        cmd = (f"bash -c 'echo $$ > \"$1/cmd.pid\"; shift; exec \"$@\"' qb \"$D\" "
               f"env -i {env_args} {shlex.join(argv)}")
        group = f'{{ {cmd}; echo $? > "$D/rc.tmp"; }}'
        # a caller whose stdout or stderr is no terminal gets pipes inside too (no colours, no
        # live progress bars), as it would on the host
        if not stderr_tty:
            group = f"{{ {group} 2>&1 1>&3 3>&- | cat >&2; }} 3>&1"
        if not stdout_tty:
            group = f"{group} | cat"
        lines = [
            "#!/bin/bash",
            "# quicbench: init of a User-Mode Linux instance (generated; removed after the run)",
            "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "D=" + shlex.quote(str(tmp)),
            "mount -t proc proc /proc",
            "mount -t sysfs sysfs /sys",
            # private: quicbench's state dir and ip netns' mounts must not be the host's
            "mount -t tmpfs -o mode=755 tmpfs /run",
            "mkdir -p /dev/shm /dev/pts && mount -t tmpfs tmpfs /dev/shm && mount -t devpts devpts /dev/pts",
            "stty -F /dev/console -opost 2>/dev/null; stty -F /dev/tty1 -opost 2>/dev/null",
            "exec 2>/dev/tty1",
            *(f"{insmod} {shlex.quote(str(mdir / p))} || echo 'quicbench uml: insmod {p} failed' >&2"
              for p in load_order(mdir, wanted)),
            "ip link set lo up",
            "hostname qb-uml 2>/dev/null",
            # Ctrl-C of the caller creates $D/stop: SIGINT to the command, SIGKILL to all 10 s later
            "python3 -c 'import os,signal,time,sys\n"
            "while not os.path.exists(sys.argv[1] + \"/stop\"): time.sleep(0.25)\n"
            "os.kill(int(open(sys.argv[1] + \"/cmd.pid\").read()), signal.SIGINT)\n"
            "time.sleep(10); os.kill(-1, signal.SIGKILL)' \"$D\" &",
            "if cd " + shlex.quote(cwd) + "; then",
            "  " + group,
            "else echo 2 > \"$D/rc.tmp\"; fi",
            "mv \"$D/rc.tmp\" \"$D/rc\"",
            "sync",
            "poweroff -f >/dev/null 2>&1 || echo o > /proc/sysrq-trigger",
            "sleep 10",
        ]
        return "\n".join(lines) + "\n"

    def command(self, tmp: Path, mem: str) -> list[str]:
        return [str(BINARY), f"mem={mem}", "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "rw",
                f"init={tmp / 'init'}", "con=null", "con0=fd:0,fd:1", "con1=null,fd:2",
                f"uml_dir={tmp}", f"umid=qb{os.getpid()}", "quiet", "loglevel=0"]

    def run(self, argv: list[str], env: dict[str, str], cwd: str, mem: str = "2G",
            stdout=None, stderr=None, scratch: tuple[str, ...] = ()) -> int:
        """Boot UML, run argv inside (env, cwd), return its exit code; output streams live.
        scratch: the caller's own temporary directories, removed with UML's if the caller is killed."""
        ok, why = self.available()
        if not ok:
            raise QuicbenchError(why)
        stdout = stdout or sys.stdout.buffer
        stderr = stderr or sys.stderr.buffer
        if _isatty(stdout) and "COLUMNS" not in env:
            # the command's console is 80 columns wide unless told the caller's terminal size
            size = shutil.get_terminal_size()
            env = {**env, "COLUMNS": str(size.columns), "LINES": str(size.lines)}
        _reap_stale()
        tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
        # UML's memory is a file it creates (and unlinks) in $TMPDIR: on tmpfs, not on disk
        shm = Path("/dev/shm") / tmp.name if os.path.isdir("/dev/shm") else tmp / "mem"
        shm.mkdir(mode=0o700)
        proc: subprocess.Popen | None = None
        watchdog: subprocess.Popen | None = None
        threads: list[threading.Thread] = []
        try:
            (tmp / "caller.pid").write_text(str(os.getpid()))
            init = tmp / "init"
            init.write_text(self.init_script(argv, env, cwd, tmp, _isatty(stdout), _isatty(stderr)))
            init.chmod(0o755)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                proc = subprocess.Popen(self.command(tmp, mem), stdin=subprocess.DEVNULL, stdout=out_w,
                                        stderr=err_w, start_new_session=True,
                                        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(shm),
                                             "LD_PRELOAD": str(bin_dir() / XSTATE_SHIM)})
            finally:
                os.close(out_w)
                os.close(err_w)
            watchdog = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(proc.pid), str(tmp), str(shm),
                                         *map(str, scratch)],
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
            threads = [threading.Thread(target=_copy, args=(out_r, stdout), daemon=True),
                       threading.Thread(target=_copy, args=(err_r, stderr), daemon=True)]
            for t in threads:
                t.start()
            try:
                proc.wait()
            except BaseException:
                self._stop(proc, tmp)
                raise
            for t in threads:
                t.join(5)
            rc_file = tmp / "rc"
            if not rc_file.exists():
                raise QuicbenchError(f"the UML kernel ended (exit {proc.returncode}) without the command's "
                                     f"exit code: it crashed or was killed (try more memory: mem={mem})")
            return int(rc_file.read_text().strip() or 1)
        finally:
            if proc is not None:
                _killpg(proc, signal.SIGKILL)
                proc.wait()
            if watchdog is not None:
                watchdog.communicate(b"done")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(shm, ignore_errors=True)

    @staticmethod
    def _stop(proc: subprocess.Popen, tmp: Path) -> None:
        """Ask the instance to interrupt its command, wait, then kill the UML process group."""
        try:
            (tmp / "stop").touch()
            proc.wait(STOP_GRACE_S)
            return
        except BaseException:   # noqa: BLE001 - a second Ctrl-C or the grace ran out: kill it
            pass
        _killpg(proc, signal.SIGTERM)   # UML's last-ditch exit cleans its helpers up
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            pass
        _killpg(proc, signal.SIGKILL)


def _killpg(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _isatty(f) -> bool:
    try:
        return os.isatty(f.fileno())
    except (AttributeError, OSError, ValueError):
        return False
