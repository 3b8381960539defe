"""The stack matrix section (analysis/matrix.py), for HTML and Markdown alike: per condition and
workload a grid of senders (rows) × receivers (columns), each cell its goodput and its verdict
against the TCP reference, and below it the cells' details (what the HTML grid links to)."""

from __future__ import annotations

from typing import Any

from quicbench.analysis.matrix import MatrixCell, MatrixGrid
from quicbench.analysis.report_data import ReportData
from quicbench.report.fmt import SimpleTable, mean_ci, num, pval, ratio_ci, verdict_text

TITLE = "Stack matrix: HTTP/3 goodput per sender × receiver, against TCP"
# the grid's marks where there is no colour (Markdown, the terminal)
MARKS = {"faster": "▲", "slower": "▼", "equivalent": "≈", "inconclusive": "?", "few": "·"}
LEGEND = {"faster": "faster than the TCP reference", "slower": "slower than the TCP reference",
          "equivalent": "equivalent to it", "inconclusive": "inconclusive", "few": "too few trials (or no reference)"}


def intro(data: ReportData) -> str:
    m = data.method
    return (f"One grid per condition and workload: HTTP/3 senders (servers) as rows, receivers (clients) as columns. "
            f"A cell is the pair's geometric mean goodput (Mbit/s) and its ratio to the TCP reference — the fastest h1/h2 "
            f"cell (protocol/TCP congestion control) of the same condition and workload — with the verdict: "
            f"different (▲ faster, ▼ slower), equivalent within ±{100 * m.margin:g} % (≈) or inconclusive (?), "
            f"{'Holm-corrected' if m.correction == 'holm' else 'uncorrected'} over the grid's cells "
            f"({m.short()}); · too few trials. A sender's result belongs to the pair: the receiver's "
            f"acknowledgements, "
            f"flow-control windows and per-packet cost shape it as much. Under each grid, every TCP cell with the "
            f"same facts, then each pair's details: goodput with its 95 % CI, the ratio to the reference with its "
            f"interval at the verdict's level, CPU seconds per GB at "
            f"each end (where a machine is CPU-bound, that is the measurement), the spurious share of the sender's "
            f"loss declarations, the receiver's ACK ratio (packets received per ACK it sent) and the flow-control "
            f"BLOCKED frames (DATA_BLOCKED and STREAM_DATA_BLOCKED) the sender sent per trial, all three from qlog "
            f"(– where no qlog was written or the stack's qlog does not say), "
            f"and the CPU-bound (⚙) and link-late (⏱: the link emulator released packets late) trials.")


def cell_text(c: MatrixCell | None) -> str:
    if c is None:
        return "–"
    if c.n == 0:
        return f"failed ({c.failed})" if c.failed else "–"
    ratio = f" {c.ratio:.2f}×" if c.ratio is not None else ""
    return f"{num(c.mean)}{ratio} {MARKS[c.tone]}{' ⚙' if c.cpu_bound else ''}{' ⏱' if c.link_late else ''}"


def grid_heading(data: ReportData, g: MatrixGrid) -> str:
    ref = (f"reference {g.reference} {num(g.reference_mean)} Mbit/s (n {g.reference_n})" if g.reference
           else "no TCP reference in this run: no verdicts")
    return f"{g.condition} — {data.workload_title(g.workload)}: {ref}"


def cpu_note(g: MatrixGrid) -> str | None:
    """A line under a grid whose every trial was CPU-bound."""
    if not g.all_cpu_bound:
        return None
    return (f"All {g.trials} trials of this grid were CPU-bound (⚙): an end's CPU, not the path, may have set every "
            f"goodput here, so the verdicts compare what each pair's stacks do with this machine's CPUs, and CPU "
            f"seconds per GB at each end is the measurement.")


def _share(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def tcp_table(g: MatrixGrid) -> SimpleTable:
    """Every TCP cell of the grid (h1/h2 over each congestion control), the reference marked."""
    t = SimpleTable(["TCP cell", "goodput [95 % CI]", "n", "failed", "CPU s/GB sender", "CPU s/GB receiver", "⚙",
                     "link-late", "stacks"])
    for label, c in g.tcp.items():
        t.rows.append([f"{label} (reference)" if label == g.reference else label, mean_ci(c.mean, c.ci_low, c.ci_high),
                       str(c.n), str(c.failed), num(c.sender_cpu_s_per_gb), num(c.receiver_cpu_s_per_gb),
                       str(c.cpu_bound), str(c.link_late), f"{c.server_stack or '?'} → {c.client_stack or c.receiver}"])
    return t


def grid_table(g: MatrixGrid) -> SimpleTable:
    t = SimpleTable(["sender \\ receiver", *g.receivers])
    for s in g.senders:
        t.rows.append([s, *[cell_text(g.cells.get((s, r))) for r in g.receivers]])
    return t


def details_table(g: MatrixGrid) -> SimpleTable:
    t = SimpleTable(["sender → receiver", "goodput [95 % CI]", "vs reference [CI at the verdict's level]", "p (adj.)", "verdict", "n",
                     "failed", "CPU s/GB sender", "CPU s/GB receiver", "spurious losses", "ACK ratio",
                     "BLOCKED frames per trial", "⚙",
                     "link-late", "stacks", "trials"])
    for (s, r), c in sorted(g.cells.items()):
        t.rows.append([f"{s} → {r}", mean_ci(c.mean, c.ci_low, c.ci_high),
                       ratio_ci(c.ratio, c.ratio_low, c.ratio_high), pval(c.p),
                       verdict_text(c.verdict, c.reps_to_decide), str(c.n), str(c.failed),
                       num(c.sender_cpu_s_per_gb), num(c.receiver_cpu_s_per_gb),
                       _share(c.spurious_share), num(c.ack_ratio, 3), num(c.fc_blocked, 3),
                       str(c.cpu_bound), str(c.link_late),
                       f"{c.server_stack or s} → {c.client_stack or r}",
                       " ".join(f"{x:05d}" for x in c.trials[:10]) + (" …" if len(c.trials) > 10 else "")])
    return t


def markdown_lines(data: ReportData) -> list[str]:
    """The section as Markdown lines (none when the run is no stack matrix)."""
    if not data.matrix:
        return []
    out = [f"## {TITLE}", "", intro(data), ""]
    for g in data.matrix:
        note = cpu_note(g)
        out += [f"### {grid_heading(data, g)}", "", grid_table(g).markdown(), ""]
        out += [note, ""] if note else []
        out += [tcp_table(g).markdown(), ""] if g.tcp else []
        out += [details_table(g).markdown(), ""]
    return out


def html_context(data: ReportData) -> dict[str, Any]:
    """What templates/_matrix.html.j2 draws."""
    grids = []
    for g in data.matrix:
        rows = [(s, [(g.cells.get((s, r)), cell_text(g.cells.get((s, r))), g.anchor(s, r)) for r in g.receivers])
                for s in g.senders]
        details = details_table(g)
        anchors = [g.anchor(s, r) for (s, r) in sorted(g.cells)]
        grids.append({"heading": grid_heading(data, g), "receivers": g.receivers, "rows": rows,
                      "details": details, "anchors": anchors, "note": cpu_note(g),
                      "tcp": tcp_table(g) if g.tcp else None})
    return {"title": TITLE, "intro": intro(data), "grids": grids, "legend": LEGEND}
