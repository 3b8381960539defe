"""The report's secondary tables as SimpleTables (formatted strings), for HTML and Markdown alike."""

from __future__ import annotations

import pandas as pd

from quicbench import stats
from quicbench.cpu import SLOWER_THAN_CELL
from quicbench.analysis.tables import FASTER_THAN_ALL, METRICS
from quicbench.report.fmt import SimpleTable, center, center_ci, ci, mean_ci, num, pct, pval, ratio_ci, verdict_text
from quicbench.model.study import Check
from quicbench.model.workload_kinds import measures, report_table
from quicbench.analysis.report_data import METRIC_LABELS, PAGE_METRICS, VIDEO_METRICS, ReportData, kind_metrics


def _wl(data: ReportData, w: str) -> str:
    return data.workload_title(w)


def diff_table(data: ReportData, a: str, b: str) -> SimpleTable:
    d = data.diffs.get((a, b), pd.DataFrame())
    t = SimpleTable(["condition", "workload", f"{a} Mbit/s (geometric mean)", f"{b} Mbit/s (geometric mean)",
                     f"{a} vs {b}", f"{a}/{b} [CI at the verdict's level]",
                     "p (adj.)", "verdict", "n"])
    for _, r in d.iterrows():
        t.rows.append([r["condition"], _wl(data, r["workload"]), num(r["mean_a"]), num(r["mean_b"]),
                       pct(r["diff_pct"]), ratio_ci(r["ratio"], r["ratio_low"], r["ratio_high"]), pval(r["p"]),
                       verdict_text(r["verdict"], r["reps_to_decide"], r.get("within")), f"{r['n_a']} / {r['n_b']}"])
    return t


def phases_table(data: ReportData) -> SimpleTable:
    cols = ["connect_ms", "tls_ms", "ttfb_ms", "transfer_ms_p50", "total_time_s"]
    t = SimpleTable(["condition", "workload", "protocol", *[METRICS[c] for c in cols], "n"])
    s = data.summary
    for _, r in s.iterrows():
        if r["n"] == 0 or not measures(data.run.kind_of(r["workload"]), "goodput_mbps"):   # object downloads
            continue
        t.rows.append([r["condition"], _wl(data, r["workload"]), r["protocol"],
                       *[center_ci(r, c) for c in cols],
                       str(int(r["n"]))])
    return t


def cpu_table(data: ReportData) -> SimpleTable:
    t = SimpleTable(["protocol", "workload", "client CPU s/GB", "server CPU s/GB", "total CPU s/GB [95 % CI]",
                     "GB moved", "CPU-bound", "n"])
    for _, r in data.cpu.iterrows():
        t.rows.append([r["protocol"], _wl(data, r["workload"]), num(r["client_cpu_s_per_gb_mean"]),
                       num(r["server_cpu_s_per_gb_mean"]),
                       mean_ci(r["cpu_s_per_gb_mean"], r["cpu_s_per_gb_ci_low"], r["cpu_s_per_gb_ci_high"]),
                       num(r["gb"], 3), f"{r['n_cpu_bound']} of {r['n']}", str(r["n"])])
    return t


def cpu_bound_table(data: ReportData) -> SimpleTable:
    t = SimpleTable(["condition", "workload", "protocol", "bound by", "trials"])
    for _, r in data.cpu_bound.iterrows():
        t.rows.append([r["condition"], _wl(data, r["workload"]), r["protocol"], r["cpu_bound_by"],
                       f"{r['trials']} of {r['of']}"])
    return t


SLOWED_NOTE = (f"A trial the CPU slowed took at least {100 * SLOWER_THAN_CELL:g} % longer than its cell's median in this run, and its path's "
               "processes (client, server, link emulator) waited for a CPU at least that extra time. The judgement "
               "needs the cell's other repetitions, so it is made after the run; the trials stay in the statistics. "
               "On the default plan it flagged no trial of a quiet machine and 6 of the 10 a busy loop per core "
               "moved, the other 4 losing their time to a loss (docs/results/runs/cpu-rule/default.md); where the CPU "
               "paces even a quiet machine's transfers (an unimpaired gigabit path) it also flags slow repetitions "
               "of the path's own CPU contention (docs/results/runs/cpu-rule/short-heldout.md).")


