"""The run report: `quicbench report RUN_DIR` and `quicbench compare RUN_A RUN_B`.

    write_report(run_dir, fmt="html")  -> run_dir/report.html (+ summary.csv, trials.parquet)
    write_report(run_dir, fmt="md")    -> run_dir/report.md   (+ summary.csv, trials.parquet)
    report_markdown(run_dir)           -> the Markdown summary as a string (for the terminal)
    compare_runs(a, b, fmt="html")     -> a/compare.html;  fmt="md" -> the Markdown as a string

analysis/report_data.py computes everything a report shows (ReportData); this package only
formats it: html.py and markdown.py render it, figures/ draws it (FIGURES lists every figure
with its id, title and caption).

Statistics: Welch's two-sided t-test, alpha 0.01, no claim below n = 3; pass test="mwu" for
Mann-Whitney U and correction="holm" for Holm-adjusted p-values (see docs/report.md).
"""

from __future__ import annotations

from pathlib import Path

from quicbench.analysis.load import RunData, load_run
from quicbench.analysis.stats import ALPHA, CORRECTIONS, MIN_N, TESTS
from quicbench.analysis.tables import Method
from quicbench.errors import QuicbenchError
from quicbench.report.exports import write_summary_csv, write_trials_parquet

FORMATS = ("html", "md")


def _method(test: str, alpha: float, correction: str, min_n: int = MIN_N) -> Method:
    if test not in TESTS:
        raise QuicbenchError(f"unknown test '{test}', accepted: {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise QuicbenchError(f"unknown correction '{correction}', accepted: {', '.join(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise QuicbenchError(f"alpha must be between 0 and 1, got {alpha}")
    return Method(test=test, alpha=alpha, correction=correction, min_n=min_n)


def _load_with_rows(run_dir: Path | str) -> RunData:
    """A run that has trial rows to report on; else a clear error that says why."""
    run = load_run(run_dir)
    if run.rows.empty:
        status = run.meta.get("status", "unknown")
        raise QuicbenchError(f"'{run_dir}' has no trial rows (run status '{status}'): nothing to report; "
                             f"resume the run to record trials")
    return run


def write_report(run_dir: Path | str, fmt: str = "html", *, test: str = "welch", alpha: float = ALPHA,
                 correction: str = "none", figures_dir: Path | str | None = None) -> Path:
    """Write the report into the run directory and return its path (report.html or report.md).

    Also writes summary.csv and trials.parquet. figures_dir, if given, receives every figure
    as a PNG file as well (the HTML embeds them either way).
    """
    if fmt not in FORMATS:
        raise QuicbenchError(f"unknown report format '{fmt}', accepted: {', '.join(FORMATS)}")
    from quicbench.analysis.report_data import build_report_data
    run = _load_with_rows(run_dir)
    data = build_report_data(run, _method(test, alpha, correction))
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


def report_markdown(run_dir: Path | str, *, test: str = "welch", alpha: float = ALPHA,
                    correction: str = "none") -> str:
    """The Markdown summary of a run (nothing written)."""
    from quicbench.analysis.report_data import build_report_data
    from quicbench.report.markdown import render_markdown
    return render_markdown(build_report_data(_load_with_rows(run_dir), _method(test, alpha, correction)))


def compare_runs(run_a: Path | str, run_b: Path | str, fmt: str = "html", *, test: str = "welch",
                 alpha: float = ALPHA, correction: str = "none") -> str | Path:
    """Compare two runs cell by cell: fmt="html" writes run_a/compare.html and returns its path,
    fmt="md" returns the Markdown."""
    if fmt not in FORMATS:
        raise QuicbenchError(f"unknown compare format '{fmt}', accepted: {', '.join(FORMATS)}")
    from quicbench.analysis.compare import build_compare_data
    a, b = load_run(run_a), load_run(run_b)
    data = build_compare_data(a, b, _method(test, alpha, correction))
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
