"""A run set beside the studies that apply to it (model/study.py): which studies, which of their
reference values match which cells, and the tables and figure inputs they declare, computed with
the run's statistics. Nothing here knows one study from another.

    applied_studies(run) -> [(Study, why)]
    match_references(run, study, why) -> DataFrame (REFERENCE_COLUMNS)
    build_studies(run, summary, method) -> [StudyData]
    figure_views(studies) -> [View]       the figures to draw: the studies' and the defaults
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
from scipy.stats import t as t_dist

from quicbench.analysis.explain import cell_flags, explained_table
from quicbench.analysis.load import RunData
from quicbench.analysis.measures import split_protocol
from quicbench.analysis.tables import (Method, center, metric_scale, best_protocols, cell_verdict, higher_is_better,
                                       samples)
from quicbench.errors import QuicbenchError
from quicbench.model.study import (CONDITION_PARAMS, Check, Figure, Study, Table, Way, builtin_studies,
                                   find_study)
from quicbench.model.units import size_label
from quicbench import stats
from quicbench.stats import DIFFERENT, EQUIVALENT, finite

REFERENCE_COLUMNS = ["study", "condition", "workload", "protocol", "metric", "quantity", "ref_condition", "size",
                     "ref_kind", "value", "unit", "value_metric", "value_text", "where", "note", "seed_protocol"]
GROUP_COLUMNS = {"size": "size", "quantity": "quantity", "kind": "ref_kind"}
DEFAULT_TOLERANCE = 1e-6


# -- which studies ----------------------------------------------------------------------------------
def plan_studies(meta: dict[str, Any]) -> list[str]:
    """The studies a run's plan names (plan key `study`: a name, a file, or a list of them)."""
    named = (meta.get("plan") or {}).get("study")
    if not named:
        return []
    return [named] if isinstance(named, str) else [str(s) for s in named]


def applied_studies(run: RunData, names: list[str] | None = None) -> tuple[list[tuple[Study, str]], list[str]]:
    """The studies to set the run beside, each with why, and notes on studies that could not be
    read. names (a report's --study) or the plan's `study` win; else every known study whose
    [applies] rule holds (its name in the plan's name, or a condition named as it names them)."""
    notes: list[str] = []
    names = names if names else plan_studies(run.meta)
    if names:
        out = []
        for n in names:
            try:
                out.append((find_study(n), "named"))
            except QuicbenchError as e:
                notes.append(f"Study '{n}' is not shown: {e}")
        return out, notes
    try:
        candidates = builtin_studies()
    except QuicbenchError as e:
        return [], [f"The studies could not be read: {e}"]
    plan_name = str((run.meta.get("plan") or {}).get("name") or "").lower().replace("_", "-")
    out = []
    for s in candidates:
        if any(p.lower() in plan_name for p in s.applies.plan_names):
            out.append((s, "plan name"))
        elif s.applies.condition_names and s.match.condition_name and any(
                re.fullmatch(s.match.condition_name, c) for c in run.condition_order):
            out.append((s, "condition names"))
    return out, notes


# -- matching ---------------------------------------------------------------------------------------
def workload_attrs(run: RunData) -> dict[str, dict[str, Any]]:
    """Workload label -> its attributes (kind, size_bytes, count, connections, page, player, mode):
    from the run's plan when it has one, else from the rows."""
    out: dict[str, dict[str, Any]] = {}
    info = run.workload_info
    for w in run.workloads:
        row = info.loc[w] if w in info.index else pd.Series(dtype=object)
        size = row.get("size_bytes")
        count = row.get("count")
        out[w] = {"kind": run.kind_of(w), "size_bytes": int(size) if pd.notna(size) else None,
                  "count": int(count) if pd.notna(count) else None,
                  "connections": str(row.get("connection_policy") or "shared"), "page": None, "player": None,
                  "mode": None}
    plan = run.meta.get("plan")
    if isinstance(plan, dict) and plan.get("workloads"):
        from quicbench.model.plan import plan_from_dict
        try:
            workloads = plan_from_dict({k: v for k, v in plan.items() if k != "study"}).workloads
        except QuicbenchError:
            workloads = []
        for wl in workloads:
            if wl.label in out:
                a = out[wl.label]
                a.update(kind=wl.kind, count=wl.count, connections=wl.connections)
                a.update(wl.workload_kind.study_attrs(wl, a))
    return out


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def condition_values(run: RunData, study: Study, by_params: bool) -> dict[str, dict[str, Any] | None]:
    """Condition -> the parameter values compared with the reference's (None: not matched): from
    the name when it matches the study's condition_name (its named groups), the rest (or all, when
    the name does not match) from the run's condition parameters if by_params."""
    rx = re.compile(study.match.condition_name) if study.match.condition_name else None
    params = run.conditions
    out: dict[str, dict[str, Any] | None] = {}
    for c in run.condition_order:
        m = rx.fullmatch(c) if rx else None
        if m is None and not by_params:
            out[c] = None
            continue
        vals: dict[str, Any] = {}
        if c in params.index:
            for p in CONDITION_PARAMS:
                v = params.at[c, p]
                vals[p] = None if v is None or (not isinstance(v, bool) and pd.isna(v)) else (
                    bool(v) if p == "spikes" else float(v))
        if m is not None:
            vals.update({k: float(v) for k, v in m.groupdict().items() if v is not None})
        out[c] = vals
    return out


