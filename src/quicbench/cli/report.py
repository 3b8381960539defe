"""`quicbench report` and `quicbench compare`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from quicbench.cli.app import app, console
from quicbench.errors import QuicbenchError


TEST_OPT = typer.Option(None, "--test", help="welch-log (Welch's t-test on log values: the ratio of geometric "
                        "means; default), welch (on the values) or mwu (Mann-Whitney U). Default: the plan's.")
CORRECTION_OPT = typer.Option(None, "--correction", help="holm (default) or none: the multiple-comparison "
                              "correction over each table's comparisons. Default: the plan's.")
ALPHA_OPT = typer.Option(None, "--alpha", help="Significance level, 0 < alpha < 0.5 (default: the plan's, 0.01).")
MARGIN_OPT = typer.Option(None, "--margin", help="Equivalence margin in %, 0 < M < 100 (default: the plan's, 10).")


def _check_method(run_dir: Path, test, correction, alpha, margin) -> None:
    """Bad flags fail before anything is read or written, with the flag's name."""
    from quicbench.analysis.tables import method_for
    try:
        method_for({}, test, alpha, correction, margin)
    except QuicbenchError as e:
        field, _, rest = str(e).partition(":")
        raise QuicbenchError(f"--{field}:{rest}") from None


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory (runs/<run-id>)."),
    fmt: str = typer.Option("html", "--format", help="html (report.html, summary.csv, trials.parquet), md, "
                            "text (the terminal summary) or json (the same, for scripts)."),
    test: Optional[str] = TEST_OPT,
    correction: Optional[str] = CORRECTION_OPT,
    alpha: Optional[float] = ALPHA_OPT,
    margin: Optional[float] = MARGIN_OPT,
    study: Optional[list[str]] = typer.Option(None, "--study", help="Set the run beside this study (a name: "
                                              "go-quick, cvart, dncs-http3, or a study file); repeatable. Default: "
                                              "the plan's `study`, else the studies whose plan or condition names "
                                              "match (docs/report.md, Studies)."),
) -> None:
    """Write the report of a run: the tables per workload kind, the studies' reference values,
    figures, heatmaps, honesty panel."""
    from quicbench.report import report_markdown, write_report
    if fmt not in ("html", "md", "text", "json"):
        raise QuicbenchError(f"--format '{fmt}': accepted: html, md, text, json")
    _check_method(run_dir, test, correction, alpha, margin)
    if study:
        from quicbench.model.study import find_study
        for ref in study:
            try:
                find_study(ref, Path.cwd())
            except QuicbenchError as e:
                raise QuicbenchError(f"--{e}") from None
    method = dict(test=test, correction=correction, alpha=alpha, margin_pct=margin)
    if fmt in ("text", "json"):
        from quicbench.cli.run import print_summary
        print_summary(run_dir, as_json=fmt == "json", **method)
        return
    studies = [str(Path(s).resolve()) if s.endswith(".toml") or "/" in s else s for s in study or []] or None
    if fmt == "md":
        print(report_markdown(run_dir, **method, studies=studies))
        return
    console.print(f"report: {write_report(run_dir, **method, studies=studies)}")


@app.command("compare")
def compare_cmd(
    run_a: Path = typer.Argument(..., help="First run directory."),
    run_b: Path = typer.Argument(..., help="Second run directory."),
    fmt: str = typer.Option("html", "--format", help="html (RUN_A/compare.html) or md."),
    test: Optional[str] = TEST_OPT,
    correction: Optional[str] = CORRECTION_OPT,
    alpha: Optional[float] = ALPHA_OPT,
    margin: Optional[float] = MARGIN_OPT,
) -> None:
    """The same cells of two runs side by side: the ratio B/A with its CI and the verdict."""
    from quicbench.report import compare_runs
    _check_method(run_a, test, correction, alpha, margin)
    out = compare_runs(run_a, run_b, fmt, test=test, correction=correction, alpha=alpha, margin_pct=margin)
    if fmt == "md":
        print(out)
    else:
        console.print(f"comparison: {out}")
