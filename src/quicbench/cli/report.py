"""`quicbench report` and `quicbench compare`."""

from __future__ import annotations

from pathlib import Path

import typer

from quicbench.cli.app import app, console
from quicbench.errors import QuicbenchError


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory (runs/<run-id>)."),
    fmt: str = typer.Option("html", "--format", help="html (report.html, summary.csv, trials.parquet), md, "
                            "text (the terminal summary) or json (the same, for scripts)."),
    test: str = typer.Option("welch", "--test", help="welch (Welch's t-test) or mwu (Mann-Whitney U)."),
    holm: bool = typer.Option(False, "--holm", help="Holm correction across the comparisons."),
) -> None:
    """Write the report of a run: Table 1, Figs. 11/12, heatmaps, CVart views, honesty panel."""
    from quicbench.report import report_markdown, write_report
    correction = "holm" if holm else "none"
    if fmt not in ("html", "md", "text", "json"):
        raise QuicbenchError(f"--format '{fmt}': accepted: html, md, text, json")
    if fmt in ("text", "json"):
        from quicbench.cli.run import print_summary
        print_summary(run_dir, as_json=fmt == "json")
        return
    if fmt == "md":
        print(report_markdown(run_dir, test=test, correction=correction))
        return
    console.print(f"report: {write_report(run_dir, test=test, correction=correction)}")


@app.command("compare")
def compare_cmd(
    run_a: Path = typer.Argument(..., help="First run directory."),
    run_b: Path = typer.Argument(..., help="Second run directory."),
    fmt: str = typer.Option("html", "--format", help="html (RUN_A/compare.html) or md."),
    test: str = typer.Option("welch", "--test", help="welch or mwu."),
) -> None:
    """The same cells of two runs side by side, with differences and significance."""
    from quicbench.report import compare_runs
    out = compare_runs(run_a, run_b, fmt, test=test)
    if fmt == "md":
        print(out)
    else:
        console.print(f"comparison: {out}")
