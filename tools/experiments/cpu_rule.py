"""Choose the CPU-bound rule by experiment and write docs/results/cpu-rule.md.

Runs a plan (the built-in default plan unless --plan) twice with `quicbench run`: on a quiet
machine, then with one CPU hog per core at plain priority (nice 0), and pairs the trials by key.
A hog-run trial's goodput *moved* when it lies outside its quiet cell's 99 % prediction interval
(t on log goodput, n − 1 degrees of freedom) and differs from the quiet cell's geometric mean by
at least 5 %. Every candidate rule judges every trial of both runs from the CPU columns the rows
hold (quicbench.cpu.PathCpu.from_row): a flag on a trial that moved is a true positive, a flag on
any other trial (each quiet trial included) a false positive, a moved trial without one a miss.
The page gives each rule's precision and recall and every trial's numbers.

Run it on an otherwise idle machine (about 6 minutes for the default plan; root, as `quicbench
run`):

    .venv/bin/python tools/experiments/cpu_rule.py
    # a smaller subset, to try it out (the page then says it is one)
    .venv/bin/python tools/experiments/cpu_rule.py --reps 3 --only condition=broadband --page /tmp/cpu-rule.md
    # the page again from two finished runs
    .venv/bin/python tools/experiments/cpu_rule.py --quiet runs/A --hog runs/B
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats

from quicbench.cpu import (DEFAULT_RULE, PATH_PROCESSES, RAN_SHARE, PathCpu, machine_busy_share, machine_cpu_ticks,
                           ran_or_waited, ran_or_waited_on_busy)
from quicbench.model.plan import Plan

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "results" / "cpu-rule.md"
PREDICTION = 0.99        # the quiet cell's prediction interval
MIN_CHANGE = 0.05        # and at least this change of goodput
MACHINE_BUSY = 0.9       # the previous `machine` rule
TARGET = 0.9             # precision and recall the chosen rule must reach
FACTS = "cpu-rule-facts.json"   # in the hog run's directory: machine, hogs, command
NOTES = "cpu-rule-notes.md"     # in the hog run's directory: the author's reading, put under the verdict


# -- the candidate rules ------------------------------------------------------------------------

def machine_rule(e: PathCpu) -> list[str]:
    """The previous `machine` rule: all CPUs ≥ 90 % busy and goodput below 80 % of the rate."""
    return ["machine"] if (e.machine_busy or 0.0) >= MACHINE_BUSY and not e.link_limited else []


def previous_rule(e: PathCpu) -> list[str]:
    """The rule before this experiment: client or server ran ≥ 90 % of a core, or ran + waited
    ≥ 90 % below 80 % of the rate; or the machine rule."""
    who = []
    for p in ("client", "server"):
        ran = e.ran_share(p)
        if ran is not None and (ran >= RAN_SHARE or (ran + (e.wait_share(p) or 0.0) >= RAN_SHARE
                                                     and not e.link_limited)):
            who.append(p)
    return who + machine_rule(e)


def ran_only(e: PathCpu) -> list[str]:
    return e.ran_at_least(RAN_SHARE)


def path_waited(share: float) -> Callable[[PathCpu], list[str]]:
    return lambda e: e.waiters() if (e.path_wait_share() or 0.0) >= share else []


def one_waited(share: float) -> Callable[[PathCpu], list[str]]:
    return lambda e: [p for p in PATH_PROCESSES if (e.wait_share(p) or 0.0) >= share]


def below_rate(rule: Callable[[PathCpu], list[str]]) -> Callable[[PathCpu], list[str]]:
    return lambda e: [] if e.link_limited else rule(e)


CANDIDATES: list[tuple[str, Callable[[PathCpu], list[str]]]] = [
    ("quicbench's default (`quicbench.cpu.DEFAULT_RULE`)", DEFAULT_RULE),
    ("previous rule: client/server ran ≥ 90 %, or ran + waited ≥ 90 % below 80 % of the rate, or `machine`",
     previous_rule),
    ("previous `machine` alone: all CPUs ≥ 90 % busy, goodput < 80 % of the rate", machine_rule),
    ("a path process ran ≥ 90 % of a core", ran_only),
    *[(f"the path's processes together waited ≥ {100 * x:g} % of the transfer", path_waited(x))
      for x in (0.02, 0.05, 0.1, 0.2)],
    *[(f"one path process waited ≥ {100 * x:g} %", one_waited(x)) for x in (0.05, 0.1)],
    *[(f"ran ≥ 90 %, or the path waited ≥ {100 * x:g} %", ran_or_waited(wait=x)) for x in (0.05, 0.1, 0.2)],
    ("ran ≥ 90 %, or the path waited ≥ 10 %, only below 80 % of the rate", below_rate(ran_or_waited(wait=0.1))),
    *[(f"ran ≥ 90 %, or the path waited ≥ {100 * x:g} % while all CPUs were ≥ 90 % busy",
       ran_or_waited_on_busy(wait=x)) for x in (0.05, 0.1, 0.2)],
]


# -- the runs -----------------------------------------------------------------------------------

def quicbench_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "quicbench"
    return [str(exe)] if exe.exists() else ["quicbench"]


def machine_busy(seconds: float = 5.0) -> float | None:
    t0 = machine_cpu_ticks()
    time.sleep(seconds)
    return machine_busy_share(t0, machine_cpu_ticks())


def start_hogs(n: int) -> list[subprocess.Popen]:
    """n busy loops at nice 0 (whatever this tool's niceness), each in its own session."""
    def plain_priority() -> None:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=plain_priority,
                             start_new_session=True, stdin=subprocess.DEVNULL) for _ in range(n)]


