"""`quicbench results`: published result pages regenerated from committed run data."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from quicbench.cli.app import app, console, err
from quicbench.errors import QuicbenchError

results_app = typer.Typer(no_args_is_help=True, help="Published results: pages whose tables come from "
                          "committed run data (docs/results).")
app.add_typer(results_app, name="results")

PAGES_HELP = "Result pages (Markdown); a directory means its *.md pages that hold tables. Default: docs/results."


def _pages(paths: List[Path]) -> list[Path]:
    from quicbench.report.published import blocks
    out: list[Path] = []
    for p in paths or [Path("docs/results")]:
        if p.is_dir():
            out += [q for q in sorted(p.glob("*.md")) if blocks(q.read_text())]
        elif p.is_file():
            out.append(p)
        else:
            raise QuicbenchError(f"{p}: no such page or directory")
    return out


def _prose_pages(paths: List[Path]) -> list[Path]:
    """The pages whose prose is checked: those named (a directory: its *.md), else the READMEs and
    every page of docs/results."""
    from quicbench.report.prose import default_pages
    if not paths:
        return default_pages(Path("."))
    return [q for p in paths for q in (sorted(p.glob("*.md")) if p.is_dir() else [p]) if q.is_file()]


@results_app.command("check")
def check_cmd(pages: List[Path] = typer.Argument(None, help=PAGES_HELP)) -> None:
    """Regenerate every table of the pages from their data, and check that the prose's sentences
    about cells (did not move, the same, fell or rose by X %, explains why) cite table rows whose
    verdicts say so; exit 1 naming each table that differs and each such sentence."""
    from quicbench.report import prose
    from quicbench.report.published import blocks, check
    found = [page for page in _pages(pages) if blocks(page.read_text())]     # a page of prose only has no tables
    problems = [p for page in found for p in check(page)]
    texts = _prose_pages(pages)
    problems += prose.check(texts)
    for p in problems:
        err.print(p, markup=False, highlight=False)
    if problems:
        raise typer.Exit(1)
    n = sum(len(blocks(page.read_text())) for page in found)
    console.print(f"{n} table(s) in {len(found)} page(s): each is what its data give; the prose of {len(texts)} "
                  f"page(s) cites the rows behind what it says of a cell", markup=False)


@results_app.command("update")
def update_cmd(pages: List[Path] = typer.Argument(None, help=PAGES_HELP)) -> None:
    """Rewrite the pages' tables from their committed data."""
    from quicbench.report.published import update
    for page in _pages(pages):
        console.print(f"{page}: {update(page)} table(s) rewritten", markup=False)


@results_app.command("publish")
def publish_cmd(run_dir: Path = typer.Argument(..., help="A run directory."),
                dest: Path = typer.Argument(..., help="Where its data go, e.g. docs/results/runs/NAME.")) -> None:
    """Copy a run's meta.json and rows (trials.jsonl.gz) where a page can cite them."""
    from quicbench.report.published import publish
    console.print(f"published: {publish(run_dir, dest)}", markup=False)
