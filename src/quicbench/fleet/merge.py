"""Merge shard runs (or any runs of one plan) into one run directory that `report` and
`compare` read like any other.

    merge_runs([shard dirs], out, force=False) -> MergeResult

Checks first, writes after: every input must be a run directory (meta.json) that no process
is writing; the inputs must come from the same plan (fingerprint, repetitions) and
the same versions (quicbench, and every client and server driver that more than one input
ran: parts that ran different clients, say the load client and the browser, merge) unless
``force``, which records each mismatch in meta.json; the merged run's versions are the union.
``out`` may not be an input, lie inside one, or be a non-empty
directory: inputs are only ever read. The merged run is written into a temporary directory
beside ``out`` and renamed into place, so a failure leaves nothing behind.

A trial key found in more than one input keeps the rows of one input only — the one whose
last row for the key is ok and started latest (else the latest) — and the choice is listed.
Warm-ups are run by every shard of a condition by design: one per key is kept, silently.
Missing trials are the keys of the plan's expansion that no input has; when the inputs are
shards of one count, the shard that holds each is named so it can be re-run. Inputs run with
different `--only` selections (say the CPU-bound conditions alone, the rest with `--jobs`) are
parts of one plan: the trials planned are the union of their selections, and the merged run
has no `--only` when that union is the whole plan (else each part's is kept in `only_parts`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicbench.errors import QuicbenchError
from quicbench.model import columns
from quicbench.model.plan import expand, plan_from_dict
from quicbench.model.shard import shard_of_key
from quicbench.model.runmeta import RunMeta
from quicbench.store import (RunLayout, RunStore, check_tree, confined, read_jsonl_checked, read_meta,
                             refuse_if_written)
import quicbench.clients  # noqa: F401 - the drivers tell the plan model which protocols they fetch

# what belongs to one run's lab and process, not to the merged result
_PER_RUN = ("lab", "tls", "server_ports", "content", "shard", "run_id", "status", "created", "finished_at",
            "resumed_at", "interrupted_by", "interrupted_at", "reps_changed", "calibration", "merge")


@dataclass
class Input:
    dir: Path
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    torn: list[int] = field(default_factory=list)     # line numbers of trials.jsonl that are not a row

    @property
    def label(self) -> str:
        shard = self.meta.get("shard")
        return f"{self.dir}" + (f" (shard {shard['index']}/{shard['count']})" if shard else "")


@dataclass
class MergeResult:
    out: Path
    rows: int
    trials: int
    ok: int
    inputs: list[dict[str, Any]]
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    rerun: dict[str, int] = field(default_factory=dict)      # "I/N" -> missing trials of that shard
    mismatches: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)            # "DIR/trials.jsonl:LINE" of every torn line
    unfinished: list[str] = field(default_factory=list)      # inputs whose run did not end (status running/interrupted)

    @property
    def problems(self) -> bool:
        """The merge wrote its output but it lacks something: exit 1."""
        return bool(self.missing or self.torn or self.unfinished)


def read_input(d: Path) -> Input:
    d = Path(d)
    layout = RunLayout(d)
    if not d.is_dir() or not layout.meta.is_file():
        raise QuicbenchError(f"{d}: not a quicbench run directory (no meta.json); merge takes run "
                             f"directories such as DIR/shards/*")
    _refuse_if_written(layout)
    confined(d, layout.trials)
    meta = read_meta(layout)
    if not isinstance(meta.get("plan"), dict):
        raise QuicbenchError(f"{d}: meta.json has no plan: cannot tell which plan its trials belong to")
    read = read_jsonl_checked(layout.trials)
    return Input(d, meta, read.rows, read.torn)


def _refuse_if_written(layout: RunLayout) -> None:
    """A run still being written (its run.lock held) is not merged; the lock is only tested, read-only."""
    refuse_if_written(layout, "merge")


def check_out(out: Path, dirs: list[Path]) -> None:
    """Merge never writes into an input: out may be neither an input nor inside one, nor a non-empty dir."""
    o = Path(out).resolve()
    for d in dirs:
        r = Path(d).resolve()
        if o == r or r in o.parents:
            raise QuicbenchError(f"--out {out}: is {'an input' if o == r else 'inside the input ' + str(d)}; "
                                 f"merge never writes into its inputs, choose another directory")
    if o.exists() and (not o.is_dir() or any(o.iterdir())):
        raise QuicbenchError(f"--out {out}: exists and is not an empty directory; choose a new directory")


def _quicbench_version(meta: dict[str, Any]) -> Any:
    return meta.get("quicbench_version") or (meta.get("host") or {}).get("quicbench")


def mismatches(inputs: list[Input]) -> list[str]:
    """How the inputs differ in plan and versions (empty: they merge as they are)."""
    from quicbench.run.runner import plan_fingerprint
    first = inputs[0]
    checks = {
        "plan fingerprint": lambda m: m.get("plan_fingerprint") or plan_fingerprint(plan_from_dict(m["plan"])),
        "repetitions": lambda m: m.get("reps") or (m.get("plan") or {}).get("repetitions"),
        "quicbench version": _quicbench_version,
        "shard count": lambda m: (m.get("shard") or {}).get("count"),
        # what carried the trials: pooled rows of two links, kernels or backends are not one sample
        "link": lambda m: _dict(m.get("link")).get("name"),
        "kernel": lambda m: _dict(m.get("host")).get("kernel_driver") or "host",
        "backend": lambda m: _dict(m.get("lab")).get("backend") or "netns",
    }
    out = []
    for what, get in checks.items():
        want = get(first.meta)
        for other in inputs[1:]:
            got = get(other.meta)
            if got is not None and want is not None and got != want:
                out.append(f"{what} differs: {first.dir} has {_short(want)}, {other.dir} has {_short(got)}")
    # versions per driver: a driver two inputs both ran must be the same build in both
    seen: dict[str, tuple[Path, Any]] = {}
    for inp in inputs:
        for driver, v in (inp.meta.get("versions") or {}).items():
            if driver in seen and seen[driver][1] != v:
                out.append(f"{driver} versions differ: {seen[driver][0]} has {_short(seen[driver][1])}, "
                           f"{inp.dir} has {_short(v)}")
            seen.setdefault(driver, (inp.dir, v))
    return out


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def merged_versions(inputs: list[Input]) -> dict[str, Any] | None:
    """Every driver's versions over the inputs (the first input's where they differ: forced)."""
    out: dict[str, Any] = {}
    for inp in inputs:
        for driver, v in (inp.meta.get("versions") or {}).items():
            out.setdefault(driver, v)
    return out or None


def _short(v: Any) -> str:
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= 120 else s[:117] + "..."


def _final(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return rows[-1]


def _rank(rows: list[dict[str, Any]], order: int) -> tuple:
    """Which input's rows of a key to keep: an ok final row first, then the latest start."""
    last = _final(rows)
    started = last.get("started_at")
    return (last.get("status") == "ok", started if isinstance(started, (int, float)) else float("-inf"), order)


