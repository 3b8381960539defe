"""The report built from small fixture runs, checked against independent computations."""

import base64
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import math
import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from quicbench.analysis import load_run
from quicbench.analysis.tables import LOG_METRICS, OPTIONAL_METRICS, SUMMARY_COLUMNS
from quicbench.errors import QuicbenchError
from quicbench.report import compare_runs, report_markdown, write_report

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES))
from make_fixture import make_run  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def goquick(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs") / "goquick-small"
    shutil.copytree(FIXTURES / "goquick-small", d)
    html = write_report(d)
    return d, html


@pytest.fixture(scope="module")
def cvart(tmp_path_factory):
    d = make_run(tmp_path_factory.mktemp("runs") / "cvart-run", "cvart")
    return d, write_report(d)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    d = make_run(tmp_path_factory.mktemp("runs") / "browser-run", "browser")
    return d, write_report(d)


def read_rows(run_dir: Path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines()])


def independent_cells(run_dir: Path) -> pd.DataFrame:
    """Per-cell goodput statistics straight from trials.jsonl with pandas (not the analysis code)."""
    rows = read_rows(run_dir)
    final = rows.drop_duplicates("key", keep="last")
    final = final[~final["warmup"].astype(bool)]
    ok = final[(final["status"] == "ok") & final["goodput_mbps"].notna()]
    g = ok.groupby(["condition", "workload", "protocol"])["goodput_mbps"]
    out = pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1), "n": g.count(), "median": g.median()})
    # goodput's interval is the log-t one: Student-t on ln(goodput), exponentiated (geometric mean's CI)
    logs = ok.assign(lg=np.log(ok["goodput_mbps"])).groupby(["condition", "workload", "protocol"])["lg"]
    half = st.t.ppf(0.975, out["n"] - 1) * logs.std(ddof=1) / np.sqrt(out["n"])
    out["ci_low"], out["ci_high"] = np.exp(logs.mean() - half), np.exp(logs.mean() + half)
    out["gmean"] = np.exp(logs.mean())        # the value shown beside that interval
    fails = final.assign(failed=final["status"] != "ok").groupby(["condition", "workload", "protocol"])["failed"]
    out["n_failed"] = fails.sum().reindex(out.index).fillna(0)
    out["n_trials"] = fails.count().reindex(out.index)
    return out


class Table1Parser(HTMLParser):
    """Collects Table 1 cells: (workload, condition, protocol) -> displayed mean, CI, n, best shading."""

    def __init__(self):
        super().__init__()
        self.cells, self.verdicts, self.seed = {}, {}, {}
        self.workload = self.condition = None
        self.cur = self.span = None
        self.in_verdict = self.in_seed = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "table" and "table1" in cls:
            self.workload = a["data-workload"]
        elif tag == "tr" and "data-condition" in a:
            self.condition = a["data-condition"]
        elif tag == "td" and "cell" in cls and "data-workload" in a:
            self.cur = {"key": (a["data-workload"], a["data-condition"], a["data-protocol"]),
                        "best": "best-cell" in cls, "text": {}}
        elif tag == "td" and "verdict" in cls:
            self.in_verdict, self.verdicts[(self.workload, self.condition)] = True, ""
        elif tag == "td" and "ref" in cls:
            self.in_seed = (self.workload, self.condition, a["data-protocol"])
            self.seed[self.in_seed] = ""
        elif tag == "span" and self.cur is not None and cls and cls[0] in ("mean", "ci", "n"):
            self.span = cls[0]
            self.cur["text"][self.span] = ""

    def handle_endtag(self, tag):
        if tag == "span":
            self.span = None
        elif tag == "td":
            if self.cur is not None:
                self.cells[self.cur["key"]] = self.cur
            self.cur, self.in_verdict, self.in_seed = None, False, False

    def handle_data(self, data):
        if self.cur is not None and self.span:
            self.cur["text"][self.span] += data
        elif self.in_verdict:
            self.verdicts[(self.workload, self.condition)] += data
        elif self.in_seed:
            self.seed[self.in_seed] += data


def parse_table1(html: str) -> Table1Parser:
    p = Table1Parser()
    p.feed(html)
    return p


def documented_columns(section: str, sub: str | None = None) -> list[str]:
    """Backticked names in the first cell of the tables under '## section' (and '### sub') of docs/data.md."""
    text = (REPO / "docs" / "data.md").read_text()
    body = text.split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    if sub:
        body = body.split(f"\n### {sub}", 1)[1].split("\n### ", 1)[0]
    cols = []
    for line in body.splitlines():
        if line.startswith("| `"):
            first = re.split(r"(?<!\\)\|", line)[1]
            cols += re.findall(r"`([a-z][a-z0-9_]*)`", first)
    return cols


# -- outputs ---------------------------------------------------------------------------------------
def test_report_files_are_written(goquick):
    d, html = goquick
    assert html == d / "report.html"
    for f in ("report.html", "summary.csv", "trials.parquet"):
        assert (d / f).stat().st_size > 0


