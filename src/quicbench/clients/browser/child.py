"""The browser child's skeleton: what every browser trial's child does, whatever the browser.

A browser trial runs one child process in the client node (Chromium's: recorder.py for a page
load, video.py for a playback; Firefox's: firefox_child.py). Each drives its browser through a
`ChildPage` (Playwright's page for Chromium, the WebDriver BiDi bridge's for Firefox) and fills
in what only its browser knows (launching it, its network events, its records); the steps below
are the same for both, so both browsers are measured alike:

* `child_main`: parse --args-json, die with the parent, run, and write the result file
  atomically, on a crash too;
* `settle`: wait until the freshly started browser is idle;
* `timed_load` / `timed_playback`: navigate and time the load (until every request has ended) or
  the playback (the player watched by `play`), with the CPU of the child's process tree over the
  same span (`tree_cpu`: user, system, run-queue wait; for a playback also per process kind and
  thread: `sched_snapshot`, `sched_delta`);
* `read_timing`: the page's Navigation, Paint and Resource Timing after a load;
* `plays_h264`: the MSE codec check before a playback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quicbench.clients.browser.video_metrics import END_SLACK_S

MSE_TYPE = 'video/mp4; codecs="avc1.64001f"'
STARTUP_LIMIT_S = 30.0        # no first frame after this long: the trial fails
STALL_LIMIT_S = 20.0          # a stall longer than this "never ends": the trial fails


class ChildPage(ABC):
    """One browser's page as its child drives it."""
    Error: type[Exception] = Exception     # what a failed navigation or script raises

    @abstractmethod
    def goto(self, url: str, timeout_s: float) -> None:
        """Navigate and wait for the load event (Error after timeout_s)."""

    @abstractmethod
    def evaluate(self, js: str) -> Any:
        """The JSON-able result of js, the source of a function without arguments."""

    @abstractmethod
    def wait_for_timeout(self, ms: float) -> None:
        """Wait ms milliseconds (the browser's events go on arriving)."""

    def error_line(self, e: BaseException) -> str:
        """What a trial's error says of e: its first line."""
        return str(e).splitlines()[0] if str(e) else type(e).__name__


