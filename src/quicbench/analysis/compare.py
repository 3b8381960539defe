"""Two runs side by side: the same cells (condition x workload x protocol), their difference,
the ratio B/A with its CI and the verdict (different, equivalent, inconclusive); plus what
differs in how the runs were made. Each cell is compared on its workload kind's headline metric
(goodput for downloads, load time for pages, QoE_lin for videos), unless one metric is asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from quicbench import stats
from quicbench.analysis.load import RunData
from quicbench.analysis.tables import CELL_KEYS, DIFFERENCE_METRICS, Method, metric_scale, samples
from quicbench.model.workload_kinds import KINDS

COMPARE_COLUMNS = ["condition", "workload", "protocol", "metric", "n_a", "mean_a", "ci_low_a", "ci_high_a", "n_b", "mean_b",
                   "ci_low_b", "ci_high_b", "diff_pct", "ratio", "ratio_low", "ratio_high", "p", "p_raw", "verdict",
                   "reps_to_decide", "within", "in"]


def cell_metric(a: RunData, b: RunData, workload: str) -> str:
    """The headline metric of the workload's kind (a video is never compared on its goodput)."""
    kind = a.kind_of(workload) if workload in a.workloads else b.kind_of(workload)
    return KINDS.get(kind).headline().name if kind in KINDS else "goodput_mbps"


def seeded_alike(a: RunData, b: RunData) -> bool:
    """Both runs restarted the link's draws per repetition (link_seed) from the same plan seed: a
    cell's repetition r met the same losses and jitter in both."""
    pa, pb = a.meta.get("plan") or {}, b.meta.get("plan") or {}
    return bool(pa.get("link_seed") and pb.get("link_seed") and pa.get("seed") == pb.get("seed")
                and "link_seed" in a.ok.columns and "link_seed" in b.ok.columns)


def twins(a: RunData, b: RunData, metric: str) -> dict[tuple[str, str, str], tuple[list[float], list[float]]]:
    """Per cell, the metric of A's and B's trials that met the same seeded draws (the same row
    `link_seed`), in pairs: A's values and B's in the same order."""
    by_seed_b = {(*k, seed): v for k, seed, v in zip(b.ok[CELL_KEYS].itertuples(index=False, name=None),
                                                     b.ok["link_seed"], b.ok[metric])}
    out: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    for k, seed, v in zip(a.ok[CELL_KEYS].itertuples(index=False, name=None), a.ok["link_seed"], a.ok[metric]):
        twin = by_seed_b.get((*k, seed))
        if twin is not None and pd.notna(seed):
            xa, xb = out.setdefault(k, ([], []))
            xa.append(v)
            xb.append(twin)
    return out


