"""The summary a terminal shows after a run (and `quicbench report RUN --format text|json`).

``summary_data`` computes it from the analysis (cell means, the best protocol per cell and its
tests) as plain JSON-able data; ``render`` lays it out as text for a terminal of a given width
(80 columns read well): one table per workload kind with that kind's headline metrics, short
headers with units; a condition or workload every row shares said once above the tables, long
names cut, and short codes with a legend only when a table would otherwise not fit,
and one plain sentence per condition: which protocol had the best value (the geometric mean of
goodputs and times), by how much, and each comparison's verdict (different, equivalent within the
margin, or inconclusive, with the ratio and its interval at the verdict's level), and any CPU-bound
caveat.
"""

from __future__ import annotations

import math
from typing import Any

from quicbench.analysis import Method, RunData, best_protocols, cell_summary
from quicbench.analysis.load import PROTOCOL_NAMES
from quicbench.analysis.tables import center, higher_is_better, metric_scale
from quicbench.analysis.honesty import cpu_slowed_trials
from quicbench.cpu import SLOWER_THAN_CELL
from quicbench.model import columns
from quicbench.model.workload_kinds import KINDS
from quicbench.stats import (DIFFERENT, EQUIVALENT, INCONCLUSIVE, LOG, N_TOO_SMALL, clean, estimate_digits, finite,
                             inside_margin_words, margin_text)

def _shown(m: Any) -> tuple[str, str, int, bool]:
    """A kind's metric as the terminal's tables show it: name, header, digits, higher is better,
    from its column (model/columns.py); a column that declares no header or digits (a user's
    kind showing a column the table does not dress) takes the kind's own."""
    col = columns.metric(m.name)
    header = col.header if col is not None and col.header else getattr(m, "header", m.name)
    digits = col.digits if col is not None and col.digits is not None else getattr(m, "digits", 2)
    return (m.name, header, digits, columns.higher_is_better(m.name))


# per workload kind (model/workload_kinds.py): the columns shown, the first the headline that
# decides "best", each with its column's terminal header, digits and direction (model/columns.py)
KIND_METRICS: dict[str, list[tuple[str, str, int, bool]]] = {
    k.name: [_shown(m) for m in k.metrics] for k in KINDS}
HEADLINE = {kind: metrics[0] for kind, metrics in KIND_METRICS.items()}
# shown beside a kind's metrics where its cells measured them: what a person sees of a page
# (largest contentful paint, Speed Index: docs/pages.md)
SEEN_METRICS: dict[str, list[tuple[str, str, int, bool]]] = {
    "page": [_shown(columns.metric(m)) for m in ("lcp_ms", "speed_index_ms")]}
WHAT = {m.name: m.what for k in KINDS for m in k.metrics if m.what}


def condition_words(p: Any) -> str:
    """'RTT 40 ms, 10 Mbit/s, 1.5 % loss' from a condition's headline values ('' if unknown)."""
    rtt, rate, loss = finite(p.get("rtt_ms")), finite(p.get("rate_mbit")), finite(p.get("loss_pct"))
    parts = []
    if rtt is not None:
        parts.append(f"RTT {rtt:g} ms")
    if rate is not None:
        parts.append(f"{rate:g} Mbit/s")
    if loss:
        parts.append(f"{loss:g} % loss")
    return ", ".join(parts)


def _recovery(rows: Any) -> list[dict[str, Any]]:
    """Per protocol of a condition's trials with loss-recovery counts: the share of what the
    server sent that it declared lost (QUIC) or retransmitted (TCP), and the share of that which
    was spurious."""
    out = []
    for proto, g in rows.groupby("protocol", sort=False):
        for sent, lost, spurious, unit in (("quic_packets_sent", "quic_lost", "quic_lost_spurious", "packets"),
                                           ("tcp_out_segs", "tcp_retrans_segs", "tcp_dsack_segs", "segments")):
            if sent not in g or not g[sent].notna().any():
                continue
            h = g[g[sent].notna()]
            n_sent, n_lost = float(h[sent].sum()), float(h[lost].sum())
            if n_sent > 0:
                k = h[h[spurious].notna()]       # spurious counts can be unknown (run/recovery.py)
                n_lost_k = float(k[lost].sum())
                out.append({"protocol": proto, "unit": unit, "lost_pct": 100 * n_lost / n_sent,
                            "spurious_pct": 100 * float(k[spurious].sum()) / n_lost_k if n_lost_k else None})
    return out