def test_html_is_self_contained_with_embedded_pngs(goquick):
    text = goquick[1].read_text()
    assert "<script" not in text and "<link" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", text)
    assert "url(" not in text
    imgs = re.findall(r'<img[^>]*src="([^"]+)"', text)
    assert len(imgs) >= 6  # Fig. 11, Fig. 12, two heatmaps, phases, CPU
    for src in imgs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG
    for section in ('id="table1"', 'id="fig11"', 'id="fig12"', 'id="heatmaps"', 'id="phases"', 'id="honesty"',
                    'id="failed"', 'id="calibration"', 'id="metadata"'):
        assert section in text
    assert 'id="cvart"' not in text  # Go-Quick conditions sweep nothing with the rest held fixed


# -- numbers ---------------------------------------------------------------------------------------
def test_summary_csv_matches_independent_groupby(goquick):
    d, _ = goquick
    s = pd.read_csv(d / "summary.csv", dtype={"condition": str}).set_index(["condition", "workload", "protocol"])
    ind = independent_cells(d)
    assert set(ind.index) <= set(s.index)
    for k, r in ind.iterrows():
        row = s.loc[k]
        assert row["n"] == r["n"] and row["n_failed"] == r["n_failed"] and row["n_trials"] == r["n_trials"]
        for col in ("mean", "gmean", "sd", "ci_low", "ci_high", "median"):
            assert row[f"goodput_mbps_{col}"] == pytest.approx(r[col], rel=1e-9), (k, col)
    # the retried trial counts once, by its successful retry; warm-ups never count
    assert s.loc[("100_4", "4x1MB/p4", "h3"), "n"] == 5
    assert s["n_trials"].sum() == 90


def test_best_protocol_and_verdicts_match_scipy(goquick):
    """Welch's t on log goodput (scipy), Holm over the table's comparisons, the ratio of geometric
    means best/other with its CI: recomputed here from the trials."""
    d, _ = goquick
    s = pd.read_csv(d / "summary.csv", dtype={"condition": str})
    rows = read_rows(d).drop_duplicates("key", keep="last")
    ok = rows[(rows["status"] == "ok") & ~rows["warmup"].astype(bool)]
    raw: dict[tuple, float] = {}
    for (c, w), cell in s.groupby(["condition", "workload"]):
        best = cell.loc[cell["goodput_mbps_mean"].idxmax(), "protocol"]
        assert (cell["cell_best"] == best).all() and cell.loc[cell["is_best"], "protocol"].tolist() == [best]
        sample = {p: np.log(ok[(ok["condition"] == c) & (ok["workload"] == w) & (ok["protocol"] == p)]["goodput_mbps"])
                  for p in cell["protocol"]}
        for p, x in sample.items():
            if p == best or len(x) < 3 or len(sample[best]) < 3:
                continue
            raw[(c, w, p)] = st.ttest_ind(sample[best], x, equal_var=False).pvalue
            got = cell.loc[cell["protocol"] == p].iloc[0]
            assert got["p_vs_best_raw"] == pytest.approx(raw[(c, w, p)])
            assert got["ratio_vs_best"] == pytest.approx(math.exp(sample[best].mean() - x.mean()))
            assert got["ratio_vs_best_ci_low"] < got["ratio_vs_best"] < got["ratio_vs_best_ci_high"]
    # Holm over every comparison of the table
    keys = sorted(raw, key=raw.get)
    m, running, holm = len(keys), 0.0, {}
    for i, k in enumerate(keys):
        running = max(running, min(1.0, (m - i) * raw[k]))
        holm[k] = running
    seen = set()
    for (c, w, p), adj in holm.items():
        got = s[(s["condition"] == c) & (s["workload"] == w) & (s["protocol"] == p)].iloc[0]
        assert got["p_vs_best"] == pytest.approx(adj)
        if adj < 0.01:
            assert got["verdict_vs_best"] == "different"
        else:
            assert got["verdict_vs_best"] in ("equivalent", "inconclusive")
        seen.add(got["verdict_vs_best"])
    assert "different" in seen and len(seen) >= 2     # the fixture exercises more than one verdict


def test_html_table1_agrees_with_summary_csv(goquick):
    d, html = goquick
    t1 = parse_table1(html.read_text())
    s = pd.read_csv(d / "summary.csv", dtype={"condition": str})
    assert len(t1.cells) == len(s)
    for _, r in s.iterrows():
        cell = t1.cells[(r["workload"], r["condition"], r["protocol"])]
        mean = float(cell["text"]["mean"])
        lo, hi = (float(x) for x in cell["text"]["ci"].split("–"))
        assert mean == pytest.approx(r["goodput_mbps_gmean"], rel=1e-3)  # the geometric mean, 4 digits shown
        assert lo == pytest.approx(r["goodput_mbps_ci_low"], rel=1e-3)
        assert hi == pytest.approx(r["goodput_mbps_ci_high"], rel=1e-3)
        assert cell["text"]["n"] == f"n={r['n']}"
        assert cell["best"] == bool(r["is_best"])
        assert t1.verdicts[(r["workload"], r["condition"])].strip().startswith(r["cell_verdict"])