def _condition_ok(ref: Any, vals: dict[str, Any], study: Study) -> int | None:
    """How many parameters agree (None: one disagrees). An empty reference field matches any value;
    an unlimited rate (none) matches only an empty one."""
    n = 0
    for p in study.match.condition:
        want = getattr(ref, p)
        if want is None:
            continue
        have = vals.get(p)
        if p == "spikes":
            if bool(have) != bool(want):
                return None
        else:
            h = _num(have)
            tol = study.match.tolerance.get(p, DEFAULT_TOLERANCE)
            if h is None or abs(h - float(want)) > tol:
                return None
        n += 1
    return n


def _workload_ok(ref: Any, attrs: dict[str, Any], study: Study) -> int | None:
    n = 0
    for a in study.match.workload:
        want = getattr(ref, a)
        if want is None:
            continue
        have = attrs.get(a)
        if a == "size_bytes":
            tol = study.match.size_tolerance_pct / 100
            if have is None or abs(have - want) > tol * want + 0.5:
                return None
        elif have is None or str(have) != str(want):
            return None
        n += 1
    return n


def _base_protocol(p: str) -> str:
    return split_protocol(p)[0]


def match_references(run: RunData, study: Study, why: str = "named") -> pd.DataFrame:
    """Every (condition, workload, protocol) of the run with the study's reference values that
    match it: the most specific reference per metric (or quantity) when several do."""
    conds = condition_values(run, study, by_params=why != "condition names")
    attrs = workload_attrs(run)
    best: dict[tuple, tuple[int, dict[str, Any]]] = {}
    for ref in study.references:
        protos = [p for p in run.protocols if p == ref.protocol or _base_protocol(p) == ref.protocol]
        if not protos:
            continue
        for c, vals in conds.items():
            if vals is None:
                continue
            nc = _condition_ok(ref, vals, study)
            if nc is None:
                continue
            for w, a in attrs.items():
                nw = _workload_ok(ref, a, study)
                if nw is None:
                    continue
                for p in protos:
                    row = {"study": study.name, "condition": c, "workload": w, "protocol": p,
                           "metric": ref.metric, "quantity": ref.quantity, "ref_condition": ref.condition,
                           "value": ref.value, "unit": ref.unit, "value_metric": ref.value_in_metric_unit,
                           "value_text": ref.value_text(), "where": ref.where, "note": ref.note,
                           "seed_protocol": ref.seed_protocol, "ref_kind": ref.kind or "",
                           "size": ref.size or (size_label(ref.size_bytes) if ref.size_bytes else "")}
                    key = (c, w, p, ref.metric or ref.quantity)
                    if key not in best or nc + nw > best[key][0]:
                        best[key] = (nc + nw, row)
    rows = [r for _, r in best.values()]
    return pd.DataFrame(rows, columns=REFERENCE_COLUMNS)


# -- tables -----------------------------------------------------------------------------------------
def ranking(means: dict[str, float | None], higher: bool = True, ties: bool = False) -> str:
    """'h1 > h2 > h3' (highest first) or, when lower is better, 'h1 < h2 < h3' (lowest first):
    the best first either way; protocols without a value left out. ties: identical values are
    joined by '=' (a document's printed numbers; never our means, which only a test can call equal)."""
    have = [(p, v) for p, v in means.items() if v is not None]
    order = sorted(have, key=lambda pv: -pv[1] if higher else pv[1])
    out = ""
    for i, (p, v) in enumerate(order):
        if i:
            out += " = " if ties and v == order[i - 1][1] else (" > " if higher else " < ")
        out += p
    return out


