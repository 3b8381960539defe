"""The run report: `quicbench report RUN_DIR` and `quicbench compare RUN_A RUN_B`.

    write_report(run_dir, fmt="html")  -> run_dir/report.html (+ summary.csv, trials.parquet)
    write_report(run_dir, fmt="md")    -> run_dir/report.md   (+ summary.csv, trials.parquet)
    report_markdown(run_dir)           -> the Markdown summary as a string (for the terminal)
    compare_runs(a, b, fmt="html")     -> a/compare.html;  fmt="md" -> the Markdown as a string

analysis/report_data.py computes everything a report shows (ReportData); this package only
formats it: html.py and markdown.py render it, figures/ draws it (FIGURES lists every figure
with its id, title and caption).

Statistics: the run's plan says how protocols are compared (its `statistics` table: Welch on
log values, Holm over each table's comparisons, alpha 0.01, equivalence within ±10 % by
default); test, alpha, correction and margin_pct override it (docs/report.md).
"""

from __future__ import annotations

from pathlib import Path

from quicbench.analysis.load import RunData, load_run
from quicbench.analysis.tables import Method, method_for
from quicbench.errors import QuicbenchError
from quicbench.report.exports import write_summary_csv, write_trials_parquet

FORMATS = ("html", "md")


def _method(run: RunData, test: str | None, alpha: float | None, correction: str | None,
            margin_pct: float | None) -> Method:
    return method_for(run.meta, test, alpha, correction, margin_pct)


def _load_with_rows(run_dir: Path | str) -> RunData:
    """A run that has trial rows to report on; else a clear error that says why."""
    run = load_run(run_dir)
    if run.rows.empty:
        status = run.meta.get("status", "unknown")
        raise QuicbenchError(f"'{run_dir}' has no trial rows (run status '{status}'): nothing to report; "
                             f"resume the run to record trials")
    return run


def write_report(run_dir: Path | str, fmt: str = "html", *, test: str | None = None, alpha: float | None = None,
                 correction: str | None = None, margin_pct: float | None = None,
                 figures_dir: Path | str | None = None, studies: list[str] | None = None) -> Path:
    """Write the report into the run directory and return its path (report.html or report.md).

    Also writes summary.csv and trials.parquet. figures_dir, if given, receives every figure
    as a PNG file as well (the HTML embeds them either way). studies: names or files of the
    studies to set the run beside (default: the plan's `study`, else those that apply).
    """
    if fmt not in FORMATS:
        raise QuicbenchError(f"unknown report format '{fmt}', accepted: {', '.join(FORMATS)}")
    from quicbench.analysis.report_data import build_report_data
    run = _load_with_rows(run_dir)
    _check_studies(studies)
    data = build_report_data(run, _method(run, test, alpha, correction, margin_pct), studies)
    write_summary_csv(data.summary, run.run_dir / "summary.csv")
    write_trials_parquet(run, run.run_dir / "trials.parquet")
    if fmt == "md":
        from quicbench.report.markdown import render_markdown
        out = run.run_dir / "report.md"
        out.write_text(render_markdown(data), encoding="utf-8")
        return out
    from quicbench.report.figures import render_figures
    from quicbench.report.figures.plotting import save_pngs
    from quicbench.report.html import render_report
    plots = render_figures(data)
    out = run.run_dir / "report.html"
    out.write_text(render_report(data, plots), encoding="utf-8")
    if figures_dir is not None:
        save_pngs([p for section in plots.values() for p in section], Path(figures_dir))
    return out


def report_markdown(run_dir: Path | str, *, test: str | None = None, alpha: float | None = None,
                    correction: str | None = None, margin_pct: float | None = None,
                    studies: list[str] | None = None) -> str:
    """The Markdown summary of a run (nothing written)."""
    from quicbench.analysis.report_data import build_report_data
    from quicbench.report.markdown import render_markdown
    run = _load_with_rows(run_dir)
    _check_studies(studies)
    return render_markdown(build_report_data(run, _method(run, test, alpha, correction, margin_pct), studies))


def _check_studies(studies: list[str] | None) -> None:
    """Studies asked for by name or file must exist and be valid (a QuicbenchError says why)."""
    from quicbench.model.study import find_study
    for ref in studies or []:
        find_study(ref, Path.cwd())


def compare_runs(run_a: Path | str, run_b: Path | str, fmt: str = "html", *, test: str | None = None,
                 alpha: float | None = None, correction: str | None = None,
                 margin_pct: float | None = None) -> str | Path:
    """Compare two runs cell by cell: fmt="html" writes run_a/compare.html and returns its path,
    fmt="md" returns the Markdown."""
    if fmt not in FORMATS:
        raise QuicbenchError(f"unknown compare format '{fmt}', accepted: {', '.join(FORMATS)}")
    from quicbench.analysis.compare import build_compare_data
    a, b = load_run(run_a), load_run(run_b)
    data = build_compare_data(a, b, _method(a, test, alpha, correction, margin_pct))     # run A's plan
    if fmt == "md":
        from quicbench.report.markdown import render_compare_markdown
        return render_compare_markdown(data)
    from quicbench.report.html import render_compare
    from quicbench.report.figures import COMPARE_FIGURE
    figure = COMPARE_FIGURE.render(data)
    out = a.run_dir / "compare.html"
    out.write_text(render_compare(data, figure[0] if figure else None), encoding="utf-8")
    return out


__all__ = ["write_report", "report_markdown", "compare_runs", "FORMATS"]
