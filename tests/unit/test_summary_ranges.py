"""No committed run's summary gives an interval outside its quantity's range: every run under
docs/results/runs is summarised again (summary.csv's rows, analysis/tables.cell_summary) and each
interval is checked against what its quantity can be (non-negative unless it is QoE; a ratio or
share at most 1, a share in % at most 100), and against its own value."""

import math

import pytest

from conftest import REPO
from quicbench import stats
from quicbench.analysis import load_run
from quicbench.analysis.honesty import cpu_per_gb
from quicbench.analysis.tables import LOG_METRICS, METRICS, OPTIONAL_METRICS, cell_summary, metric_scale

RUNS = sorted(p.parent for p in (REPO / "docs" / "results" / "runs").glob("*/meta.json"))
AT_MOST_ONE = {"rebuffer_ratio", "frames_dropped_ratio", "frames_skipped_ratio", "top_level_share", "jain_index"}
AT_MOST_100 = {"fg_share_pct"}


def out_of_range(metric: str, lo: float, hi: float) -> bool:
    if metric_scale(metric) != stats.SIGNED and lo < 0:
        return True
    if metric in AT_MOST_ONE and hi > 1:
        return True
    return metric in AT_MOST_100 and hi > 100


def test_there_are_committed_runs():
    assert len(RUNS) > 50


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.name)
def test_every_interval_of_a_committed_run_keeps_its_range(run_dir):
    run = load_run(run_dir)
    summary = cell_summary(run)
    bad = []
    for metric in (*METRICS, *OPTIONAL_METRICS):
        if f"{metric}_ci_low" not in summary:
            continue
        for _, r in summary.iterrows():
            lo, hi = r[f"{metric}_ci_low"], r[f"{metric}_ci_high"]
            if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
                continue
            if out_of_range(metric, lo, hi) or lo > hi:
                bad.append(f"{r['condition']}/{r['workload']}/{r['protocol']} {metric} [{lo:g}, {hi:g}]")
            g = r.get(f"{metric}_gmean")
            if metric in LOG_METRICS and g is not None and not math.isnan(g):   # one scale: the value it is for
                assert lo <= g * (1 + 1e-12) and g <= hi * (1 + 1e-12), (metric, lo, g, hi)
    for _, r in cpu_per_gb(run).iterrows():
        for col in ("client_cpu_s_per_gb", "server_cpu_s_per_gb", "cpu_s_per_gb"):
            lo = r[f"{col}_ci_low"]
            if lo is not None and not math.isnan(lo) and lo < 0:
                bad.append(f"{r['protocol']}/{r['workload']} {col} [{lo:g}, ...]")
    assert not bad, f"{len(bad)} intervals out of range in {run_dir.name}: " + "; ".join(bad[:10])