def descendants(root: int) -> list[int]:
    """The live descendants of process root (from the parent pids in /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def tree_cpu() -> tuple[float, float, float]:
    """User CPU, system CPU and run-queue wait seconds of this process and every live descendant
    (driver, browser).

    CPU is the scheduler's nanosecond run time (cpu.process_sched_seconds), split into user and
    system in the proportion of the processes' clock-tick counters; wait is the time they were
    runnable but waited for a CPU.
    """
    from quicbench.cpu import process_sched_seconds
    tick = os.sysconf("SC_CLK_TCK")
    user = sys_ = total = wait = 0.0
    for pid in [os.getpid(), *descendants(os.getpid())]:
        try:
            f = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user += int(f[11]) / tick
        sys_ += int(f[12]) / tick
        run, waited = process_sched_seconds(pid) or (0.0, 0.0)
        total, wait = total + run, wait + waited
    ticks = user + sys_
    if ticks > 0 and total > 0:
        return total * user / ticks, total * sys_ / ticks, wait
    return user, sys_, wait


SETTLE_IDLE = 0.05      # the browser is settled when it uses less than 5 % of a core ...
SETTLE_WINDOW = 0.2     # ... over this many seconds
SETTLE_MAX = 5.0        # give up waiting after this long (the load still runs)


def wait_until_idle(page: ChildPage) -> float:
    """Wait until the freshly started browser is idle, so that its start-up work (processes,
    profile, component set-up) does not compete with the measured load for the CPU."""
    t0 = time.monotonic()
    last = sum(tree_cpu()[:2])
    while time.monotonic() - t0 < SETTLE_MAX:
        page.wait_for_timeout(SETTLE_WINDOW * 1000)
        now = sum(tree_cpu()[:2])
        if now - last < SETTLE_IDLE * SETTLE_WINDOW:
            break
        last = now
    return round(time.monotonic() - t0, 3)


def settle(page: ChildPage, a: dict[str, Any], out: dict[str, Any]) -> None:
    """Unless the arguments say settle = false: wait until the browser is idle (out's settle_s)."""
    if a.get("settle", True):
        out["settle_s"] = wait_until_idle(page)


def record_cpu(out: dict[str, Any], before: tuple[float, float, float], after: tuple[float, float, float]) -> None:
    """The child tree's CPU between two tree_cpu readings: cpu_user_s, cpu_sys_s, cpu_wait_s."""
    out["cpu_user_s"], out["cpu_sys_s"] = max(0.0, after[0] - before[0]), max(0.0, after[1] - before[1])
    out["cpu_wait_s"] = max(0.0, after[2] - before[2])


def timed_load(page: ChildPage, a: dict[str, Any], out: dict[str, Any], pending: Callable[[], int]) -> None:
    """Load a["url"] once (deadline a["timeout_s"]) and time it: load_wall_s from the navigation's
    start until every request has ended (pending() is 0; network events can trail the load event
    by a few ms: at most 5 s more), the child tree's CPU over the same span, and a failed
    navigation's first line as out's error."""
    cpu0 = tree_cpu()
    t0 = time.time()
    try:
        page.goto(a["url"], a["timeout_s"])
    except page.Error as e:
        out["error"] = page.error_line(e)
    deadline = time.time() + 5
    while pending() and time.time() < deadline:
        page.wait_for_timeout(25)
    out["load_wall_s"] = time.time() - t0
    record_cpu(out, cpu0, tree_cpu())


def read_timing(page: ChildPage, js: str, out: dict[str, Any]) -> dict[str, Any]:
    """The timing script's result after a load that did not fail, else {} (a script that fails:
    out's timing_error)."""
    if out["error"] is not None:
        return {}
    try:
        return page.evaluate(js) or {}
    except page.Error as e:
        out["timing_error"] = page.error_line(e)
        return {}


def plays_h264(page: ChildPage, a: dict[str, Any], out: dict[str, Any], browser: str, fix: str) -> bool:
    """Whether this browser's MediaSource plays H.264 (out's mse_h264); when not, out's error names
    the browser's executable and the fix."""
    supported = page.evaluate(f"() => window.MediaSource ? MediaSource.isTypeSupported('{MSE_TYPE}') : null")
    out["mse_h264"] = supported
    if not supported:
        out["error"] = (f"this {browser} ({a['executable']}) cannot play H.264 in MediaSource "
                        f"(isTypeSupported('{MSE_TYPE}') is {supported}): {fix}")
    return bool(supported)


def timed_playback(page: ChildPage, a: dict[str, Any], out: dict[str, Any]) -> None:
    """Open the player page a["url"] and watch it play (play), timed: t_end_ms, play_wall_s, the
    child tree's CPU, and its scheduler time per process kind and thread over the whole playback,
    from the load's start to the first frame and from the first frame to the stop; a failure of
    the page or the player's script is out's error."""
    cpu0 = tree_cpu()
    sched0 = sched_snapshot()
    at_playing: dict = {}
    t0 = time.time()
    try:
        page.goto(a["url"], a["timeout_s"])
        play(page, a, out, at_playing)
    except page.Error as e:
        out["error"] = f"video page over {a['protocol']} failed: {page.error_line(e)}"
    out["t_end_ms"] = time.time() * 1000
    out["play_wall_s"] = time.time() - t0
    cpu1 = tree_cpu()
    sched1 = sched_snapshot()
    out["sched"] = sched_delta(sched0, sched1)
    if at_playing:       # load start -> first frame, first frame -> stop
        out["sched_startup"] = {"wall_s": round(at_playing["t"] - t0, 3),
                                **sched_delta(sched0, at_playing["threads"])}
        out["sched_playback"] = {"wall_s": round(time.time() - at_playing["t"], 3),
                                 **sched_delta(at_playing["threads"], sched1)}
    record_cpu(out, cpu0, cpu1)


_STATE_JS = """() => { const l = window.qbLog; if (!l) return null;
  const ev = l.events, v = document.getElementById('v');
  return {n: ev.length, playing: ev.some(e => e.type === 'playing'), ended: ev.some(e => e.type === 'ended'),
          last: ev.length ? ev[ev.length - 1].type : null, t_last: ev.length ? ev[ev.length - 1].t : null,
          fatal: l.errors.filter(e => e.fatal).length, pos: v ? v.currentTime : null,
          waiting_since: (() => { for (let i = ev.length - 1; i >= 0; i--) {
            if (ev[i].type === 'playing') return null; if (ev[i].type === 'waiting') return ev[i].t; }
            return null; })(),
          now: performance.timeOrigin + performance.now()}; }"""

# Firefox's process types as the CPU columns name Chromium's: the content process ("tab") runs the
# page (the player's JavaScript, MSE) as Chromium's renderer does; Firefox decodes video in its
# RDD process ("firefox:rdd"), which Chromium does in the renderer (docs/video.md, Firefox)
FIREFOX_KINDS = {"tab": "renderer", "gpu": "gpu-process"}


def process_kind(pid: int) -> str | None:
    """What a process of the browser's tree is: Chromium's `--type` (renderer, gpu-process,
    utility:<sub-type>, zygote, ...), Firefox's `-contentproc` type (FIREFOX_KINDS), `browser` for
    the browser's main process, `driver` for the rest (this child, Playwright's driver, the
    Firefox bridge); None when it is gone."""
    try:     # Chromium rewrites its helpers' command lines into one string: split at spaces too
        argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return None
    if b"-contentproc" in argv:     # Firefox's child processes end their command line with their type
        ptype = argv[-1].decode(errors="replace")
        return FIREFOX_KINDS.get(ptype, f"firefox:{ptype}")
    kind = next((a[7:].decode() for a in argv if a.startswith(b"--type=")), None)
    if kind == "utility":
        sub = next((a.split(b"=", 1)[1].decode() for a in argv if a.startswith(b"--utility-sub-type=")), "")
        return f"utility:{sub.rsplit('.', 1)[-1] or '?'}"
    if kind:
        return kind
    name = Path(argv[0].decode(errors="replace")).name if argv else ""
    return "browser" if "chrom" in name or "firefox" in name else "driver"


def sched_snapshot() -> dict[tuple[int, int], tuple[str, str, float, float]]:
    """(pid, tid) -> (process kind, thread name, on-CPU s, run-queue wait s) of every thread of
    this child's tree (the scheduler's nanosecond counters, /proc/PID/task/TID/schedstat); a
    process's main thread is named `main` (a renderer's runs the page's JavaScript)."""
    out = {}
    for pid in [os.getpid(), *descendants(os.getpid())]:
        kind = process_kind(pid)
        if kind is None:
            continue
        try:
            tasks = list((Path("/proc") / str(pid) / "task").iterdir())
        except OSError:
            continue
        for t in tasks:
            try:
                run, wait = (t / "schedstat").read_text().split()[:2]
                name = (t / "comm").read_text().strip()
            except (OSError, ValueError):
                continue
            tid = int(t.name)
            out[(pid, tid)] = (kind, "main" if tid == pid else name, int(run) / 1e9, int(wait) / 1e9)
    return out


def sched_delta(before: dict, after: dict) -> dict[str, dict[str, list[float]]]:
    """On-CPU and wait seconds between two snapshots, per process kind and per (kind, thread
    name): {"by_process": {kind: [cpu, wait]}, "by_thread": {"kind/thread": [cpu, wait]}}. A thread
    born between the snapshots counts from zero; one that ended is not counted."""
    by_process: dict[str, list[float]] = {}
    by_thread: dict[str, list[float]] = {}
    for key, (kind, name, run, wait) in after.items():
        _, _, run0, wait0 = before.get(key, (kind, name, 0.0, 0.0))
        d_run, d_wait = max(0.0, run - run0), max(0.0, wait - wait0)
        for table, k in ((by_process, kind), (by_thread, f"{kind}/{name}")):
            acc = table.setdefault(k, [0.0, 0.0])
            acc[0] += d_run
            acc[1] += d_wait
    rnd = lambda t: {k: [round(v[0], 3), round(v[1], 3)] for k, v in sorted(t.items())}  # noqa: E731
    return {"by_process": rnd(by_process), "by_thread": rnd(by_thread)}


def play(page: ChildPage, a: dict, out: dict, at_playing: dict) -> None:
    """Wait while the player plays: until the watched time is reached (VOD: or its end), a fatal
    player error, a stall longer than STALL_LIMIT_S, or no start within STARTUP_LIMIT_S. At the
    first `playing`, at_playing gets the time and the threads' scheduler counters (sched_snapshot)."""
    t0 = time.time()
    deadline = t0 + a["timeout_s"]
    t_play = None
    while True:
        page.wait_for_timeout(250)
        s = page.evaluate(_STATE_JS) or {}
        now = time.time()
        if s.get("fatal"):
            out["stop_reason"] = "player error"
            return
        if s.get("playing") and t_play is None:
            t_play = now
            at_playing.update(t=time.time(), threads=sched_snapshot())   # splits start-up and playback
        if t_play is None and now - t0 > STARTUP_LIMIT_S:
            out["stop_reason"] = f"no playback after {STARTUP_LIMIT_S:.0f} s"
            return
        if s.get("waiting_since") and t_play is not None and (s["now"] - s["waiting_since"]) / 1000 > STALL_LIMIT_S:
            out["stop_reason"] = f"stalled for more than {STALL_LIMIT_S:.0f} s"
            return
        if s.get("ended") or (a.get("vod") and (s.get("pos") or 0) >= a["play_s"] - END_SLACK_S):
            out["stop_reason"] = "ended"
            return
        if t_play is not None and now - t_play >= a["play_s"] + (2.0 if a.get("vod") else 0.0):
            out["stop_reason"] = "duration reached"
            return
        if now > deadline:
            out["stop_reason"] = "trial timeout"
            return


def _die_with_parent(profile: Path) -> None:
    """If quicbench dies (even by SIGKILL), this load and its browser die too: the kernel sends
    SIGTERM on the parent's death (PR_SET_PDEATHSIG), and the handler kills the load's processes."""
    import ctypes
    import shutil
    import signal

    from quicbench.clients.browser.driver import _kill_load, browser_pids

    def on_parent_death(signum: int, frame: object) -> None:
        _kill_load(None, profile)             # the browser (its own process group), found by its profile
        deadline = time.monotonic() + 3       # its processes end, then nothing writes the profile any more
        while browser_pids(profile) and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(profile, ignore_errors=True)   # the parent that would have removed it is gone
        os.killpg(os.getpgrp(), signal.SIGKILL)   # then our group (Playwright's driver and us)

    signal.signal(signal.SIGTERM, on_parent_death)
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:                     # the parent died before the call
        on_parent_death(signal.SIGTERM, None)


def child_main(argv: list[str] | None, description: str, run: Callable[[dict[str, Any]], dict[str, Any]],
               out_name: str, echo: tuple[str, ...], empty: dict[str, Any], indent: int | None = None) -> int:
    """A browser child's whole life: parse --args-json, die with the parent, run, and write
    out_name atomically — on a crash of the browser or driver too, with the error, the echo keys
    of the arguments and the empty fields the parent expects."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--args-json", required=True)
    a = json.loads(ap.parse_args(argv).args_json)
    trial_dir = Path(a["trial_dir"])
    _die_with_parent(Path(a["profile"]))
    try:
        out = run(a)
    except Exception as e:  # noqa: BLE001 - a crash of the browser or driver, reported in the result file
        out = {**{k: a.get(k) for k in echo},
               "error": f"browser failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
               **empty}
        print(out["error"], file=sys.stderr)
    tmp = trial_dir / (out_name + ".tmp")
    tmp.write_text(json.dumps(out, indent=indent))
    os.replace(tmp, trial_dir / out_name)
    return 0
