"""The Markdown summary: Table 1, the H3 differences, the honesty panel in short, what is missing."""

from __future__ import annotations

from quicbench.analysis.compare import CompareData
from quicbench.analysis.report_data import ReportData
from quicbench.model.workload_kinds import KINDS
from quicbench.report import views
from quicbench.report.compare import compare_table
from quicbench.report.fmt import plural
from quicbench.report.matrix import markdown_lines as matrix_lines
from quicbench.report.measures import markdown_sections

VIDEO_NOTE = ("Startup, stall time, played bitrate, live latency and Pensieve's QoE per chunk [95 % CI] per cell: "
              "geometric means for startup, bitrate and latencies, arithmetic means for stall time and QoE; "
              "per metric the best protocol against each other one. Startup, bitrate and latency are compared on "
              "the ratio of geometric means; stall time and QoE, which can be 0 or negative, on the difference of "
              "means (Welch), stall time equivalent within ±0.5 s (docs/report.md).")
PHASES_NOTE = ("Per object download: TCP connect, TLS handshake, time to first byte (from the request's start), "
               "the median request's transfer from its first byte to its last, and the trial's total time; a "
               "QUIC handshake is one phase (connect; TLS 0).")
ABOVE_NOTE = ("† the value lies above its interval (an arithmetic mean beside a bootstrap interval).")