def merge_runs(dirs: list[Path], out: Path, force: bool = False) -> MergeResult:
    if not dirs:
        raise QuicbenchError("merge: name at least one run directory")
    dirs = [Path(d) for d in dirs]
    out = Path(out).absolute()        # the run's id is its directory's name ('.' has none)
    seen: set[Path] = set()
    for d in dirs:
        if d.resolve() in seen:
            raise QuicbenchError(f"{d}: named twice")
        seen.add(d.resolve())
    check_out(out, dirs)
    inputs = [read_input(d) for d in dirs]
    differ = mismatches(inputs)
    if differ and not force:
        raise QuicbenchError(f"merge: the runs differ ({differ[0]}{'; ...' if len(differ) > 1 else ''}); "
                             f"--force merges them anyway and records it")

    # rows per key per input; one input's rows per key are kept
    by_key: dict[str, list[tuple[int, list[dict[str, Any]]]]] = {}
    for i, inp in enumerate(inputs):
        per: dict[str, list[dict[str, Any]]] = {}
        for r in inp.rows:
            per.setdefault(str(r.get("key")), []).append(r)
        for k, rs in per.items():
            by_key.setdefault(k, []).append((i, rs))
    kept: list[tuple[int, dict[str, Any]]] = []
    duplicates, warmups_dropped = [], 0
    for k, cands in by_key.items():
        best_i, best_rows = max(cands, key=lambda c: _rank(c[1], c[0]))
        kept += [(best_i, r) for r in best_rows]
        if len(cands) > 1:
            if all(r.get("warmup") for _, rs in cands for r in rs):
                warmups_dropped += len(cands) - 1
                continue
            duplicates.append({"key": k, "kept": str(inputs[best_i].dir),
                               "kept_status": _final(best_rows).get("status"),
                               "dropped": [str(inputs[i].dir) for i, _ in cands if i != best_i]})

    # seq names a trial's directory: keep it, unless another trial took it (a forced merge of two plans)
    seq_owner: dict[int, str] = {}
    new_seq: dict[tuple[int, int], int] = {}
    kept.sort(key=lambda ir: (ir[1].get("seq") if isinstance(ir[1].get("seq"), int) else 1 << 62))
    next_free = 1 + max([r.get("seq") for _, r in kept if isinstance(r.get("seq"), int)], default=-1)
    rows_out = []
    for i, r in kept:
        r = dict(r)
        s = r.get("seq")
        if isinstance(s, int):
            if (i, s) not in new_seq:
                if seq_owner.get(s, r.get("key")) != r.get("key"):
                    new_seq[(i, s)] = next_free
                    next_free += 1
                else:
                    new_seq[(i, s)] = s
                seq_owner.setdefault(new_seq[(i, s)], r.get("key"))
            r["seq"] = new_seq[(i, s)]
        problems = columns.check_row(r)
        if problems:
            raise QuicbenchError(f"{inputs[i].dir}: row {r.get('key')!r} does not fit this quicbench's columns "
                                 f"({problems[0]}); merge it with the quicbench that wrote it")
        rows_out.append(r)

    first = inputs[0]
    plan = plan_from_dict(first.meta["plan"], source=str(first.dir / "meta.json"))
    parts = [inp.meta.get("only") or None for inp in inputs]
    # the union of the inputs' selections, in the plan's order; shards share one: expanded once
    reps = first.meta.get("reps")
    selections = {json.dumps(p, sort_keys=True): p for p in parts}.values()
    planned = list({t.key: t for sel in selections for t in expand(plan, reps=reps, only=sel)}.values())
    whole = None in parts or {t.key for t in expand(plan, reps=reps)} <= {t.key for t in planned}
    present = {r.get("key") for r in rows_out}
    missing = [t.key for t in planned if not t.warmup and t.key not in present]
    rerun: dict[str, int] = {}
    counts = {(inp.meta.get("shard") or {}).get("count") for inp in inputs}
    if missing and len(counts) == 1 and None not in counts:
        n = counts.pop()
        owner = shard_of_key(planned, n)
        for k in missing:
            rerun[f"{owner[k]}/{n}"] = rerun.get(f"{owner[k]}/{n}", 0) + 1

    hosts: dict[str, Any] = {}
    for inp in inputs:
        h = inp.meta.get("host") or {}
        hosts.setdefault(str(h.get("hostname", "?")), h)
    calibration: dict[str, Any] = {}
    for inp in inputs:
        for cond, v in (inp.meta.get("calibration") or {}).items():
            calibration.setdefault(cond, {**v, "host": (inp.meta.get("host") or {}).get("hostname")}
                                   if isinstance(v, dict) else v)
    final = {r.get("key"): r for r in rows_out}
    measured = [r for r in final.values() if not r.get("warmup")]
    described = [{"dir": str(inp.dir.resolve()), "run_id": inp.meta.get("run_id"), "shard": inp.meta.get("shard"),
                  "status": inp.meta.get("status"), "host": (inp.meta.get("host") or {}).get("hostname"),
                  "quicbench_version": _quicbench_version(inp.meta), "rows": len(inp.rows),
                  "rows_kept": sum(1 for i, _ in kept if inputs[i] is inp)} for inp in inputs]
    torn = [f"{inp.dir / 'trials.jsonl'}:{n}" for inp in inputs for n in inp.torn]
    unfinished = [f"{inp.label}: status {inp.meta.get('status') or 'unknown'}" for inp in inputs
                  if inp.meta.get("status") != "complete"]
    complete = not missing and not unfinished
    now = time.time()
    meta = {k: v for k, v in first.meta.items() if k not in _PER_RUN}
    # host: the facts every host shares (CPU model, kernel, ...), hostnames joined; each host's in full in hosts
    facts = list(hosts.values())
    host = {k: v for k, v in facts[0].items() if all(f.get(k) == v for f in facts)}
    host["hostname"] = ", ".join(sorted(hosts))
    if any(parts):
        meta["only"] = None if whole else first.meta.get("only")
        if not whole:
            meta["only_parts"] = parts
    meta.update(run_id=Path(out).name, created=now, host=host, finished_at=now, versions=merged_versions(inputs),
                status="complete" if complete else "incomplete",
                lab=first.meta.get("lab"), hosts=hosts, calibration=calibration or None,
                merge={"inputs": described, "duplicates": duplicates, "warmups_deduplicated": warmups_dropped,
                       "missing": missing, "rerun_shards": rerun, "forced": bool(force and differ),
                       "torn_lines": torn, "unfinished_inputs": unfinished,
                       "mismatches": differ, "at": now})
    copies = []
    for (i, seq), new in new_seq.items():
        src = RunLayout(inputs[i].dir).trial(seq)
        dest = RunLayout(Path(out)).trial(new).relative_to(Path(out))
        # the trial's directory and those of its earlier attempts (trials/NNNNN.attempt-K)
        for d in [src, *sorted(src.parent.glob(f"{src.name}.attempt-*"))] if src.parent.is_dir() else []:
            check_tree(inputs[i].dir, d)      # a link out of the input (trials/00000 -> /etc) is refused
            if d.is_dir():
                copies.append((d, dest.with_name(dest.name + d.name[len(src.name):])))
    RunStore.build(Path(out), RunMeta.model_validate(meta), rows_out, copies)
    return MergeResult(Path(out), rows=len(rows_out), trials=len(measured),
                       ok=sum(r.get("status") == "ok" for r in measured), inputs=described, duplicates=duplicates,
                       missing=missing, rerun=rerun, mismatches=differ, hosts=sorted(hosts), torn=torn,
                       unfinished=unfinished)
