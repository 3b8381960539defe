"""Verdicts with their explanations: an ``explained`` study table (model/study.py's Table and
Explanation). Per cell (condition x workload) and pair of protocols a vs b, each metric's
comparison (the report's: Method.compare, Holm over the metric's comparisons of the table); for
every decided difference, the measurements on the same loads that explain it, or none
("unexplained"). The rule is data, not prose: a measurement explains a difference when the
study declares that it can (its ``explains``), its own comparison of the same two protocols on
the same cell is decided different (Holm over that measurement's comparisons of the table), and
it points toward the protocol that was faster (``faster_when``: fewer connections, a shorter
handshake, less stalling make a load faster). A decided measurement pointing the other way is
kept as evidence against.

    explained_table(run, table, method) -> dict | None
"""

from __future__ import annotations

from typing import Any

from quicbench import stats
from quicbench.analysis.load import RunData
from quicbench.analysis.measures import split_protocol
from quicbench.analysis.tables import Method, center, higher_is_better, samples
from quicbench.model.study import Explanation, Table
from quicbench.stats import DIFFERENT

EXPLAINED = "explained"
UNEXPLAINED = "unexplained"


def _named(run: RunData, name: str) -> list[str]:
    """The run's protocols a pair's name stands for: itself, else those of that base protocol
    (h3 for h3@quinn/bbr when the run names its stacks)."""
    if name in run.protocols:
        return [name]
    return [p for p in run.protocols if split_protocol(p)[0] == name]


def _pairs(run: RunData, table: Table) -> list[tuple[str, str]]:
    if table.pairs:
        return list(dict.fromkeys((x, y) for a, b in table.pairs for x in _named(run, a) for y in _named(run, b)
                                  if x != y))
    protos = list(run.protocols)
    return [(b, a) for i, a in enumerate(protos) for b in protos[i + 1:]]


def _a_lower(test: stats.TestResult, mean_a: float, mean_b: float) -> bool | None:
    """Whether a's value is the lower one, on the test's own scale (the ratio of geometric means,
    else the difference of means, else the centres); None when they are equal."""
    if test.ratio is not None and test.ratio == test.ratio:
        return None if test.ratio == 1 else test.ratio < 1
    if test.difference is not None and test.difference == test.difference:
        return None if test.difference == 0 else test.difference < 0
    return None if mean_a == mean_b else mean_a < mean_b


def cell_flags(run: RunData) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(condition, workload, protocol) -> (CPU-bound, link-late) trials among the cell's used ones."""
    ok = run.ok
    out: dict[tuple[str, str, str], tuple[int, int]] = {}
    for k, g in ok.groupby(["condition", "workload", "protocol"], sort=False):
        cpu = int(g["cpu_bound"].fillna(False).astype(bool).sum()) if "cpu_bound" in g else 0
        late = int(g["link_late"].fillna(False).astype(bool).sum()) if "link_late" in g else 0
        out[k] = (cpu, late)
    return out


def _comparisons(run: RunData, metric: str, cells: list[tuple[str, str]], pairs: list[tuple[str, str]],
                 method: Method) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """(condition, workload, a, b) -> the metric's comparison a vs b (Holm over these: one family)."""
    smp = samples(run, metric)
    keys, tests, out = [], [], {}
    for c, w in cells:
        for a, b in pairs:
            xa, xb = smp.get((c, w, a)), smp.get((c, w, b))
            if xa is None or xb is None or not xa.size or not xb.size:
                continue
            keys.append((c, w, a, b))
            tests.append(method.compare(xa, xb, metric))
            out[(c, w, a, b)] = {"mean_a": center(metric, xa), "mean_b": center(metric, xb),
                                 "n_a": int(xa.size), "n_b": int(xb.size)}
    for k, r in zip(keys, stats.adjust(tests, method.correction)):
        out[k]["test"] = r
        out[k]["a_lower"] = _a_lower(r, out[k]["mean_a"], out[k]["mean_b"])
    return out


def explained_table(run: RunData, table: Table, method: Method) -> dict[str, Any] | None:
    """Per metric of the table, cell and pair: the comparison and, where it decided a difference,
    the explanations that hold (and the decided ones pointing the other way). Rows of a cell
    carry its CPU-bound and link-late loads (a verdict there may be the CPU's or the link's)."""
    wls = [w for w in run.workloads if table.workload_kind is None or run.kind_of(w) == table.workload_kind]
    cells = [(c, w) for c in run.condition_order for w in wls]
    pairs = _pairs(run, table)
    if not cells or not pairs:
        return None
    flags = cell_flags(run)
    comps = {m: _comparisons(run, m, cells, pairs, method)
             for m in dict.fromkeys([*table.metrics, *(e.metric for e in table.explanations)])}
    rows: list[dict[str, Any]] = []
    for metric in table.metrics:
        lower_better = not higher_is_better(metric)
        candidates: list[Explanation] = [e for e in table.explanations if metric in e.explains]
        for (c, w, a, b), cmp in comps[metric].items():
            test = cmp["test"]
            fa, fb = flags.get((c, w, a), (0, 0)), flags.get((c, w, b), (0, 0))
            row = {"metric": metric, "condition": c, "workload": w, "a": a, "b": b, **cmp,
                   "n_cpu_bound": fa[0] + fb[0], "n_link_late": fa[1] + fb[1],
                   "status": None, "by": [], "against": []}
            if test.verdict == DIFFERENT and cmp["a_lower"] is not None:
                a_faster = cmp["a_lower"] == lower_better
                for e in candidates:
                    ec = comps[e.metric].get((c, w, a, b))
                    if ec is None or ec["test"].verdict != DIFFERENT or ec["a_lower"] is None:
                        continue
                    a_favoured = ec["a_lower"] == (e.faster_when == "lower")
                    (row["by"] if a_favoured == a_faster else row["against"]).append({"explanation": e, **ec})
                row["status"] = EXPLAINED if row["by"] else UNEXPLAINED
            rows.append(row)
    if not rows:
        return None
    tally = {m: {"compared": 0, "different": 0, EXPLAINED: 0, UNEXPLAINED: 0} for m in table.metrics}
    for r in rows:
        t = tally[r["metric"]]
        t["compared"] += 1
        if r["status"]:
            t["different"] += 1
            t[r["status"]] += 1
    return {"id": table.id, "title": table.title, "note": table.note, "explained": rows,
            "metrics": list(table.metrics), "explanations": list(table.explanations), "tally": tally,
            "n_tests": {m: len(c) for m, c in comps.items()}}