def test_seed_table1_shown_beside_ours(goquick):
    seed = pd.read_csv(REPO / "src" / "quicbench" / "data" / "studies" / "go-quick" / "reference.csv", comment="#")
    assert len(seed) == 45 and set(seed["protocol"]) == {"h1", "h2", "h3"}
    pick = seed.set_index(["size", "condition", "protocol"])["value"]
    assert pick[("1MB", "0_0.0", "h2")] == 509.67 and pick[("10KB", "100_4.0", "h3")] == 0.46
    assert pick[("100KB", "12.5_0.5", "h1")] == 25.22
    t1 = parse_table1(goquick[1].read_text())
    names = {"0_0": "0_0.0", "25_1": "25_1.0", "100_4": "100_4.0"}
    sizes = {"10x100KB/p10": "100KB", "4x1MB/p4": "1MB"}
    assert len(t1.seed) == 18
    for (w, c, p), text in t1.seed.items():
        assert float(text) == pick[(sizes[w], names[c], p)]


def test_docs_document_every_column(goquick, cvart, browser):
    doc_summary = documented_columns("summary.csv")
    assert doc_summary == SUMMARY_COLUMNS  # same names, same order
    optional = set(OPTIONAL_METRICS)
    doc_optional = set(documented_columns("trials.parquet", "Capture columns")) | set(
        documented_columns("trials.parquet", "Browser page-load columns")) | set(
        documented_columns("trials.parquet", "Video columns")) | set(
        documented_columns("trials.parquet", "Competing traffic")) | set(
        documented_columns("trials.parquet", "Link columns")) | set(
        documented_columns("trials.parquet", "Loss-recovery columns"))
    assert optional <= doc_optional
    doc_trials = set(documented_columns("trials.parquet"))
    passthrough = set(documented_columns("trials.parquet", "Passed through when present"))
    for d, _ in (goquick, cvart, browser):
        header = list(pd.read_csv(d / "summary.csv", nrows=0).columns)
        assert header[:len(SUMMARY_COLUMNS)] == SUMMARY_COLUMNS
        for extra in header[len(SUMMARY_COLUMNS):]:
            m = re.fullmatch(r"(.+)_(mean|gmean|ci_low|ci_high)", extra)
            assert m and m.group(1) in optional, extra
            assert m.group(2) != "gmean" or m.group(1) in LOG_METRICS, extra   # only metrics summarised on logs
        cols = set(pd.read_parquet(d / "trials.parquet").columns)
        assert doc_trials - passthrough <= cols, doc_trials - passthrough - cols
        assert cols <= doc_trials, cols - doc_trials


def test_parquet_keeps_every_row_exactly(goquick):
    d, _ = goquick
    pq = pd.read_parquet(d / "trials.parquet")
    raw = [json.loads(l) for l in (d / "trials.jsonl").read_text().splitlines()]
    assert len(pq) == len(raw)
    assert pq["start_ns"].dropna().astype("int64").tolist() == [r["start_ns"] for r in raw if r["start_ns"] is not None]
    assert int(pq["used"].sum()) == int(independent_cells(d)["n"].sum())
    assert int(pq["superseded"].sum()) == 1 and int(pq["warmup"].sum()) == 9


# -- other report forms ------------------------------------------------------------------------------
def test_markdown_summary(goquick):
    d, _ = goquick
    md = report_markdown(d)
    assert md.startswith("# quicbench report") and "## Table 1" in md and "Welch" in md
    for c in ("0_0", "25_1", "100_4"):
        assert f"| {c} |" in md
    assert "seed h3" in md and "## H3 vs H2" in md and "### Failed trials" in md
    out = write_report(d, fmt="md")
    assert out == d / "report.md" and out.read_text() == md