def render_markdown(data: ReportData) -> str:
    run = data.run
    plan = run.meta.get("plan") or {}
    c = data.counts
    out = [f"# quicbench report: {plan.get('name') or run.run_id}", "",
           f"Run `{run.run_id}`: {c['trials']} trials ({c['ok']} ok, {c['failed']} failed), "
           f"{plural(len(run.condition_order), 'condition')} × {plural(len(run.workloads), 'workload')} × "
           f"{plural(len(run.protocols), 'protocol')}; statistics over {plural(c['used'], 'successful trial')}"
           + (f" ({c['cpu_bound']} CPU-bound, marked ⚙)" if c["cpu_bound"] else "")
           + (f"; {c['link_late']} link-late (the link emulator released packets late: docs/link.md)"
              if c.get("link_late") else "") + ".", "",
           f"**Method.** {data.method_text}", ""]
    if data.missing:
        out += ["**Missing or limited:**", ""] + [f"- {m}" for m in data.missing] + [""]
    ref = data.table1_reference
    if data.table1:
        out += ["## Table 1: goodput (Mbit/s), geometric mean [95 % CI] (n)", "",
                f"Best protocol in bold; then the best against each other protocol: its verdict (different, "
                f"equivalent within ±{100 * data.method.margin:g} %, or inconclusive), the ratio of geometric means "
                f"best/other with its interval at the verdict's level (it excludes 1 exactly when the verdict is "
                f"'different'), and the "
                f"{'Holm-adjusted' if data.method.correction == 'holm' else 'raw'} p over the table's "
                f"{data.n_tests_table1} comparisons ({data.method.short()}). The CI of a cell is its geometric mean's (never below zero; where a trial measured 0, the arithmetic mean's, by bootstrap)."
                + (f" {ABOVE_NOTE}" if data.any_mean_above_ci else "")
                + (f" {ref.study.label.capitalize()} columns: {ref.study.source}." if ref is not None else ""), ""]
    for title, t in views.table1_markdown(data):
        out += [f"### {title}", "", t.markdown(), ""]
    for tbl, parts in views.reference_tables(data):
        out += [f"## {tbl['title']}", "", " ".join(tbl["note"].split()), ""]
        for title, t in parts:
            out += [f"### {title}", "", t.markdown(), ""] if title else [t.markdown(), ""]
    for tbl, t in views.variants_tables(data):
        out += [f"## {tbl['title']}", "", " ".join(tbl["note"].split()) + f" ({data.method.short()})", "",
                t.markdown(), ""]
    for tbl, t in views.claims_tables(data):
        out += [f"## {tbl['title']}", "", " ".join(tbl["note"].split()) + f" ({data.method.short()})", "",
                t.markdown(), ""]
    for tbl, tally, parts in views.explained_tables(data):
        out += [f"## {tbl['title']}", "", " ".join(f"{tbl['note']} {views.EXPLAINED_NOTE} {views.explanations_text(tbl)}".split())
                + f" ({data.method.short()})", "", tally.markdown(), ""]
        for title, t in parts:
            out += [f"### {title}", "", t.markdown(), ""]
    for (a, b) in data.diffs:
        t = views.diff_table(data, a, b)
        if t:
            out += [f"## {a.upper()} vs {b.upper()}: % difference in geometric mean goodput", "", t.markdown(), ""]
    if data.has_phases:
        out += ["## Connection phases: geometric mean [95 % CI]", "", PHASES_NOTE, "", views.phases_table(data).markdown(), ""]
    video = views.video_table(data)
    if video:
        out += ["## Video (HLS / DASH in the browser)", "", VIDEO_NOTE, "", video.markdown(), "",
                "### Video: the best protocol per metric", "", views.verdict_table(data, "video").markdown(), ""]
    pages = views.pages_table(data)
    if pages:
        out += ["## Page loads (browser)", "", pages.markdown(), "",
                "### Page loads: the best protocol per metric", "", views.verdict_table(data, "page").markdown(), ""]
        phases = views.page_phases_table(data)
        if phases:
            out += ["### Connection phases of the page's HTML (httpstat's, as DNCS-HTTP3 measured them)", "",
                    views.PAGE_PHASES_NOTE, "", phases.markdown(), ""]
    for kind in data.other_kinds:
        t = views.kind_table(data, kind)
        if t:
            out += [f"## {KINDS.get(kind).title}", "", t.markdown(), "",
                    f"### {kind}: the best protocol per metric", "", views.verdict_table(data, kind).markdown(), ""]
    rec = views.recovery_table(data)
    if rec:
        out += ["## Loss recovery (what the sender declared lost, and how much of it was not)", "",
                rec.markdown(), ""]
    out += markdown_sections(data)
    out += matrix_lines(data)
    out += ["## Honesty panel", ""]
    cpu = views.cpu_table(data)
    if cpu:
        out += ["### CPU seconds per GB", "", cpu.markdown(), ""]
    if not data.cpu_bound.empty:
        out += ["### CPU-bound trials", "", views.cpu_bound_table(data).markdown(), ""]
    if not data.cpu_slowed.empty:
        out += ["### Trials the CPU slowed (judged after the run)", "", views.SLOWED_NOTE, "",
                views.cpu_slowed_table(data).markdown(), ""]
    hosts = views.host_table(data)
    if hosts:
        out += ["### Hosts (goodput relative to the same cell's mean over all hosts)", "", hosts.markdown(), ""]
    fr = views.failure_reason_table(data)
    out += ["### Failed trials", "", fr.markdown() if fr else "No trial failed.", ""]
    cal = views.calibration_table(data)
    if cal:
        out += ["### Calibration: configured vs measured", "", cal.markdown(), ""]
    md = dict(data.metadata)
    keys = ["status", "host kernel", "host cpu_model", "host cpus", "link emulator", "TCP congestion control"]
    facts = ", ".join(f"{k}: {md[k]}" for k in keys if k in md)
    versions = ", ".join(f"{k.removeprefix('version ')} {v}" for k, v in data.metadata if k.startswith("version "))
    out += ["### Run", "", f"{facts}." if facts else "No run metadata.", ""]
    if versions:
        out += [f"Versions: {versions}.", ""]
    return "\n".join(out).rstrip() + "\n"


def render_compare_markdown(data: CompareData) -> str:
    a, b, table, diffs = data.run_a, data.run_b, compare_table(data.frame), data.setup_diffs
    out = [f"# quicbench compare: {a} (A) vs {b} (B)", "",
           f"**Method.** {data.method_text} Values are geometric means for goodputs and times (arithmetic "
           f"means otherwise); difference = 100 × (B − A) / A on those values.", ""]
    if diffs:
        out += ["**Set-up differences:**", ""] + [f"- {k}: A {va}, B {vb}" for k, va, vb in diffs] + [""]
    else:
        out += ["Same plan fingerprint, host, versions and link in both runs.", ""]
    out += [data.tally, "", table.markdown(), ""]
    if data.notes:
        out += [f"- {n}" for n in data.notes] + [""]
    return "\n".join(out)