class Bests:
    """best_protocols per (metric, kind), computed once for the whole report (each one a family)."""

    def __init__(self, run: RunData, method: Method):
        self.run, self.method = run, method
        self._cache: dict[tuple[str, str], pd.DataFrame] = {}

    def get(self, metric: str, kind: str) -> pd.DataFrame:
        key = (metric, kind)
        if key not in self._cache:
            self._cache[key] = best_protocols(self.run, self.method, metric, higher_is_better(metric),
                                              kind=kind).set_index(["condition", "workload"])
        return self._cache[key]

    def verdict(self, metric: str, kind: str, c: str, w: str) -> tuple[str | None, str | None, float | None]:
        b = self.get(metric, kind)
        if (c, w) not in b.index:
            return None, None, None
        r = b.loc[(c, w)]
        return r["cell_best"], r["cell_verdict"], finite(r["cell_p"])


def _way_workload(way: Way, proto: str, candidates: list[str], attrs: dict[str, dict[str, Any]]) -> str | None:
    """The first of the candidate workloads (those the references matched) with the way's attributes."""
    # a protocol's own attributes replace the way's (the seed's h2: a page, not a per-object download)
    want = way.protocols.get(_base_protocol(proto), way.workload)
    for w in candidates:
        a = attrs[w]
        if all(str(a.get(k)) == str(v) if k != "connections" else str(a.get(k)).split(":")[0] == str(v)
               for k, v in want.items()):
            return w
    return None


def _candidates(run: RunData, refs: pd.DataFrame, table: Table, attrs: dict[str, dict[str, Any]]) -> list[str]:
    """The workloads a table's ways choose from: those the references matched and, when a way asks
    for another kind (a page load of the same objects: the seed's h2 from Chrome), the run's
    workloads of any kind with the same object size."""
    wls = list(dict.fromkeys(refs["workload"]))
    kinds = {str(k) for way in table.ways for k in [way.workload.get("kind"),
                                                     *(o.get("kind") for o in way.protocols.values())] if k}
    if kinds - {attrs[w]["kind"] for w in wls}:
        sizes = {attrs[w]["size_bytes"] for w in wls}
        wls += [w for w in run.workloads if w not in wls and attrs[w]["size_bytes"] in sizes]
    return wls


def _cell(summary: pd.DataFrame, c: str, w: str | None, p: str, metric: str,
          flags: dict[tuple[str, str, str], tuple[int, int]] | None = None) -> dict[str, Any] | None:
    if w is None or (c, w, p) not in summary.index:
        return None
    r = summary.loc[(c, w, p)]
    # the value the interval is for: the geometric mean on the log scale, else the arithmetic mean
    mean = finite(r.get(f"{metric}_gmean"))
    mean = mean if mean is not None else finite(r.get(f"{metric}_mean"))
    if mean is None:
        return None
    return {"mean": mean, "ci_low": finite(r.get(f"{metric}_ci_low")), "ci_high": finite(r.get(f"{metric}_ci_high")),
            "n": int(r["n"]), "n_cpu_bound": int(r["n_cpu_bound"]),
            "n_link_late": (flags or {}).get((c, w, p), (0, 0))[1]}


def _swapped_pairs(ref: dict[str, float | None], ours: dict[str, float | None], higher: bool
                   ) -> list[tuple[str, str]]:
    """(q, p): pairs of protocols the reference ranks p ahead of q (values strictly apart) and our
    means q ahead of p."""
    sign = 1 if higher else -1
    have = [p for p in ref if ref[p] is not None and ours.get(p) is not None]
    return [(q, p) for p in have for q in have
            if sign * (ref[p] - ref[q]) > 0 and sign * (ours[q] - ours[p]) > 0]     # type: ignore[operator]