def compare_cells(a: RunData, b: RunData, method: Method = Method(), metric: str | None = None) -> pd.DataFrame:
    """One row per cell in either run; mean_a/mean_b are the values the intervals are for (the
    geometric mean on the log scale, stats.Summary.center); diff_pct is B over A in % of A on that scale (empty for a metric compared
    on its difference: it can be 0 or negative). Each cell's metric is its kind's headline unless
    `metric` is given. With Holm the family is all cells. When both runs seeded the link's draws
    alike (seeded_alike), a cell's ratio metric is compared in pairs of twins (stats.compare_paired)."""
    metrics = {w: metric or cell_metric(a, b, w) for w in dict.fromkeys([*a.workloads, *b.workloads])}
    by_metric = {m: (samples(a, m), samples(b, m)) for m in set(metrics.values())}
    paired = {m: twins(a, b, m) for m in set(metrics.values()) if m not in DIFFERENCE_METRICS} \
        if seeded_alike(a, b) else {}
    cells_a = set(map(tuple, a.trials[CELL_KEYS].drop_duplicates().values))
    cells_b = set(map(tuple, b.trials[CELL_KEYS].drop_duplicates().values))
    order_c = list(dict.fromkeys([*a.condition_order, *b.condition_order]))
    order_w = list(dict.fromkeys([*a.workloads, *b.workloads]))
    order_p = list(dict.fromkeys([*a.protocols, *b.protocols]))
    rows, tested = [], []
    for c in order_c:
        for w in order_w:
            for p in order_p:
                k = (c, w, p)
                if k not in cells_a and k not in cells_b:
                    continue
                m = metrics[w]
                sa, sb = by_metric[m]
                xa, xb = sa.get(k), sb.get(k)
                s_a = stats.summarize(xa if xa is not None else [], scale=metric_scale(m))
                s_b = stats.summarize(xb if xb is not None else [], scale=metric_scale(m))
                where = "both" if k in cells_a and k in cells_b else ("A only" if k in cells_a else "B only")
                row: dict[str, Any] = {
                    "condition": c, "workload": w, "protocol": p, "metric": m,
                    "n_a": s_a.n, "mean_a": s_a.center, "ci_low_a": s_a.ci_low, "ci_high_a": s_a.ci_high,
                    "n_b": s_b.n, "mean_b": s_b.center, "ci_low_b": s_b.ci_low, "ci_high_b": s_b.ci_high,
                    "diff_pct": None if m in DIFFERENCE_METRICS else stats.pct_diff(s_b.center, s_a.center),
                    "in": where, "p": None,
                    "verdict": "not in both runs"}
                if row["in"] == "both" and m in paired:
                    ta, tb = paired[m].get(k, ([], []))
                    tested.append((len(rows), stats.compare_paired(tb, ta, alpha=method.alpha_per_look,
                                                                   min_n=method.min_n, margin=method.margin)))
                elif row["in"] == "both":
                    tested.append((len(rows), method.compare(xb if xb is not None else [],
                                                             xa if xa is not None else [], m)))  # B / A
                rows.append(row)
    for (i, _), r in zip(tested, stats.adjust([r for _, r in tested], method.correction)):
        rows[i].update(p=r.p, p_raw=r.p_raw, verdict=r.verdict, ratio=r.ratio, ratio_low=r.ratio_low,
                       ratio_high=r.ratio_high, reps_to_decide=r.reps_to_decide, within=stats.margin_text(r))
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def _get(meta: dict[str, Any], path: str) -> Any:
    cur: Any = meta
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def setup_differences(a: RunData, b: RunData) -> list[tuple[str, str, str]]:
    """(what, run A, run B) for each set-up fact that differs between the runs."""
    keys = [("plan fingerprint", "plan_fingerprint"), ("plan", "plan.name"), ("kernel", "host.kernel"),
            ("CPU", "host.cpu_model"), ("CPUs", "host.cpus"), ("host", "host.hostname"),
            ("quicbench", "host.quicbench"), ("link emulator", "link.name"), ("TCP congestion control", "lab.tcp_cc"),
            ("TCP initial window", "lab.tcp_initcwnd"), ("router hops", "lab.hops"), ("repetitions", "plan.repetitions")]
    out = []
    for label, path in keys:
        va, vb = _get(a.meta, path), _get(b.meta, path)
        if va != vb:
            out.append((label, str(va), str(vb)))
    va, vb = a.meta.get("versions") or {}, b.meta.get("versions") or {}
    for k in dict.fromkeys([*va, *vb]):
        if va.get(k) != vb.get(k):
            out.append((f"version {k}", str(va.get(k)), str(vb.get(k))))
    return out


@dataclass
class CompareData:
    """Everything `quicbench compare` shows: the cells of both runs, counts, notes, set-up differences."""
    run_a: str
    run_b: str
    dir_a: str
    dir_b: str
    frame: pd.DataFrame                      # compare_cells(): one row per cell (COMPARE_COLUMNS)
    setup_diffs: list[tuple[str, str, str]]  # (what, run A, run B)
    method_text: str
    n_tested: int
    n_sig: int                 # verdict 'different'
    protocols: list[str]
    notes: list[str] = field(default_factory=list)
    n_equiv: int = 0           # verdict 'equivalent'

    @property
    def tally(self) -> str:
        """'3 of 12 cells differ, 5 are equivalent within the margin, 4 inconclusive.'"""
        rest = self.n_tested - self.n_sig - self.n_equiv
        return (f"{self.n_sig} of {self.n_tested} cells compared differ, {self.n_equiv} are equivalent within "
                f"the margin, {rest} inconclusive.")


def build_compare_data(a: RunData, b: RunData, method: Method = Method()) -> CompareData:
    df = compare_cells(a, b, method)
    tested = df[df["verdict"].isin([stats.DIFFERENT, stats.EQUIVALENT, stats.INCONCLUSIVE])]
    notes = []
    only_a, only_b = int((df["in"] == "A only").sum()), int((df["in"] == "B only").sum())
    if only_a or only_b:
        notes.append(f"{only_a} cells only in A and {only_b} only in B are listed without a test.")
    small = int((df["verdict"] == stats.N_TOO_SMALL).sum())
    if small:
        notes.append(f"{small} cells have fewer than {method.min_n} successful trials in a run: no claim is made.")
    return CompareData(run_a=a.run_id, run_b=b.run_id, dir_a=str(a.run_dir), dir_b=str(b.run_dir), frame=df,
                       setup_diffs=setup_differences(a, b),
                       method_text=method.text(len(tested), "every cell the two runs share") + (
                           " Both runs seeded the link's random draws alike (link_seed, the same plan seed): each "
                           "cell's trials of A and B that met the same draws are compared in pairs, by a paired "
                           "t-test on the log ratios (n − 1 degrees of freedom) with its ratio CI and equivalence "
                           "test." if seeded_alike(a, b) else ""),
                       n_tested=len(tested), n_sig=int((tested["verdict"] == stats.DIFFERENT).sum()),
                       n_equiv=int((tested["verdict"] == stats.EQUIVALENT).sum()),
                       protocols=list(dict.fromkeys([*a.protocols, *b.protocols])), notes=notes)
