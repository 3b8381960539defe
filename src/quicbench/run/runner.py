"""The trial runner: plan -> its resolution (model/specs.py) -> lab sessions -> trials -> store.

Each trial's row is appended and fsynced, or nothing is written; a resumed run skips the
trials whose rows are there. Ctrl-C and SIGTERM stop after cleaning up (lab removed,
servers stopped) and leave the run resumable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import platform
import shlex
import signal
import threading
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from quicbench import __version__
from quicbench.clients import client_class
from quicbench.content.objects import generate
from quicbench.errors import EnvironmentFault, QuicbenchError
from quicbench.model import columns
from quicbench.model.plan import Plan, plan_fingerprint, plan_from_dict
from quicbench.model.runmeta import RunMeta
from quicbench.model.shard import Selection, Shard
from quicbench.model.specs import RunSpec, TrialSpec
from quicbench.run.parallel import schedule, units
from quicbench.run.preflight import check_run
from quicbench.run.session import LabSession, RunContext, close_sessions, open_sessions
from quicbench.store import RunStore, new_run_id


def host_facts() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os
    # kernel_driver: "uml" when the run executes inside User-Mode Linux (--kernel uml)
    return {"hostname": platform.node(), "kernel": platform.release(),
            "kernel_driver": os.environ.get("QUICBENCH_KERNEL", "host"), "cpu_model": cpu,
            "cpus": os.cpu_count(), "python": platform.python_version(), "quicbench": __version__,
            "quicbench_commit": source_commit()}


def source_commit() -> str | None:
    """The git commit of the quicbench source that ran ('-dirty' with uncommitted changes to
    tracked files), so a published number names the code that measured it; None outside a checkout."""
    import subprocess
    from quicbench.paths import REPO_ROOT
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


class Runner:
    """A scheduler over lab sessions: one, or up to ``jobs`` at once (run/parallel.py)."""

    def __init__(self, run: RunSpec, store: RunStore, console: Console | None = None,
                 selection: Selection = Selection(), retry_failed: bool = False, resume_hint: str = "PLAN",
                 backend: str = "netns", inventory: str | None = None, jobs: int = 1,
                 extend: Callable[[], list[TrialSpec]] | None = None, created: bool = False):
        self.spec = run            # the plan resolved for the selection (Selection.resolve)
        self.created = created        # a new run (not a resume): refused before a trial, it leaves nothing
        self.jobs = jobs
        self.ceiling: dict[str, Any] | None = None   # the kernel's ceiling (run/ceiling.py), once measured
        self.store = store
        self.console = console or Console()
        # a shard runs its share of the plan's trials, each with its plan-wide seq and key
        self.selection = selection
        self.trials = list(run.trials)
        self.retry_failed = retry_failed
        self.resume_hint = resume_hint
        self.backend = backend
        self.inventory = inventory
        # after the trials: more trials to run in the same labs, until it returns none (--until-decided)
        self.extend = extend

    # -- resume bookkeeping ------------------------------------------------------------
    def pending(self) -> list[TrialSpec]:
        rows = self.store.rows()
        done = set()
        for row in rows:
            if row.get("status") == "ok" or not self.retry_failed:
                done.add(row["key"])
        return fresh_seqs([t for t in self.trials if t.key not in done], rows, self.trials)

    # -- the run -----------------------------------------------------------------------
    def run(self) -> list[dict[str, Any]]:
        todo = self.pending()
        spec = self.spec
        if not todo and self.extend is not None:
            todo = self.extend()
        if not todo:
            # every trial is recorded (or a shard of more shards than cells got none): the run is complete
            self.console.print(f"nothing to do: all {len(self.trials)} trials of {self.store.dir} are recorded")
            if self.store.read_meta().get("status") != "complete":
                self.store.update_meta(status="complete", finished_at=time.time())
            return self.store.rows()
        clients = {name: client_class(name, spec.client_commands)() for name in {t.client for t in todo}}
        need = spec.content
        content = generate(dict(need.objects), seed=need.seed, realistic_page=need.realistic_page,
                           videos=list(need.videos), archives=need.archives)
        # every lab's servers serve the run's private copy (hard links to the cache), and the live
        # publishers write into it: nothing made in the cache later is served
        served = self.store.dir / "served"
        content = content.isolated(served)
        ctx = RunContext(spec=spec, store=self.store, clients=clients, content=content, console=self.console,
                         backend=self.backend, inventory=self.inventory)
        n = min(self.jobs, len(units(todo)))
        sessions: list[LabSession] = []
        try:
            with self._run_status(served):
                open_sessions(ctx, todo, n, sessions)
                described = sessions[0].describe()
                was = self.store.read_meta().get("link")
                if (self.store.rows() and isinstance(was, dict) and was.get("name")
                        and was["name"] != (described.get("link") or {}).get("name")):
                    raise QuicbenchError(f"--resume {self.store.dir}: its trials ran over link {was['name']}, this "
                                         f"lab's is {described['link'].get('name')}; a run does not mix links: resume "
                                         f"where {was['name']} is available, or start a new run")
                if n > 1:
                    described["lab"] |= {"labs": n, "jobs": self.jobs}
                self.store.update_meta(**described)
                for drv, why in (described["link"].get("auto_passed_over") or {}).items():
                    self.console.print(f"[yellow]link auto: not {drv}: {why}; "
                                       f"using {described['link']['name']}[/]", highlight=False)
                if spec.calibrate:
                    # every condition measured first, in the first lab, while no trial runs
                    for cond in {spec.condition.name: spec.condition for spec in todo}.values():
                        self.console.print(f"calibrating {cond.name} (alone, before the trials)")
                        sessions[0].calibrate(cond, self.console)
                ctx.ceiling = self.ceiling = sessions[0].measure_ceiling(todo)
                schedule(sessions, todo, self.store, self.console)
                while self.extend is not None and (more := self.extend()):
                    schedule(sessions, more, self.store, self.console)
        finally:
            # teardown is bounded (each session's watchdog dumps the stacks of a hang). A second
            # Ctrl-C during it must not leave a lab behind: SIGINT waits until every lab is down.
            with _sigint_deferred():
                close_sessions(sessions)
                shutil.rmtree(served, ignore_errors=True)
        return self.store.rows()

    @contextlib.contextmanager
    def _run_status(self, served: Path | None = None):
        """meta.json says running, then complete; interrupted (resumable) with the hint to resume;
        or failed with the reason, when the run could not start or keep its configuration (a
        server that never listens, a link the kernel lacks): fix it, then resume."""
        # served: the run's private copy of the content, given back when the disk is too full to
        # record the end (it is removed at teardown anyway)
        stale = {k: None for k in ("failed_reason", "interrupted_by") if self.store.read_meta().get(k)}
        self.store.update_meta(status="running", resumed_at=time.time() if self.store.rows() else None, **stale)
        self.store.reserve_space()
        try:
            yield
            self.store.free_reserve()
            self.store.update_meta(status="complete", finished_at=time.time())
        except BaseException as e:
            self.store.free_reserve()
            # a quicbench bug outside a trial (not an error it raised on purpose) fails the run too
            bug = isinstance(e, Exception) and not isinstance(e, QuicbenchError)
            failed = bug or (isinstance(e, QuicbenchError) and not isinstance(e, EnvironmentFault))
            reason = f"quicbench internal error: {type(e).__name__}: {e}" if bug else str(e)
            end = ({"status": "failed", "failed_reason": reason} if failed else
                   {"status": "interrupted", "interrupted_by": type(e).__name__})
            for attempt in range(2):
                try:
                    self.store.update_meta(**end, interrupted_at=time.time())
                    break
                except EnvironmentFault:
                    if attempt or served is None:
                        break   # no space even then: meta.json keeps 'running', which a resume treats alike
                    shutil.rmtree(served, ignore_errors=True)
            if failed and self.created and not self.store.rows():
                raise         # refused before a trial: start_run removes the new run's directory
            self.console.print(f"[yellow]{'failed' if failed else 'interrupted'}: resume with "
                               f"'quicbench run {self.resume_hint} --resume {self.store.dir}{self._testbed_flags()}'[/]",
                               highlight=False, soft_wrap=True)
            raise


    def _testbed_flags(self) -> str:
        """The flags of the testbed this run ran on, for the resume hint (a resume takes them from
        meta.json anyway and refuses others: printed so that nobody wonders)."""
        flags = []
        if self.backend != "netns":
            flags += ["--backend", self.backend] + (["--inventory", str(self.inventory)] if self.inventory else [])
        meta = self.store.read_meta()
        kernel = (meta.get("host") or {}).get("kernel_driver")
        if kernel and kernel != "host":
            flags += ["--kernel", str(kernel)]
        # what shapes the run (a resume takes these from meta.json too, and refuses others)
        if self.selection.reps:
            flags += ["--reps", str(self.selection.reps)]
        for key, values in sorted((self.selection.only or {}).items()):
            flags += [f for v in values for f in ("--only", f"{key}={v}")]
        if (meta.get("sequential") or {}).get("max_reps"):
            flags += ["--until-decided", str(meta["sequential"]["max_reps"])]
        if self.jobs > 1:
            flags += ["--jobs", str(self.jobs)]
        return "".join(f" {shlex.quote(f)}" for f in flags)


def fresh_seqs(todo: list[TrialSpec], rows: list[dict[str, Any]], planned: list[TrialSpec] = ()) -> list[TrialSpec]:
    """The trials with a seq (their directory's number) no recorded row of another trial holds:
    more repetitions (--reps on resume, --until-decided) renumber the plan's expansion, and a
    trial directory must never be reused by another trial. Taken seqs move past every one in use."""
    used = {r["seq"]: r.get("key") for r in rows if isinstance(r.get("seq"), int)}
    nxt = 1 + max([*used, *(t.seq for t in planned), *(t.seq for t in todo), -1])
    out = []
    for t in todo:
        if used.get(t.seq, t.key) != t.key:
            t = dataclasses.replace(t, seq=nxt)
            nxt += 1
        used[t.seq] = t.key
        out.append(t)
    return out


@contextlib.contextmanager
def _sigint_deferred():
    """Hold SIGINT (a second Ctrl-C) until the block ends, then deliver it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if got:
        raise KeyboardInterrupt


def start_run(plan: Plan, out: Path, console: Console, resume: Path | None = None, reps: int | None = None,
              only: dict[str, list[str]] | None = None, retry_failed: bool = False,
              plan_source: str = "PLAN", backend: str = "netns", inventory: str | None = None,
              shard: Shard | None = None, jobs: int = 1,
              until_decided: Callable[[RunStore, Selection], Callable[[], list[TrialSpec]]] | None = None
              ) -> RunStore:
    """Create (or resume) a run and run it: the plan is resolved into specs for its selection
    (model/specs.py), those are checked (run/preflight.py), and only they go on. until_decided,
    given, makes the function that adds trials to undecided cells after each look (the CLI's: the
    decision is the analysis')."""
    selection, store = Selection(reps, only, shard), None
    try:
        if resume:                  # its own plan and selection: --reps alone may change
            store = RunStore.open(resume)
            store.acquire()
            meta = check_resumable(store.dir, plan, only)
            selection = _resumed_selection(store.dir, meta, selection)
        spec = selection.resolve(plan)
        check_run(spec, plan_source or "default plan", installed=True)
        if resume:
            _record_reps(store, meta, reps, console)
    except BaseException:
        if store is not None:
            store.release()
        raise
    if not resume:
        out_existed = Path(out).exists()
        store = RunStore.create(out, RunMeta(
            format_version=columns.FORMAT_VERSION, created=time.time(), status="created",
            quicbench_version=__version__, host=host_facts(), columns=columns.describe(), **spec.meta),
            run_id=new_run_id(f"shard{shard.index}of{shard.count}") if shard else None)
    try:
        Runner(spec, store, console, selection, retry_failed=retry_failed, resume_hint=plan_source,
               backend=backend, inventory=inventory, jobs=jobs,
               extend=until_decided(store, selection) if until_decided else None,
               created=not resume).run()
    except KeyboardInterrupt as e:
        # the caller says what an interrupt after the last trial left undone (the report)
        e.run_dir = store.dir                      # type: ignore[attr-defined]
        e.run_complete = store.read_meta().get("status") == "complete"  # type: ignore[attr-defined]
        raise
    except QuicbenchError as e:
        # refused (exit 2) before a trial was recorded: a new run leaves no directory behind
        if not resume and not isinstance(e, EnvironmentFault) and not store.rows():
            store.release()
            shutil.rmtree(store.dir, ignore_errors=True)
            if not out_existed:
                with contextlib.suppress(OSError):
                    Path(out).rmdir()
        raise
    finally:
        store.release()
    return store


def _only_text(only: dict[str, list[str]] | None) -> str:
    return " ".join(f"--only {k}={v}" for k, vs in sorted((only or {}).items()) for v in vs)


def check_resumable(run_dir: Path, plan: Plan, only: dict[str, list[str]] | None) -> dict[str, Any]:
    """A resume goes on with the run's own plan and selection, never mixes in others (exit 2 naming
    both sides); meta.json, read and checked."""
    from quicbench.store import RunLayout, read_meta
    meta = read_meta(RunLayout(Path(run_dir)))
    if not isinstance(meta.get("plan"), dict):
        raise QuicbenchError(f"--resume {run_dir}: meta.json has no plan; not a run quicbench can resume")
    stored = plan_from_dict(meta["plan"], source=str(Path(run_dir) / "meta.json"))
    if plan_fingerprint(stored) != plan_fingerprint(plan):
        raise QuicbenchError(f"--resume {run_dir}: the run was made from a different plan: '{stored.name}' "
                             f"({', '.join(stored.protocols)}; {stored.repetitions} repetitions), not this "
                             f"'{plan.name}' ({', '.join(plan.protocols)}; {plan.repetitions} repetitions); "
                             f"pass the same plan file")
    was = Selection.from_meta(meta)
    if only and dict(only) != dict(was.only or {}):
        raise QuicbenchError(f"--only: the run {run_dir} was made with "
                             f"{_only_text(was.only) or 'no --only (the whole plan)'}, not {_only_text(only)}; "
                             f"a resume does not mix selections: resume without --only, or start a new run")
    return meta


def _resumed_selection(run_dir: Path, meta: dict[str, Any], asked: Selection) -> Selection:
    """A resumed run keeps its plan, --only and shard; --reps may change (_record_reps). meta: its
    meta.json, checked by check_resumable."""
    was = Selection.from_meta(meta)
    if asked.shard is not None and asked.shard != was.shard:
        what = f"shard {was.shard}" if was.shard else "not a shard"
        raise QuicbenchError(f"--shard {asked.shard}: the run {run_dir} is {what}; resume it without --shard")
    return Selection(reps=asked.reps or was.reps, only=asked.only or was.only, shard=was.shard)


def _record_reps(store: RunStore, meta: dict[str, Any], reps: int | None, console: Console) -> None:
    """A resume's --reps that changes the run's repetitions: recorded in meta.json, and said."""
    was = (Selection.from_meta(meta).reps
           or plan_from_dict(meta["plan"], source=str(store.dir / "meta.json")).repetitions)
    if reps and reps != was:
        store.update_meta(reps=reps, reps_changed=[*meta.get("reps_changed", []),
                                                     {"from": was, "to": reps, "at": time.time()}])
        console.print(f"[yellow]--reps {reps}: the run's repetitions change from {was} (recorded in meta.json)[/]")