def reference_vs_ours(run: RunData, summary: pd.DataFrame, refs: pd.DataFrame, table: Table, bests: Bests,
                      label: str, metric_labels: dict[str, str]) -> dict[str, Any] | None:
    """The reference per protocol with its ranking beside ours per way (the run's workloads with
    the way's attributes), with our ranking and the best protocol's verdict, per group and row."""
    # the table's metrics, and (one row each, ours empty) the quantities quicbench has no metric for
    refs = refs[refs["metric"].isin(table.metrics) | (refs["metric"].isna() & refs["quantity"].isin(table.quantities))]
    refs = refs.assign(row_key=refs["metric"].where(refs["metric"].notna(), refs["quantity"]))
    if refs.empty or summary.empty:
        return None
    s = summary.set_index(["condition", "workload", "protocol"])
    attrs = workload_attrs(run)
    groups = []
    # ways that take protocols from different workloads: their comparisons, Holm over the table
    mixed: list[tuple[dict[str, Any], str, str, stats.TestResult]] = []
    # pairs ranked the other way round from the reference: (way cell, is it the top pair, test, higher is better)
    rank_tests: list[tuple[dict[str, Any], bool, stats.TestResult, bool]] = []
    flags = cell_flags(run)
    smp_cache: dict[str, dict[tuple[str, str, str], Any]] = {}
    split = refs.groupby(GROUP_COLUMNS[table.group_by], sort=False) if table.group_by != "none" else [("", refs)]
    for g, gr in split:
        ways = [way for way in table.ways
                if any(_way_workload(way, p, _candidates(run, gr, table, attrs), attrs) for p in run.protocols)]
        if not ways:
            continue
        rows = []
        metrics = [m for m in [*table.metrics, *table.quantities] if m in set(gr["row_key"])]
        for c in run.condition_order:
            gc = gr[gr["condition"] == c]
            if gc.empty:
                continue
            wls = _candidates(run, gc, table, attrs)
            for m in (metrics if table.rows == "metric" else metrics[:1]):
                gm = gc[gc["row_key"] == m]
                higher = higher_is_better(m)
                # the reference in the metric's unit when it converts, else as printed (with its unit)
                ref = {p: None for p in run.protocols}
                ref_text = {p: "–" for p in run.protocols}
                for p in run.protocols:
                    hit = gm[gm["protocol"] == p]
                    if len(hit):
                        h = hit.iloc[0]
                        converted = finite(h["value_metric"])
                        ref[p] = converted if converted is not None else finite(h["value"])
                        ref_text[p] = f"{converted:.5g}" if converted is not None else h["value_text"]
                # a cell the reference names without a number (CVart plotted, printed nothing)
                # keeps its row: ours beside the seed's "–"; a cell it does not name has none
                if gm.empty:
                    continue
                row: dict[str, Any] = {"condition": c, "metric": m, "label": metric_labels.get(m, m),
                                       "ref": ref, "ref_text": ref_text, "ref_rank": ranking(ref, higher, ties=True),
                                       "where": "; ".join(dict.fromkeys(gm["where"])),
                                       "notes": "; ".join(n for n in dict.fromkeys(gm["note"]) if n)}
                for way in ways:
                    cells, means, used = {}, {}, {}
                    for p in run.protocols:
                        w = _way_workload(way, p, wls, attrs)
                        if w is not None:
                            used[p] = w
                        cells[p] = _cell(s, c, w, p, m, flags) if m in table.metrics else None
                        means[p] = cells[p]["mean"] if cells[p] else None
                    rank = ranking(means, higher) if used and m in table.metrics else ""
                    # a verdict compares protocols on one workload; a way that takes each protocol
                    # from another workload (protocols = {...}) ranks them but tests nothing
                    one = next(iter(used.values())) if len(set(used.values())) == 1 else None
                    # a way that names its own protocols' workloads is judged on the protocols it
                    # took, even when those happen to share one workload (the run lacks the others):
                    # the workload's verdict would speak of protocols the way left out
                    own = bool(way.protocols)
                    best, verdict, p_best = (bests.verdict(m, attrs[one]["kind"], c, one)
                                             if one and not own and m in table.metrics else (None, None, None))
                    # compared on the protocols the reference ranks (not where its numbers tie)
                    ref_rank = "" if " = " in row["ref_rank"] else row["ref_rank"]
                    common = ranking({p: v for p, v in means.items() if ref[p] is not None}, higher)
                    row[way.name] = {"workload": one, "workloads": used, "cells": cells, "rank": rank, "best": best,
                                     "verdict": verdict, "p": p_best, "differs": False, "best_differs": False,
                                     "differs_by_estimate": bool(common) and bool(ref_rank) and common != ref_rank}
                    if row[way.name]["differs_by_estimate"] and m in table.metrics:
                        # ≠ only where our order is decided: each pair the reference ranks one way
                        # and our means the other, tested (ours-ahead over the other; decided below)
                        smp = smp_cache.setdefault(m, samples(run, m))
                        ours_top, ref_top = common.split(" ")[0], ref_rank.split(" ")[0]
                        for q, p in _swapped_pairs(ref, means, higher):
                            xq, xp = smp.get((c, used.get(q), q)), smp.get((c, used.get(p), p))
                            if xq is not None and xp is not None and len(xq) and len(xp):
                                rank_tests.append((row[way.name], (q, p) == (ours_top, ref_top),
                                                   bests.method.compare(xq, xp, m), higher))
                    if (one is None or own) and len(used) > 1 and m in table.metrics:
                        # each protocol on its own workload: the best mean against each other
                        # protocol's trials, on the metric's scale (decided below, with the table)
                        smp = smp_cache.setdefault(m, samples(run, m))
                        xs = {p: smp.get((c, w, p)) for p, w in used.items()}
                        xs = {p: x for p, x in xs.items() if x is not None and len(x)}
                        if len(xs) > 1:
                            b = max(xs, key=lambda p: (1 if higher else -1) * center(m, xs[p]))
                            row[way.name]["best"] = b
                            row[way.name]["tests"] = {}
                            mixed += [(row[way.name], b, p, bests.method.compare(xs[b], x, m))
                                      for p, x in xs.items() if p != b]
                rows.append(row)
        if rows:
            groups.append({"group": g, "title": table.group_title.format(group=g, label=label),
                           "protocols": run.protocols, "ways": [w.name for w in ways], "rows": rows,
                           "higher": {m: higher_is_better(m) for m in metrics}})
    for (cell, top, _r, up), r in zip(rank_tests, stats.adjust([r for _, _, r, _ in rank_tests],
                                                                 bests.method.correction)):
        if r.verdict == DIFFERENT and bool(r.higher) == up:
            cell["differs"] = True
            cell["best_differs"] = cell["best_differs"] or top
    for (cell, _b, p, _r), r in zip(mixed, stats.adjust([r for *_, r in mixed], bests.method.correction)):
        cell["tests"][p] = r
    for cell in {id(c): c for c, *_ in mixed}.values():
        cell["verdict"], cell["p"] = cell_verdict(cell.pop("tests"))
    if not groups:
        return None
    return {"id": table.id, "title": table.title, "note": table.note, "rows_by": table.rows, "label": label,
            "groups": groups}