def _mean(summary_row: Any, metric: str) -> float | None:
    """The cell's value: the geometric mean for a metric summarised on logs, else the arithmetic mean."""
    if not hasattr(summary_row, "get"):
        return None
    g = finite(summary_row.get(f"{metric}_gmean"))
    return g if g is not None else finite(summary_row.get(f"{metric}_mean"))


def protocol_name(p: str) -> str:
    """HTTP/3 for h3; a stack such as h3~curl or h1@nginx keeps its suffix."""
    base, rest = p[:2], p[2:]
    return PROTOCOL_NAMES.get(base, base) + rest


def summary_data(run: RunData, method: Method = Method()) -> dict[str, Any]:
    """Everything the terminal summary shows, as JSON-able data."""
    cells = cell_summary(run, method)
    slowed = cpu_slowed_trials(run)["condition"].value_counts()
    conditions = []
    for c in run.condition_order:
        p = run.conditions.loc[c]
        in_c = run.ok[run.ok["condition"] == c]
        conditions.append({"name": c, "desc": condition_words(p) or run.condition_desc(c),
                           "link_late": int(in_c["link_late"].sum()) if "link_late" in in_c else 0,
                           "cpu_slowed": int(slowed.get(c, 0)),
                           "recovery": _recovery(in_c),
                           "rtt_ms": finite(p.get("rtt_ms")), "loss_pct": finite(p.get("loss_pct")),
                           "rate_mbit": finite(p.get("rate_mbit"))})
    rows = []
    for _, r in cells.iterrows():
        kind = run.kind_of(r["workload"])
        row = {"condition": r["condition"], "workload": r["workload"], "kind": kind, "protocol": r["protocol"],
               "server": r["server"], "n": int(r["n"]), "n_trials": int(r["n_trials"]),
               "n_failed": int(r["n_failed"]), "n_cpu_bound": int(r["n_cpu_bound"]), "best": bool(r["is_best"])}
        for metric, *_ in KIND_METRICS[kind]:
            row[metric] = _mean(r, metric)
        row.update({m: v for m, *_ in SEEN_METRICS.get(kind, []) if (v := _mean(r, m)) is not None})
        row["client_cpu_s"] = finite(r.get("client_cpu_s_mean"))
        row["server_cpu_s"] = finite(r.get("server_cpu_s_mean"))
        rows.append(row)
    verdicts = []
    for kind in KINDS.names():
        metric, _, _, higher = HEADLINE[kind]
        if not any(r["kind"] == kind for r in rows):
            continue
        best = best_protocols(run, method, metric=metric, higher_is_better=higher, kind=kind)
        # the viewer's experience beside a video's headline (its QoE): each metric's own comparisons
        beside = KINDS.get(kind).beside_headline
        viewer = {m: best_protocols(run, method, metric=m, higher_is_better=higher_is_better(m), kind=kind
                                    ).set_index(["condition", "workload"])
                  for m in beside}
        for _, b in best.iterrows():
            cell = [r for r in rows if r["condition"] == b["condition"] and r["workload"] == b["workload"]]
            v = _verdict(b, cell, kind, metric, higher)
            if viewer:
                ok = run.ok[(run.ok["condition"] == b["condition"]) & (run.ok["workload"] == b["workload"])]
                v["viewer"] = [_viewer(m, viewer[m], b["condition"], b["workload"], ok) for m in beside
                               if (b["condition"], b["workload"]) in viewer[m].index]
            verdicts.append(v)
    return {"run_id": run.run_id, "method": method.short(), "conditions": conditions, "cells": rows,
            "verdicts": verdicts, "sentences": sentences(conditions, verdicts)}


