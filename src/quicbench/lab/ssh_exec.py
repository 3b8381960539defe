"""The local side of a command the `ssh` lab backend runs on a host (stdlib only: it starts
for every command, so it imports nothing of quicbench).

    python3 ssh_exec.py run SPEC_JSON      run one remote command through ssh
    python3 ssh_exec.py keeper SPEC_JSON   hold every host's dead-man watchdog open

`run` runs `ssh ... REMOTE` with stdin, stdout and stderr passed through, so that the
callers of ``lab.cmd()`` (servers, clients, linkem, ping) work as with a local process. What
plain ssh cannot do it adds: SIGTERM/SIGINT/SIGHUP are forwarded to the remote process
group (the remote command records its group id in a file named by SPEC["pgfile"]), and
after the command ends the files it wrote (SPEC["pull"]: remote path -> local path) are
copied back to the controller.

`keeper` starts SPEC["hosts"][i]["argv"] (an ssh that runs the host's watchdog) with a pipe
as its stdin and writes a heartbeat line every second. The watchdog cleans the host up
when its stdin ends or no heartbeat comes for its dead-man time: when the keeper ends, when
the process that owns the lab (SPEC["owner"]) is gone, or when the network is.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time


def _alive(owner: dict | None) -> bool:
    if not owner:
        return True
    try:
        stat = open(f"/proc/{owner['pid']}/stat").read()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and int(fields[19]) == owner["start"]


def run(spec: dict) -> int:
    ssh = spec["ssh"]
    proc = subprocess.Popen([*ssh, spec["remote"]])
    forwarded: list[int] = []

    def forward(signum, frame):   # noqa: ANN001 - signal handler
        forwarded.append(signum)
        sig = "KILL" if len(forwarded) > 1 else "TERM"
        # the remote process group, by the id its wrapper recorded; the ssh ends with it
        kill = (f"f={spec['pgfile']}; [ -f \"$f\" ] && {' '.join(spec.get('sudo') or [])} kill -{sig} -\"$(cat \"$f\")\" 2>/dev/null; true")
        try:
            subprocess.run([*ssh, kill], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)
        except subprocess.TimeoutExpired:
            pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    while True:
        try:
            rc = proc.wait(5 if forwarded else None)
            break
        except subprocess.TimeoutExpired:
            proc.kill()      # the host did not answer the kill: give up on the session
        except InterruptedError:
            continue
    pulls = spec.get("pull") or []
    if pulls:
        pull(ssh, spec["remote_root"], pulls)
    return rc if rc >= 0 else 128 - rc


def pull(ssh: list[str], remote_root: str, paths: list[str]) -> None:
    """Move remote_root + p back to p for every local path p that exists on the host (removed
    there once sent: a client's downloads do not pile up on its host over a run)."""
    rel = [p.lstrip("/") for p in paths]
    script = (f"cd {_q(remote_root)} 2>/dev/null || exit 0; set --; for p in {' '.join(_q(r) for r in rel)}; "
              f"do [ -e \"$p\" ] && set -- \"$@\" \"$p\"; done; [ $# -gt 0 ] && tar -cf - \"$@\" 2>/dev/null "
              f"&& rm -rf \"$@\" 2>/dev/null; true")
    get = subprocess.Popen([*ssh, script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    put = subprocess.run(["tar", "-C", "/", "-xf", "-", "--no-same-owner", "--warning=no-timestamp"],
                         stdin=get.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    get.wait()
    del put


def _q(s: str) -> str:
    import shlex
    return shlex.quote(s)


def keeper(spec: dict) -> int:
    procs = [subprocess.Popen(h["argv"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for h in spec["hosts"]]
    stop: list[int] = []
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda signum, frame: stop.append(signum))
    while not stop and _alive(spec.get("owner")):
        if all(p.poll() is not None for p in procs):
            break      # every watchdog has ended: its host cleaned up, or will when its heartbeats stay away
        for p in procs:
            try:
                p.stdin.write(b"x\n")
                p.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
        time.sleep(1)
    for p in procs:   # stdin ends: every watchdog cleans its host up now
        try:
            p.stdin.close()
        except OSError:
            pass
    deadline = time.monotonic() + 20
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
    return 0


if __name__ == "__main__":
    mode, spec_json = sys.argv[1], sys.argv[2]
    sys.exit({"run": run, "keeper": keeper}[mode](json.loads(spec_json)))