def _filter_ok(vals: dict[str, Any], check: Check, study: Study) -> bool:
    """The condition is one the check is about (within the study's match tolerance)."""
    for p, want in check.conditions.items():
        have = vals.get(p)
        tol = study.match.tolerance.get(p, DEFAULT_TOLERANCE)
        if want == "nonzero":
            if not _num(have):
                return False
        elif not any((bool(have) == bool(v)) if p == "spikes" else
                     (_num(have) is not None and abs(_num(have) - float(v)) <= tol) for v in want):
            return False
    return True


NOT_JUDGED_CPU = "not judged here (CPU-bound)"
NOT_JUDGED_LATE = "not judged here (link-late)"
CLAIMS_NOTE = ("An outcome per cell: agrees (the difference the claim states is significant, beyond its stated "
               "bound when it gives one — a one-sided test at the bound — or equivalence is shown within its "
               "margin where it claims none), contradicts (significant the other way, or on the wrong side of the bound), "
               "equivalent, or undecided; Holm over every judged cell of the table. A cell with a CPU-bound (⚙) or "
               "link-late (⌛) trial is not judged: the CPU or the link may have set the pace there, and a check "
               "with no other cell is 'not judged here'.")
CLAIM_OUTCOMES = ("agrees", "contradicts", "equivalent", "undecided", "cpu_bound", "link_late")


def threshold_test(a, b, check: Check, method: Method) -> stats.TestResult:
    """a vs b against the claim's stated bound on the ratio a/b (check.ratio, on logs): the
    one-sided log-Welch test in the direction the estimate lies, as a TestResult whose p is that
    test's (different: the ratio is shown beyond the bound on the side its point estimate lies).
    Without a ratio: the report's test, with the check's margin when it states one."""
    m = method if check.margin_pct is None else replace(method, margin=check.margin_pct / 100)
    r = m.compare(a, b, check.metric)
    if check.ratio is None or r.verdict == stats.N_TOO_SMALL:
        return r
    if r.ratio is None:
        # no logarithm (a value <= 0): no ratio to hold against the bound
        return replace(r, p=None, p_raw=None, p_equiv=None, p_equiv_raw=None, verdict=stats.INCONCLUSIVE)
    lw = stats.log_welch(stats.clean(a), stats.clean(b))
    d = lw.d - math.log(check.ratio)           # the log of the ratio over the bound
    p = (0.0 if d else 1.0) if lw.se == 0 else float(t_dist.sf(abs(d) / lw.se, lw.df))
    verdict = DIFFERENT if p < m.alpha_per_look else stats.INCONCLUSIVE
    return replace(r, p=p, p_raw=p, p_equiv=None, p_equiv_raw=None, verdict=verdict, reps_to_decide=None)


def _check_outcome(check: Check, r: stats.TestResult) -> str:
    """agrees / contradicts / equivalent / undecided for one cell's (adjusted) test."""
    if check.ratio is not None:
        if r.verdict != DIFFERENT or r.ratio is None:
            return "undecided"
        beyond = r.ratio > check.ratio          # the side of the bound the ratio lies on
        return "agrees" if beyond == (check.expect == "higher") else "contradicts"
    if check.expect == "equivalent":
        if r.verdict == EQUIVALENT or r.inside_margin:
            return "agrees"
        return "contradicts" if r.verdict == DIFFERENT else "undecided"
    if r.verdict == DIFFERENT:
        return "agrees" if bool(r.higher) == (check.expect == "higher") else "contradicts"
    return "equivalent" if r.verdict == EQUIVALENT else "undecided"