def _versus(tests: dict, means: dict[str, float | None], winner: str, higher: bool) -> list[dict[str, Any]]:
    """The winner against each other protocol (best mean first): its verdict, p, and the ratio
    (or, for a metric that can be 0, the difference) with its 95 % CI."""
    others = sorted((p for p in means if p != winner and means[p] is not None), key=lambda p: means[p],
                    reverse=higher)
    out = []
    for o in others:
        t = tests.get(o)
        out.append({"protocol": o, "mean": means[o], "ahead_pct": _pct(means.get(winner), means[o], higher),
                    "verdict": t.verdict if t is not None else None,
                    "p": finite(t.p) if t is not None else None,
                    "ratio": finite(t.ratio) if t is not None else None,
                    "ratio_ci": [finite(t.ratio_low), finite(t.ratio_high)] if t is not None else None,
                    "difference": finite(t.difference) if t is not None else None,
                    "difference_ci": [finite(t.diff_low), finite(t.diff_high)] if t is not None else None,
                    "margin": t.margin if t is not None else None,
                    "margin_abs": t.margin_abs if t is not None else None,
                    "reps_to_decide": t.reps_to_decide if t is not None else None,
                    "within": margin_text(t) if t is not None else None})
    return out


def _verdict(b: Any, cell: list[dict[str, Any]], kind: str, metric: str, higher: bool) -> dict[str, Any]:
    means = {r["protocol"]: r[metric] for r in cell if r[metric] is not None}
    winner = b["cell_best"]
    versus = _versus(b["tests"], means, winner, higher)
    runner_up = versus[0]["protocol"] if versus else None
    test = b["tests"].get(runner_up) if runner_up else None
    return {"condition": b["condition"], "workload": b["workload"], "kind": kind, "metric": metric,
            "higher_is_better": higher, "best": winner, "best_mean": means.get(winner),
            "runner_up": runner_up, "runner_up_mean": means.get(runner_up) if runner_up else None,
            "verdict": b["cell_verdict"], "p": finite(b["cell_p"]),
            "p_vs_runner_up": finite(test.p) if test is not None else None, "versus": versus,
            "cpu_bound": {r["protocol"]: r["n_cpu_bound"] for r in cell if r["n_cpu_bound"]}}


def _viewer(metric: str, best: Any, c: str, w: str, ok: Any) -> dict[str, Any]:
    """One metric of a video cell for the viewer sentence: means per protocol, the best and its
    comparisons; constant when every trial of the cell had the same value (no stall at all)."""
    b = best.loc[(c, w)]
    higher = higher_is_better(metric)
    means = {p: finite(center(metric, clean(g[metric]))) for p, g in ok.groupby("protocol") if g[metric].notna().any()}
    x = ok[metric].dropna()
    return {"metric": metric, "higher_is_better": higher, "best": b["cell_best"], "means": means,
            "constant": len(x) > 1 and x.nunique() == 1, "value": finite(x.iloc[0]) if len(x) else None,
            "versus": _versus(b["tests"], means, b["cell_best"], higher)}


def _pct(best: float | None, other: float | None, higher_is_better: bool) -> float | None:
    """How much better best is than other, in % of other."""
    if best is None or other is None or other == 0:
        return None
    return 100 * ((best - other) / other if higher_is_better else (other - best) / other)


def _fmt_p(p: float | None) -> str:
    if p is None:
        return ""
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.2g}"


def _ratio(o: dict[str, Any], best: str) -> str:
    r, ci = o.get("ratio"), o.get("ratio_ci") or [None, None]
    if r is None and o.get("difference") is not None:
        d, dci = o["difference"], o.get("difference_ci") or [None, None]
        name = f"{best} − {protocol_name(o['protocol'])}"
        if None in dci:
            return f"{name} = {d:+.2f}"
        e, lo, hi = estimate_digits(d, dci[0], dci[1], null=0.0, signed=True)
        return f"{name} = {e} [{lo}, {hi}]"
    if r is None:
        return ""
    name = f"{best}/{protocol_name(o['protocol'])}"
    if None in ci:
        return f"{name} = {r:.2f}"
    e, lo, hi = estimate_digits(r, ci[0], ci[1])
    return f"{name} = {e} [{lo}, {hi}]"


