"""The pages study's explained verdicts (analysis/explain.py): each metric compared between two
protocols, Holm over the metric's comparisons, and every decided difference explained by a
measurement on the same loads decided the same way, or "unexplained"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

from quicbench.analysis import load_run
from quicbench.analysis.report_data import build_report_data
from quicbench.errors import QuicbenchError
from quicbench.model.study import find_study, load_study
from quicbench.report import report_markdown
from quicbench.report.views import explained_tables
from test_studies import write_run

PAGE = "page:har:p10-s1"
# (condition, protocol) -> the loads' geometric means: lcp, fcp, handshake, connections, all streams idle
CELLS = {
    # h3 paints first, its handshake a round trip shorter; h1 and h2 alike on LCP; h1 paints its first
    # content before h2 although h2 opens fewer connections (nothing measured explains it)
    ("broadband", "h1"): (300.0, 100.0, 80.0, 20, 5.0),
    ("broadband", "h2"): (300.0, 200.0, 80.0, 10, 5.0),
    ("broadband", "h3"): (200.0, 100.0, 40.0, 10, 5.0),
    # under loss h2's streams stand still together (head-of-line blocking); h1 never multiplexes
    ("mobile", "h1"): (500.0, 150.0, 80.0, 20, 0.0),
    ("mobile", "h2"): (900.0, 150.0, 80.0, 10, 400.0),
    ("mobile", "h3"): (500.0, 150.0, 80.0, 10, 100.0),
}


def page_run(d: Path, reps: int = 8, study: str | None = "pages", suffix: str = "") -> Path:
    rng = np.random.default_rng(11)
    rows = []
    for (c, p), (lcp, fcp, hs, conns, idle) in CELLS.items():
        for rep in range(1, reps + 1):
            def jit(x: float) -> float:
                return x * float(rng.lognormal(0, 0.05))
            rows.append({"key": f"{c}|{PAGE}|{p}|r{rep}", "condition": c, "workload": PAGE, "kind": "page",
                         "protocol": p + suffix, "rep": rep, "status": "ok", "lcp_ms": jit(lcp),
                         "speed_index_ms": jit(lcp * 0.8), "first_contentful_paint_ms": jit(fcp),
                         "page_load_ms": jit(lcp * 2), "handshake_ms": jit(hs), "page_connections": conns,
                         "all_streams_idle_ms": jit(idle) if idle else 0.0, "body_stall_ms_max": jit(50.0),
                         "cpu_bound": p == "h3" and c == "mobile" and rep == 1})
    heads = {"broadband": {"delay_ms": 10.0, "loss_pct": 0.0, "rate_mbit": 50.0, "jitter_ms": 0.0, "spikes": False},
             "mobile": {"delay_ms": 20.0, "loss_pct": 1.5, "rate_mbit": 10.0, "jitter_ms": 0.0, "spikes": False}}
    plan = {"name": "pages", "workloads": [{"kind": "page", "har": "p10-s1.har"}]}
    if study:
        plan["study"] = study
    return write_run(d, plan, heads, rows)


def values(d: Path, metric: str, c: str, p: str) -> np.ndarray:
    rows = [json.loads(x) for x in (d / "trials.jsonl").read_text().splitlines()]
    return np.array([r[metric] for r in rows if (r["condition"], r["protocol"]) == (c, p)])


def table(d: Path) -> dict:
    (sd,) = build_report_data(load_run(d)).studies
    (tbl,) = sd.tables
    return tbl


def row(tbl: dict, metric: str, c: str, a: str, b: str) -> dict:
    (r,) = [r for r in tbl["explained"] if (r["metric"], r["condition"], r["a"], r["b"]) == (metric, c, a, b)]
    return r


def names(items: list[dict]) -> set[str]:
    return {x["explanation"].metric for x in items}


def test_every_pair_compared_with_holm_over_the_metric(tmp_path):
    d = page_run(tmp_path / "run")
    tbl = table(d)
    lcp = [r for r in tbl["explained"] if r["metric"] == "lcp_ms"]
    assert {(r["condition"], r["a"], r["b"]) for r in lcp} == {
        (c, a, b) for c in ("broadband", "mobile") for a, b in (("h2", "h1"), ("h3", "h1"), ("h3", "h2"))}
    raw = {}
    for r in lcp:
        la, lb = np.log(values(d, "lcp_ms", r["condition"], r["a"])), np.log(values(d, "lcp_ms", r["condition"], r["b"]))
        assert r["test"].ratio == pytest.approx(math.exp(la.mean() - lb.mean()))
        raw[(r["condition"], r["a"], r["b"])] = st.ttest_ind(la, lb, equal_var=False).pvalue
    keys = sorted(raw, key=raw.get)
    running = 0.0
    for i, k in enumerate(keys):         # Holm over the six LCP comparisons
        running = max(running, min(1.0, (len(keys) - i) * raw[k]))
        assert row(tbl, "lcp_ms", *k)["test"].p == pytest.approx(running)
    assert tbl["n_tests"]["lcp_ms"] == 6


def test_a_decided_difference_is_explained_by_a_measurement_decided_its_way(tmp_path):
    tbl = table(page_run(tmp_path / "run"))
    # h3's LCP beats h1's and h2's on broadband: its handshake is shorter, decided the same way
    for b in ("h1", "h2"):
        r = row(tbl, "lcp_ms", "broadband", "h3", b)
        assert r["test"].verdict == "different" and r["status"] == "explained"
        assert "handshake_ms" in names(r["by"])
    # h3 vs h1: h3 also opens fewer connections (both explain it); vs h2 the connections are equal
    assert names(row(tbl, "lcp_ms", "broadband", "h3", "h1")["by"]) >= {"handshake_ms", "page_connections"}
    assert "page_connections" not in names(row(tbl, "lcp_ms", "broadband", "h3", "h2")["by"])
    # h2's LCP loses to h1's under loss: its streams stood still together; its fewer connections
    # point the other way
    r = row(tbl, "lcp_ms", "mobile", "h2", "h1")
    assert r["status"] == "explained" and names(r["by"]) == {"all_streams_idle_ms"}
    assert names(r["against"]) == {"page_connections"}
    # a difference nothing measured points to is unexplained, with the evidence against it kept
    r = row(tbl, "first_contentful_paint_ms", "broadband", "h2", "h1")
    assert r["test"].verdict == "different" and r["status"] == "unexplained" and not r["by"]
    assert names(r["against"]) == {"page_connections"}
    # no decided difference: nothing to explain
    r = row(tbl, "lcp_ms", "broadband", "h2", "h1")
    assert r["test"].verdict != "different" and r["status"] is None
    assert tbl["tally"]["first_contentful_paint_ms"]["unexplained"] >= 1
    assert row(tbl, "lcp_ms", "mobile", "h3", "h1")["n_cpu_bound"] == 1


def test_the_report_shows_the_verdicts_and_their_explanations(tmp_path):
    d = page_run(tmp_path / "run")
    md = report_markdown(d)
    assert "## Page verdicts and what explains them" in md
    assert "### largest contentful paint (ms)" in md and "### Speed Index (ms)" in md
    line = next(x for x in md.splitlines() if x.startswith("| broadband | page:har:p10-s1 | h2 vs h1 |")
                and "unexplained" in x)
    assert "(against: connections opened 0.5 [0.5, 0.5])" in line
    # LCP and Speed Index are headline columns of the page table, each with its verdict
    assert "| LCP (ms) |" in md.split("## Page loads (browser)")[1].splitlines()[2]
    assert "| mobile | page:har:p10-s1 | Speed Index (ms) |" in md
    data = build_report_data(load_run(d))
    ((_, tally, parts),) = explained_tables(data)
    assert [t for t, _ in parts][:2] == ["largest contentful paint (ms)", "Speed Index (ms)"]
    assert all(len(r) == len(tally.headers) for r in tally.rows)
    from collections import defaultdict
    from quicbench.report.html import render_report
    html = render_report(data, plots=defaultdict(list))
    assert '<h3 id="page-verdicts">Page verdicts and what explains them</h3>' in html
    assert "<h4>Speed Index (ms)</h4>" in html and "unexplained (against: connections opened" in html


def test_the_pages_study_and_bad_explained_tables(tmp_path):
    s = find_study("pages")
    (t,) = s.tables
    assert t.kind == "explained" and t.metrics[:2] == ["lcp_ms", "speed_index_ms"]
    assert all(set(e.explains) <= set(t.metrics) for e in t.explanations)
    bad = tmp_path / "bad.toml"
    base = ('name = "b"\ntitle = "b"\ndocument = "d"\n[[tables]]\nkind = "explained"\nid = "x"\n'
            'metrics = ["lcp_ms"]\n')
    for extra, needle in (
            ("", "explained needs explanations"),
            ('[[tables.explanations]]\nmetric = "page_connections"\nname = "c"\nfaster_when = "lower"\n'
             'explains = ["page_load_ms"]\n', "explains 'page_load_ms', not a metric of the table"),
            ('[[tables.explanations]]\nmetric = "no_such"\nname = "c"\nfaster_when = "lower"\n'
             'explains = ["lcp_ms"]\n', "unknown metric 'no_such'"),
            ('[[tables.explanations]]\nmetric = "page_connections"\nname = "c"\nfaster_when = "less"\n'
             'explains = ["lcp_ms"]\n', "faster_when")):
        bad.write_text(base + extra)
        with pytest.raises(QuicbenchError, match=needle):
            load_study(bad)


def test_a_run_without_the_plan_study_gets_it_by_name(tmp_path):
    d = page_run(tmp_path / "run", study=None)
    assert not build_report_data(load_run(d)).studies             # it applies to no run by itself
    md = report_markdown(d, studies=["pages"])
    assert "## Page verdicts and what explains them" in md


def test_the_terminal_shows_lcp_and_speed_index_where_loads_measured_them(tmp_path):
    from quicbench.report.terminal import render, summary_data
    d = page_run(tmp_path / "run")
    data = summary_data(load_run(d))
    cell = next(c for c in data["cells"] if (c["condition"], c["protocol"]) == ("mobile", "h2"))
    assert cell["lcp_ms"] == pytest.approx(math.exp(np.log(values(d, "lcp_ms", "mobile", "h2")).mean()))
    text = render(data, width=120)
    assert "LCP ms" in text and "SI ms" in text
    rows = [json.loads(x) for x in (d / "trials.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("lcp_ms"), r.pop("speed_index_ms")
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    bare = summary_data(load_run(d))
    assert "lcp_ms" not in bare["cells"][0] and "LCP ms" not in render(bare, width=120)


def test_pairs_name_base_protocols(tmp_path):
    """A run whose protocols name their server (h3@replay) is compared as the pairs name them."""
    tbl = table(page_run(tmp_path / "run", suffix="@replay"))
    lcp = [r for r in tbl["explained"] if r["metric"] == "lcp_ms" and r["condition"] == "mobile"]
    assert [(r["a"], r["b"]) for r in lcp] == [("h2@replay", "h1@replay"), ("h3@replay", "h1@replay"),
                                               ("h3@replay", "h2@replay")]
    assert next(r for r in lcp if r["a"] == "h2@replay")["status"] == "explained"
