"""`quicbench merge`, `quicbench slurm` and `quicbench k8s`: one plan on many machines (docs/scale.md)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from quicbench.cli.app import app, console, err
from quicbench.errors import QuicbenchError

SHOWN = 10   # lines of duplicates or missing keys printed; meta.json has them all


@app.command("merge")
def merge_cmd(
    run_dirs: List[Path] = typer.Argument(..., help="Run directories to merge (e.g. DIR/shards/*)."),
    out: Path = typer.Option(..., "--out", "-o", help="The merged run directory (new, or empty)."),
    force: bool = typer.Option(False, "--force", help="Merge runs of different plans or versions; recorded in meta.json."),
) -> None:
    """Merge shard runs of one plan into one run that report and compare read (exit 1 if trials are missing)."""
    from quicbench.run.merge import merge_runs
    res = merge_runs(run_dirs, out, force=force)
    print_merge(res)
    if res.missing:
        raise typer.Exit(1)


def print_merge(res) -> None:
    for m in res.mismatches:
        err.print(f"[yellow]--force: {m}[/]", highlight=False)
    for d in res.duplicates[:SHOWN]:
        err.print(f"[yellow]duplicate {d['key']}: kept the row of {d['kept']} ({d['kept_status']}, latest), "
                  f"dropped {', '.join(d['dropped'])}[/]", highlight=False)
    if len(res.duplicates) > SHOWN:
        err.print(f"[yellow]... {len(res.duplicates) - SHOWN} more duplicates (meta.json: merge.duplicates)[/]")
    console.print(f"merged {len(res.inputs)} run(s) from {len(res.hosts)} host(s) ({', '.join(res.hosts)}): "
                  f"{res.trials} trials ({res.ok} ok), {len(res.duplicates)} duplicate(s) dropped, "
                  f"{len(res.missing)} missing", highlight=False)
    if res.missing:
        err.print(f"[red]{len(res.missing)} trial(s) of the plan are in no input:[/] "
                  + ", ".join(res.missing[:SHOWN]) + (" ..." if len(res.missing) > SHOWN else ""), highlight=False)
        if res.rerun:
            err.print("re-run " + ", ".join(f"--shard {s} ({n} trials)" for s, n in sorted(res.rerun.items()))
                      + " and merge again", highlight=False)
    console.print(f"merged run: [bold]{res.out}[/] ('quicbench report {res.out}')")
