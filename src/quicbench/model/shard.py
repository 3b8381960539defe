"""Shards: a deterministic share of a plan's trials, so that N machines run one plan together.

A shard is ``I/N`` with I in 1..N. The unit of partition is the *cell* — (condition,
workload, repetition) — never a trial: a cell's protocols run back to back on one machine,
in the interleaved order ``expand`` gave them, so that drift hits every protocol alike.
Cells are dealt round-robin over the shards in expand order with one counter that runs on
across conditions: every shard gets a fair share of every condition (counts differ by at
most one) and the shards' totals stay balanced even when a condition has fewer cells than
there are shards. Warm-up trials are not cells: every shard that runs a condition runs its
warm-ups (each shard has its own lab, which needs warming).

``--shard auto/N`` takes I from the environment of an array job:

* Slurm: ``SLURM_ARRAY_TASK_ID``. With ``--array=1-N`` it is I itself; an array that starts
  elsewhere (``--array=0-(N-1)``) is mapped by ``SLURM_ARRAY_TASK_MIN``: I = id − min + 1.
* Kubernetes Indexed Job: ``JOB_COMPLETION_INDEX`` is 0-based: I = index + 1.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from quicbench.errors import QuicbenchError
from quicbench.model.specs import LabSpec, RunSpec, TrialSpec

SLURM_ENV = "SLURM_ARRAY_TASK_ID"
SLURM_MIN_ENV = "SLURM_ARRAY_TASK_MIN"
K8S_ENV = "JOB_COMPLETION_INDEX"
MAX_SHARDS = 10_000


@dataclass(frozen=True)
class Shard:
    index: int    # 1..count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def as_meta(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def _int(text: str) -> int | None:
    """A number written in ASCII digits (str.isdigit also accepts '²', which int() refuses)."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def parse_shard(text: str, env: Mapping[str, str] | None = None) -> Shard:
    """``I/N`` (1 <= I <= N) or ``auto/N`` (I from the array job's environment)."""
    env = os.environ if env is None else env
    accepted = f"accepted: I/N with 1 <= I <= N <= {MAX_SHARDS}, or auto/N inside a Slurm array or Kubernetes Indexed Job"
    head, sep, tail = text.partition("/")
    count = _int(tail) if sep else None
    if count is None or not 1 <= count <= MAX_SHARDS:
        raise QuicbenchError(f"--shard {text!r}: {accepted}")
    if head.strip() == "auto":
        index = _auto_index(text, count, env)
    else:
        index = _int(head)
        if index is None or not 1 <= index <= count:
            raise QuicbenchError(f"--shard {text!r}: I must be 1..{count} (shards count from 1); {accepted}")
    return Shard(index, count)


def _auto_index(text: str, count: int, env: Mapping[str, str]) -> int:
    if env.get(SLURM_ENV, "").strip():
        raw, task = env[SLURM_ENV], _int(env[SLURM_ENV])
        low = _int(env.get(SLURM_MIN_ENV, "")) if env.get(SLURM_MIN_ENV, "").strip() else None
        if task is None or (env.get(SLURM_MIN_ENV, "").strip() and low is None):
            raise QuicbenchError(f"--shard {text}: {SLURM_ENV}={raw!r} is not a task number")
        index = task - low + 1 if low is not None else task
        source = f"{SLURM_ENV}={task}" + (f" ({SLURM_MIN_ENV}={low})" if low is not None else "")
    elif env.get(K8S_ENV, "").strip():
        raw, job = env[K8S_ENV], _int(env[K8S_ENV])
        if job is None:
            raise QuicbenchError(f"--shard {text}: {K8S_ENV}={raw!r} is not an index")
        index, source = job + 1, f"{K8S_ENV}={job} (0-based)"
    else:
        raise QuicbenchError(f"--shard {text}: auto needs {SLURM_ENV} (Slurm array) or {K8S_ENV} "
                             f"(Kubernetes Indexed Job) in the environment; neither is set, pass I/N instead")
    if not 1 <= index <= count:
        raise QuicbenchError(f"--shard {text}: {source} gives shard {index}, outside 1..{count}: "
                             f"the array must have exactly {count} tasks")
    return index


