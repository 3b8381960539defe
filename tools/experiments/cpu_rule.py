"""Choose the CPU-bound rule by experiment and write a page of docs/results/runs/cpu-rule/.

Runs a plan (the built-in default plan unless --plan) in pairs with `quicbench run`: on a quiet
machine, then with one CPU hog per core at plain priority (nice 0); --pairs such pairs, one after
the other. Each cell's quiet noise is pooled over every quiet run: a hog-run trial's goodput
*moved* when it lies outside that cell's 99 % prediction interval (t on log goodput, n − 1 degrees
of freedom) and differs from the quiet cell's geometric mean by at least 5 %. Every candidate rule
judges every trial of every run from the CPU columns the rows hold (quicbench.cpu.PathCpu.from_row):
a flag on a hog trial that moved is a true positive; a flag on any other trial (every quiet trial:
the quiet machine is the reference, where nothing should be flagged) a false positive; a moved
trial without one a miss. The page gives each rule's precision and recall, the default rule's for
each pair alone, and every trial's numbers. With two pairs or more, also against two further
truths: moved over the path's noise floor (noise_floor) and moved against the trial's quiet twins
(twin_truth; meant for plans with link_seed, whose twins met the same random losses).

Run it on an otherwise idle machine (about 10 minutes for plans/cpu-rule-bulk.toml; root, as
`quicbench run`):

    .venv/bin/python tools/experiments/cpu_rule.py --plan plans/cpu-rule-bulk.toml
    # a smaller subset, to try it out (the page then says it is one)
    .venv/bin/python tools/experiments/cpu_rule.py --pairs 1 --reps 3 --only condition=broadband --page /tmp/cpu-rule.md
    # the page again from finished runs (quiet and hog runs in pair order)
    .venv/bin/python tools/experiments/cpu_rule.py --quiet runs/QA runs/QB --hog runs/HA runs/HB
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import math
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats

from quicbench.cpu import (DEFAULT_RULE, PATH_PROCESSES, RAN_SHARE, PathCpu, machine_busy_share, machine_cpu_ticks,
                           ran_or_waited, ran_or_waited_on_busy, slowed_against_cell)
from quicbench.model.plan import Plan
from quicbench.stats import DIFFERENT, EQUIVALENT, INCONCLUSIVE, TestResult, adjust, compare
from quicbench.store import read_jsonl_checked

REPO = Path(__file__).resolve().parents[2]
# the experiments' full pages (every trial) sit beside their runs; docs/results/cpu-rule.md sums them up
PAGE = REPO / "docs" / "results" / "runs" / "cpu-rule" / "bulk.md"
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


def softirq_waited(share: float) -> Callable[[PathCpu], list[str]]:
    """The kernel's softirq threads (ksoftirqd) waited ≥ share of the transfer for a CPU."""
    return lambda e: ["softirq"] if (e.softirq_wait_share() or 0.0) >= share else []


def either(*rules: Callable[[PathCpu], list[str]]) -> Callable[[PathCpu], list[str]]:
    return lambda e: [w for r in rules for w in r(e)]


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
# judged against the trial's cell in the same run, after the run (quicbench.cpu.slowed_against_cell,
# what the report applies): not a per-trial rule a trial can apply as it ends. Added after the
# short-transfer experiment showed no per-trial rule works there; tried on fresh pairs since.
def slower_than_siblings(excess: float, covered: float) -> Callable[[Trial], list[str]]:
    """Took ≥ `excess` longer than its cell's median in the same run, and the path's processes
    waited for a CPU at least `covered` of that extra time."""
    return lambda t: slowed_against_cell(t.evidence, t.cell_median_s, excess, covered)


CELL_CANDIDATES: list[tuple[str, Callable[[Trial], list[str]]]] = [
    *[(f"after the run: ≥ {100 * x:g} % slower than its cell's median in the same run, the path's waits "
       f"≥ {100 * c:g} % of the extra time", slower_than_siblings(x, c)) for x, c in ((0.05, 0.5), (0.05, 1.0))],
    ("after the run: the default, or ≥ 5 % slower than its cell's median with waits ≥ 50 % of the extra time",
     lambda t: DEFAULT_RULE(t.evidence) or slower_than_siblings(0.05, 0.5)(t)),
]