def test_holm_and_mann_whitney_options_are_stated(goquick, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(goquick[0], d)
    md = report_markdown(d, correction="holm", test="mwu")
    assert "Holm" in md and "Mann-Whitney" in md
    write_report(d, fmt="md", correction="holm")
    s = pd.read_csv(d / "summary.csv", dtype={"condition": str})
    assert (s["correction"] == "holm").all()
    with pytest.raises(QuicbenchError):
        write_report(d, fmt="pdf")


def test_cvart_run_shows_grid_cvart_views_time_series_and_calibration(cvart):
    d, html = cvart
    text = html.read_text()
    for section in ('id="cvart"', 'id="timeseries"', 'id="heatmap-h3-vs-h2"', 'id="cvart-0"'):
        assert section in text
    assert "configured → measured" in text and "r10_d50_l0_spikes" in text and "tolerance" in text
    s = pd.read_csv(d / "summary.csv", dtype={"condition": str}).set_index(["condition", "workload", "protocol"])
    rows = read_rows(d)
    ind = rows.groupby(["condition", "workload", "protocol"])["overhead_pct"].mean()
    for k, v in ind.items():
        assert s.loc[k, "overhead_pct_mean"] == pytest.approx(v)
    assert s.loc[("r100_d10_l2", "1x5MB/p1", "h1"), "rate_mbit"] == 100
    assert s.loc[("r100_d10_l2", "1x5MB/p1", "h1"), "loss_pct"] == pytest.approx(2)


def test_browser_page_loads(browser):
    d, html = browser
    text = html.read_text()
    assert 'id="pages"' in text and 'id="page-load-vs-condition"' in text and "page:realistic" in text
    assert "seed h1" not in text  # page loads are not the seed's downloads
    rows = read_rows(d)
    for cond, g in rows.groupby("condition"):
        means = np.exp(np.log(g["page_load_ms"]).groupby(g["protocol"]).mean())   # geometric means
        fastest = means.idxmin()
        ps = [st.ttest_ind(np.log(g[g["protocol"] == fastest]["page_load_ms"]),
                           np.log(g[g["protocol"] == p]["page_load_ms"]), equal_var=False).pvalue
              for p in means.index if p != fastest]
        line = next(l for l in report_markdown(d).splitlines() if l.startswith(f"| {cond} | page:realistic | h1 |"))
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells[-2] == fastest
        # Holm never goes below the raw p, and never above m times it (m: the family's size)
        m = rows["condition"].nunique() * (means.size - 1)
        if all(p * m < 0.01 for p in ps):
            assert cells[-1].startswith("ahead of all")
        if any(p >= 0.01 for p in ps):
            assert not cells[-1].startswith("ahead of all")
        assert float(cells[3].split()[0]) == pytest.approx(means["h1"], rel=1e-3)


def test_page_connection_phases_as_dncs_measured_them(browser):
    """DNCS's httpstat phases: a table of its own, each cell the rows' geometric mean, QUIC without a TLS phase."""
    d, html = browser
    assert 'id="page-phases"' in html.read_text()
    md = report_markdown(d).splitlines()
    head = md.index(next(l for l in md if l.startswith("### Connection phases of the page's HTML")))
    header = next(l for l in md[head:] if l.startswith("| condition"))
    cols = [c.strip() for c in header.split("|")[1:-1]]
    rows = read_rows(d)
    for proto in ("h1", "h3"):
        line = next(l for l in md[head:] if l.startswith(f"| 50_2 | page:realistic | {proto} |"))
        cells = dict(zip(cols, (c.strip() for c in line.split("|")[1:-1])))
        g = rows[(rows["condition"] == "50_2") & (rows["protocol"] == proto)]
        def gm(col):
            return float(np.exp(np.log(g[col]).mean())) if (g[col] > 0).all() else float(g[col].mean())
        assert float(cells["server processing (ms)"].split()[0]) == pytest.approx(gm("httpstat_server_ms"), rel=1e-3)
        assert float(cells["content transfer (ms)"].split()[0]) == pytest.approx(gm("httpstat_transfer_ms"), rel=1e-3)
        if proto == "h3":
            assert cells["TLS (ms)"].startswith("–")
        else:
            assert float(cells["TLS (ms)"].split()[0]) == pytest.approx(gm("httpstat_tls_ms"), rel=1e-3)


def test_tiny_run_says_what_is_missing(tmp_path):
    d = make_run(tmp_path / "tiny", "tiny")
    text = write_report(d).read_text()
    assert "fewer than 3 successful trials" in text and "Only one network condition" in text
    assert "No packet captures" in text and "no CI" in text
    s = pd.read_csv(d / "summary.csv", dtype={"condition": str})
    assert len(s) == 2 and s["n"].tolist() == [1, 0]


def test_all_failed_run_still_reports(tmp_path):
    d = make_run(tmp_path / "failed", "tiny")
    rows = [json.loads(l) for l in (d / "trials.jsonl").read_text().splitlines()]
    for r in rows:
        r.update(status="failed", error="connection refused", goodput_mbps=None)
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn": ')
    text = write_report(d).read_text()
    assert "No trial succeeded" in text and "connection refused" in text
    assert "report" in report_markdown(d)


def test_missing_columns_and_meta_are_tolerated(goquick, tmp_path):
    d = tmp_path / "bare"
    d.mkdir()
    keep = ("condition", "protocol", "workload", "size_bytes", "count", "rep", "status", "goodput_mbps", "bytes")
    rows = [{k: v for k, v in json.loads(l).items() if k in keep}
            for l in (goquick[0] / "trials.jsonl").read_text().splitlines()]
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = write_report(d).read_text()
    assert "meta.json is missing" in text and "No connection-phase timings" in text
    assert "No CPU measurements" in text
    assert len(pd.read_csv(d / "summary.csv")) == 18


def test_not_a_run_directory(tmp_path):
    with pytest.raises(QuicbenchError):
        write_report(tmp_path / "nope")
    with pytest.raises(QuicbenchError):
        write_report(tmp_path)


# -- compare ---------------------------------------------------------------------------------------
def test_compare_runs(goquick, tmp_path):
    a = goquick[0]
    b = tmp_path / "run-b"
    shutil.copytree(a, b)
    rows = [json.loads(l) for l in (b / "trials.jsonl").read_text().splitlines()]
    for r in rows:
        if r["protocol"] == "h3" and r.get("goodput_mbps"):
            r["goodput_mbps"] *= 1.5
    (b / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((b / "meta.json").read_text())
    meta["host"]["kernel"] = "6.9.0-other"
    (b / "meta.json").write_text(json.dumps(meta))

    md = compare_runs(a, b, fmt="md")
    assert "kernel: A 6.1.0-fixture, B 6.9.0-other" in md
    ia, ib = independent_cells(a), independent_cells(b)
    lines = {tuple(x.strip() for x in l.split("|")[1:4]): l for l in md.splitlines() if l.startswith("| ")}

    def sample(d, k):
        r = read_rows(d).drop_duplicates("key", keep="last")
        r = r[(r["status"] == "ok") & ~r["warmup"].astype(bool)]
        return r[(r["condition"] == k[0]) & (r["workload"] == k[1]) & (r["protocol"] == k[2])]["goodput_mbps"]

    raw = {}
    for k in ia.index:
        cells = [x.strip() for x in lines[k].split("|")[1:-1]]
        assert cells[3] == "goodput Mbit/s"             # downloads: compared on goodput
        diff = 100 * (ib.loc[k, "gmean"] - ia.loc[k, "gmean"]) / ia.loc[k, "gmean"]   # on the values shown
        assert cells[8] == f"{diff:+.1f} %"
        assert (cells[8] == "+50.0 %") == (k[2] == "h3")
        xa, xb = np.log(sample(a, k)), np.log(sample(b, k))
        if len(xa) >= 3 and len(xb) >= 3:
            raw[k] = st.ttest_ind(xb, xa, equal_var=False).pvalue
            assert cells[9].startswith(f"{math.exp(xb.mean() - xa.mean()):.3g} [")      # B/A [CI]
    order = sorted(raw, key=raw.get)
    running = 0.0
    for i, k in enumerate(order):            # Holm over every cell both runs have
        running = max(running, min(1.0, (len(order) - i) * raw[k]))
        cells = [x.strip() for x in lines[k].split("|")[1:-1]]
        assert (cells[11] == "different") == (running < 0.01), (k, running, cells[11])
        # one level: the B/A interval beside the verdict excludes 1 exactly when the verdict is 'different'
        lo, hi = (float(x) for x in cells[9].split("[")[1].rstrip("]").split(", "))
        assert (lo > 1 or hi < 1) == (cells[11] == "different"), (k, cells[9], cells[11])
    html = compare_runs(a, b)
    assert html == a / "compare.html" and "data:image/png;base64," in html.read_text()


def test_compare_judges_each_kind_by_its_own_metric(video):
    """A video cell is compared on QoE_lin (a difference: it can be negative), never on goodput."""
    from quicbench.analysis.compare import compare_cells
    run = load_run(video[0])
    df = compare_cells(run, run)
    assert set(df["metric"]) == {"qoe_lin"} and df["diff_pct"].isna().all()
    assert (df["verdict"] != "not in both runs").all()


def test_fixture_is_reproducible(tmp_path):
    d = make_run(tmp_path / "goquick-small", "goquick")
    for f in ("meta.json", "trials.jsonl"):
        assert (d / f).read_text() == (FIXTURES / "goquick-small" / f).read_text()
    run = load_run(d)
    assert run.condition_order == ["0_0", "25_1", "100_4"] and run.protocols == ["h1", "h2", "h3"]


def test_goodput_intervals_stay_positive_and_the_value_shown_is_the_geometric_mean(tmp_path):
    def row(i, proto, goodput):
        return {"key": f"c|w|{proto}|r{i}", "condition": "c", "workload": "4x1MB/p4", "protocol": proto, "rep": i,
                "status": "ok", "goodput_mbps": goodput, "bytes": 4_000_000, "size_bytes": 1_000_000, "count": 4,
                "parallel": 4}
    wide = [20.0, 60.0, 290.0]                        # n = 3: Student-t's interval would reach below zero
    stalls = [100.0 + i for i in range(15)] + [0.01] * 5   # n = 20, five stalled trials: very unequal
    rows = [row(i, "h1", g) for i, g in enumerate(wide)] + [row(i, "h2", g) for i, g in enumerate(stalls)]
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "meta.json").write_text(json.dumps({"run_id": "x", "plan": {"name": "spread"}}))
    html = write_report(tmp_path).read_text()
    s = pd.read_csv(tmp_path / "summary.csv").set_index("protocol")
    assert st.t.interval(0.95, 2, loc=np.mean(wide), scale=st.sem(wide))[0] < 0
    for p, x in (("h1", wide), ("h2", stalls)):
        lg = np.log(x)
        lo, hi = st.t.interval(0.95, len(x) - 1, loc=lg.mean(), scale=st.sem(lg))
        assert s.loc[p, "goodput_mbps_ci_low"] == pytest.approx(np.exp(lo)) and np.exp(lo) > 0
        assert s.loc[p, "goodput_mbps_ci_high"] == pytest.approx(np.exp(hi))
    assert s.loc["h2", "goodput_mbps_mean"] > s.loc["h2", "goodput_mbps_ci_high"]   # the arithmetic mean lies above it
    assert s.loc["h1", "goodput_mbps_ci_low"] < s.loc["h1", "goodput_mbps_mean"] < s.loc["h1", "goodput_mbps_ci_high"]
    # one scale: the value shown is the geometric mean, which its interval always holds
    for p, x in (("h1", wide), ("h2", stalls)):
        g = float(np.exp(np.mean(np.log(x))))
        assert s.loc[p, "goodput_mbps_gmean"] == pytest.approx(g)
        assert s.loc[p, "goodput_mbps_ci_low"] < g < s.loc[p, "goodput_mbps_ci_high"]
    md = report_markdown(tmp_path)
    line = next(l for l in md.splitlines() if l.startswith("| c |"))
    h1, h2 = [c.strip() for c in line.split("|")[2:4]]
    assert h2.startswith(f"{float(s.loc['h2', 'goodput_mbps_gmean']):.4g} [") and "†" not in h1 + h2
    assert "geometric mean [95 % CI]" in md and 'class="above"' not in html


def test_columns_table_and_docs_agree():
    """The columns table (the row schema in code) and docs/data.md name the same row columns."""
    from quicbench.model import columns
    documented = set(documented_columns("trials.parquet"))
    derived = set(documented_columns("trials.parquet", "Derived columns"))
    assert derived == {c.name for c in columns.DERIVED}
    assert {c.name for c in columns.COLUMNS} == documented - derived


# -- head-of-line blocking ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def holrun(tmp_path_factory):
    d = make_run(tmp_path_factory.mktemp("runs") / "hol-run", "hol")
    return d, write_report(d)


HOL = ("all_streams_idle_ms", "body_stall_ms_p50", "body_stall_ms_max", "completion_spread_ms")


def test_head_of_line_section_shows_cells_with_cis(holrun):
    from quicbench.analysis.hol import head_of_line
    d, html = holrun
    text, md = html.read_text(), report_markdown(d)
    assert '<h2 id="hol">Head-of-line blocking</h2>' in text and 'href="#hol"' in text
    assert "## Head-of-line blocking" in md and "### h3 vs h2" in md
    # what the measures do and do not isolate is said
    for t in (text, md):
        assert "waits for acknowledgements" in t and "not HOL blocking alone" in t and "Holm-corrected" in t
    hol = head_of_line(load_run(d))
    rows = read_rows(d)
    ok = rows[rows["status"] == "ok"]
    assert len(hol.cells) == 6 and set(hol.cells["protocol"]) == {"h1", "h2", "h3"}
    for _, c in hol.cells.iterrows():
        g = ok[(ok["condition"] == c["condition"]) & (ok["protocol"] == c["protocol"])]
        for m in HOL:
            x = g[m].dropna().astype(float).to_numpy()
            assert c[f"{m}_n"] == len(x) and c[f"{m}_mean"] == pytest.approx(x.mean())
            if (x > 0).all():      # the geometric mean's log-t interval
                half = st.t.ppf(0.975, len(x) - 1) * np.log(x).std(ddof=1) / np.sqrt(len(x))
                assert c[f"{m}_ci_low"] == pytest.approx(np.exp(np.log(x).mean() - half))
                assert c[f"{m}_ci_high"] == pytest.approx(np.exp(np.log(x).mean() + half))
                assert c[f"{m}_gmean"] == pytest.approx(np.exp(np.log(x).mean()))
            elif x.any():          # zeros: the bootstrap interval of the mean, inside the values' range
                boot = st.bootstrap((x,), np.mean, n_resamples=4999, rng=np.random.default_rng(20261127))
                lo, hi = boot.confidence_interval
                assert (c[f"{m}_ci_low"], c[f"{m}_ci_high"]) == pytest.approx((max(lo, x.min()), min(hi, x.max())))
                assert 0 <= c[f"{m}_ci_low"] and np.isnan(c[f"{m}_gmean"])
    # every cell is in the Markdown with its n
    for c in ("25_0", "25_2"):
        assert sum(1 for line in md.splitlines() if line.startswith(f"| {c} |") and line.endswith("| 6 |")) >= 3


def test_head_of_line_verdicts_are_holm_corrected_and_never_from_non_significance(holrun):
    from quicbench.analysis.hol import NOT_TESTED, head_of_line
    d, _ = holrun
    hol = head_of_line(load_run(d))
    rows = read_rows(d)
    ok = rows[rows["status"] == "ok"]
    raw = {}
    for cond in ("25_0", "25_2"):
        for m in HOL:
            a = ok[(ok["condition"] == cond) & (ok["protocol"] == "h3")][m].dropna().astype(float).to_numpy()
            b = ok[(ok["condition"] == cond) & (ok["protocol"] == "h2")][m].dropna().astype(float).to_numpy()
            if not a.any() and not b.any():
                continue           # 0 in every trial of both: reported, not tested
            if (a > 0).all() and (b > 0).all():
                raw[(cond, m)] = st.ttest_ind(np.log(a), np.log(b), equal_var=False).pvalue
            else:
                raw[(cond, m)] = st.ttest_ind(a, b, equal_var=False).pvalue
    # Holm over the section's family, by hand
    order = sorted(raw, key=raw.get)
    holm, running = {}, 0.0
    for rank, k in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * raw[k]))
        holm[k] = running
    assert hol.n_tests == len(raw) == 7
    comp = hol.comparisons.set_index(["condition", "metric"])
    assert comp.loc[("25_0", "all_streams_idle_ms"), "verdict"] == NOT_TESTED
    for k, p in holm.items():
        r = comp.loc[k]
        assert r["p"] == pytest.approx(p, rel=1e-6), k
        assert r["verdict"] in ("different", "equivalent", "inconclusive")
        if r["verdict"] == "different":
            assert p < 0.01
        if r["verdict"] == "inconclusive":
            assert p >= 0.01
    # under loss h2's streams stand still together far longer than h3's: different, h3 lower;
    # h3 measured 0 in some trials, so no ratio is claimed (Welch on the values)
    idle = comp.loc[("25_2", "all_streams_idle_ms")]
    assert idle["verdict"] == "different" and idle["mean_a"] < idle["mean_b"] and idle["test"] == "welch"
    assert idle["ratio"] is None or pd.isna(idle["ratio"])
    stall = comp.loc[("25_2", "body_stall_ms_p50")]
    assert stall["test"] == "welch-log" and stall["ratio_low"] <= stall["ratio"] <= stall["ratio_high"]
    md = report_markdown(d)
    section = md[md.index("## Head-of-line blocking"):md.index("## Honesty panel")]
    assert "Welch on values: some trials 0" in section and f"not tested: {NOT_TESTED}" in section
    assert "≈" not in section and "tied" not in section