def claim_result(tally: dict[str, int]) -> str:
    """A check's result from its cells' outcomes: judged on the cells that are neither CPU-bound
    nor link-late; none such: not judged here."""
    judged = {k: tally.get(k, 0) for k in ("agrees", "contradicts", "equivalent", "undecided")}
    n = sum(judged.values())
    if not n:
        if tally.get("cpu_bound"):
            return NOT_JUDGED_CPU
        if tally.get("link_late"):
            return NOT_JUDGED_LATE
        return "not measured"
    if judged["agrees"] == n:
        return "reproduced"
    if judged["contradicts"] == n:
        return "contradicted"
    if judged["contradicts"] and not judged["agrees"]:
        return "contradicted in part"
    if judged["agrees"] and not judged["contradicts"]:
        return "reproduced in part"
    if judged["agrees"] and judged["contradicts"]:
        return "mixed"
    return "not decided"


def _check_workloads(run: RunData, check: Check, wls: list[str], attrs: dict[str, dict[str, Any]]
                     ) -> list[tuple[str, str]]:
    """The (workload of a, workload of b) pairs a check compares: per workload the references
    matched when the check names no attributes; else, per object size of those workloads, the run's
    workloads (of any kind) with each protocol's attributes (the seed's h2: a page of those objects)."""
    if not check.workload and not check.protocols:
        return [(w, w) for w in wls]
    out = []
    for size in dict.fromkeys(attrs[w]["size_bytes"] for w in wls):
        same = [w for w in run.workloads if attrs[w]["size_bytes"] == size]
        pick = {}
        for proto in (check.a, check.b):
            want = check.workload_for(proto)
            pick[proto] = next((w for w in same if all(
                (str(attrs[w].get(k)).split(":")[0] if k == "connections" else str(attrs[w].get(k))) == str(v)
                for k, v in want.items())), None)
        if pick[check.a] is not None and pick[check.b] is not None:
            out.append((pick[check.a], pick[check.b]))
    return out


def claims(run: RunData, study: Study, refs: pd.DataFrame, method: Method) -> list[dict[str, Any]]:
    """Each claim of the study checked on the run: per check, the cells (conditions the check is
    about x the workloads it takes each protocol from) where a vs b shows what the claim states
    (agrees), the opposite (contradicts), or neither; a cell with a CPU-bound or link-late trial is
    not judged (the CPU or the link may have set the pace). Holm over every judged cell of every
    claim of the study (one family: the claims table)."""
    if not study.claims:
        return []
    attrs = workload_attrs(run)
    wls = [w for w, a in attrs.items() if any(_workload_ok(r, a, study) is not None for r in study.references)]
    conds = condition_values(run, study, by_params=True)
    flags = cell_flags(run)
    smp_cache: dict[str, dict[tuple[str, str, str], Any]] = {}
    out: list[dict[str, Any]] = []
    pending: list[tuple[dict[str, Any], Check, stats.TestResult]] = []
    for claim in study.claims:
        checks = []
        for ck in claim.checks:
            entry: dict[str, Any] = {"check": ck, "cells": [], **{k: 0 for k in CLAIM_OUTCOMES},
                                     "result": "not measured"}
            checks.append(entry)
            if ck.a not in run.protocols or ck.b not in run.protocols or not wls:
                continue
            smp = smp_cache.setdefault(ck.metric, samples(run, ck.metric))
            pairs = _check_workloads(run, ck, wls, attrs)
            for c in run.condition_order:
                if conds.get(c) is None or not _filter_ok(conds[c], ck, study):
                    continue
                for wa, wb in pairs:
                    xa, xb = smp.get((c, wa, ck.a)), smp.get((c, wb, ck.b))
                    if xa is None or xb is None or not xa.size or not xb.size:
                        continue
                    cpu = flags.get((c, wa, ck.a), (0, 0))[0] + flags.get((c, wb, ck.b), (0, 0))[0]
                    late = flags.get((c, wa, ck.a), (0, 0))[1] + flags.get((c, wb, ck.b), (0, 0))[1]
                    cell = {"condition": c, "workload": wa if wa == wb else f"{wa} / {wb}", "workload_a": wa,
                            "workload_b": wb, "mean_a": float(xa.mean()), "mean_b": float(xb.mean()),
                            "n_cpu_bound": cpu, "n_link_late": late}
                    entry["cells"].append(cell)
                    if cpu or late:
                        cell["outcome"] = "cpu_bound" if cpu else "link_late"
                        continue
                    pending.append((cell, ck, threshold_test(xa, xb, ck, method)))
        out.append({"claim": claim, "checks": checks})
    for (cell, ck, _r), r in zip(pending, stats.adjust([r for *_, r in pending], method.correction)):
        cell.update(outcome=_check_outcome(ck, r), ratio=finite(r.ratio), ratio_low=finite(r.ratio_low),
                    ratio_high=finite(r.ratio_high), p=finite(r.p), verdict=r.verdict)
    for c in out:
        for entry in c["checks"]:
            for cell in entry["cells"]:
                entry[cell["outcome"]] += 1
            entry["result"] = claim_result(entry)
    return out


