"""Does the player CPU rule flag the playbacks a busy CPU harmed, and only those?

An experiment, run on an otherwise idle machine: the same short video plan (plans/video-cpu.toml:
the LAN link, where the network never limits a 3 Mbit/s ladder) played with the machine quiet
and with busy-loop "hogs" (one per core by default), the arms interleaved repetition by
repetition so that a drift of the machine hits every arm alike. Each arm's trials are real
quicbench runs (`quicbench run ... --reps 1`, one run directory per repetition and arm).

A playback is *harmed* when the viewer saw the CPU's effect: more than 1 % of its frames dropped
or never presented, a stall (on this link only the client's CPU stalls a player), a start-up
more than 1.5 x the quiet arm's median, or a failed trial. The tool prints, per arm, the
figures the rule could use (dropped and skipped frames, the renderer's and the GPU process's CPU
and run-queue wait, the start-up's CPU and its main-thread wait, start-up, stalls), the rule's
flags against harm and against the hog arms (precision, recall), the same for the download rule
(cpu_bound), and a sweep of the rule's three thresholds; it writes the same as JSON
(<out>/player_cpu.json).

    .venv/bin/python tools/video/player_cpu.py --out /tmp/player-cpu            # run and analyse
    .venv/bin/python tools/video/player_cpu.py --out /tmp/player-cpu --analyse  # analyse again

The rule is quicbench.clients.browser.video_metrics.player_cpu_bound; docs/video.md says what it
is and why.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from quicbench.clients.browser.video_metrics import (PLAYER_FRAMES_LOST_LIMIT, PLAYER_RENDERER_WAIT_LIMIT,
                                                     PLAYER_STARTUP_WAIT_LIMIT, player_cpu_bound)
from quicbench.paths import REPO_ROOT

PLAN = REPO_ROOT / "plans" / "video-cpu.toml"
QUICBENCH = Path(sys.executable).with_name("quicbench")
HARM_FRAMES = 0.01          # more than 1 % of the frames lost
HARM_STARTUP = 1.5          # a start-up 1.5 x the quiet arm's median
FIGURES = ("frames_dropped_ratio", "frames_skipped_ratio", "renderer_cpu_pct", "renderer_wait_pct",
           "gpu_process_cpu_pct", "gpu_process_wait_pct", "startup_cpu_pct", "startup_main_wait_pct", "client_cpu_pct", "machine_cpu_pct", "startup_s",
           "stall_total_s", "qoe_lin")
SWEEP_FRAMES = (0.005, 0.01, 0.02)
SWEEP_WAIT = (10.0, 20.0, 40.0)
SWEEP_STARTUP = (30.0, 50.0, 80.0, None)       # None: the frames clause alone


def start_hogs(n: int) -> list[subprocess.Popen]:
    """n busy loops, each its own process (the scheduler spreads them over the cores)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True,
                             stdin=subprocess.DEVNULL) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for h in hogs:
        try:
            os.killpg(h.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        h.wait()


def run_arms(plan: Path, out: Path, arms: list[int], reps: int, only: list[str]) -> None:
    for rep in range(1, reps + 1):
        for hogs in arms:
            arm_dir = out / f"hogs-{hogs}"
            arm_dir.mkdir(parents=True, exist_ok=True)
            argv = [str(QUICBENCH), "run", str(plan), "--reps", "1", "--out", str(arm_dir), "--no-report"]
            for o in only:
                argv += ["--only", o]
            print(f"[rep {rep}/{reps}] {hogs} hog(s): {' '.join(argv)}", flush=True)
            running = start_hogs(hogs)
            try:
                time.sleep(1.0 if hogs else 0.0)       # the hogs are running before the lab is built
                rc = subprocess.run(argv, stdout=subprocess.DEVNULL).returncode
            finally:
                stop_hogs(running)
            if rc not in (0, 1):        # 1: some trials failed, which is data here
                raise SystemExit(f"quicbench run exited {rc}: see {arm_dir}")


def load(out: Path) -> dict[int, list[dict]]:
    """hogs -> every trial row (not warm-ups) of that arm's run directories."""
    arms: dict[int, list[dict]] = {}
    for arm_dir in sorted(out.glob("hogs-*")):
        hogs = int(arm_dir.name.split("-", 1)[1])
        for trials in sorted(arm_dir.glob("*/trials.jsonl")):
            for line in trials.read_text().splitlines():
                row = json.loads(line)
                if not row.get("warmup"):
                    arms.setdefault(hogs, []).append(row)
    return arms


def harmed(row: dict, quiet_startup: float | None) -> bool:
    lost = max(row.get("frames_dropped_ratio") or 0.0, row.get("frames_skipped_ratio") or 0.0)
    slow = (quiet_startup is not None and row.get("startup_s") is not None
            and row["startup_s"] > HARM_STARTUP * quiet_startup)
    return row.get("status") != "ok" or lost > HARM_FRAMES or (row.get("stalls") or 0) > 0 or slow


def confusion(rows: list[dict], flags: list[bool], truth: list[bool]) -> dict:
    tp = sum(f and t for f, t in zip(flags, truth))
    fp = sum(f and not t for f, t in zip(flags, truth))
    fn = sum(t and not f for f, t in zip(flags, truth))
    return {"n": len(rows), "flagged": sum(flags), "harmed": sum(truth), "tp": tp, "fp": fp, "fn": fn,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None}


def analyse(out: Path) -> dict:
    arms = load(out)
    if not arms:
        raise SystemExit(f"no runs under {out}: run the experiment first (without --analyse)")
    quiet = [r["startup_s"] for r in arms.get(0, []) if r.get("status") == "ok" and r.get("startup_s")]
    quiet_startup = statistics.median(quiet) if quiet else None
    rows = [r for hogs in sorted(arms) for r in arms[hogs]]
    truth = [harmed(r, quiet_startup) for r in rows]
    hogged = [hogs > 0 for hogs in sorted(arms) for _ in arms[hogs]]

    def rule(r: dict, frames: float = PLAYER_FRAMES_LOST_LIMIT, wait: float = PLAYER_RENDERER_WAIT_LIMIT,
             startup: float = PLAYER_STARTUP_WAIT_LIMIT) -> bool:
        return bool(player_cpu_bound(r, frames, wait, startup))

    flags = [rule(r) for r in rows]
    download_rule = [bool(r.get("cpu_bound")) for r in rows]
    per_arm = {}
    for hogs in sorted(arms):
        a = arms[hogs]
        per_arm[hogs] = {"trials": len(a), "failed": sum(r.get("status") != "ok" for r in a),
                         "harmed": sum(harmed(r, quiet_startup) for r in a), "flagged": sum(rule(r) for r in a),
                         "download_rule": sum(bool(r.get("cpu_bound")) for r in a),
                         "median": {f: _median([r.get(f) for r in a]) for f in FIGURES}}
    sweep = [{"frames_limit": fl, "wait_limit": wl, "startup_limit": sl,
              **confusion(rows, [rule(r, fl, wl, math.inf if sl is None else sl) for r in rows], truth)}
             for fl in SWEEP_FRAMES for wl in SWEEP_WAIT for sl in SWEEP_STARTUP]
    return {"quiet_startup_median_s": quiet_startup, "arms": per_arm,
            "rule": {"frames_limit": PLAYER_FRAMES_LOST_LIMIT, "wait_limit": PLAYER_RENDERER_WAIT_LIMIT,
                     "startup_limit": PLAYER_STARTUP_WAIT_LIMIT, "vs_harm": confusion(rows, flags, truth), "vs_hog_arm": confusion(rows, flags, hogged)},
            "download_rule": {"vs_harm": confusion(rows, download_rule, truth),
                              "vs_hog_arm": confusion(rows, download_rule, hogged)},
            "sweep": sweep,
            "trials": [{"hogs": h, "key": r.get("key"), "status": r.get("status"), "harmed": t, "flagged": f,
                        **{k: r.get(k) for k in FIGURES}}
                       for h, r, t, f in zip([h for h in sorted(arms) for _ in arms[h]], rows, truth, flags)]}


def _median(values: list) -> float | None:
    v = [x for x in values if isinstance(x, (int, float))]
    return round(statistics.median(v), 4) if v else None


def show(res: dict) -> None:
    print(f"\nquiet start-up median: {res['quiet_startup_median_s']} s; harmed = >{100 * HARM_FRAMES:g} % frames "
          f"lost, a stall, start-up > {HARM_STARTUP} x that, or failed")
    heads = ["hogs", "trials", "failed", "harmed", "flagged", "download rule", *FIGURES]
    print("\nmedians per arm\n" + " | ".join(heads))
    for hogs, a in res["arms"].items():
        print(" | ".join(str(x) for x in [hogs, a["trials"], a["failed"], a["harmed"], a["flagged"],
                                          a["download_rule"], *[a["median"][f] for f in FIGURES]]))
    for name in ("rule", "download_rule"):
        for against in ("vs_harm", "vs_hog_arm"):
            c = res[name][against]
            print(f"{name} {against}: flagged {c['flagged']}/{c['n']}, positives {c['harmed']}, "
                  f"precision {c['precision']}, recall {c['recall']}")
    print("\nsweep against harm: (frames lost > X and renderer wait >= Y % of the playback) or "
          "(main thread wait >= Z % of the start-up)")
    print("X | Y | Z | flagged | tp | fp | fn | precision | recall")
    for s in res["sweep"]:
        print(" | ".join(str(s[k]) for k in ("frames_limit", "wait_limit", "startup_limit", "flagged", "tp", "fp",
                                              "fn", "precision", "recall")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for the arms' runs and player_cpu.json")
    ap.add_argument("--plan", type=Path, default=PLAN)
    ap.add_argument("--reps", type=int, default=3, help="repetitions per arm, interleaved (default 3)")
    ap.add_argument("--hogs", default=f"0,{os.cpu_count() or 1}",
                    help="busy loops per arm, comma-separated (default: 0 and one per core)")
    ap.add_argument("--only", action="append", default=[], help="passed to quicbench run (repeatable)")
    ap.add_argument("--analyse", action="store_true", help="analyse the runs already under --out, run nothing")
    a = ap.parse_args(argv)
    try:
        arms = [int(x) for x in a.hogs.split(",")]
    except ValueError:
        ap.error(f"--hogs: '{a.hogs}' is not a comma-separated list of counts (e.g. 0,2)")
    if 0 not in arms or any(x < 0 for x in arms):
        ap.error(f"--hogs: '{a.hogs}' needs the quiet arm 0 and no negative count")
    if a.reps < 1:
        ap.error(f"--reps: {a.reps}: at least 1")
    if not a.analyse:
        if not a.plan.is_file():
            ap.error(f"--plan: no such file '{a.plan}'")
        run_arms(a.plan, a.out, arms, a.reps, a.only)
    res = analyse(a.out)
    (a.out / "player_cpu.json").write_text(json.dumps(res, indent=1))
    show(res)
    print(f"\nwritten: {a.out / 'player_cpu.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