def test_head_of_line_section_absent_without_the_columns(goquick, browser):
    for run_dir, html in (goquick, browser):
        assert "Head-of-line blocking" not in html.read_text()
        assert "Head-of-line blocking" not in report_markdown(run_dir)


def test_head_of_line_needs_several_objects(holrun, tmp_path):
    # one object per trial has no other object to wait for: no section
    from quicbench.analysis.hol import head_of_line
    d = tmp_path / "one-object"
    shutil.copytree(holrun[0], d)
    rows = [json.loads(l) for l in (d / "trials.jsonl").read_text().splitlines()]
    for r in rows:
        r.update(count=1, parallel=1, workload="1x1MB/p1", size_bytes=1_000_000, key=r["key"].replace("10x100KB/p10", "1x1MB/p1"))
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not head_of_line(load_run(d))
    assert "Head-of-line blocking" not in report_markdown(d)
# -- kinds: a video-only and a page-only run ----------------------------------------------------------
@pytest.fixture(scope="module")
def video(tmp_path_factory):
    d = make_run(tmp_path_factory.mktemp("runs") / "video-run", "video")
    return d, write_report(d)


def _cells(md: str, heading: str) -> list[list[str]]:
    """The body rows of the Markdown table under a heading."""
    body = md.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    return [[c.strip() for c in l.split("|")[1:-1]] for l in body.splitlines()
            if l.startswith("| ") and not l.startswith("| condition")]


