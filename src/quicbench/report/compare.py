"""quicbench compare RUN_A RUN_B: the same cells side by side, the difference and its significance.

The numbers come from analysis/compare.py (CompareData); this module formats them."""

from __future__ import annotations

import pandas as pd

from quicbench.report.fmt import SimpleTable, mean_ci, pct, pval, ratio_ci, verdict_text

# each cell's metric (its workload kind's headline), as the table names it
METRIC_NAMES = {"goodput_mbps": "goodput Mbit/s", "page_load_ms": "page load ms", "qoe_lin": "QoE_lin"}


def compare_table(df: pd.DataFrame) -> SimpleTable:
    t = SimpleTable(["condition", "workload", "protocol", "metric", "A [95 % CI]", "n A", "B [95 % CI]", "n B",
                     "B vs A", "B/A [CI at the verdict's level]", "p (adj.)", "verdict"])
    def cell(m, lo, hi, n):
        return "no data" if not n else mean_ci(m, lo, hi)

    for _, r in df.iterrows():
        t.rows.append([r["condition"], r["workload"], r["protocol"], METRIC_NAMES.get(r["metric"], r["metric"]),
                       cell(r["mean_a"], r["ci_low_a"], r["ci_high_a"], r["n_a"]), str(r["n_a"]),
                       cell(r["mean_b"], r["ci_low_b"], r["ci_high_b"], r["n_b"]), str(r["n_b"]),
                       pct(r["diff_pct"]), ratio_ci(r["ratio"], r["ratio_low"], r["ratio_high"]), pval(r["p"]),
                       verdict_text(r["verdict"], r["reps_to_decide"], r.get("within"))])
    return t


__all__ = ["compare_table"]