def cpu_slowed_table(data: ReportData) -> SimpleTable:
    t = SimpleTable(["condition", "workload", "protocol", "repetition", "time (s)", "cell's median (s)",
                     "path waited (s)", "waited"])
    for _, r in data.cpu_slowed.iterrows():
        t.rows.append([r["condition"], _wl(data, r["workload"]), r["protocol"], str(r["rep"]), num(r["time_s"], 3),
                       num(r["cell_median_s"], 3), num(r["path_wait_s"], 3), r["slowed_by"]])
    return t


def recovery_table(data: ReportData) -> SimpleTable:
    # the slow-start columns only for runs whose QUIC qlogs log the congestion state
    ss = "n_ss_exit" in data.recovery and data.recovery["n_ss_exit"].notna().any()
    t = SimpleTable(["condition", "workload", "protocol", "sent per trial", "declared lost / retransmitted",
                     "of those spurious", "by reordering threshold", "client got out of order", "TCP reordering seen",
                     "TCP undos", *(["left slow start at (KB, median)", "left it below the BDP without a loss"]
                                    if ss else []), "n"])
    for _, r in data.recovery.iterrows():
        early = "–"
        if ss and pd.notna(r["n_ss_exit"]) and pd.notna(r["ss_exit_early"]):
            early = f"{int(r['ss_exit_early'])} of {int(r['n_ss_exit'])} (BDP {num(r['bdp_kb'])} KB)"
        t.rows.append([r["condition"], _wl(data, r["workload"]), r["protocol"], num(r["sent"]),
                       pct(r["declared_lost_pct"], signed=False), pct(r["spurious_of_lost_pct"], signed=False),
                       pct(r["by_reordering_pct"], signed=False), pct(r["out_of_order_pct"], signed=False),
                       num(r["tcp_reorder_events"]),
                       num(r["tcp_undos"]), *([num(r["ss_exit_cwnd_kb"]), early] if ss else []), str(r["n"])])
    return t


def host_table(data: ReportData) -> SimpleTable:
    t = SimpleTable(["host", "trials", "ok", "failed", "CPU-bound", "goodput vs cell mean"])
    for _, r in data.hosts.iterrows():
        g = r["goodput_vs_cell_pct"]
        t.rows.append([str(r["host"]), str(r["trials"]), str(r["ok"]), str(r["failed"]), str(r["cpu_bound"]),
                       "–" if g is None or pd.isna(g) else f"{g:+.1f} % (n={r['n_goodput']})"])
    return t


def failure_reason_table(data: ReportData) -> SimpleTable:
    t = SimpleTable(["trials", "reason", "protocols", "conditions", "example"])
    for _, r in data.failure_reasons.iterrows():
        t.rows.append([str(r["trials"]), r["reason"], r["protocols"], r["conditions"], r["example"]])
    return t


def failed_table(data: ReportData) -> SimpleTable:
    t = SimpleTable(["seq", "condition", "workload", "protocol", "rep", "error", "afterwards"])
    for _, r in data.failed.iterrows():
        rep = "warm-up" if r["warmup"] else ("–" if pd.isna(r["rep"]) else str(int(r["rep"])))
        t.rows.append(["–" if pd.isna(r["seq"]) else str(int(r["seq"])), r["condition"], r["workload"], r["protocol"],
                       rep, str(r["error"] or ""), r["retried"] or "final"])
    return t