def test_video_only_run_has_no_goodput_tables_and_its_own_metrics(video):
    d, html = video
    text = html.read_text()
    md = report_markdown(d)
    # rows of a video carry a goodput (the player's download rate): never a Table 1, heatmap or
    # goodput figure, never "1 × 100KB"
    for absent in ('id="table1"', 'id="heatmaps"', 'id="vs-condition"', 'id="relative"', "× 100KB", "Mbit/s</th>"):
        assert absent not in text, absent
    assert "## Table 1" not in md and "% difference in geometric mean goodput" not in md and "Object downloads" not in md
    assert 'id="video"' in text and 'id="video-verdicts"' in text
    for m in ("startup_s", "stall_total_s", "mean_bitrate_kbps", "qoe_lin"):     # its own figures
        assert f'id="video-{m}"' in text
    for col in ("startup (s)", "stalled (s)", "played bitrate (kbit/s)", "live latency (s)", "QoE_lin per chunk"):
        assert col in md
    # the LAN had no stall at all: nothing to compare, and said so
    verdicts = _cells(md, "### Video: the best protocol per metric")
    lan_stall = [r for r in verdicts if r[0] == "lan" and r[2] == "stalled (s)"]
    assert len(lan_stall) == 2 and all(r[4] == "the same in every trial" for r in lan_stall)