# -- figures ----------------------------------------------------------------------------------------
DEFAULT_FIGURES: tuple[Figure, ...] = (
    Figure(kind="metric_vs_condition", id="goodput-vs-condition", section="vs-condition",
           heading="Goodput vs condition", title="Goodput vs condition",
           caption="Mean goodput per protocol with the 95 % confidence interval of the geometric mean (a t-interval "
                   "on log goodput, never below zero), one panel per object workload. Protocols are drawn slightly "
                   "apart so that the bars do not hide each other."),
    Figure(kind="relative_to_best", id="relative-to-best-workload", section="relative",
           heading="Goodput relative to the best workload",
           title="Goodput relative to the best workload",
           caption="Each protocol's geometric mean goodput as a percentage of its own best workload in the same condition, "
                   "one panel per condition. Bars scale that workload's 95 % CI by the best mean (the best mean's "
                   "own uncertainty is not propagated)."),
    Figure(kind="metric_vs_parameter", id="sweep-{i}", section="sweeps", heading="Metrics vs swept parameters",
           title="Metrics vs swept parameters: {workload}", metrics=["total_time_s", "goodput_mbps", "overhead_pct"],
           caption="Means of each metric as one condition parameter is swept with the others held fixed, with 95 % "
                   "confidence intervals: of the geometric mean for transfer time and goodput (never below zero), "
                   "Student-t for overhead. {slices}."),
    Figure(kind="metric_vs_condition", id="video-{metric}", section="video", heading="Video",
           title="{label} vs condition", metrics=["startup_s", "stall_total_s", "mean_bitrate_kbps", "qoe_lin"],
           workload_kinds=["video"], log=False, place="kind",
           caption="Mean per protocol with its 95 % confidence interval (of the geometric mean for startup and "
                   "bitrate; Student-t for stall time and QoE, which can be 0 or negative), one panel per video "
                   "workload."),
    Figure(kind="timeseries", id="timeseries", section="sweeps", heading="Metrics vs swept parameters",
           title="Throughput time series: {workload}",
           caption="Server→client wire throughput per capture interval (Ethernet frames, headers included) for "
                   "the trial with the median goodput of each protocol."),
)
# where a figure kind goes: before the heatmaps (condition-level goodput) or after them
PLACE = {"metric_vs_condition": "main", "relative_to_best": "main", "metric_vs_parameter": "views",
         "timeseries": "views"}


@dataclass
class View:
    """One declared figure to draw, with the reference values it overlays."""
    figure: Figure
    study: str | None
    refs: pd.DataFrame
    xlabel: str
    place: str


@dataclass
class StudyData:
    study: Study
    why: str                                   # named, plan name, condition names
    refs: pd.DataFrame                         # matched reference values (REFERENCE_COLUMNS)
    tables: list[dict[str, Any]] = field(default_factory=list)     # reference_vs_ours tables, built
    claims: list[dict[str, Any]] = field(default_factory=list)
    columns: Table | None = None               # its reference_columns table (Table 1's metric)
    all_named: bool = False                    # every condition of the run matches condition_name

    @property
    def protocol_names(self) -> str:
        """'https, http2, quic are shown as h1, h2, h3' (from the reference's seed_protocol)."""
        pairs = list(dict.fromkeys((r.seed_protocol, r.protocol) for r in self.study.references
                                   if r.seed_protocol and r.seed_protocol != r.protocol))
        if not pairs:
            return ""
        return (", ".join(a for a, _ in pairs) + " are shown as " + ", ".join(b for _, b in pairs))

    @property
    def match_text(self) -> str:
        m = self.study.match
        conds = ", ".join(p.removesuffix("_ms").removesuffix("_pct").removesuffix("_mbit") for p in m.condition)
        wls = ", ".join(m.workload)
        by = f"condition ({conds}" + (", or its name" if m.condition_name else "") + ")" if conds else "condition name"
        return f"Matched by {by} and workload ({wls})"