def _cal_value(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    return num(v) if isinstance(v, (int, float)) else str(v)


def _cal_cell(r: pd.Series) -> str:
    dev = pct(r["deviation_pct"])
    verdict = str(r["verdict"]).split(":", 1)[0] if r.get("verdict") else ""
    return (f"{_cal_value(r['configured'])} → {_cal_value(r['measured'])}" + (f" ({dev})" if dev != "–" else "")
            + (f" {verdict}" if verdict else ""))


def calibration_details(data: ReportData) -> SimpleTable:
    t = SimpleTable(["condition", "quantity", "configured", "measured", "deviation", "verdict"])
    for _, r in data.calibration.iterrows():
        t.rows.append([r["condition"], r["quantity"], _cal_value(r["configured"]), _cal_value(r["measured"]),
                       pct(r["deviation_pct"]), str(r["verdict"] or "")])
    return t


def calibration_table(data: ReportData) -> SimpleTable:
    """One row per condition (run order), one column per quantity: configured → measured (deviation)."""
    cal = data.calibration
    if cal.empty:
        return SimpleTable(["condition"])
    quantities = list(dict.fromkeys(cal["quantity"]))
    order = {c: i for i, c in enumerate(data.run.condition_order)}
    conds = sorted(dict.fromkeys(cal["condition"]), key=lambda c: order.get(c, len(order)))
    t = SimpleTable(["condition", *[f"{q}: configured → measured" for q in quantities]])
    idx = {(r["condition"], r["quantity"]): r for _, r in cal.iterrows()}
    for c in conds:
        t.rows.append([c, *[_cal_cell(idx[(c, q)]) if (c, q) in idx else "–" for q in quantities]])
    return t


def metadata_table(data: ReportData) -> SimpleTable:
    return SimpleTable(["", ""], [[k, v] for k, v in data.metadata])


def _metric_value(r: pd.Series, metric: str) -> str:
    if metric == "page_weight_bytes":
        m = center(r, metric)
        return "–" if m is None or pd.isna(m) else f"{num(m / 1e6)} MB"
    return center_ci(r, metric)


def pages_table(data: ReportData) -> SimpleTable:
    """DNCS's page table: per condition, workload and protocol, timings with CIs, weight, requests;
    the fastest load and its verdict last (verdict_table has every metric's)."""
    shown = [(m, lbl) for m, lbl in PAGE_METRICS if f"{m}_mean" in data.pages]
    t = SimpleTable(["condition", "workload", "protocol", *[lbl for _, lbl in shown],
                     "first paint (ms)", "connections", "n", "fastest load", "verdict (p)"])
    for _, r in data.pages.iterrows():
        best = r.get("page_load_ms_cell_best")
        p = r.get("page_load_ms_cell_p")
        verdict = str(r.get("page_load_ms_cell_verdict") or "–") + (f" ({pval(p)})" if p is not None and pd.notna(p)
                                                                     else "")
        t.rows.append([r["condition"], r["workload"], r["protocol"], *[_metric_value(r, m) for m, _ in shown],
                       center_ci(r, "first_contentful_paint_ms"),
                       num(r.get("page_connections_mean")), str(int(r["n"])),
                       str(best if isinstance(best, str) else "–"), verdict])
    return t


# DNCS's httpstat phases (seed 004) of the page's HTML, and the browser's own TTFB of it
PAGE_PHASE_COLUMNS = (("httpstat_connect_ms", "TCP connect, QUIC: handshake (ms)"), ("httpstat_tls_ms", "TLS (ms)"),
                      ("httpstat_server_ms", "server processing (ms)"),
                      ("httpstat_transfer_ms", "content transfer (ms)"), ("httpstat_total_ms", "total (ms)"),
                      ("page_ttfb_ms", "browser TTFB (ms)"))


PAGE_PHASES_NOTE = ("httpstat's phases, as DNCS-HTTP3 reported them (seed 004): after each load, one fetch of the page's "
                    "HTML on a new connection (qb-load; DNCS ran httpstat, i.e. curl), geometric mean with 95 % CI "
                    "(where a phase was 0, the arithmetic mean with a bootstrap CI). QUIC has no "
                    "TLS phase of its own: its connect is the whole handshake. DNCS's curl had no HTTP/3, so the seed's "
                    "phases for its HTTP/3 server are HTTP/2's over TCP. \"Browser TTFB\" is DevTools' \"Waiting\" "
                    "of the page's HTML in the load itself.")


def page_phases_table(data: ReportData) -> SimpleTable | None:
    """DNCS's connection phases: per condition, workload and protocol, httpstat's phases of one
    fetch of the page's HTML on a new connection (geometric mean with CI); QUIC has no TLS phase of its own."""
    if data.pages.empty or "httpstat_server_ms_mean" not in data.pages \
            or not data.pages["httpstat_server_ms_mean"].notna().any():
        return None
    t = SimpleTable(["condition", "workload", "protocol", *[lbl for _, lbl in PAGE_PHASE_COLUMNS], "n"])
    for _, r in data.pages.iterrows():
        cells = []
        for c, _ in PAGE_PHASE_COLUMNS:
            if c == "httpstat_tls_ms" and str(r["protocol"]).split("~")[0].split("@")[0] == "h3":
                cells.append("– (in the handshake)")
            else:
                cells.append(center_ci(r, c))
        t.rows.append([r["condition"], r["workload"], r["protocol"], *cells, str(int(r["n"]))])
    return t


def video_table(data: ReportData) -> SimpleTable | None:
    """The video table: per condition, workload and protocol, the viewer's metrics with CIs
    (verdict_table has each metric's best protocol and verdict)."""
    if data.video.empty:
        return None
    metrics = [(m, lbl) for m, lbl in VIDEO_METRICS if f"{m}_mean" in data.video
               and data.video[f"{m}_mean"].notna().any()]
    t = SimpleTable(["condition", "workload", "protocol", *[lbl for _, lbl in metrics], "stalls", "switches/min",
                     "dropped frames", "n"])
    for _, r in data.video.iterrows():
        t.rows.append([r["condition"], r["workload"], r["protocol"],
                       *[center_ci(r, m) for m, _ in metrics],
                       num(r.get("stalls_mean")), num(r.get("switches_per_min_mean")),
                       f"{100 * r['frames_dropped_ratio_mean']:.1f} %" if pd.notna(r.get("frames_dropped_ratio_mean"))
                       else "–", str(int(r["n"]))])
    return t


def kind_table(data: ReportData, kind: str) -> SimpleTable | None:
    """A kind without a table of its own (a user's): its declared metrics with CIs per cell."""
    frame = data.other_kinds.get(kind)
    if frame is None or frame.empty:
        return None
    metrics = kind_metrics(kind)
    t = SimpleTable(["condition", "workload", "protocol", *[lbl for _, lbl in metrics], "n"])
    for _, r in frame.iterrows():
        t.rows.append([r["condition"], r["workload"], r["protocol"],
                       *[center_ci(r, m) for m, _ in metrics],
                       str(int(r["n"]))])
    return t


def verdict_table(data: ReportData, kind: str) -> SimpleTable | None:
    """Per page, video (or other kind's) cell and metric: the best protocol, the cell's verdict and
    each comparison (ratio of geometric means, or difference of means for stall time and QoE, with
    its interval at the verdict's level)."""
    frame, metrics = {"pages": (data.pages, PAGE_METRICS), "video": (data.video, VIDEO_METRICS)}.get(
        report_table(kind), (data.other_kinds.get(kind, pd.DataFrame()), kind_metrics(kind)))
    if frame.empty:
        return None
    t = SimpleTable(["condition", "workload", "metric", "best", "verdict", "best vs each other"])
    for (c, w), g in frame.groupby(["condition", "workload"], sort=False):
        r = g.iloc[0]
        for m, lbl in metrics:
            if f"{m}_cell_best" not in g or not g[f"{m}_mean"].notna().any():
                continue
            if bool(r.get(f"{m}_constant", False)) is True:
                t.rows.append([c, w, lbl, "–", "the same in every trial", "nothing to compare"])
                continue
            best = r.get(f"{m}_cell_best")
            p = r.get(f"{m}_cell_p")
            t.rows.append([c, w, lbl, str(best if isinstance(best, str) else "–"),
                           str(r.get(f"{m}_cell_verdict") or "–") + (f" ({pval(p)})" if p is not None and pd.notna(p)
                                                                      else ""),
                           str(r.get(f"{m}_comparisons") or "–")])
    return t


def reference_tables(data: ReportData) -> list[tuple[dict, list[tuple[str, SimpleTable]]]]:
    """Each study's reference_vs_ours tables: (the table, [(group title, SimpleTable)]): the
    reference per protocol and its ranking, then per way ours (mean (n), ⚙k: k CPU-bound trials, ⌛k:
    k link-late) and our ranking (≠: it differs from the reference's on a pair of protocols our test
    decides; ≠!: the best protocol differs so; the verdict when ours is not
    ahead of all)."""
    out = []
    for sd in data.studies:
        for tbl in sd.tables:
            if "groups" not in tbl:
                continue
            parts = []
            for g in tbl["groups"]:
                protos, label = g["protocols"], tbl["label"]
                by_metric = tbl["rows_by"] == "metric"
                heads = (["condition", "metric"] if by_metric else ["condition"]) + \
                    [f"{label} {p}" for p in protos] + [f"{label} ranking"]
                for k in g["ways"]:
                    heads += [f"{k} {p}" for p in protos] + [f"{k} ranking"]
                if by_metric:
                    heads += [f"where in the {label}"]
                t = SimpleTable(heads)
                for r in g["rows"]:
                    row = [r["condition"]] + ([r["label"]] if by_metric else [])
                    row += [r["ref_text"][p] for p in protos]
                    row.append(r["ref_rank"] or "–")
                    for k in g["ways"]:
                        cells = r[k]["cells"]
                        row += [("–" if cells[p] is None else f"{num(cells[p]['mean'])} (n={cells[p]['n']})"
                                 + (f" ⚙{cells[p]['n_cpu_bound']}" if cells[p]["n_cpu_bound"] else "")
                                 + (f" ⌛{cells[p]['n_link_late']}" if cells[p].get("n_link_late") else ""))
                                for p in protos]
                        mark = (" ≠!" if r[k]["best_differs"] else " ≠") if r[k]["differs"] else ""
                        sig = "" if r[k]["verdict"] in (None, FASTER_THAN_ALL) else f" ({r[k]['verdict']})"
                        row.append((r[k]["rank"] or "–") + mark + sig)
                    if by_metric:
                        row.append(r["where"] + (f" ({r['notes']})" if r["notes"] else ""))
                    t.rows.append(row)
                parts.append((g["title"], t))
            out.append((tbl, parts))
    return out


CLAIM_OUTCOMES = ("agrees", "contradicts", "equivalent", "undecided")


def variants_tables(data: ReportData) -> list[tuple[dict, SimpleTable]]:
    """Each study's variants tables: per metric, base and variant condition, workload and protocol,
    both values with their 95 % CIs, the comparison variant/base (ratio of geometric means with its
    interval at the verdict's level,
    or the difference of means) and the verdict."""
    out = []
    for sd in data.studies:
        for tbl in sd.tables:
            if "variants" not in tbl:
                continue
            several = len(tbl["metrics"]) > 1
            t = SimpleTable((["metric"] if several else []) + ["condition", "variant", "workload", "protocol",
                            "condition [95 % CI] (n)", "variant [95 % CI] (n)",
                            "variant / condition [CI at the verdict's level]",
                            "p (adj.)", "verdict"])
            for r in tbl["variants"]:
                res = r["test"]
                if res.difference is not None:
                    e, lo, hi = stats.estimate_digits(res.difference, res.diff_low, res.diff_high, null=0.0,
                                                      signed=True)
                    change = f"{e} [{lo}, {hi}] (difference)"
                else:
                    change = ratio_ci(res.ratio, res.ratio_low, res.ratio_high)
                t.rows.append(([METRIC_LABELS.get(r["metric"], r["metric"])] if several else []) + [
                    r["base"], r["variant_name"], r["workload"], r["protocol"],
                    f"{mean_ci(r['base_mean'], *r['base_ci'])} ({r['base_n']})",
                    f"{mean_ci(r['variant_mean'], *r['variant_ci'])} ({r['variant_n']})",
                    change, pval(res.p), verdict_text(res.verdict, res.reps_to_decide, stats.margin_text(res))])
            out.append((tbl, t))
    return out


def _check_text(k: Check) -> str:
    """'h2 (page) equivalent to h1 (objects, per-object) on goodput_mbps within ±10 % (delay_ms 25/50)
    [the seed's pairing]'."""
    where = ", ".join(f"{p} {'≠ 0' if v == 'nonzero' else '/'.join(f'{x:g}' for x in v)}"
                      for p, v in k.conditions.items())
    rel = {"higher": "higher than", "lower": "lower than", "equivalent": "equivalent to"}[k.expect]

    def side(proto: str) -> str:
        attrs = k.workload_for(proto)
        return proto + (f" ({', '.join(str(v) for v in attrs.values())})" if attrs and k.protocols else "")
    bound = k.threshold_text()
    text = f"{side(k.a)} {rel} {side(k.b)} on {k.metric}" + (f" {bound}" if bound else "") + \
        (f" ({where})" if where else "")
    if k.label or (k.workload and not k.protocols):
        shared = f" ({', '.join(str(v) for v in k.workload.values())})" if k.workload and not k.protocols else ""
        text = f"{k.label or 'each'}{shared}: {text}"
    if k.threshold_source:
        text += f" [{k.threshold_source}]"
    return text


def _decided_cells(cells: list[dict]) -> str:
    """'25_1 page:10x1069168B: 0.12 [0.0976, 0.147]; ...' for the cells that agree or contradict."""
    out = [f"{c['condition']} {c['workload_a']}: {ratio_ci(c.get('ratio'), c.get('ratio_low'), c.get('ratio_high'))}"
           for c in cells if c["outcome"] in ("agrees", "contradicts")]
    return "; ".join(out) or "–"


def claims_tables(data: ReportData) -> list[tuple[dict, SimpleTable]]:
    """Each study's claims: per check, the cells where ours agrees, contradicts, is equivalent or
    undecided, those not judged (CPU-bound or link-late), the result, and the decided cells' ratios."""
    out = []
    for sd in data.studies:
        for tbl in sd.tables:
            if "claims" not in tbl:
                continue
            t = SimpleTable(["claim", "where", "check", "cells", "agrees", "contradicts", "equivalent", "undecided",
                             "not judged ⚙ / ⌛", "result", "decided cells: a/b [95 % CI]"])
            for c in tbl["claims"]:
                claim = c["claim"]
                if not c["checks"]:
                    t.rows.append([claim.text, claim.where, claim.note or "not checked", "–", "–", "–", "–", "–",
                                   "–", "not checked", "–"])
                for i, ck in enumerate(c["checks"]):
                    t.rows.append([claim.text if i == 0 else "″", claim.where if i == 0 else "″",
                                   _check_text(ck["check"]), str(len(ck["cells"])),
                                   *[str(ck[o]) for o in CLAIM_OUTCOMES], f"{ck['cpu_bound']} / {ck['link_late']}",
                                   ck["result"], _decided_cells(ck["cells"])])
            out.append((tbl, t))
    return out


def table1_markdown(data: ReportData) -> list[tuple[str, SimpleTable]]:
    """Table 1 as one Markdown table per workload: geometric mean [95 % CI] (n) per protocol."""
    out = []
    for blk in data.table1:
        protos = blk["protocols"]
        heads = ["condition", *[f"{p} Mbit/s" for p in protos], "best",
                 "best vs each other: verdict, ratio [CI at the verdict's level]"]
        if blk["has_ref"]:
            heads += [f"{blk['ref_label']} {p}" for p in protos] + [f"{blk['ref_label']} best"]
        t = SimpleTable(heads)
        for r in blk["rows"]:
            cells = []
            for c in r["cells"]:
                if not c["present"]:
                    cells.append("–")
                    continue
                txt = (f"{num(c['mean'])} {ci(c['ci_low'], c['ci_high']) or 'no CI'}"
                       f"{' †' if c['mean_above_ci'] else ''} (n={c['n']})") if c["n"] \
                    else "no data"
                if c["n_failed"]:
                    txt += f" {c['n_failed']} failed"
                if c["n_cpu_bound"]:
                    txt += f" ⚙{c['n_cpu_bound']}"
                cells.append(f"**{txt}**" if c["is_best"] else txt)
            row = [r["condition"], *cells, r.get("best") or "–", r.get("comparisons") or r.get("verdict") or "–"]
            if blk["has_ref"]:
                row += [num(c["ref"], 5) for c in r["cells"]] + [r["ref_best"] or "–"]
            t.rows.append(row)
        out.append((blk["title"], t))
    return out


# -- explained verdicts (a study's `explained` table: analysis/explain.py) ------------------------
EXPLAINED_NOTE = (
    "Per cell and pair of protocols a vs b: each metric's geometric means, the ratio a/b with its interval at the "
    "verdict's level and the verdict, Holm over that metric's comparisons in this table. For every decided difference, "
    "the measurements on the same loads that explain it: a measurement the study names as able to explain the metric "
    "whose own comparison of the same two protocols in the same cell is decided different (Holm over that "
    "measurement's comparisons) and points toward the faster protocol, with its ratio a/b; none: 'unexplained'. A "
    "measurement decided the other way is listed as 'against'. n: the two protocols' loads; ⚙k: k of them "
    "CPU-bound, ⌛k: link-late.")


def _change(test: stats.TestResult) -> str:
    """'0.82 [0.75, 0.9]' (ratio a/b) or '-3.1 [-4, -2] (difference)' for a metric that can be 0."""
    if test.ratio is None and test.difference is not None:
        e, lo, hi = stats.estimate_digits(test.difference, test.diff_low, test.diff_high, null=0.0, signed=True)
        return f"{e} [{lo}, {hi}] (difference)"
    return ratio_ci(test.ratio, test.ratio_low, test.ratio_high)


def _measured(x: dict) -> str:
    """'connections opened 0.5 [0.45, 0.55]' (a/b), or with a value of 0 in the cells (no ratio)
    'all streams idle 412 vs 0'."""
    change = _change(x["test"])
    return f"{x['explanation'].name} " + (change if change != "–" else f"{num(x['mean_a'])} vs {num(x['mean_b'])}")


def explained_text(row: dict) -> str:
    """What a row's difference is explained by: 'connections opened 0.5 [0.45, 0.55]; ...', or
    'unexplained', each with the measurements decided the other way; '–' when nothing was decided."""
    if not row["status"]:
        return "–"
    said = "; ".join(_measured(x) for x in row["by"]) or "unexplained"
    if row["against"]:
        said += " (against: " + "; ".join(_measured(x) for x in row["against"]) + ")"
    return said


def explanations_text(tbl: dict) -> str:
    """The table's measurements in words: 'connections opened (fewer is faster: every new ...)'."""
    return "The measurements, which way of each is faster, and why: " + "; ".join(
        f"{e.name} ({e.faster_when} is faster"
        + (f": {e.why}" if e.why else "") + ")" for e in tbl["explanations"]) + "."


def explained_tables(data: ReportData) -> list[tuple[dict, SimpleTable, list[tuple[str, SimpleTable]]]]:
    """Each study's explained tables: (the table, its tally per metric, [(metric label, rows)])."""
    out = []
    for sd in data.studies:
        for tbl in sd.tables:
            if "explained" not in tbl:
                continue
            tally = SimpleTable(["metric", "comparisons", "decided different", "explained", "unexplained"])
            for m in tbl["metrics"]:
                t = tbl["tally"][m]
                if t["compared"]:
                    tally.rows.append([METRIC_LABELS.get(m, m), str(t["compared"]), str(t["different"]),
                                       str(t["explained"]), str(t["unexplained"])])
            parts = []
            for m in tbl["metrics"]:
                t = SimpleTable(["condition", "workload", "a vs b", "a", "b", "a/b [CI at the verdict's level]",
                                 "p (adj.)", "verdict", "explained by (the same loads)", "n"])
                for r in tbl["explained"]:
                    if r["metric"] != m:
                        continue
                    res = r["test"]
                    marks = (f" ⚙{r['n_cpu_bound']}" if r["n_cpu_bound"] else "") + (
                        f" ⌛{r['n_link_late']}" if r["n_link_late"] else "")
                    t.rows.append([r["condition"], _wl(data, r["workload"]), f"{r['a']} vs {r['b']}",
                                   num(r["mean_a"]), num(r["mean_b"]), _change(res), pval(res.p),
                                   verdict_text(res.verdict, res.reps_to_decide, stats.margin_text(res)),
                                   explained_text(r), f"{r['n_a']} / {r['n_b']}{marks}"])
                if t.rows:
                    parts.append((METRIC_LABELS.get(m, m), t))
            out.append((tbl, tally, parts))
    return out