def test_video_verdicts_match_scipy_on_each_metric_scale(video):
    """Startup on the ratio of geometric means (Welch on logs), stall time on the difference of means
    (Welch on the values), each metric's comparisons one Holm family; recomputed from the rows."""
    d, _ = video
    rows = read_rows(d)
    md = report_markdown(d)
    verdicts = {(r[0], r[1], r[2]): r for r in _cells(md, "### Video: the best protocol per metric")}
    for metric, label, log in (("startup_s", "startup (s)", True), ("stall_total_s", "stalled (s)", False)):
        raw, best = {}, {}
        for (c, w), g in rows.groupby(["condition", "workload"]):
            means = g.groupby("protocol")[metric].mean()
            b = means.idxmin()
            best[(c, w)] = b
            x = g[g["protocol"] == b][metric]
            for p in means.index:
                if p == b:
                    continue
                y = g[g["protocol"] == p][metric]
                if not log and x.nunique() == 1 and y.nunique() == 1 and x.iloc[0] == y.iloc[0]:
                    continue                       # identical constants: no test, not in the family
                raw[(c, w, p)] = st.ttest_ind(np.log(x) if log else x, np.log(y) if log else y,
                                              equal_var=False).pvalue
        keys = sorted(raw, key=raw.get)
        holm, running = {}, 0.0
        for i, k in enumerate(keys):
            running = max(running, min(1.0, (len(keys) - i) * raw[k]))
            holm[k] = running
        for (c, w, p), adj in holm.items():
            r = verdicts[(c, w, label)]
            assert r[3] == best[(c, w)]
            part = next(x for x in r[5].split("; ") if x.startswith(f"vs {p}:"))
            assert part.startswith(f"vs {p}: different") == (adj < 0.01), (c, w, p, adj, part)
            if not log:
                assert "diff " in part          # the difference of means, not a ratio
    assert any("different" in r[5] for r in verdicts.values())      # the fixture exercises a decision