# the kernel's deferred packet work: judged only on runs whose rows have softirq_wait_s
SOFTIRQ_CANDIDATES: list[tuple[str, Callable[[PathCpu], list[str]]]] = [
    *[(f"the softirq threads waited ≥ {100 * x:g} % of the transfer", softirq_waited(x)) for x in (0.01, 0.05)],
    *[(f"the default, or the softirq threads waited ≥ {100 * x:g} %", either(DEFAULT_RULE, softirq_waited(x)))
      for x in (0.01, 0.05)],
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

@functools.cache      # a page reads each run's rows for every pair and every rule: once is enough (read-only)
def final_rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The final row of every measured trial (warm-ups out, a retry supersedes its failure), by key."""
    plain = run_dir / "trials.jsonl"
    # a run directory, or its rows as docs/results keeps them (quicbench results publish: gzip)
    read = read_jsonl_checked(plain if plain.is_file() else run_dir / "trials.jsonl.gz")
    return {r["key"]: r for r in read.rows if not r.get("warmup")}


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
    pair: int                  # which quiet/hog pair (0, 1, ...)
    key: str
    row: dict[str, Any]
    evidence: PathCpu
    moved: bool | None         # None: not judged; a quiet trial never moved (it is the reference)
    cell_median_s: float | None = None     # the median time of its cell's trials in the same run
    # moved, and on a path where the hog runs move more trials than the quiet runs judged against
    # each other (noise_floor); None where it cannot be judged (one pair: no quiet run to leave out)
    moved_over_floor: bool | None = None
    # moved against its quiet twins (twin_truth); None where it cannot be judged
    moved_vs_twins: bool | None = None


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


Pair = tuple[Path, Path]      # (quiet run, hog run) of one plan


def quiet_intervals(quiet_dirs: Iterable[Path]) -> dict[str, Interval | None]:
    """Each cell's 99 % prediction interval from its successful trials in every quiet run."""
    cells: dict[str, list[float]] = {}
    for d in quiet_dirs:
        for k, r in final_rows(d).items():
            if r.get("status") == "ok" and r.get("goodput_mbps"):
                cells.setdefault(cell_of(k), []).append(r["goodput_mbps"])
    return {c: prediction_interval(g) for c, g in cells.items()}


def build_trials(pairs: list[Pair], min_change: float) -> tuple[list[Trial], dict[str, Interval | None]]:
    """Every successful trial of every run, judged against the quiet noise of all quiet runs."""
    rates = link_rates(pairs[0][0])
    pis = quiet_intervals(q for q, _ in pairs)
    trials = []
    for i, (quiet_dir, hog_dir) in enumerate(pairs):
        for run, d in (("quiet", quiet_dir), ("hog", hog_dir)):
            for k, r in final_rows(d).items():
                if r.get("status") != "ok":
                    continue
                pi = pis.get(cell_of(k))
                truth = (False if pi is not None else None) if run == "quiet" else \
                    moved(r.get("goodput_mbps"), pi, min_change)
                trials.append(Trial(run, i, k, r, PathCpu.from_row(r, rates.get(r["condition"])), truth))
    cells: dict[tuple[str, int, str], list[Trial]] = {}
    for t in trials:
        if t.evidence.duration_s:
            cells.setdefault((t.run, t.pair, cell_of(t.key)), []).append(t)
    for group in cells.values():
        median = statistics.median(t.evidence.duration_s for t in group)
        for t in group:
            t.cell_median_s = median
    return trials, pis


def moves_left_out(pairs: list[Pair], min_change: float) -> dict[str, tuple[int, int, int]]:
    """The truth's own noise: per condition, how many trials of each quiet run, and of its pair's
    hog run, move against the other quiet runs' cells (every quiet run left out in turn), and how
    many trials each side had. A quiet run's moves are what the truth calls moved with no hog."""
    out: dict[str, list[int]] = {}
    for i, (quiet_dir, hog_dir) in enumerate(pairs):
        pis = quiet_intervals(q for j, (q, _) in enumerate(pairs) if j != i)
        for side, d in ((0, quiet_dir), (1, hog_dir)):
            for k, r in final_rows(d).items():
                if r.get("status") != "ok":
                    continue
                counts = out.setdefault(r["condition"], [0, 0, 0])
                counts[side] += bool(moved(r.get("goodput_mbps"), pis.get(cell_of(k)), min_change))
                counts[2] += side == 0
    return {c: (q, h, n) for c, (q, h, n) in out.items()}


def noise_floor(left_out: dict[str, tuple[int, int, int]]) -> dict[str, bool]:
    """Per condition (path): do the hog runs move more trials than the quiet runs judged against each
    other (`left_out`: moves_left_out's counts; empty with one pair)? Where they do not, the path's moves are what it does without a hog (its
    losses' tail), and no hog trial there counts as moved by the hog. Needs two pairs or more.

    The gate can only take moved trials out of the truth: a flag on a path it closes counts as a false
    positive. A gate wrongly open (noise moved more with hogs by chance) keeps noise in the truth, which
    lowers a correct rule's recall; one wrongly closed (the hogs' moves outnumbered by the quiet runs')
    turns a correct rule's flags there into false positives: either way against the rule."""
    return {c: h > q for c, (q, h, _) in left_out.items()}


def apply_noise_floor(trials: list[Trial], floor: dict[str, bool]) -> None:
    for t in trials:
        if t.moved is not None and floor:
            t.moved_over_floor = t.moved and floor.get(t.row["condition"], False)


TWIN_Z = 3.0       # twin truth: moved beyond this many robust standard deviations of the quiet twins' noise


@dataclass
class TwinNoise:
    scale: float          # 1.4826 x the median absolute log ratio of a quiet trial to its other twins' median
    threshold: float      # max(TWIN_Z x scale, log(1 + min_change)): a log ratio beyond it moved
    quiet_moves: int      # quiet trials beyond it against their other twins (the truth's own noise)
    n: int                # quiet trials judged


def twin_truth(pairs: list[Pair], trials: list[Trial], min_change: float) -> dict[str, TwinNoise]:
    """A third truth, for plans whose link restarts its random draws per repetition (link_seed: a
    trial's twins in the other runs met the same losses and jitter): a hog trial moved when its log
    goodput lies beyond the threshold from the median of its quiet twins (the same key in every quiet
    run). The threshold is robust: per condition, TWIN_Z times 1.4826 x the median absolute deviation
    of every quiet trial's log goodput from the median of its other quiet twins, and at least
    min_change. Needs two pairs or more; sets Trial.moved_vs_twins and returns each condition's noise."""
    if len(pairs) < 2:
        return {}
    logs: dict[str, list[float | None]] = {}
    for j, (q, _) in enumerate(pairs):
        for k, r in final_rows(q).items():
            g = r.get("goodput_mbps") if r.get("status") == "ok" else None
            logs.setdefault(k, [None] * len(pairs))[j] = math.log(g) if g else None
    residuals: dict[str, list[float]] = {}
    for k, xs in logs.items():
        for j, x in enumerate(xs):
            others = [y for i, y in enumerate(xs) if i != j and y is not None]
            if x is not None and others:
                residuals.setdefault(k.split("|", 1)[0], []).append(x - statistics.median(others))
    noise: dict[str, TwinNoise] = {}
    for c, res in residuals.items():
        scale = 1.4826 * statistics.median(abs(x) for x in res)
        thr = max(TWIN_Z * scale, math.log(1 + min_change))
        noise[c] = TwinNoise(scale, thr, sum(abs(x) > thr for x in res), len(res))
    for t in trials:
        twins = [x for x in logs.get(t.key, []) if x is not None]
        g = t.row.get("goodput_mbps")
        c = noise.get(t.row["condition"])
        if t.run == "quiet":
            t.moved_vs_twins = False if twins and c else None
        elif g and len(twins) >= 2 and c:
            t.moved_vs_twins = abs(math.log(g) - statistics.median(twins)) > c.threshold
    return noise


def score(name: str, rule: Callable[[Any], list[str]], trials: list[Trial], on_trial: bool = False,
          truth_of: str = "moved") -> Score:
    """Rule's flags against the moved trials; `on_trial`: the rule takes the Trial (it needs its cell),
    else its PathCpu; `truth_of`: the Trial attribute that holds the truth (moved, moved_over_floor,
    moved_vs_twins)."""
    s = Score(name, 0, 0, 0, 0, 0)
    for t in trials:
        truth = getattr(t, truth_of)
        if truth is None:
            continue
        flagged = bool(rule(t if on_trial else t.evidence))
        if t.run == "quiet":
            s.quiet_flagged += flagged
        else:
            s.hog_flagged += flagged
        if flagged and truth:
            s.tp += 1
        elif flagged:
            s.fp += 1
        elif truth:
            s.fn += 1
    return s


@dataclass
class Ceiling:
    """The most a rule on one piece of a trial's CPU evidence could reach against one truth: it
    never flags a quiet trial (as if it knew which trials ran beside the hogs) and flags the hog
    trials whose evidence reaches a threshold per group (condition × protocol), the thresholds
    chosen with the truth in hand for the best min(precision, recall) (evidence_ceiling)."""
    truth_of: str
    positives: int
    tp: int
    fp: int
    evidence: str        # which EVIDENCE the best thresholds are on

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / self.positives if self.positives else None

    @property
    def worst(self) -> float:
        return min(self.precision or 0.0, self.recall or 0.0)


def group_of(t: Trial) -> tuple[str, str]:
    return t.row.get("condition") or "", t.row.get("protocol") or ""


# the evidence an upper bound may threshold: each a share of the transfer, from the trial's CPU columns
EVIDENCE: dict[str, Callable[[PathCpu], float]] = {
    "the path's waits": lambda e: e.path_wait_share() or 0.0,
    "the longest wait of one path process": lambda e: max((e.wait_share(p) or 0.0) for p in PATH_PROCESSES),
    "the largest on-CPU share of one path process": lambda e: max((e.ran_share(p) or 0.0) for p in PATH_PROCESSES),
    "on-CPU plus waits of one path process": lambda e: max((e.ran_share(p) or 0.0) + (e.wait_share(p) or 0.0)
                                                         for p in PATH_PROCESSES),
}


def evidence_ceiling(trials: list[Trial], truth_of: str = "moved") -> Ceiling:
    """The best of every rule in the family: one piece of CPU evidence (EVIDENCE), a threshold on it
    per group (condition × protocol), with or without the goodput guard (only below 80 % of the
    link's rate, as the default rule has it), flagging hog trials only. Per evidence, each group's
    options (a (TP, FP) count per threshold and guard) are combined exactly over groups: for each
    total TP the fewest FP any choice gives, then the best min(precision, recall). Trials the truth
    cannot judge are left out."""
    groups: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        if getattr(t, truth_of) is not None and t.run == "hog":
            groups.setdefault(group_of(t), []).append(t)
    positives = sum(bool(getattr(t, truth_of)) for g in groups.values() for t in g)
    best = Ceiling(truth_of, positives, 0, 0, "")
    for name, evidence in EVIDENCE.items():
        fewest_fp = {0: 0}                    # total TP -> fewest FP
        for members in groups.values():
            scored = [(evidence(t.evidence), not t.evidence.link_limited, bool(getattr(t, truth_of)))
                      for t in members]
            options = {(0, 0)}
            for th in {x for x, _, _ in scored}:
                for guarded in (False, True):
                    flagged = [m for x, below, m in scored if x >= th and (below or not guarded)]
                    options.add((sum(flagged), len(flagged) - sum(flagged)))
            combined: dict[int, int] = {}
            for tp, fp in fewest_fp.items():
                for a, b in options:
                    if tp + a not in combined or combined[tp + a] > fp + b:
                        combined[tp + a] = fp + b
            fewest_fp = combined
        for tp, fp in fewest_fp.items():
            c = Ceiling(truth_of, positives, tp, fp, name)
            if (c.worst, c.tp, -c.fp) > (best.worst, best.tp, -best.fp):
                best = c
    return best


Separation = tuple[tuple[str, str], list[float], list[float], float]   # group, moved waits, others' waits, p


def wait_separation(trials: list[Trial], truth_of: str = "moved") -> list[Separation]:
    """Per group with a moved trial: the path wait shares of its moved hog trials and of its other
    judged hog trials, and the one-sided Mann–Whitney p that the moved ones waited longer."""
    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for t in trials:
        truth = getattr(t, truth_of)
        if truth is not None and t.run == "hog":
            moved_, other = groups.setdefault(group_of(t), ([], []))
            (moved_ if truth else other).append(t.evidence.path_wait_share() or 0.0)
    out = []
    for g in sorted(groups):
        moved_, other = groups[g]
        if moved_ and other:
            out.append((g, moved_, other, float(stats.mannwhitneyu(moved_, other, alternative="greater").pvalue)))
    return out


def cell_shifts(trials: list[Trial], margin: float) -> list[tuple[str, TestResult]]:
    """Each cell's goodput with the hogs against without them, every run's trials pooled: the ratio
    of geometric means with its interval at the verdict's level (Holm's step) and the report's verdict
    (log-Welch, equivalence within ±margin by two one-sided tests, Holm over the page's cells)."""
    goodputs: dict[tuple[str, str], list[float]] = {}
    for t in trials:
        if t.row.get("goodput_mbps"):
            goodputs.setdefault((cell_of(t.key), t.run), []).append(t.row["goodput_mbps"])
    cells = sorted({c for c, _ in goodputs})
    results = adjust([compare(goodputs.get((c, "hog"), []), goodputs.get((c, "quiet"), []), margin=margin)
                      for c in cells])
    return list(zip(cells, results))


def shift_verdict(r: TestResult) -> str:
    """A cell's shift in words: slower / faster with the hogs (and whether by less than the margin),
    equivalent within the margin, or inconclusive with the trials a side that would likely decide."""
    margin = f"±{100 * r.margin:g} %"
    if r.verdict == DIFFERENT:
        return ("slower" if r.ratio is not None and r.ratio < 1 else "faster") + " with the hogs" + \
            (f", inside the {margin} margin" if r.inside_margin else "")
    if r.verdict == EQUIVALENT:
        return f"equivalent within {margin}"
    if r.verdict == INCONCLUSIVE and r.reps_to_decide:
        return f"inconclusive (about {r.reps_to_decide} trials a side would likely decide)"
    return r.verdict


# -- the page -----------------------------------------------------------------------------------

def md_cell(text: str) -> str:
    """Text for a Markdown table cell: a trial key's '|' escaped, so the row keeps its columns."""
    return str(text).replace("|", "\\|")


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


def pair_label(i: int) -> str:
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[i] if i < 26 else str(i + 1)


def run_id(d: Path) -> str:
    return json.loads((d / "meta.json").read_text()).get("run_id") or d.name


def page(args: argparse.Namespace, pairs: list[Pair], facts: dict[str, Any]) -> tuple[str, Score, Score]:
    trials, pis = build_trials(pairs, args.min_change)
    left_out = moves_left_out(pairs, args.min_change) if len(pairs) > 1 else {}
    floor = noise_floor(left_out)
    apply_noise_floor(trials, floor)
    softirq = any(t.evidence.softirq_wait is not None for t in trials)
    rules = [(name, rule, False) for name, rule in CANDIDATES + (SOFTIRQ_CANDIDATES if softirq else [])]
    rules += [(name, rule, True) for name, rule in CELL_CANDIDATES]
    scores = [score(name, rule, trials, on_trial) for name, rule, on_trial in rules]
    default = scores[0]
    best = max(scores, key=lambda s: (s.worst, (s.precision or 0) + (s.recall or 0)))
    floor_scores = [score(name, rule, trials, on_trial, truth_of="moved_over_floor")
                    for name, rule, on_trial in rules] if floor else []
    twins = twin_truth(pairs, trials, args.min_change)
    twin_scores = [score(name, rule, trials, on_trial, truth_of="moved_vs_twins")
                   for name, rule, on_trial in rules] if twins else []
    hog = [t for t in trials if t.run == "hog"]
    quiet = [t for t in trials if t.run == "quiet"]
    n_moved = sum(bool(t.moved) for t in hog)
    unjudged = sum(t.moved is None for t in trials)
    meta = json.loads((pairs[0][0] / "meta.json").read_text())
    subset = bool(meta.get("only") or meta.get("reps"))
    labels = [pair_label(i) for i in range(len(pairs))]
    runs = "; ".join(f"{lab}: `{run_id(q)}` (quiet) and `{run_id(h)}` (with hogs)" for lab, (q, h) in zip(labels, pairs))
    hogs, cpus = facts["hogs"], facts.get("cpus") or 1
    per_core = "one per core" if hogs == cpus else f"{hogs / cpus:g} per core"
    loops = "one busy loop per core" if hogs == cpus else f"{hogs / cpus:g} busy loops per core"
    out = ["# Which trials did the CPU slow down? Choosing the CPU-bound rule by experiment", ""]
    out += [f"Generated by `tools/experiments/cpu_rule.py` on {facts['date']} from {len(pairs)} pair(s) of runs of "
            f"the plan `{(meta.get('plan') or {}).get('name')}` ({runs}; {facts['hogs']} CPU hogs at nice 0, "
            f"{per_core}), quicbench {(meta.get('host') or {}).get('quicbench_commit') or '(commit not recorded)'}.", ""]
    # the commands that measured the pairs (a page may pool pairs measured by several)
    commands = list(dict.fromkeys(facts.get("commands") or [])) or ([facts["command"]] if facts.get("command") else [])
    if commands:
        out += ["```", *commands, "```", ""]
    if shown(pairs[0][0]).startswith("docs/results/"):
        dirs = ", ".join(f"`{shown(d)}`" for pair in pairs for d in pair)
        out += [f"The runs' meta.json and rows are committed in {dirs} (`quicbench results publish`; each hog "
                f"run's `{FACTS}` holds the facts below); tests/unit/test_published_results.py rebuilds this page "
                "from them.", ""]
    busy = facts.get("busy_before") or []
    # pooled pairs may come from more than one machine of the same kind (a kernel each)
    kernels = ", ".join(dict.fromkeys(facts.get("kernels") or [facts["kernel"]]))
    out += [f"Machine: {facts['host']}, {facts['cpus']} CPUs, kernel {kernels}; busy share of its CPUs "
            f"over 5 s before each quiet run: {', '.join(pct(b) for b in busy) or '–'}."]
    if any(b is not None and b > 0.1 for b in busy):
        out += ["**The machine was not idle before a quiet run: the quiet noise and flags are not those of a "
                "quiet machine; these numbers are indicative only.**"]
    if subset:
        out += [f"**A subset of the plan** (only: {meta.get('only') or '–'}, repetitions: "
                f"{meta.get('reps') or 'the plan'}'s, plan: {args.plan or 'default'}): not the page's publishable numbers."]
    out += ["", "## Method", "",
            f"The plan runs in {len(pairs)} pair(s) with `quicbench run`, one after the other: on the quiet machine, "
            f"then with {loops} at plain priority (nice 0). Each cell's quiet "
            "noise is pooled over "
            "the quiet runs. A hog-run trial's goodput **moved** when it lies outside its cell's "
            f"{100 * PREDICTION:g} % prediction interval (t on log goodput, n − 1 degrees of freedom: where one more "
            f"quiet trial would fall) and differs from the quiet cell's geometric mean by at least "
            f"{100 * args.min_change:g} %. Every rule judges every successful trial of every run from the CPU columns "
            "its row holds (client, server and link emulator: on-CPU and run-queue wait seconds over the transfer; "
            "the machine's busy share; goodput against the link's rate). A flag on a hog trial that moved is a "
            "true positive; a flag on any other trial — every quiet trial among them: on the quiet machine "
            "nothing should be flagged — a false positive; a moved trial without one a miss. Precision = TP / "
            "(TP + FP), recall = TP / (TP + FN); the target is ≥ 0.9 for both. Rules marked \"after the run\" "
            "judge a trial against the other repetitions of its cell in the same run (its time against their "
            "median), which a trial cannot do as it ends.", "",
            "With two pairs or more the rules are also scored against a second truth, **moved over the path's "
            "noise floor**: each quiet run is judged against the other quiet runs' cells (each left out in turn) "
            "and its pair's hog run against the same cells; on a path (condition) where the hog runs move no more "
            "trials than the quiet runs, a moved hog trial is not counted as moved by the hog (the path "
            "moves as often without one: its losses' tail), and a flag there is a false positive. The gate only "
            "takes moves out of the truth and every flag on a closed path counts against the rule.", "",
            "And against a third truth, **moved against its quiet twins**: a trial's twins are the trials with "
            "its key in the quiet runs; a hog trial moved when its log goodput is further from the median of "
            f"its quiet twins than {TWIN_Z:g} robust standard deviations of the quiet twins' own spread (per "
            "condition: 1.4826 × the median absolute deviation of every quiet trial from the median of its other "
            f"twins) and at least {100 * args.min_change:g} %. With `link_seed` (plan) the twins met the same random "
            "losses and jitter, so a path's losses are common to a trial and its twins; without it they are "
            "independent draws.", "",
            f"Trials: {len(quiet)} quiet, {len(hog)} with hogs; {n_moved} of the hog trials moved; "
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
            f"It flags {default.quiet_flagged} of {len(quiet)} quiet trials.",
            f"Best candidate here: {best.name} (precision {num(best.precision)}, recall {num(best.recall)})."]
    machine = next(s for s in scores if s.name.startswith("previous `machine`"))
    out += [f"The previous machine-busy rule: precision {num(machine.precision)}, recall {num(machine.recall)}, "
            f"{machine.quiet_flagged} quiet trials flagged."]
    if len(pairs) > 1:
        # each pair alone: its own quiet run's noise (half the trials per cell: a wider interval)
        alone = []
        for i, pair in enumerate(pairs):
            own, _ = build_trials([pair], args.min_change)
            s = score("default", DEFAULT_RULE, own)
            alone.append(f"{labels[i]}: precision {num(s.precision)}, recall {num(s.recall)} "
                         f"({s.tp + s.fn} moved, {s.quiet_flagged} quiet flagged)")
        out += ["Each pair alone, judged against its own quiet run's noise (half the quiet trials per cell, so a "
                "wider prediction interval): " + "; ".join(alone) + "."]
    if len(pairs) > 1:
        out += ["", "### How often the truth moves without a hog", "",
                "Each quiet run judged against the other quiet runs' cells (each left out in turn), beside its "
                "pair's hog run judged against the same cells: the quiet column is what \"moved\" counts on a quiet "
                "machine (noise, losses), the hog column what it counts with the hogs.", "",
                "| condition | quiet trials that moved | hog trials that moved | trials per side |", "|---|---|---|---|"]
        for c, (q, h, n) in left_out.items():
            out.append(f"| {md_cell(c)} | {q} | {h} | {n} |")
    shifts = cell_shifts(trials, args.min_change)
    out += ["", "### How much the hogs moved each cell", "",
            "Each cell's goodput in the hog runs against the quiet runs, every run's trials pooled: the ratio of "
            "geometric means with its interval at the verdict's level (Holm's step: it excludes 1 exactly when "
            "the verdict is a difference), and the report's verdict (log-Welch; equivalent: within "
            f"±{100 * args.min_change:g} %, two one-sided tests; Holm over the {len(shifts)} cells).", "",
            "| cell | trials quiet / hogs | with hogs ÷ quiet [CI at the verdict's level] | p (Holm) | verdict |",
            "|---|---|---|---|---|"]
    for c, r in shifts:
        ratio = (f"{r.ratio:.3f} [{r.ratio_low:.3f}, {r.ratio_high:.3f}]" if r.ratio is not None else "–")
        p_shown = f"{r.p:.2g}" if r.p is not None else "–"
        verdict = shift_verdict(r)
        out.append(f"| {md_cell(c)} | {r.n_b} / {r.n_a} | {ratio} | {p_shown} | {verdict} |")
    if floor_scores:
        opened = [c for c, o in floor.items() if o]
        n_over = sum(bool(t.moved_over_floor) for t in hog)
        out += ["", "### Against the path's noise floor", "",
                f"Paths where the hog runs moved more trials than the quiet runs: {', '.join(opened) or 'none'}; "
                f"{n_over} of the {n_moved} moved hog trials lie on them.", ""]
        out += truth_table(floor_scores)
    if twin_scores:
        seeded = bool((meta.get("plan") or {}).get("link_seed"))
        hog_moves: dict[str, int] = {}
        for t in hog:
            hog_moves[t.row["condition"]] = hog_moves.get(t.row["condition"], 0) + bool(t.moved_vs_twins)
        out += ["", "### Against each trial's quiet twins", "",
                ("The plan seeds the link per repetition (`link_seed`): each trial's twins met the same random "
                 "draws." if seeded else "The plan does not seed the link: a trial's twins met independent "
                 "random draws."), "",
                "| condition | twins' spread (robust sd) | moved beyond | quiet trials beyond it (own twins) | "
                "hog trials beyond it |", "|---|---|---|---|---|"]
        for c, tn in twins.items():
            out.append(f"| {c} | {100 * (math.exp(tn.scale) - 1):.1f} % | {100 * (math.exp(tn.threshold) - 1):.1f} % | "
                       f"{tn.quiet_moves} of {tn.n} | {hog_moves.get(c, 0)} |")
        out += [""] + truth_table(twin_scores)
    if n_moved:
        out += ["", "### What any rule on the CPU evidence could reach", ""]
        out += ceiling_section(trials, floor_scores, twin_scores)
    if n_moved == 0:
        out += ["**No hog trial moved: the hogs did not slow this plan down, so no rule's recall is measured.**"]
    notes = args.notes or pairs[-1][1] / NOTES
    if notes.is_file():
        # the author's reading of these runs, kept with them so the page is rebuilt whole
        out += ["", notes.read_text().strip()]
    out += ["", "## Trials", "",
            "Goodput in Mbit/s; the hog run's CPU: client / server / link emulator run-queue wait as a share of "
            "the transfer, their largest on-CPU share, the machine's busy share; flags of the default rule and "
            "of the previous machine rule. The first column names the pair; quiet trials are listed only when a "
            "rule flagged them.", "",
            "| pair | trial | quiet | with hogs | change | quiet cell: geo mean [99 % PI] | moved | vs twins | "
            "wait c / s / l | ran max | machine | default | machine rule |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    quiet_by_key = {(t.pair, t.key): t for t in quiet}
    for t in trials:
        if t.run == "quiet" and not (DEFAULT_RULE(t.evidence) or machine_rule(t.evidence)):
            continue
        q = quiet_by_key.get((t.pair, t.key))
        g, gq = t.row.get("goodput_mbps"), q.row.get("goodput_mbps") if q else None
        pi = pis.get(cell_of(t.key))
        cell = f"{pi.geo_mean:.2f} [{pi.low:.2f}, {pi.high:.2f}]" if pi else "–"
        waits = " / ".join(pct(t.evidence.wait_share(p), 1) for p in PATH_PROCESSES)
        ran = max((x for x in (t.evidence.ran_share(p) for p in PATH_PROCESSES) if x is not None), default=None)
        change = f"{100 * (g / gq - 1):+.1f} %" if g and gq and t.run == "hog" else "–"
        out.append(f"| {labels[t.pair]} | {md_cell(t.key)}{' (quiet)' if t.run == 'quiet' else ''} | {num(gq)} | "
                   f"{num(g) if t.run == 'hog' else '–'} | {change} | {cell} | "
                   f"{moved_text(t)} | {yes_no(t.moved_vs_twins)} | {waits} | {pct(ran)} | "
                   f"{pct(t.evidence.machine_busy)} | {','.join(DEFAULT_RULE(t.evidence)) or ''} | "
                   f"{'yes' if machine_rule(t.evidence) else ''} |")
    quiet_args = " ".join(shown(q) for q, _ in pairs)
    hog_args = " ".join(shown(h) for _, h in pairs)
    notes_arg = f" --notes {shown(args.notes)}" if args.notes else ""
    out += ["", "To regenerate this page from the same runs:", "", "```",
            f"python tools/experiments/cpu_rule.py --quiet {quiet_args} --hog {hog_args}{notes_arg} --page PAGE",
            "```", "", "(PAGE: this page's path, under docs/results/runs/cpu-rule/.)", ""]
    return "\n".join(out), default, best


def ceiling_section(trials: list[Trial], floor_scores: list[Score], twin_scores: list[Score]) -> list[str]:
    """An upper bound for the rules on one piece of the CPU evidence (evidence_ceiling) against each
    truth, and, per condition × protocol, whether the moved trials waited longer (wait_separation)."""
    truths = [("moved (the quiet cells' 99 % interval)", "moved")]
    truths += [("moved over the path's noise floor", "moved_over_floor")] if floor_scores else []
    truths += [("moved against its quiet twins", "moved_vs_twins")] if twin_scores else []
    out = ["An upper bound for the rules that judge a trial by one piece of its CPU evidence — the path's "
           "run-queue waits together, the longest of one process, the largest on-CPU share, or on-CPU plus waits "
           "of one process, each as a share of the transfer: it flags no quiet trial, as if it knew which trials "
           "ran beside the hogs, and flags the hog trials whose evidence reaches a threshold set for each "
           "condition × protocol, with or without the default rule's guard (below 80 % of the link's rate); the "
           "evidence, thresholds and guards are chosen with the truth in hand for the best min(precision, recall) "
           "over all of them together. Fitted to these very trials, it is more than such a rule fixed before the "
           "runs can do.", "",
           "| truth | moved | TP | FP | precision | recall | best on |", "|---|---|---|---|---|---|---|"]
    ceilings = []
    for label, attr in truths:
        c = evidence_ceiling(trials, attr)
        ceilings.append(c)
        out.append(f"| {label} | {c.positives} | {c.tp} | {c.fp} | {num(c.precision)} | {num(c.recall)} | "
                   f"{c.evidence or '–'} |")
    out += ["", "Per condition × protocol with a moved trial (plain truth), among the hog trials: the path's wait "
            "share of the moved ones and of the others, and the one-sided Mann–Whitney p that the moved ones "
            "waited longer.", "",
            "| condition | protocol | moved | others | wait of the moved: median [range] | "
            "wait of the others: median | p |", "|---|---|---|---|---|---|---|"]
    for (cond, proto), moved_, other, p in wait_separation(trials):
        out.append(f"| {cond} | {proto} | {len(moved_)} | {len(other)} | "
                   f"{pct(statistics.median(moved_), 1)} [{pct(min(moved_), 1)}, {pct(max(moved_), 1)}] | "
                   f"{pct(statistics.median(other), 1)} | {p:.2f} |")
    reached = [label for (label, _), c in zip(truths, ceilings) if c.positives and c.worst >= TARGET]
    out += ["", f"Against {', '.join(reached)}: a rule on the CPU evidence can reach the target of 0.9 here."
            if reached else
            "**Against no truth can a rule on one piece of the CPU evidence reach the target of 0.9 here, even "
            "fitted to these trials**: beside the hogs, the CPU evidence of the trials that moved overlaps that of "
            "the trials that did not too much for any threshold (the waits: the table above)."]
    return out


def truth_table(scores: list[Score]) -> list[str]:
    """Every rule's score against one of the further truths, and the sentence under it (the default
    rule is the first score)."""
    best = max(scores, key=lambda s: (s.worst, (s.precision or 0) + (s.recall or 0)))
    meets = [s for s in scores if (s.precision or 0) >= TARGET and (s.recall or 0) >= TARGET]
    out = ["| rule | TP | FP | missed | precision | recall |", "|---|---|---|---|---|---|"]
    for s in scores:
        mark = " **(best)**" if s is best else ""
        out.append(f"| {s.name}{mark} | {s.tp} | {s.fp} | {s.fn} | {num(s.precision)} | {num(s.recall)} |")
    return out + ["", f"Against this truth: quicbench's default rule precision {num(scores[0].precision)}, recall "
                  f"{num(scores[0].recall)}; best {best.name} (precision {num(best.precision)}, recall "
                  f"{num(best.recall)}); " + (f"{len(meets)} rule(s) meet the target of 0.9 for both." if meets
                                              else "**no rule meets the target of 0.9 for both.**")]


def yes_no(x: bool | None) -> str:
    return "–" if x is None else ("yes" if x else "no")


def moved_text(t: Trial) -> str:
    if t.moved is None:
        return "–"
    if t.moved and t.moved_over_floor is False:
        return "yes, within the path's floor"
    return "yes" if t.moved else "no"


def is_run_dir(d: Path) -> bool:
    return (d / "trials.jsonl").is_file() or (d / "trials.jsonl.gz").is_file()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", help="plan file (default: quicbench's built-in default plan)")
    ap.add_argument("--reps", type=int, help="override the plan's repetitions (at least 3: the quiet cells' noise)")
    ap.add_argument("--only", action="append", default=[], help="passed to quicbench run (repeatable)")
    ap.add_argument("--pairs", type=int, default=2, help="quiet/hog pairs of runs to measure (default 2)")
    ap.add_argument("--out", default=str(REPO / "runs" / "cpu-rule"), help="directory for the runs")
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 1, help="CPU hogs (default: one per core)")
    ap.add_argument("--min-change", type=float, default=MIN_CHANGE, help="smallest goodput change that counts as moved")
    ap.add_argument("--quiet", type=Path, nargs="+", help="existing quiet run directories (with --hog: no new runs)")
    ap.add_argument("--hog", type=Path, nargs="+", help="existing run directories measured with hogs, in the same order")
    ap.add_argument("--page", type=Path, default=PAGE, help=f"where to write the page (default {PAGE})")
    ap.add_argument("--notes", type=Path, help=f"the reading to put under the verdict (default: {NOTES} in the last "
                    "hog run, if there); for a page that pools runs another page already reads")
    args = ap.parse_args(argv)
    if args.reps is not None and args.reps < 3:
        ap.error("--reps: accepted: 3 or more (a quiet cell's noise needs 3 trials)")
    if args.pairs < 1:
        ap.error("--pairs: accepted: 1 or more")
    if (args.quiet is None) != (args.hog is None) or (args.quiet and len(args.quiet) != len(args.hog)):
        ap.error("--quiet and --hog: as many hog runs as quiet runs, or neither to run the plan")
    if args.notes is not None and not args.notes.is_file():
        ap.error(f"--notes: {args.notes}: no such file")
    facts: dict[str, Any] = {"date": dt.date.today().isoformat(), "host": platform.node(), "cpus": os.cpu_count(),
                             "kernel": platform.release(), "hogs": args.hogs}
    if args.quiet:
        pairs = list(zip(args.quiet, args.hog))
        for d in (d for pair in pairs for d in pair):
            if not is_run_dir(d):
                ap.error(f"{d}: not a run directory with trials (no trials.jsonl or trials.jsonl.gz)")
        kept = [json.loads((h / FACTS).read_text()) if (h / FACTS).exists() else {} for _, h in pairs]
        facts.update({k: v for k, v in kept[-1].items() if k != "busy_before"})
        facts["busy_before"] = [k.get("busy_before") for k in kept]
        facts["commands"] = [k["command"] for k in kept if k.get("command")]
        facts["kernels"] = [k["kernel"] for k in kept if k.get("kernel")]
    else:
        facts["command"] = shlex.join(["python", "tools/experiments/cpu_rule.py", *(argv or sys.argv[1:])])
        facts["busy_before"], pairs = [], []
        for i in range(args.pairs):
            busy = machine_busy()
            facts["busy_before"].append(busy)
            if busy is not None and busy > 0.1:
                print(f"cpu_rule: the machine is {100 * busy:.0f} % busy before quiet run {i + 1}: "
                      "the page will say its numbers are indicative only", file=sys.stderr)
            quiet_dir = run_plan(args, f"quiet {pair_label(i)}")
            hogs = start_hogs(args.hogs)
            try:
                time.sleep(1.0)
                hog_dir = run_plan(args, f"{args.hogs} hogs {pair_label(i)}")
            finally:
                stop_hogs(hogs)
            pairs.append((quiet_dir, hog_dir))
            # what the page says of the runs, kept beside each hog run for regenerating it
            (hog_dir / FACTS).write_text(json.dumps({**facts, "busy_before": busy, "quiet_run": str(quiet_dir)},
                                                    indent=1))
    text, default, best = page(args, pairs, facts)
    args.page.parent.mkdir(parents=True, exist_ok=True)
    args.page.write_text(text)
    print(f"page: {args.page}")
    print(f"default rule: precision {num(default.precision)}, recall {num(default.recall)}, "
          f"{default.quiet_flagged} quiet trials flagged; best: {best.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