def stop_hogs(hogs: Iterable[subprocess.Popen]) -> None:
    for h in hogs:
        if h.poll() is None:
            os.kill(h.pid, signal.SIGKILL)
        h.wait()


def run_plan(args: argparse.Namespace, label: str) -> Path:
    """`quicbench run` into args.out; the new run directory."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in out.iterdir()}
    cmd = [*quicbench_cmd(), "run", *([args.plan] if args.plan else []), "--out", str(out), "--no-report",
           *(["--reps", str(args.reps)] if args.reps else []), *(x for o in args.only for x in ("--only", o))]
    print(f"[{label}] {shlex.join(cmd)}", file=sys.stderr, flush=True)
    rc = subprocess.run(cmd).returncode
    new = [p for p in out.iterdir() if p.name not in before and (p / "meta.json").exists()]
    if len(new) != 1:
        sys.exit(f"cpu_rule: the {label} run (exit {rc}) left {len(new)} run directories in {out}")
    return new[0]


# -- the analysis ---------------------------------------------------------------------------------

def final_rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The final row of every measured trial (warm-ups out, a retry supersedes its failure), by key."""
    rows: dict[str, dict[str, Any]] = {}
    plain = run_dir / "trials.jsonl"
    # a run directory, or its rows as docs/results keeps them (quicbench results publish: gzip)
    with (open(plain) if plain.is_file() else gzip.open(run_dir / "trials.jsonl.gz", "rt")) as f:
        for line in f:
            r = json.loads(line)
            if not r.get("warmup"):
                rows[r["key"]] = r
    return rows


def link_rates(run_dir: Path) -> dict[str, float | None]:
    """Each condition's download rate (the goodput guard's reference), from the run's plan."""
    plan = Plan.model_validate(json.loads((run_dir / "meta.json").read_text())["plan"])
    return {c.name: c.down_rate_mbit for c in plan.conditions}


def cell_of(key: str) -> str:
    return key.rsplit("|", 1)[0]


@dataclass
class Interval:
    geo_mean: float
    low: float
    high: float
    n: int