def test_page_only_run_has_no_goodput_tables_and_a_verdict_per_metric(browser):
    d, html = browser
    text = html.read_text()
    md = report_markdown(d)
    assert 'id="table1"' not in text and 'id="heatmaps"' not in text and "## Table 1" not in md
    assert "% difference in geometric mean goodput" not in md
    assert 'id="pages"' in text and 'id="page-verdicts"' in text
    verdicts = _cells(md, "### Page loads: the best protocol per metric")
    metrics = {r[2] for r in verdicts}
    assert {"load (ms)", "DOMContentLoaded (ms)", "TTFB (ms)", "page weight (MB)", "requests"} <= metrics
    rows = read_rows(d)
    for r in verdicts:
        if r[2] == "DOMContentLoaded (ms)":
            g = rows[rows["condition"] == r[0]]
            assert r[3] == g.groupby("protocol")["dom_content_loaded_ms"].mean().idxmin()


def test_a_users_own_kind_gets_its_own_table_not_table1(tmp_path, monkeypatch):
    """A kind registered by a user (tests/fixtures/extension/toy_kind.py's shape): its declared
    metric in a table of its own with a verdict, never in Table 1 (which is object downloads')."""
    from quicbench.model.workload_kinds import KINDS, Metric, WorkloadKind

    class FirstByte(WorkloadKind):
        name = "first-byte"
        title = "First byte: time to the first byte of one object"
        metrics = (Metric("ttfb_ms", "time to first byte"),)

    monkeypatch.setitem(KINDS._drivers, "first-byte", FirstByte)
    rows = []
    for rep in range(1, 5):
        for p, ttfb in (("h1", 3.0), ("h3", 9.0)):
            base = {"condition": "c", "protocol": p, "rep": rep, "status": "ok", "bytes": 10_000, "size_bytes": 10_000,
                    "count": 1, "parallel": 1}
            rows.append({**base, "key": f"c|fb|{p}|r{rep}", "workload": "first-byte:10KB", "kind": "first-byte",
                         "ttfb_ms": ttfb + rep / 10, "goodput_mbps": 20.0 + rep})
            rows.append({**base, "key": f"c|obj|{p}|r{rep}", "workload": "1x10KB/p1", "kind": "objects",
                         "goodput_mbps": 30.0 + rep + (5 if p == "h1" else 0)})
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "meta.json").write_text(json.dumps({"run_id": "k", "plan": {"name": "kinds"}}))
    md = report_markdown(tmp_path)
    table1 = md.split("## Table 1", 1)[1].split("\n## ", 1)[0]
    assert "### 1 × 10KB" in table1 and "first-byte" not in table1
    assert "## First byte: time to the first byte of one object" in md
    (row,) = _cells(md, "### first-byte: the best protocol per metric")
    assert row[2] == "time to first byte (ms)" and row[3] == "h1" and row[4].startswith("ahead of all")
    assert 'id="kind-first-byte"' in write_report(tmp_path).read_text()