def sentence(cond: dict[str, Any], verdicts: list[dict[str, Any]]) -> str:
    """One plain sentence for a condition: the protocol with the best mean per workload, by how
    much, each comparison's verdict with its ratio, and a CPU-bound caveat. 'Fastest' only when it
    is different from every other protocol; 'equivalent' only when the equivalence test says so."""
    parts = []
    bound: dict[str, int] = {}
    for v in verdicts:
        best = protocol_name(v["best"])
        what = WHAT[v["metric"]]
        where = f"on {v['workload']}" if len(verdicts) > 1 else f"({v['workload']})"
        if v["runner_up"] is None:
            parts.append(f"only {best} has results {where}")
            continue
        better = "more" if v["higher_is_better"] else "less"
        against = []
        for i, o in enumerate(v["versus"]):
            ahead = o["ahead_pct"]
            by = "?" if ahead is None else (f"{ahead:.0f} %" if ahead >= 1 else f"{ahead:.1f} %")
            if o.get("ratio") is None and o.get("difference") is not None:
                by = f"{abs(o['difference']):.2g}"       # a metric that can be 0 or negative: its own unit
            other = protocol_name(o["protocol"])
            ratio = _ratio(o, best)
            more = f"{better} {what} than" if i == 0 else f"{better} than"
            if o["verdict"] == DIFFERENT:
                inside = f", {inside_margin_words(o['within'])}" if o.get("within") else ""
                against.append(f"{by} {more} {other} ({ratio}, {_fmt_p(o['p'])}{inside})")
            elif o["verdict"] == EQUIVALENT:
                against.append(f"equivalent to {other} within {_margin(o, v['metric'])} ({ratio})")
            elif o["verdict"] == INCONCLUSIVE:
                need = o.get("reps_to_decide")
                tail = f"; about {need} trials per protocol would likely decide" if need else ""
                against.append(f"{by} {more} {other}, inconclusive ({ratio}, {_fmt_p(o['p'])}{tail})")
            elif o["verdict"] == N_TOO_SMALL:
                against.append(f"{by} {more} {other} (too few trials to test)")
            else:
                against.append(f"{by} {more} {other}")
        won = f"was {KINDS.get(v['kind']).lead_word}"
        mean = "geometric mean" if metric_scale(v["metric"]) == LOG else "mean"
        lead = won if all(o["verdict"] == DIFFERENT for o in v["versus"]) else f"had the best {mean}"
        if not v["higher_is_better"]:
            lead = won if lead == won else f"had the best (lowest) {mean}"
        parts.append(f"{best} {lead} {where}: " + ", ".join(against)
                     + (f"; for the viewer: {_viewer_text(v['viewer'])}" if v.get("viewer") else ""))
        for p, n in v["cpu_bound"].items():
            bound[p] = bound.get(p, 0) + n
    desc = cond.get("desc") or ""
    text = f"{cond['name']}" + (f" ({desc})" if desc and desc != cond["name"] else "") + ": "
    text += "; ".join(parts) + "."
    if bound:
        n = sum(bound.values())
        who = ", ".join(f"{protocol_name(p)}: {k}" for p, k in bound.items())
        text += (f" Caveat: {n} trial{'s' if n > 1 else ''} CPU-bound ({who}): there the CPU, not the "
                 f"network, set the pace.")
    slowed = cond.get("cpu_slowed") or 0
    if slowed:
        text += (f" Caveat: {slowed} trial{'s' if slowed > 1 else ''} slowed by the CPU (judged after the run: "
                 f"≥ {100 * SLOWER_THAN_CELL:g} % slower than {'their' if slowed > 1 else 'its'} cell's median, "
                 "the path's CPU waits covering the extra time).")
    rec = cond.get("recovery") or []
    if rec:
        said = []
        for r in rec:
            verb = "declared lost" if r["unit"] == "packets" else "retransmitted"
            s = f"{protocol_name(r['protocol'])}'s server {verb} {r['lost_pct']:.1f} % of its {r['unit']}"
            if r["spurious_pct"] is not None:
                s += f", {r['spurious_pct']:.0f} % of those spurious"
            said.append(s)
        text += " Loss recovery: " + "; ".join(said) + "."
    late = cond.get("link_late") or 0
    if late:
        text += (f" Caveat: {late} trial{'s' if late > 1 else ''} link-late: the link emulator released "
                 f"packets late, so the path was not quite the condition named.")
    return text[0].upper() + text[1:]


def _margin(o: dict[str, Any], metric: str) -> str:
    """'±10 %' (a ratio's margin) or '±0.5 s' (a difference's, in the metric's unit)."""
    if o.get("margin_abs") is not None:
        return f"±{o['margin_abs']:g} {UNITS.get(metric, '')}".rstrip()
    return f"±{100 * (o.get('margin') or 0.1):g} %"