def prediction_interval(goodputs: list[float], level: float = PREDICTION) -> Interval | None:
    """Where one more trial of the cell falls with probability `level` (t on log values)."""
    logs = [math.log(g) for g in goodputs if g and g > 0]
    n = len(logs)
    if n < 3:
        return None
    m = sum(logs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd * math.sqrt(1 + 1 / n)
    return Interval(math.exp(m), math.exp(m - half), math.exp(m + half), n)


def moved(goodput: float | None, pi: Interval | None, min_change: float) -> bool | None:
    """Outside the quiet cell's prediction interval and at least min_change from its geometric mean;
    None when it cannot be judged (no goodput, or fewer than 3 quiet trials in the cell)."""
    if goodput is None or pi is None:
        return None
    return (goodput < pi.low or goodput > pi.high) and abs(goodput / pi.geo_mean - 1) >= min_change


@dataclass
class Trial:
    run: str                   # "quiet" or "hog"
    key: str
    row: dict[str, Any]
    evidence: PathCpu
    moved: bool | None         # None: not judged


@dataclass
class Score:
    name: str
    quiet_flagged: int
    hog_flagged: int
    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def worst(self) -> float:
        return min(self.precision or 0.0, self.recall or 0.0)


def build_trials(quiet_dir: Path, hog_dir: Path, min_change: float) -> tuple[list[Trial], dict[str, Interval | None]]:
    quiet, hog = final_rows(quiet_dir), final_rows(hog_dir)
    rates = link_rates(quiet_dir)
    cells: dict[str, list[float]] = {}
    for k, r in quiet.items():
        if r.get("status") == "ok" and r.get("goodput_mbps"):
            cells.setdefault(cell_of(k), []).append(r["goodput_mbps"])
    pis = {c: prediction_interval(g) for c, g in cells.items()}
    sensitive = cpu_sensitive_cells(hog, pis, min_change)
    trials = []
    for run, rows in (("quiet", quiet), ("hog", hog)):
        for k, r in rows.items():
            if r.get("status") != "ok":
                continue
            e = PathCpu.from_row(r, rates.get(r["condition"]))
            # a quiet trial's CPU set its pace when taking CPU away moves its cell; a hog trial's
            # when it moved itself
            truth = (sensitive.get(cell_of(k)) if run == "quiet"
                     else moved(r.get("goodput_mbps"), pis.get(cell_of(k)), min_change))
            trials.append(Trial(run, k, r, e, truth))
    return trials, pis


def cpu_sensitive_cells(hog: dict[str, dict[str, Any]], pis: dict[str, Interval | None],
                        min_change: float) -> dict[str, bool | None]:
    """Cells whose goodput the hogs moved as a whole: the geometric mean of the cell's hog trials is
    outside the quiet cell's prediction interval and at least min_change from its geometric mean.
    There the CPU, not the link, set the pace of the quiet trials too (less CPU, less goodput)."""
    by: dict[str, list[float]] = {}
    for k, r in hog.items():
        if r.get("status") == "ok" and r.get("goodput_mbps"):
            by.setdefault(cell_of(k), []).append(r["goodput_mbps"])
    out: dict[str, bool | None] = {}
    for c, pi in pis.items():
        g = by.get(c)
        out[c] = None if pi is None or not g else moved(math.exp(sum(map(math.log, g)) / len(g)), pi, min_change)
    return out


def score(name: str, rule: Callable[[PathCpu], list[str]], trials: list[Trial]) -> Score:
    s = Score(name, 0, 0, 0, 0, 0)
    for t in trials:
        if t.moved is None:
            continue
        flagged = bool(rule(t.evidence))
        if t.run == "quiet":
            s.quiet_flagged += flagged
        else:
            s.hog_flagged += flagged
        if flagged and t.moved:
            s.tp += 1
        elif flagged:
            s.fp += 1
        elif t.moved:
            s.fn += 1
    return s


# -- the page -----------------------------------------------------------------------------------

def pct(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f} %"


def num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def shown(d: Path) -> str:
    """A run directory as the page names it: relative to the repository when inside it."""
    try:
        return str(d.resolve().relative_to(REPO))
    except ValueError:
        return str(d)


def page(args: argparse.Namespace, quiet_dir: Path, hog_dir: Path, facts: dict[str, Any]) -> tuple[str, Score, Score]:
    trials, pis = build_trials(quiet_dir, hog_dir, args.min_change)
    scores = [score(name, rule, trials) for name, rule in CANDIDATES]
    default = scores[0]
    best = max(scores, key=lambda s: (s.worst, (s.precision or 0) + (s.recall or 0)))
    hog = [t for t in trials if t.run == "hog"]
    quiet = [t for t in trials if t.run == "quiet"]
    n_moved = sum(bool(t.moved) for t in hog)
    unjudged = sum(t.moved is None for t in trials)
    meta = json.loads((quiet_dir / "meta.json").read_text())
    subset = bool(meta.get("only") or meta.get("reps"))
    hog_meta = json.loads((hog_dir / "meta.json").read_text())
    out = ["# Which trials did the CPU slow down? Choosing the CPU-bound rule by experiment", ""]
    out += [f"Generated by `tools/experiments/cpu_rule.py` on {facts['date']} from the runs "
            f"`{meta.get('run_id') or quiet_dir.name}` (quiet) and `{hog_meta.get('run_id') or hog_dir.name}` "
            f"({facts['hogs']} CPU hogs at nice 0, one per core) of the plan `{(meta.get('plan') or {}).get('name')}`, "
            f"quicbench {(meta.get('host') or {}).get('quicbench_commit') or '(commit not recorded)'}.", ""]
    if facts.get("command"):
        out += ["```", facts["command"], "```", ""]
    if shown(quiet_dir).startswith("docs/results/"):
        out += [f"The two runs' meta.json and rows are committed in `{shown(quiet_dir)}` and `{shown(hog_dir)}` "
                f"(`quicbench results publish`; the hog run's `{FACTS}` holds the facts below); "
                "tests/unit/test_published_results.py rebuilds this page from them.", ""]
    out += [f"Machine: {facts['host']}, {facts['cpus']} CPUs, kernel {facts['kernel']}; busy share of its CPUs "
            f"over 5 s before the quiet run: {pct(facts.get('busy_before'))}."]
    if facts.get("busy_before") is not None and facts["busy_before"] > 0.1:
        out += [f"**The machine was not idle before the quiet run ({pct(facts['busy_before'])} busy): the "
                f"quiet run's noise and flags are not those of a quiet machine; these numbers are indicative only.**"]
    if subset:
        out += [f"**A subset of the plan** (only: {meta.get('only') or '–'}, repetitions: "
                f"{meta.get('reps') or 'the plan'}'s, plan: {args.plan or 'default'}): not the page's publishable numbers."]
    out += ["", "## Method", "",
            "The plan runs twice with `quicbench run`: first on the quiet machine, then with one busy loop per "
            "core at plain priority (nice 0), and the trials are paired by key. A hog-run trial's goodput "
            f"**moved** when it lies outside its quiet cell's {100 * PREDICTION:g} % prediction interval (t on log "
            f"goodput, n − 1 degrees of freedom: where one more quiet trial would fall) and differs from the quiet "
            f"cell's geometric mean by at least {100 * args.min_change:g} %. Every rule judges every successful "
            "trial of both runs from the CPU columns its row holds (client, server and link emulator: on-CPU "
            "and run-queue wait seconds over the transfer; the machine's busy share; goodput against the "
            "link's rate). A quiet trial's CPU **set its pace** when the hogs moved its cell as a whole (the "
            "geometric mean of the cell's hog trials is outside the quiet prediction interval and at least "
            f"{100 * args.min_change:g} % off): with less CPU, less goodput. A flag on a hog trial that moved, or on "
            "a quiet trial whose CPU set its pace, is a true positive; a flag on any other trial a false positive; "
            "such a trial without a flag a miss. Precision = TP / (TP + FP), recall = TP / (TP + FN); the target "
            "is ≥ 0.9 for both.", "",
            f"Trials: {len(quiet)} quiet, {len(hog)} with hogs; {n_moved} of the hog trials moved; "
            f"{sum(bool(t.moved) for t in quiet)} quiet trials are in cells whose CPU set their pace; "
            f"{unjudged} not judged (no goodput, or fewer than 3 successful quiet trials in the cell).", "",
            "## Rules", "",
            "| rule | flagged quiet | flagged with hogs | TP | FP | missed | precision | recall |",
            "|---|---|---|---|---|---|---|---|"]
    for s in scores:
        mark = " **(best)**" if s is best else ""
        out.append(f"| {s.name}{mark} | {s.quiet_flagged} | {s.hog_flagged} | {s.tp} | {s.fp} | {s.fn} | "
                   f"{num(s.precision)} | {num(s.recall)} |")
    meets = (default.precision or 0) >= TARGET and (default.recall or 0) >= TARGET
    out += ["", "## Verdict", "",
            f"quicbench's default rule: precision {num(default.precision)}, recall {num(default.recall)} — "
            + ("meets the target of 0.9 for both." if meets else "**does not meet the target of 0.9 for both.**"),
            f"It flags {default.quiet_flagged} of {len(quiet)} quiet trials (a quiet machine flags only the trials "
            f"whose CPU set their pace).",
            f"Best candidate here: {best.name} (precision {num(best.precision)}, recall {num(best.recall)})."]
    machine = next(s for s in scores if s.name.startswith("previous `machine`"))
    out += [f"The previous machine-busy rule: precision {num(machine.precision)}, recall {num(machine.recall)}, "
            f"{machine.quiet_flagged} quiet trials flagged."]
    if n_moved == 0:
        out += ["**No hog trial moved: the hogs did not slow this plan down, so no rule's recall is measured.**"]
    notes = hog_dir / NOTES
    if notes.is_file():
        # the author's reading of these runs, kept with them so the page is rebuilt whole
        out += ["", notes.read_text().strip()]
    out += ["", "## Trials", "",
            "Goodput in Mbit/s; the hog run's CPU: client / server / link emulator run-queue wait as a share of "
            "the transfer, their largest on-CPU share, the machine's busy share; flags of the default rule and "
            "of the previous machine rule. Quiet trials are listed only when a rule flagged them.", "",
            "| trial | quiet | with hogs | change | quiet cell: geo mean [99 % PI] | moved | wait c / s / l | ran max "
            "| machine | default | machine rule |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    quiet_by_key = {t.key: t for t in quiet}
    for t in trials:
        if t.run == "quiet" and not (DEFAULT_RULE(t.evidence) or machine_rule(t.evidence)):
            continue
        q = quiet_by_key.get(t.key)
        g, gq = t.row.get("goodput_mbps"), q.row.get("goodput_mbps") if q else None
        pi = pis.get(cell_of(t.key))
        cell = f"{pi.geo_mean:.2f} [{pi.low:.2f}, {pi.high:.2f}]" if pi else "–"
        waits = " / ".join(pct(t.evidence.wait_share(p), 1) for p in PATH_PROCESSES)
        ran = max((x for x in (t.evidence.ran_share(p) for p in PATH_PROCESSES) if x is not None), default=None)
        change = f"{100 * (g / gq - 1):+.1f} %" if g and gq and t.run == "hog" else "–"
        out.append(f"| {t.key}{' (quiet)' if t.run == 'quiet' else ''} | {num(gq)} | "
                   f"{num(g) if t.run == 'hog' else '–'} | {change} | {cell} | "
                   f"{'–' if t.moved is None else ('yes' if t.moved else 'no')} | {waits} | {pct(ran)} | "
                   f"{pct(t.evidence.machine_busy)} | {','.join(DEFAULT_RULE(t.evidence)) or ''} | "
                   f"{'yes' if machine_rule(t.evidence) else ''} |")
    out += ["", "To regenerate this page from the same two runs:", "", "```",
            f"python tools/experiments/cpu_rule.py --quiet {shown(quiet_dir)} --hog {shown(hog_dir)}", "```", ""]
    return "\n".join(out), default, best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", help="plan file (default: quicbench's built-in default plan)")
    ap.add_argument("--reps", type=int, help="override the plan's repetitions (at least 3: the quiet cells' noise)")
    ap.add_argument("--only", action="append", default=[], help="passed to quicbench run (repeatable)")
    ap.add_argument("--out", default=str(REPO / "runs" / "cpu-rule"), help="directory for the two runs")
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 1, help="CPU hogs (default: one per core)")
    ap.add_argument("--min-change", type=float, default=MIN_CHANGE, help="smallest goodput change that counts as moved")
    ap.add_argument("--quiet", type=Path, help="an existing quiet run directory (with --hog: no new runs)")
    ap.add_argument("--hog", type=Path, help="an existing run directory measured with hogs")
    ap.add_argument("--page", type=Path, default=PAGE, help=f"where to write the page (default {PAGE})")
    args = ap.parse_args(argv)
    if args.reps is not None and args.reps < 3:
        ap.error("--reps: accepted: 3 or more (a quiet cell's noise needs 3 trials)")
    if (args.quiet is None) != (args.hog is None):
        ap.error("--quiet and --hog: give both run directories, or neither to run the plan twice")
    facts: dict[str, Any] = {"date": dt.date.today().isoformat(), "host": platform.node(), "cpus": os.cpu_count(),
                             "kernel": platform.release(), "hogs": args.hogs}
    if args.quiet:
        quiet_dir, hog_dir = args.quiet, args.hog
        for d in (quiet_dir, hog_dir):
            if not ((d / "trials.jsonl").is_file() or (d / "trials.jsonl.gz").is_file()):
                ap.error(f"{d}: not a run directory with trials (no trials.jsonl or trials.jsonl.gz)")
        kept = hog_dir / FACTS
        facts.update(json.loads(kept.read_text()) if kept.exists() else {"busy_before": None})
    else:
        facts["command"] = shlex.join(["python", "tools/experiments/cpu_rule.py", *(argv or sys.argv[1:])])
        facts["busy_before"] = machine_busy()
        if facts["busy_before"] is not None and facts["busy_before"] > 0.1:
            print(f"cpu_rule: the machine is {100 * facts['busy_before']:.0f} % busy before the quiet run: "
                  "the page will say its numbers are indicative only", file=sys.stderr)
        quiet_dir = run_plan(args, "quiet")
        hogs = start_hogs(args.hogs)
        try:
            time.sleep(1.0)
            hog_dir = run_plan(args, f"{args.hogs} hogs")
        finally:
            stop_hogs(hogs)
        # what the page says of the runs, kept beside the hog run for regenerating it
        (hog_dir / FACTS).write_text(json.dumps({**facts, "quiet_run": str(quiet_dir)}, indent=1))
    text, default, best = page(args, quiet_dir, hog_dir, facts)
    args.page.parent.mkdir(parents=True, exist_ok=True)
    args.page.write_text(text)
    print(f"page: {args.page}")
    print(f"default rule: precision {num(default.precision)}, recall {num(default.recall)}, "
          f"{default.quiet_flagged} quiet trials flagged; best: {best.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
