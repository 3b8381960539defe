"""quicbench compare RUN_A RUN_B: the same cells side by side, the difference and its significance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.lines import Line2D

from quicbench.analysis.compare import compare_cells, setup_differences
from quicbench.analysis.load import RunData
from quicbench.analysis.tables import Method
from quicbench.report import palette
from quicbench.report.fmt import SimpleTable, ci, num, pct, pval
from quicbench.report.plotting import Plot, new_figure, render, styled


def compare_table(df: pd.DataFrame) -> SimpleTable:
    t = SimpleTable(["condition", "workload", "protocol", "A Mbit/s [95 % CI]", "n A", "B Mbit/s [95 % CI]", "n B",
                     "B vs A", "p", "verdict"])
    def cell(m, lo, hi, n):
        return "no data" if not n else f"{num(m)} {ci(lo, hi)}".strip()

    for _, r in df.iterrows():
        t.rows.append([r["condition"], r["workload"], r["protocol"],
                       cell(r["mean_a"], r["ci_low_a"], r["ci_high_a"], r["n_a"]), str(r["n_a"]),
                       cell(r["mean_b"], r["ci_low_b"], r["ci_high_b"], r["n_b"]), str(r["n_b"]),
                       pct(r["diff_pct"]), pval(r["p"]), str(r["verdict"])])
    return t


def compare_figure(df: pd.DataFrame, protocols: list[str]) -> Plot | None:
    d = df[(df["in"] == "both") & df["diff_pct"].notna()]
    if d.empty:
        return None
    cells = list(dict.fromkeys(zip(d["condition"], d["workload"])))
    with styled():
        fig, axes = new_figure(1, 1, height_in=3.6)
        ax = axes[0]
        step = 0.8 / max(len(protocols), 1)
        for j, p in enumerate(protocols):
            dp = d[d["protocol"] == p].set_index(["condition", "workload"])
            for i, cw in enumerate(cells):
                if cw not in dp.index:
                    continue
                r = dp.loc[cw]
                sig = r["verdict"] == "significant"
                ax.plot(i - 0.4 + step * (j + 0.5), r["diff_pct"], marker=palette.marker(p), markersize=7,
                        color=palette.color(p), markerfacecolor=palette.color(p) if sig else "white", linestyle="none")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(cells)))
        ax.set_xticklabels([f"{c}\n{w}" for c, w in cells], rotation=30 if len(cells) > 6 else 0,
                           ha="right" if len(cells) > 6 else "center", fontsize=8)
        ax.set_xlim(-0.6, len(cells) - 0.4)
        ax.set_ylabel("mean goodput, B vs A (%)")
        ax.set_xlabel("condition / workload")
        handles = [Line2D([], [], color=palette.color(p), marker=palette.marker(p), linestyle="none",
                          label=palette.label(p)) for p in protocols]
        handles += [Line2D([], [], color="grey", marker="o", linestyle="none", label="significant"),
                    Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle="none",
                           label="not significant / n too small")]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return render(fig, "compare-diff", "B vs A per cell",
                      "100 × (mean B − mean A) / mean A for every cell in both runs; filled markers are significant.")


def compare_context(a: RunData, b: RunData, method: Method, figures: bool = True) -> dict[str, Any]:
    df = compare_cells(a, b, method)
    tested = df[df["verdict"].isin(["significant", "not significant"])]
    notes = []
    only_a, only_b = int((df["in"] == "A only").sum()), int((df["in"] == "B only").sum())
    if only_a or only_b:
        notes.append(f"{only_a} cells only in A and {only_b} only in B are listed without a test.")
    small = int((df["verdict"] == "n too small").sum())
    if small:
        notes.append(f"{small} cells have fewer than {method.min_n} successful trials in a run: no claim is made.")
    protocols = list(dict.fromkeys([*a.protocols, *b.protocols]))
    return {"run_a": a.run_id, "run_b": b.run_id, "dir_a": str(a.run_dir), "dir_b": str(b.run_dir), "frame": df,
            "table": compare_table(df), "setup_diffs": setup_differences(a, b),
            "method_text": method.text(len(tested)), "n_tested": len(tested),
            "n_sig": int((tested["verdict"] == "significant").sum()), "notes": notes,
            "figure": compare_figure(df, protocols) if figures else None}


def write_compare_html(ctx: dict[str, Any], path: Path) -> Path:
    from quicbench.report.html import render_compare
    path.write_text(render_compare(ctx), encoding="utf-8")
    return path


__all__ = ["compare_context", "write_compare_html", "compare_figure", "compare_table"]