# the viewer sentence's words per metric: (name, unit, digits, the best's word); unit and digits
# are the column's (model/columns.py)
VIEWER_WORDS = {m: (name, columns.metric(m).unit, columns.metric(m).digits, word) for m, name, word in (
    ("startup_s", "start-up", "fastest"), ("stall_total_s", "stall time", "least"),
    ("mean_bitrate_kbps", "played bitrate", "highest"), ("live_latency_s_mean", "live latency", "lowest"))}
UNITS = {m: u for m, (_, u, _, _) in VIEWER_WORDS.items()}


def _viewer_text(items: list[dict[str, Any]]) -> str:
    """'start-up HTTP/1.1 1.02 s, HTTP/3 1.45 s (HTTP/1.1 fastest: different from HTTP/3, ...), no
    protocol stalled in any trial, played bitrate ...': each metric's means and its verdicts."""
    said = []
    for it in items:
        name, unit, digits, word = VIEWER_WORDS[it["metric"]]
        if it["constant"]:
            said.append("no protocol stalled in any trial" if it["metric"] == "stall_total_s" and not it["value"]
                        else f"{name} {it['value']:.{digits}f} {unit} in every trial")
            continue
        means = ", ".join(f"{protocol_name(p)} {m:.{digits}f}" for p, m in it["means"].items() if m is not None)
        best = protocol_name(it["best"])
        vs = it["versus"]
        decided = vs and all(o["verdict"] == DIFFERENT for o in vs)
        tests, undecided = [], {}
        for o in vs:
            other = protocol_name(o["protocol"])
            ratio = _ratio(o, best)
            if o["verdict"] == EQUIVALENT:
                tests.append(f"equivalent to {other} within {_margin(o, it['metric'])}")
            elif o["verdict"] == DIFFERENT:
                tests.append(f"different from {other}" + (f", {ratio}" if ratio else ""))
            else:
                undecided.setdefault(o["verdict"] or "untested", []).append(other)
        tests += [f"{v} vs {', '.join(who)}" for v, who in undecided.items()]
        lead = f"{best} {word}" if decided else f"{best} best {'geometric mean' if metric_scale(it['metric']) == LOG else 'mean'}"
        said.append(f"{name} {means} {unit} ({lead}" + (": " + "; ".join(tests) if tests else "") + ")")
    return ", ".join(said)