def build_studies(run: RunData, summary: pd.DataFrame, method: Method, bests: Bests,
                  metric_labels: dict[str, str], names: list[str] | None = None
                  ) -> tuple[list[StudyData], list[str]]:
    """Every study applied to the run, with its matched references, tables and claims."""
    applied, notes = applied_studies(run, names)
    out = []
    for study, why in applied:
        refs = match_references(run, study, why) if not summary.empty else pd.DataFrame(columns=REFERENCE_COLUMNS)
        sd = StudyData(study, why, refs)
        rx = re.compile(study.match.condition_name) if study.match.condition_name else None
        sd.all_named = bool(run.condition_order) and rx is not None and all(rx.fullmatch(c)
                                                                           for c in run.condition_order)
        for t in study.tables:
            if t.kind in WITHIN_RUN:
                built = WITHIN_RUN[t.kind](run, t, method)
                if built:
                    sd.tables.append(built)
                continue
            if refs.empty:
                continue
            if t.kind == "reference_columns":
                sd.columns = sd.columns or t
            elif t.kind == "reference_vs_ours":
                built = reference_vs_ours(run, summary, refs, t, bests, study.label, metric_labels)
                if built:
                    sd.tables.append(built)
            elif t.kind == "claims":
                sd.claims = claims(run, study, refs, method)
                sd.tables.append({"id": t.id, "title": t.title, "note": f"{t.note} {CLAIMS_NOTE}".strip(),
                                  "claims": sd.claims})
        if refs.empty and not summary.empty and any(t.kind not in WITHIN_RUN for t in study.tables):
            notes.append(f"Study {study.name} ({study.title}) applies ({why}) but none of its reference values "
                         f"match this run's conditions and workloads.")
        out.append(sd)
    return out, notes


def variants_table(run: RunData, table: Table, method: Method) -> dict[str, Any] | None:
    """What one factor does: for each base condition whose variant (base name + suffix) the run
    also has, each cell (workload x protocol) of the variant against the same cell of the base, on
    each metric: both means with their CIs and the comparison variant/base on the metric's scale
    (ratio of geometric means with its CI, or the difference of means for metrics that can be 0),
    Holm over the table (its family: every row)."""
    conds = set(run.condition_order)
    rows: list[dict[str, Any]] = []
    pending: list[stats.TestResult] = []
    for m in table.metrics:
        smp = samples(run, m)
        scale = metric_scale(m)
        for base in run.condition_order:
            for v in table.variants:
                var = base + v.suffix
                if var not in conds:
                    continue
                for w in run.workloads:
                    for p in run.protocols:
                        xb, xv = smp.get((base, w, p)), smp.get((var, w, p))
                        if xb is None or xv is None or not (len(xb) and len(xv)):
                            continue
                        sb, sv = stats.summarize(xb, scale=scale), stats.summarize(xv, scale=scale)
                        rows.append({"metric": m, "base": base, "variant": var, "variant_name": v.name, "workload": w,
                                     "protocol": p, "base_mean": sb.center, "base_ci": (sb.ci_low, sb.ci_high),
                                     "base_n": sb.n, "variant_mean": sv.center, "variant_ci": (sv.ci_low, sv.ci_high),
                                     "variant_n": sv.n})
                        pending.append(method.compare(xv, xb, m))
    if not rows:
        return None
    for row, r in zip(rows, stats.adjust(pending, method.correction)):
        row["test"] = r
    return {"id": table.id, "title": table.title, "note": table.note, "variants": rows,
            "metrics": list(table.metrics)}


# table kinds that need no reference values: built from the run alone
WITHIN_RUN = {"variants": variants_table, "explained": explained_table}


def figure_views(studies: list[StudyData]) -> list[View]:
    """The studies' figures, then each default figure whose kind (and first metric) no study draws."""
    views = []
    for sd in studies:
        for f in sd.study.figures:
            refs = sd.refs[sd.refs["metric"].isin(f.metrics)] if f.reference else sd.refs.iloc[0:0]
            views.append(View(f, sd.study.name, refs, f.xlabel if sd.all_named and f.xlabel else "condition",
                              f.place or PLACE[f.kind]))
    taken = {(v.figure.kind, v.figure.metrics[0] if v.figure.metrics else "") for v in views}
    for f in DEFAULT_FIGURES:
        if (f.kind, f.metrics[0] if f.metrics else "") not in taken:
            views.append(View(f, None, pd.DataFrame(columns=REFERENCE_COLUMNS), "condition", f.place or PLACE[f.kind]))
    return views

