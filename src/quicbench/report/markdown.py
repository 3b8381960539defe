"""The Markdown summary: Table 1, the H3 differences, the honesty panel in short, what is missing."""

from __future__ import annotations

from quicbench.analysis.stats import TESTS
from quicbench.report import views
from quicbench.report.fmt import plural
from quicbench.report.model import SEED_NOTE, ReportModel


def render_markdown(model: ReportModel) -> str:
    run = model.run
    plan = run.meta.get("plan") or {}
    c = model.counts
    out = [f"# quicbench report: {plan.get('name') or run.run_id}", "",
           f"Run `{run.run_id}`: {c['trials']} trials ({c['ok']} ok, {c['failed']} failed), "
           f"{plural(len(run.condition_order), 'condition')} × {plural(len(run.workloads), 'workload')} × "
           f"{plural(len(run.protocols), 'protocol')}; statistics over {plural(c['used'], 'successful trial')}"
           + (f" ({c['cpu_bound']} CPU-bound, marked ⚙)" if c["cpu_bound"] else "") + ".", "",
           f"**Method.** {model.method_text}", ""]
    if model.missing:
        out += ["**Missing or limited:**", ""] + [f"- {m}" for m in model.missing] + [""]
    out += ["## Table 1: goodput (Mbit/s), mean [95 % CI] (n)", "",
            f"Best protocol in bold; verdict = best vs every other protocol, {TESTS[model.method.test]}, "
            f"p < {model.method.alpha:g} (largest p shown)."
            + (f" Seed columns: {SEED_NOTE}." if model.is_goquick else ""), ""]
    for title, t in views.table1_markdown(model):
        out += [f"### {title}", "", t.markdown(), ""]
    for (a, b) in model.diffs:
        t = views.diff_table(model, a, b)
        if t:
            out += [f"## {a.upper()} vs {b.upper()}: % difference in mean goodput", "", t.markdown(), ""]
    pages = views.pages_table(model)
    if pages:
        out += ["## Page loads (browser)", "", pages.markdown(), ""]
    out += ["## Honesty panel", ""]
    cpu = views.cpu_table(model)
    if cpu:
        out += ["### CPU seconds per GB", "", cpu.markdown(), ""]
    if not model.cpu_bound.empty:
        out += ["### CPU-bound trials", "", views.cpu_bound_table(model).markdown(), ""]
    fr = views.failure_reason_table(model)
    out += ["### Failed trials", "", fr.markdown() if fr else "No trial failed.", ""]
    cal = views.calibration_table(model)
    if cal:
        out += ["### Calibration: configured vs measured", "", cal.markdown(), ""]
    md = dict(model.metadata)
    keys = ["status", "host kernel", "host cpu_model", "host cpus", "link emulator", "TCP congestion control"]
    facts = ", ".join(f"{k}: {md[k]}" for k in keys if k in md)
    versions = ", ".join(f"{k.removeprefix('version ')} {v}" for k, v in model.metadata if k.startswith("version "))
    out += ["### Run", "", f"{facts}." if facts else "No run metadata.", ""]
    if versions:
        out += [f"Versions: {versions}.", ""]
    return "\n".join(out).rstrip() + "\n"


def render_compare_markdown(ctx: dict) -> str:
    a, b, table, diffs = ctx["run_a"], ctx["run_b"], ctx["table"], ctx["setup_diffs"]
    out = [f"# quicbench compare: {a} (A) vs {b} (B)", "",
           f"**Method.** {ctx['method_text']} Difference = 100 × (mean B − mean A) / mean A.", ""]
    if diffs:
        out += ["**Set-up differences:**", ""] + [f"- {k}: A {va}, B {vb}" for k, va, vb in diffs] + [""]
    else:
        out += ["Same plan fingerprint, host, versions and link in both runs.", ""]
    out += [f"{ctx['n_sig']} of {ctx['n_tested']} cells tested differ significantly.", "", table.markdown(), ""]
    if ctx.get("notes"):
        out += [f"- {n}" for n in ctx["notes"]] + [""]
    return "\n".join(out)

