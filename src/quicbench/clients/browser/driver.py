"""`browser`: real page loads in Debian's Chromium, driven by Playwright, inside the client node.

One page load = one child process, run in the lab's client namespace:

    ip netns exec qb-<lab>-client python -m quicbench.clients.browser.driver --args-json '{...}'

The child launches ``/usr/bin/chromium`` (never a downloaded browser) through Playwright with a
fresh profile (cold cache, no connection or QUIC session carried from one load to the next),
loads the page once, listens to the DevTools protocol's Network events for every request,
reads Navigation, Paint and Resource Timing, writes ``page.json`` and Playwright's
``page.har`` into the trial directory and exits. The parent (``BrowserClient.fetch``) runs it
with a hard deadline, measures its CPU with ``os.wait4``, and turns page.json into per-request
records (for ``summarize_requests``), page metrics (``ClientResult.extra``) and an error when
anything went wrong: a failed load, a failed request, a request over another protocol than
the one asked for (Chromium can mark QUIC broken and fall back to TCP), or a body of the wrong
size. See docs/browser.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import quicbench.clients.httpstat as httpstat
from quicbench.clients.base import Client, ClientResult, FetchRequest, Target, run_measured
from quicbench.clients.browser.page_metrics import expected_resources, interpret, mark_replay_misses
from quicbench.errors import QuicbenchError

CHROMIUM = os.environ.get("QUICBENCH_CHROMIUM", "/usr/bin/chromium")
INSTALL_HINT = "run 'make browser' (Debian's chromium: quicbench never uses a downloaded browser)"
PLAYWRIGHT_HINT = "run 'make browser' (pip installs the Python package only: never 'playwright install')"
# the child's command (python -m would import this module twice: once via quicbench.clients)
PROFILE_PREFIX = "qb-browser-profile-"     # each load's fresh profile in the temporary directory
CHILD = "import sys; from quicbench.clients.browser.recorder import main; sys.exit(main())"

def chromium_flags(protocol: str, host: str, port: int, address: str, spki_sha256_b64: str,
                   origins: list[tuple[str, int]] | tuple = ()) -> list[str]:
    """The command line flags of one load (besides those Playwright adds). origins: a replayed
    page's (host, port) origins, each resolved to the lab's server and (h3) forced onto QUIC."""
    names = list(dict.fromkeys([host, *(h for h, _ in origins)]))
    forced = list(dict.fromkeys([f"{host}:{port}", *(f"{h}:{p}" for h, p in origins)]))
    flags = [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
        "--disable-client-side-phishing-detection", "--metrics-recording-only", "--disable-breakpad",
        "--disable-dev-shm-usage", "--password-store=basic",
        # the lab hostname goes to the server; every other name fails at once (no DNS on the wire)
        "--host-resolver-rules=" + ", ".join(f"MAP {n} {address}" for n in names) + ", MAP * ~NOTFOUND",
        # trust the lab's server key for this browser instance only (nothing system-wide)
        f"--ignore-certificate-errors-spki-list={spki_sha256_b64}",
    ]
    if origins:
        # a replayed page's cross-site iframes stay in the page's renderer: their requests are then
        # the page's DevTools Network events (an out-of-process iframe reports to its own session)
        flags.append("--disable-site-isolation-trials")
    if protocol == "h3":
        # no Alt-Svc discovery on a cold first load: force QUIC for the lab origin
        flags += ["--enable-quic", f"--origin-to-force-quic-on={','.join(forced)}"]
    elif protocol == "h2":
        flags += ["--disable-quic"]
    elif protocol == "h1":
        flags += ["--disable-quic", "--disable-http2"]
    else:
        raise ValueError(f"unknown protocol {protocol!r}: accepted h1, h2, h3")
    return flags


class BrowserClient(Client):
    name = "browser"
    provisions = ("browser",)
    protocols = frozenset({"h1", "h2", "h3"})
    connection_policies = ("shared",)       # the browser manages its own connections
    quic_stack = "chromium"        # Chromium's own QUIC (google/quiche), built in
    workload_kinds = ("page",)

    @staticmethod
    def executable() -> str:
        if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
            raise QuicbenchError(f"missing browser '{CHROMIUM}': {INSTALL_HINT}")
        try:
            import playwright  # noqa: F401  (only whether it is installed)
        except ImportError:
            raise QuicbenchError(f"missing Python package 'playwright': {PLAYWRIGHT_HINT}") from None
        return CHROMIUM

    @classmethod
    def version(cls) -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            exe = cls.executable()
            v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
            # 'Chromium 156.0.8078.108 built on Debian ...': the version number (its QUIC is built in)
            m = re.search(r"\d+(?:\.\d+)+", v)
            out["chromium"] = m.group(0) if m else v
        except Exception as e:  # noqa: BLE001 - a version string must never stop a run
            out["chromium"] = f"unknown ({e})"
        try:
            from importlib.metadata import version
            out["playwright"] = version("playwright")
        except Exception:  # noqa: BLE001
            out["playwright"] = "unknown"
        return out

    # -- one load ---------------------------------------------------------------------
    def child_args(self, target: Target, protocol: str, workload, trial_dir: Path, timeout_s: float,
                   profile: Path) -> dict[str, Any]:
        port = "" if target.port == 443 else f":{target.port}"
        archive = workload.archive() if getattr(workload, "har", None) else None
        return {
            # a replayed page loads from its own origins (each resolved to the lab's server)
            "url": archive.page_url if archive else f"https://{target.hostname}{port}{workload.page_path}",
            "origins": archive.hosts if archive else [],
            # Speed Index from screencast frames: replayed pages (QUICBENCH_SPEED_INDEX=1 for every
            # page load, =0 for none); the frames cost the browser some CPU during the load
            "screencast": {"1": True, "0": False}.get(os.environ.get("QUICBENCH_SPEED_INDEX", ""),
                                                      archive is not None),
            "protocol": protocol, "host": target.hostname, "port": target.port, "address": target.address,
            "spki": target.tls.spki_sha256_b64, "trial_dir": str(trial_dir), "profile": str(profile),
            "timeout_s": timeout_s, "executable": self.executable(),
            # QUICBENCH_BROWSER_NETLOG=1 keeps Chromium's net-log of each load (netlog.json), for debugging
            "netlog": str(trial_dir / "netlog.json") if os.environ.get("QUICBENCH_BROWSER_NETLOG") == "1" else None,
            "settle": os.environ.get("QUICBENCH_BROWSER_SETTLE", "1") != "0",
            # QUICBENCH_CHROMIUM_FLAGS adds flags (space-separated) to every load, e.g. for experiments;
            # they are recorded with the others in page.json and summary.json
            "extra_flags": os.environ.get("QUICBENCH_CHROMIUM_FLAGS", "").split(),
        }

    # the child script of one load, how its errors name it, and what its summary.json adds
    child_script: ClassVar[str] = CHILD
    load_label: ClassVar[str] = "browser load"

    def summary_facts(self, page: dict[str, Any]) -> dict[str, Any]:
        """What summary.json records of the browser that loaded the page (or played the video)."""
        return {"chromium": page.get("browser_version"), "flags": page.get("flags")}

    def page_error(self, error: str | None, page: dict[str, Any]) -> str | None:
        """The load's error, with what this browser's own readings add (none for Chromium)."""
        return error

    def fetch(self, req: FetchRequest) -> ClientResult:
        target, protocol, workload, trial_dir = req.target, req.protocol, req.workload, req.trial_dir
        run = run_browser_child(req, self.child_script, "page.json", self.load_label,
                                ("page.json", "page.har", "requests.jsonl", httpstat.REQUESTS_FILE,
                                 httpstat.SUMMARY_FILE),
                                lambda profile: self.child_args(target, protocol, workload, trial_dir,
                                                                req.timeout_s, profile))
        if isinstance(run, ClientResult):
            return run
        page = run.out
        archive = workload.archive() if getattr(workload, "har", None) else None
        if archive is not None:
            mark_replay_misses(page.get("requests") or [], {(e.method, e.host, e.port, e.path)
                                                            for e in archive.entries})
        requests, extra, error = interpret(page, protocol, expected_resources(target, workload),
                                           recorded=archive.recorded if archive else None)
        error = self.page_error(error, page)
        if error is None and archive is None:
            # DNCS's connection phases came from httpstat (curl) fetching the page's HTML, not from
            # the browser: the same fetch (qb-load), on a new connection, once the browser has gone
            phases, why = httpstat.fetch_phases(target, protocol, workload.page_path, trial_dir,
                                                min(req.timeout_s, httpstat.DEADLINE_S))
            extra.update(phases)
            error = why
        summary = write_requests_and_summary(trial_dir, requests, page, {
            "url": page.get("url"), **self.summary_facts(page), "har_entries": page.get("har_entries")})
        return ClientResult(requests=requests, summary=summary, process_cpu_s=run.cpu, wall_s=run.wall,
                            returncode=run.returncode, error=error, extra=extra)


@dataclass
class ChildRun:
    """What a browser child left: its JSON, exit code, CPU and wall seconds."""
    out: dict[str, Any]
    returncode: int
    cpu: float | None
    wall: float


def run_browser_child(req: FetchRequest, child: str, out_name: str, what: str, stale: tuple[str, ...],
                      make_args: Callable[[Path], dict[str, Any]]) -> ChildRun | ClientResult:
    """One browser child for one trial, page load or playback alike: the trial directory without
    a previous attempt's files, a fresh profile (removed after), the child's arguments with the
    key log and (h3) net-log asked for, the child run in the client node, its JSON read back.
    A failed trial's result instead when there is nothing to interpret."""
    trial_dir, options = req.trial_dir, req.options
    trial_dir.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (trial_dir / name).unlink(missing_ok=True)
    profile = Path(tempfile.mkdtemp(prefix=PROFILE_PREFIX))
    os.chmod(profile, 0o700)
    try:
        try:
            args = make_args(profile)
            if options is not None and options.keylog:
                args["keylog"] = str(trial_dir / "keys.log")
            if options is not None and options.qlog and req.protocol == "h3":
                args["netlog"] = str(trial_dir / "netlog.json")   # Chromium writes no qlog: its net-log
        except Exception as e:  # noqa: BLE001 - missing browser or Playwright: a failed trial
            return ClientResult(requests=[], summary={}, process_cpu_s=None, wall_s=0.0, returncode=-1,
                                error=str(e))
        returncode, cpu, wall, killed = run_child(req.target, child, args, trial_dir, req.timeout_s, profile)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    out = _read_json(trial_dir / out_name)
    if not out:
        return ClientResult(requests=[], summary={}, process_cpu_s=cpu, wall_s=wall, returncode=returncode or -1,
                            error=child_failed(what, trial_dir, returncode, killed))
    return ChildRun(out, returncode, cpu, wall)