def cell_of(t: TrialSpec) -> tuple[str, str, int]:
    """The cell a trial belongs to: its protocols (and servers) stay together on one shard."""
    return (t.condition.name, t.workload.label, t.rep)


def assign(trials: Sequence[TrialSpec], count: int) -> dict[tuple[str, str, int], int]:
    """Each measured cell's shard (1..count): round-robin in expand order, one counter for all conditions."""
    out: dict[tuple[str, str, int], int] = {}
    for t in trials:
        if t.warmup:
            continue
        c = cell_of(t)
        if c not in out:
            out[c] = len(out) % count + 1
    return out


def select(trials: Sequence[TrialSpec], shard: Shard | None) -> list[TrialSpec]:
    """The trials of one shard, in their expand order and with their plan-wide ``seq`` (so trial
    directories of different shards never collide); warm-ups of the shard's conditions included."""
    if shard is None:
        return list(trials)
    owner = assign(trials, shard.count)
    mine = [t for t in trials if not t.warmup and owner[cell_of(t)] == shard.index]
    conditions = {t.condition.name for t in mine}
    return [t for t in trials if (t.warmup and t.condition.name in conditions)
            or (not t.warmup and owner[cell_of(t)] == shard.index)]


def shard_of_key(trials: Sequence[TrialSpec], count: int) -> dict[str, int]:
    """Trial key -> the shard that runs it (measured trials only): which shard to re-run for a missing key."""
    owner = assign(trials, count)
    return {t.key: owner[cell_of(t)] for t in trials if not t.warmup}


@dataclass(frozen=True)
class Selection:
    """Which of a plan's trials a run runs: its repetitions (None: the plan's), --only, its shard."""
    reps: int | None = None
    only: Mapping[str, list[str]] | None = None
    shard: Shard | None = None

    def trials(self, plan) -> list[TrialSpec]:
        from quicbench.model.plan import expand
        return select(expand(plan, reps=self.reps, only=dict(self.only) if self.only else None), self.shard)

    def as_meta(self, plan) -> dict:
        """meta.json's reps, only and shard (a shard's measured trials: what its own report expects)."""
        return self._meta(self.trials(plan) if self.shard else ())

    def resolve(self, plan) -> RunSpec:
        """The plan resolved for running this selection: its trials, the lab, the content, the
        run-wide settings of a trial, and what meta.json records of the plan and the selection."""
        import json
        from quicbench.model.plan import condition_headlines, plan_fingerprint
        trials = tuple(self.trials(plan))
        return RunSpec(
            trials=trials,
            lab=LabSpec(name="run", hops=plan.hops, tcp_cc=plan.tcp_ccs[0], tcp_initcwnd=plan.tcp_initcwnd,
                        link=plan.link, offload=plan.offload),
            conditions=tuple(plan.conditions),
            content=plan.content(),
            options=plan.options, trial_timeout_s=plan.trial_timeout_s, qlog=plan.qlog, verify_cc=plan.verify_cc,
            calibrate=plan.calibrate, seed=plan.seed, link_seed=plan.link_seed,
            matrix=plan.matrix(), studies=plan.studies,
            client_commands=dict(plan.client_commands), server_commands=dict(plan.server_commands),
            meta={"plan": json.loads(plan.model_dump_json()), "plan_fingerprint": plan_fingerprint(plan),
                  "conditions": condition_headlines(plan.conditions), **self._meta(trials)})

    def _meta(self, trials) -> dict:
        return {"reps": self.reps, "only": dict(self.only) if self.only else None,
                "shard": {**self.shard.as_meta(), "trials": sum(not t.warmup for t in trials)}
                if self.shard else None}

    @classmethod
    def from_meta(cls, meta: Mapping) -> "Selection":
        was = meta.get("shard")
        return cls(reps=meta.get("reps"), only=meta.get("only"),
                   shard=Shard(int(was["index"]), int(was["count"])) if was else None)
