"""The measure sections (analysis/measures.py) on synthetic runs: competing traffic, session
resumption and 0-RTT, NAT rebinding. Every number is checked against an independent computation
on the rows (scipy), never against hard-coded outputs."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from quicbench.analysis import load_run
from quicbench.analysis.measures import LOAD, REBINDING, RESUMPTION, SAME_OUTCOME, compute
from quicbench.report import report_markdown, write_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
from make_fixture import make_run  # noqa: E402


def rows(d: Path) -> pd.DataFrame:
    return pd.read_json(d / "trials.jsonl", lines=True)


def holm(raw: dict) -> dict:
    order, out, running = sorted(raw, key=raw.get), {}, 0.0
    for rank, k in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * raw[k]))
        out[k] = running
    return out


@pytest.fixture(scope="module")
def loadrun(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs") / "load-run", "load")


@pytest.fixture(scope="module")
def resrun(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs") / "res-run", "resumption")


@pytest.fixture(scope="module")
def rebindrun(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs") / "rebind-run", "rebind")


def test_competing_traffic_cells_and_protocol_comparisons(loadrun):
    m = compute(load_run(loadrun), LOAD)
    r = rows(loadrun)
    assert set(m.cells["protocol"]) == {"h1", "h2", "h3"} and (m.cells["n"] == 6).all()
    for _, c in m.cells.iterrows():
        x = r[r["protocol"] == c["protocol"]]["fg_share_pct"].to_numpy()
        assert c["fg_share_pct_mean"] == pytest.approx(x.mean())
        half = st.t.ppf(0.975, len(x) - 1) * np.log(x).std(ddof=1) / np.sqrt(len(x))
        assert c["fg_share_pct_ci_low"] == pytest.approx(np.exp(np.log(x).mean() - half))
    # compared: goodput, share and the two delays; h3 vs h1, h3 vs h2, h2 vs h1; Holm over all 12
    raw = {}
    for a, b in (("h3", "h1"), ("h3", "h2"), ("h2", "h1")):
        for metric in ("goodput_mbps", "fg_share_pct", "load_owd_ms_p50", "load_owd_ms_p99"):
            xa = np.log(r[r["protocol"] == a][metric].to_numpy())
            xb = np.log(r[r["protocol"] == b][metric].to_numpy())
            raw[(a, b, metric)] = st.ttest_ind(xa, xb, equal_var=False).pvalue
    adj = holm(raw)
    comp = m.comparisons.set_index(["a", "b", "metric"])
    assert m.n_tests == len(raw) == 12 and len(comp) == 12
    for k, p in adj.items():
        assert comp.loc[k, "p"] == pytest.approx(p, rel=1e-6)
        assert comp.loc[k, "verdict"] == ("different" if p < 0.01 else comp.loc[k, "verdict"])
    share = comp.loc[("h3", "h1", "fg_share_pct")]
    assert share["verdict"] == "different" and share["ratio_high"] < 1
    md = report_markdown(loadrun)
    assert "## Competing traffic and delay under load" in md and "### h3 vs h1, h3 vs h2, h2 vs h1" in md
    assert "Jain's index" in md and "≈" not in md[md.index("## Competing traffic"):md.index("## Honesty panel")]


def test_resumption_compares_modes_within_each_protocol(resrun):
    m = compute(load_run(resrun), RESUMPTION)
    r = rows(resrun)
    assert len(m.cells) == 9
    comp = m.comparisons
    # tickets vs none, 0rtt vs none, 0rtt vs tickets, for each protocol; ttfb and total time
    assert len(comp) == 3 * 3 * 2 and set(comp["protocol"]) == {"h1", "h2", "h3"}
    label = {"none": "10x10KB/p1/per-object", "tickets": "10x10KB/p1/per-object/tickets",
             "0rtt": "10x10KB/p1/per-object/0rtt"}
    raw, ratio = {}, {}
    for p in ("h1", "h2", "h3"):
        for a, b in (("tickets", "none"), ("0rtt", "none"), ("0rtt", "tickets")):
            for metric in ("ttfb_ms", "total_time_s"):
                xa = np.log(r[(r["protocol"] == p) & (r["workload"] == label[a])][metric].to_numpy())
                xb = np.log(r[(r["protocol"] == p) & (r["workload"] == label[b])][metric].to_numpy())
                raw[(p, label[a], label[b], metric)] = st.ttest_ind(xa, xb, equal_var=False).pvalue
                ratio[(p, label[a], label[b], metric)] = np.exp(xa.mean() - xb.mean())
    adj = holm(raw)
    c = comp.set_index(["protocol", "a", "b", "metric"])
    for k, p in adj.items():
        assert c.loc[k, "p"] == pytest.approx(p, rel=1e-6) and c.loc[k, "ratio"] == pytest.approx(ratio[k])
    # 0-RTT halves h3's first byte (two round trips to one) and is different; h1 resumes without gain
    assert c.loc[("h3", label["0rtt"], label["none"], "ttfb_ms"), "verdict"] == "different"
    assert c.loc[("h3", label["0rtt"], label["none"], "ttfb_ms"), "ratio"] == pytest.approx(0.5, abs=0.05)
    assert c.loc[("h1", label["tickets"], label["none"], "ttfb_ms"), "verdict"] in ("equivalent", "inconclusive")
    cells = m.cells.set_index(["workload", "protocol"])
    assert cells.loc[(label["0rtt"], "h3"), "early_data_pct_mean"] == 100
    assert cells.loc[(label["tickets"], "h2"), "resumed_pct_mean"] == 100
    md = report_markdown(resrun)
    assert "## Session resumption and 0-RTT" in md and "0-RTT accepted, %" in md


def test_rebinding_counts_survival_and_compares_it_with_fisher(rebindrun):
    m = compute(load_run(rebindrun), REBINDING)
    r = rows(rebindrun)
    cells = m.cells.set_index("protocol")
    for p in ("h1", "h2", "h3"):
        g = r[r["protocol"] == p]
        k = int((g["status"] == "ok").sum())
        assert cells.loc[p, "survived_k"] == k and cells.loc[p, "n"] == len(g)
        lo, hi = st.binomtest(k, len(g)).proportion_ci(method="wilson")
        assert cells.loc[p, "survived_low"] == pytest.approx(lo) and cells.loc[p, "survived_high"] == pytest.approx(hi)
    assert cells.loc["h3", "survived_k"] == 5 and cells.loc["h1", "survived_k"] == 0
    comp = m.comparisons.set_index(["a", "b", "metric"])
    assert cells.loc["h3", "kept_k"] == 5
    # four Fisher tests in the family: survived and kept its connection, h3 against h1 and h2 (the
    # stall has no h1/h2 trial that survived to compare)
    raw = {(b, metric): st.fisher_exact([[5, 1], [0, 6]]).pvalue for b in ("h1", "h2") for metric in ("survived", "kept")}
    assert m.n_tests == 4
    for (b, metric), p in holm(raw).items():
        row = comp.loc[("h3", b, metric)]
        assert row["test"] == "fisher" and row["p"] == pytest.approx(p)
        assert row["verdict"] == ("different" if p < 0.01 else "inconclusive")
        assert comp.loc[("h3", b, "seen"), "verdict"] == SAME_OUTCOME
    md = report_markdown(rebindrun)
    sec = md[md.index("## NAT rebinding"):md.index("## Honesty panel")]
    assert "5/6 [" in sec and "0/6 [" in sec and "Fisher's exact test" in sec
    assert "not tested: the same outcome in every trial" in sec


def test_measure_sections_in_the_html_report(rebindrun, resrun):
    for d, key, title in ((rebindrun, "rebinding", "NAT rebinding"), (resrun, "resumption", "Session resumption and 0-RTT")):
        html = write_report(d).read_text()
        assert f'<h2 id="{key}">{title}</h2>' in html and f'href="#{key}"' in html
        assert "Head-of-line blocking" not in html