def sentences(conditions: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in conditions:
        vs = [v for v in verdicts if v["condition"] == c["name"]]
        if vs:
            out.append(sentence(c, vs))
    return out


# -- text layout ------------------------------------------------------------------------------------

def _codes(names: list[str], prefix: str) -> dict[str, str]:
    return {n: f"{prefix}{i}" for i, n in enumerate(names, 1)}


def _fmt(v: float | None, digits: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _kind_table(cells: list[dict[str, Any]], kind: str, names: dict[str, dict[str, str] | None],
                compact: bool = False) -> list[str]:
    """One kind's table. names: for condition, workload and protocol, how each name is shown
    (a mapping; a name it lacks is shown whole), or None to leave the column out (it is said
    above the table)."""
    metrics = KIND_METRICS[kind] + [m for m in SEEN_METRICS.get(kind, []) if any(m[0] in r for r in cells)]
    heads = {"condition": "C" if compact else "cond", "workload": "W" if compact else "workload",
             "protocol": "P" if compact else "proto"}
    shown = [f for f in ("condition", "workload", "protocol") if names.get(f, {}) is not None]
    header = [*(heads[f] for f in shown), "ok/n", *(h for _, h, _, _ in metrics), "CPU s c/s", "CPU-bd"]
    rows = []
    for r in cells:
        vals = []
        for i, (m, _, digits, _) in enumerate(metrics):
            mark = "*" if i == 0 and r["best"] else ""
            vals.append(_fmt(r.get(m), digits) + mark)
        cpu = f"{_fmt(r['client_cpu_s'], 2)}/{_fmt(r['server_cpu_s'], 2)}"
        rows.append([*((names.get(f) or {}).get(r[f], r[f]) for f in shown), f"{r['n']}/{r['n_trials']}", *vals,
                     cpu, str(r["n_cpu_bound"]) if r["n_cpu_bound"] else ""])
    return _table(header, rows, right=set(range(len(shown), len(header))))


def _shortened(names: list[str], limit: int) -> dict[str, str] | None:
    """Each name cut to `limit` characters by an ellipsis in its middle (a sweep's names differ at
    their ends), or None when two would then read the same."""
    def cut(n: str) -> str:
        if len(n) <= limit:
            return n
        head = (limit - 1) // 2
        return n[:head] + "\u2026" + n[len(n) - (limit - 1 - head):]
    short = {n: cut(n) for n in names}
    return short if len(set(short.values())) == len(names) else None


def _layouts(conds: list[str], wls: list[str], protos: list[str]) -> list[tuple[dict[str, Any], bool, bool]]:
    """Ways to lay the tables out, most readable first: (names per column, codes used, compact
    headers). A condition or workload that every row shares leaves the table (said above it);
    then long names are cut; codes with a legend only when nothing else fits."""
    one = {"condition": len(conds) == 1, "workload": len(wls) == 1}
    whole: dict[str, Any] = {"condition": {}, "workload": {}, "protocol": {}}
    lean = {f: (None if one.get(f) else m) for f, m in whole.items()}
    out: list[tuple[dict[str, Any], bool, bool]] = [(whole, False, False), (lean, False, False)]
    for limit in (24, 18, 14, 10):
        cut = {f: (None if m is None else _shortened(n, limit) or {})
               for (f, m), n in zip(lean.items(), (conds, wls, protos))}
        out.append((cut, False, False))
    coded = {"condition": None if one["condition"] else _codes(conds, "C"),
             "workload": None if one["workload"] else _codes(wls, "W"), "protocol": {}}
    out.append((coded, True, False))
    out.append(({**coded, "protocol": _codes(protos, "P")}, True, False))
    out.append(({**coded, "protocol": _codes(protos, "P")}, True, True))
    return out


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    import textwrap
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_on_hyphens=False) or [""]


def render(data: dict[str, Any], width: int = 80) -> str:
    """The summary as plain text for a terminal of `width` columns."""
    cells = data["cells"]
    if not cells:
        return "no trials recorded"
    conds = list(dict.fromkeys(r["condition"] for r in cells))
    wls = list(dict.fromkeys(r["workload"] for r in cells))
    protos = list(dict.fromkeys(r["protocol"] for r in cells))
    # the most readable layout in which every table fits the width
    for names, coded, compact in _layouts(conds, wls, protos):
        tables = {}
        for kind in KINDS.names():
            kc = [r for r in cells if r["kind"] == kind]
            if kc:
                tables[kind] = _kind_table(kc, kind, names, compact)
        if all(len(line) <= width for t in tables.values() for line in t):
            break
    out: list[str] = []
    descs = {c["name"]: c["desc"] for c in data["conditions"]}
    if names["condition"] is None:
        out += _wrap(f"Condition: {conds[0]}" + (f" ({descs[conds[0]]})" if descs.get(conds[0]) else ""), width)
    if names["workload"] is None:
        out += _wrap(f"Workload: {wls[0]}", width)
    titles = {k.name: k.title for k in KINDS}
    for kind, t in tables.items():
        out += _wrap(titles[kind], width) + t + [""]
    legend = []
    if coded:
        for field, what in (("condition", conds), ("workload", wls), ("protocol", protos)):
            for name in what:
                code = (names[field] or {}).get(name)
                if code and code != name:
                    legend.append(f"{code} = {name}" + (f" ({descs.get(name)})" if field == "condition"
                                                        and descs.get(name) else ""))
    if legend:
        for item in legend:
            out += _wrap(item, width, "     ")
        out.append("")
    out += _wrap("Goodputs and times are geometric means, QoE and stall time arithmetic means; CPU s c/s: client / "
                 "server CPU seconds per trial (arithmetic means); CPU-bd: trials where a CPU (an endpoint's or the "
                 "whole machine's), not the network, set the pace. Ratios [intervals] are at each verdict's level "
                 "(Holm).", width)
    out.append("")
    for s in data["sentences"]:
        out += _wrap(s, width, "  ")
    out += _wrap(f"(significance: {data['method']})", width)
    return "\n".join(out)