def write_requests_and_summary(trial_dir: Path, requests: list[dict[str, Any]], out: dict[str, Any],
                               extra: dict[str, Any]) -> dict[str, Any]:
    """requests.jsonl and summary.json of a browser trial (the child's CPU figures, then extra)."""
    with open(trial_dir / "requests.jsonl", "w") as f:
        for r in requests:
            f.write(json.dumps(r) + "\n")
    summary = {k: out[k] for k in ("cpu_user_s", "cpu_sys_s", "cpu_wait_s") if out.get(k) is not None}
    summary.update(extra)
    (trial_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def run_child(target: Target, child: str, args: dict[str, Any], trial_dir: Path, timeout_s: float,
              profile: Path) -> tuple[int, float, float, bool]:
    """Run a browser child (one load or playback) in the client node: (exit code, CPU s, wall s,
    killed at the deadline). Its home is the fresh profile (no NSS database, cache or config is
    shared); a hard stop comes a little after the child's own deadline; nothing outlives it."""
    argv = target.lab.cmd("client", [sys.executable, "-c", child, "--args-json", json.dumps(args)])
    # TMPDIR too: the browser's own temporary directories (/tmp/org.chromium.Chromium.*) live in the
    # profile and go with it, also when a SIGKILL gave the browser no chance to remove them
    (profile / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(profile), XDG_CONFIG_HOME=str(profile / ".config"),
               XDG_CACHE_HOME=str(profile / ".cache"), XDG_DATA_HOME=str(profile / ".local"),
               TMPDIR=str(profile / "tmp"))
    with open(trial_dir / "client.log", "wb") as log:
        result = run_measured(argv, timeout_s + 30, on_deadline=lambda p: _kill_load(p.pid, profile),
                              stdout=log, stderr=log, env=env, start_new_session=True)
    _kill_load(None, profile)
    return result


def child_failed(what: str, trial_dir: Path, returncode: int, killed: bool) -> str:
    """Why a child wrote no result, with the last lines of its log."""
    tail = (trial_dir / "client.log").read_text(errors="replace").strip().splitlines()[-3:]
    why = "killed after the deadline" if killed else f"exit code {returncode}"
    return f"{what} failed ({why})" + (f": {' | '.join(tail)}" if tail else "")


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


def reap_profiles(min_age_s: float = 60.0) -> list[Path]:
    """Remove browser profiles (with the browser's temporary files inside) that a killed run left:
    no browser process uses them and they are older than min_age_s (a load just starting has none
    yet)."""
    removed = []
    for d in Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}*"):
        try:
            old = time.time() - d.stat().st_mtime > min_age_s
        except OSError:
            continue
        if d.is_dir() and old and not browser_pids(d):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _kill_load(pid: int | None, profile: Path) -> None:
    """Kill the child's process group and any browser process of this load (found by its profile)."""
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in browser_pids(profile):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def browser_pids(profile: Path) -> list[int]:
    """Processes of the load that uses this profile, this process excepted: the browser's (found
    by Chromium's --user-data-dir) and every process that inherited the load's TMPDIR (run_child
    sets it for the child; Firefox's content, socket and decoder processes name no profile)."""
    marker = f"--user-data-dir={profile}".encode()
    env_marker = f"\0TMPDIR={profile / 'tmp'}\0".encode()
    out = []
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            if marker in (d / "cmdline").read_bytes() or env_marker in b"\0" + (d / "environ").read_bytes() + b"\0":
                out.append(int(d.name))
        except OSError:
            continue
    return out


# ---------------------------------------------------------------------------------------------
# The child: runs inside the client namespace, drives Chromium for one load.
# ---------------------------------------------------------------------------------------------
