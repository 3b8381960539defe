"""Studies as data (model/study.py, analysis/studies.py): a toy study declared in one file of a test
fixture is set beside a small synthetic run, and its reference-vs-ours table, Table 1 columns,
claims and figure are what an independent computation on the rows says; the built-in studies
load; bad study files and plan keys are refused naming the field."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

from quicbench.analysis import load_run
from quicbench.analysis.report_data import build_report_data
from quicbench.errors import QuicbenchError
from quicbench.model.plan import load_plan, plan_from_dict
from quicbench.model.study import available, find_study, load_study, read_reference_csv
from quicbench.report import report_markdown, write_report
from quicbench.run.preflight import check_plan

REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "fixtures" / "studies" / "toy-study.toml"
# (condition, per-direction delay ms, loss %) and the goodput each protocol has there (Mbit/s)
CONDS = [("near", 10.4, 0.0), ("far", 100.0, 0.0), ("lossy", 10.0, 1.0)]
GOODPUT = {("near", "h1"): 45.0, ("near", "h2"): 38.0, ("near", "h3"): 28.0,
           ("far", "h1"): 4.0, ("far", "h2"): 4.1, ("far", "h3"): 6.5,
           ("lossy", "h1"): 9.0, ("lossy", "h2"): 9.2, ("lossy", "h3"): 12.0}
WORKLOADS = [("1x1MB/p1", 1_000_000, 1), ("10x10KB/p10", 10_000, 10)]


def synthetic_run(d: Path, study: str | None = str(TOY), reps: int = 6) -> Path:
    rng = np.random.default_rng(5)
    rows = []
    for c, delay, loss in CONDS:
        for w, size, count in WORKLOADS:
            for p in ("h1", "h2", "h3"):
                for rep in range(1, reps + 1):
                    g = GOODPUT[(c, p)] * (0.2 if size == 10_000 else 1.0) * float(rng.lognormal(0, 0.05))
                    rows.append({"key": f"{c}|{w}|{p}|caddy|r{rep}", "condition": c, "workload": w, "kind": "objects",
                                 "protocol": p, "server": "caddy", "client": "qb-load", "rep": rep, "status": "ok",
                                 "size_bytes": size, "count": count, "parallel": count, "bytes": size * count,
                                 "goodput_mbps": g, "total_time_s": size * count * 8 / (g * 1e6)})
    heads = {c: {"delay_ms": delay, "loss_pct": loss, "rate_mbit": None, "jitter_ms": 0.0, "spikes": False,
                 "rtt_ms": 2 * delay} for c, delay, loss in CONDS}
    plan = {"name": "toy-run", "workloads": [{"size": "1MB"}, {"size": "10KB", "count": 10}],
            "conditions": [{"name": c, "delay_ms": delay, "loss_pct": loss} for c, delay, loss in CONDS]}
    if study:
        plan["study"] = study
    return write_run(d, plan, heads, rows)


def write_run(d: Path, plan: dict, heads: dict, rows: list[dict]) -> Path:
    """A run directory of these rows: meta.json (plan, condition headlines) and trials.jsonl."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "meta.json").write_text(json.dumps({"run_id": d.name, "plan": plan, "conditions": heads}))
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def sample(d: Path, c: str, w: str, p: str) -> np.ndarray:
    rows = [json.loads(l) for l in (d / "trials.jsonl").read_text().splitlines()]
    return np.array([r["goodput_mbps"] for r in rows if (r["condition"], r["workload"], r["protocol"]) == (c, w, p)])


def holm(ps: dict) -> dict:
    keys = sorted(ps, key=ps.get)
    out, running = {}, 0.0
    for i, k in enumerate(keys):
        running = max(running, min(1.0, (len(keys) - i) * ps[k]))
        out[k] = running
    return out


def test_toy_study_is_matched_by_condition_parameters_and_workload(tmp_path):
    d = synthetic_run(tmp_path / "run")
    data = build_report_data(load_run(d))
    (sd,) = data.studies
    assert sd.study.name == "toy-paper" and sd.why == "named"
    got = {(r.condition, r.workload, r.protocol): r.value_metric for r in sd.refs.itertuples()}
    # near: 10.4 ms is within the declared 1 ms of 10; lossy has 1 % loss (the paper had none); the
    # 10 KB workload is not the paper's 1 MB; h2 has no reference; far/h3 has a note and no value
    assert set(got) == {("near", "1x1MB/p1", "h1"), ("near", "1x1MB/p1", "h3"), ("far", "1x1MB/p1", "h1"),
                        ("far", "1x1MB/p1", "h3")}
    assert got[("near", "1x1MB/p1", "h1")] == pytest.approx(40.0)          # 40000 kbit/s in Mbit/s
    assert got[("far", "1x1MB/p1", "h1")] == pytest.approx(5.0)
    assert math.isnan(got[("far", "1x1MB/p1", "h3")])
    far_h3 = sd.refs[(sd.refs["condition"] == "far") & (sd.refs["protocol"] == "h3")].iloc[0]
    assert "crashed" in far_h3["note"] and far_h3["value_text"] == "–"


def test_toy_study_reference_vs_ours_table(tmp_path):
    d = synthetic_run(tmp_path / "run")
    data = build_report_data(load_run(d))
    (table,) = [t for t in data.studies[0].tables if t.get("id") == "toy-table"]
    (group,) = table["groups"]
    assert group["title"] == "1MB downloads" and group["ways"] == ["ours"]
    rows = {r["condition"]: r for r in group["rows"]}
    assert set(rows) == {"near", "far"}                      # lossy matches nothing of the paper
    near, far = rows["near"], rows["far"]
    assert near["ref"] == {"h1": pytest.approx(40.0), "h2": None, "h3": pytest.approx(30.0)}
    assert near["ref_rank"] == "h1 > h3" and far["ref_rank"] == "h1"
    for c, r in rows.items():
        means = {p: np.exp(np.log(sample(d, c, "1x1MB/p1", p)).mean()) for p in ("h1", "h2", "h3")}   # geometric
        for p, m in means.items():
            assert r["ours"]["cells"][p]["mean"] == pytest.approx(m) and r["ours"]["cells"][p]["n"] == 6
        assert r["ours"]["rank"] == " > ".join(sorted(means, key=lambda p: -means[p]))
    # near: ours ranks h1 > h3 as the paper does; far: ours has h3 ahead of h1, the paper only h1
    assert not near["ours"]["differs"] and not far["ours"]["differs"]
    # the verdict is the best protocol's against each other one (Holm over the objects' Table 1)
    s = data.summary.set_index(["condition", "workload", "protocol"])
    assert near["ours"]["verdict"] == s.loc[("near", "1x1MB/p1", "h1"), "cell_verdict"]
    md = report_markdown(d)
    assert "## Toy paper's Table 2 beside ours" in md and "### 1MB downloads" in md
    line = next(l for l in md.splitlines() if l.startswith("| near | 40 | – | 30 | h1 > h3 |"))
    assert f"{near['ours']['cells']['h1']['mean']:.4g} (n=6)" in line
    html = write_report(d).read_text()
    assert 'id="toy-table"' in html and "paper ranking" in html and 'data-study="toy-paper"' in html


def test_toy_study_columns_beside_table1_and_figure(tmp_path):
    d = synthetic_run(tmp_path / "run")
    data = build_report_data(load_run(d))
    (blk,) = [b for b in data.table1 if b["workload"] == "1x1MB/p1"]
    assert blk["has_ref"] and blk["ref_label"] == "paper"
    near = next(r for r in blk["rows"] if r["condition"] == "near")
    assert [c["ref"] for c in near["cells"]] == [pytest.approx(40.0), None, pytest.approx(30.0)]
    assert near["ref_best"] == "h1" and near["ref_agrees"] == (near["best"] == "h1")
    other = next(b for b in data.table1 if b["workload"] == "10x10KB/p10")
    assert not other["has_ref"]
    html = write_report(d).read_text()
    assert "<th class=\"num\">paper h1</th>" in html and "The grey columns are the toy paper's" in html.replace(
        "&#39;", "'")
    assert 'id="toy"' in html and 'id="toy-goodput"' in html and "Hollow markers: the paper" in html
    # the study's figure replaces the default goodput-vs-condition figure
    assert 'id="goodput-vs-condition"' not in html


def test_toy_study_claim_checked_with_holm_over_the_comparison(tmp_path):
    d = synthetic_run(tmp_path / "run")
    data = build_report_data(load_run(d))
    (claim,) = data.studies[0].claims
    (check,) = claim["checks"]
    # independently: Welch on log goodput h1 vs h3 in each cell the claim is about (delay 10 ms,
    # within the study's 1 ms tolerance, on the paper's workload: 1 MB), Holm over those cells
    # (the family: every judged cell of the study's claims)
    raw = {(c, "1x1MB/p1"): st.ttest_ind(np.log(sample(d, c, "1x1MB/p1", "h1")),
                                         np.log(sample(d, c, "1x1MB/p1", "h3")), equal_var=False).pvalue
           for c in ("near", "lossy")}
    adj = holm(raw)
    cells = {(x["condition"], x["workload"]): x for x in check["cells"]}
    assert set(cells) == {("near", "1x1MB/p1"), ("lossy", "1x1MB/p1")}
    for k, x in cells.items():
        assert x["p"] == pytest.approx(adj[k])
        higher = sample(d, *k, "h1").mean() > sample(d, *k, "h3").mean()
        want = ("agrees" if higher else "contradicts") if adj[k] < 0.01 else x["outcome"]
        assert x["outcome"] == want
    assert cells[("near", "1x1MB/p1")]["outcome"] == "agrees"
    assert cells[("lossy", "1x1MB/p1")]["outcome"] == "contradicts"    # h3 is ahead there
    assert check["result"] == "mixed"
    md = report_markdown(d)
    assert "TCP is faster than QUIC near the server." in md and "| mixed |" in md


def test_a_run_without_a_plan_study_gets_the_study_its_name_applies(tmp_path):
    d = synthetic_run(tmp_path / "go-quick-like", study=None)
    meta = json.loads((d / "meta.json").read_text())
    meta["plan"]["name"] = "my-go-quick-variant"
    (d / "meta.json").write_text(json.dumps(meta))
    data = build_report_data(load_run(d))
    assert [(s.study.name, s.why) for s in data.studies] == [("go-quick", "plan name")]
    # a study asked for explicitly wins over the plan's (quicbench report --study)
    data = build_report_data(load_run(d), studies=[str(TOY)])
    assert [s.study.name for s in data.studies] == ["toy-paper"]
    meta["plan"]["name"] = "unrelated"
    (d / "meta.json").write_text(json.dumps(meta))
    data = build_report_data(load_run(d))
    assert data.studies == [] and any("No study's reference values" in m for m in data.missing)


def test_builtin_studies_load_and_say_where_each_number_is():
    assert {"go-quick", "cvart", "dncs-http3"} <= set(available())
    for name in ("go-quick", "cvart", "dncs-http3"):
        s = find_study(name)
        assert s.references and all(r.where for r in s.references)
        assert all(r.value is not None or r.note for r in s.references)
    gq = find_study("go-quick")
    assert len(gq.references) == 45 and {r.size_bytes for r in gq.references} == {1069168, 103250, 10215}
    # CVart prints no number: every reference says so instead of a value
    assert all(r.value is None and "no number" in r.note for r in find_study("cvart").references)
    dncs = {(r.protocol, r.quantity): r for r in find_study("dncs-http3").references}
    assert dncs[("h3", "Load time")].value_in_metric_unit == pytest.approx(3960.0)        # 3.96 sec in ms
    # the hls.js demo's panel: fragment latency in ms; the "MB/s" it printed for fragAvgKbps read as Mbit/s
    assert dncs[("h2", "Avg latency")].metric == "frag_latency_ms_mean"
    bitrate = dncs[("h2", "Avg bitrate")]
    assert bitrate.metric == "frag_kbps_mean" and bitrate.value_in_metric_unit == pytest.approx(139570.0)
    assert "our reading" in bitrate.note


@pytest.mark.parametrize("text,needle", [
    ("protocol,metric,quantity,value,unit,where\nh1,goodput_mbps,goodput,,Mbit/s,Table 1\n", "no value and no note"),
    ("protocol,metric,quantity,value,unit,where\nh1,speed,goodput,3,Mbit/s,Table 1\n", "unknown metric 'speed'"),
    ("protocol,metric,quantity,value,unit,where,colour\nh1,goodput_mbps,goodput,3,Mbit/s,T1,red\n",
     "unknown column 'colour'"),
    ("protocol,metric,quantity,value,unit,where,spikes\nh1,goodput_mbps,goodput,3,Mbit/s,T1,maybe\n", "spikes"),
])
def test_bad_reference_rows_are_refused_naming_the_field(text, needle):
    with pytest.raises(QuicbenchError) as e:
        read_reference_csv(text, "ref.csv")
    msg = str(e.value)
    assert needle in msg and msg.startswith("ref.csv")
    assert "line 2" in msg or "accepted: protocol" in msg      # the row, or the columns accepted


def test_bad_study_files_are_refused(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('name = "x"\ntitle = "x"\ndocument = "d"\n[match]\ncondition = ["colour"]\n')
    with pytest.raises(QuicbenchError, match="match.condition"):
        load_study(f)
    f.write_text('name = "x"\ntitle = "x"\ndocument = "d"\n[[figures]]\nkind = "pie"\n')
    with pytest.raises(QuicbenchError, match="figures"):
        load_study(f)
    with pytest.raises(QuicbenchError, match="unknown study 'nope', accepted: .*go-quick"):
        find_study("nope")


def test_plan_study_key(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text(f'study = "{TOY.name}"\n[[workloads]]\nsize = "1MB"\n')
    (tmp_path / TOY.name).write_text(TOY.read_text())
    p = load_plan(plan)
    assert p.study == str(tmp_path / TOY.name)          # a file is relative to the plan
    check_plan(p, str(plan))
    with pytest.raises(QuicbenchError, match="study: unknown study 'no-such-study'"):
        check_plan(plan_from_dict({"workloads": [{"size": "1MB"}], "study": "no-such-study"}), "p")
    with pytest.raises(QuicbenchError, match="study"):
        plan_from_dict({"workloads": [{"size": "1MB"}], "study": "Bad Name!"})
    from quicbench.run.runner import plan_fingerprint
    base = plan_from_dict({"workloads": [{"size": "1MB"}]})
    assert plan_fingerprint(base) == plan_fingerprint(plan_from_dict({"workloads": [{"size": "1MB"}],
                                                                      "study": "go-quick"}))


def test_report_command_takes_a_study(tmp_path):
    from conftest import run_qb
    d = synthetic_run(tmp_path / "run", study=None)
    r = run_qb("report", str(d), "--format", "md", "--study", str(TOY))
    assert r.returncode == 0, r.stderr
    assert "## Toy paper's Table 2 beside ours" in r.stdout
    bad = run_qb("report", str(d), "--study", "no-such-study")
    assert bad.returncode == 2 and "--study: unknown study 'no-such-study', accepted:" in bad.stderr
    assert not (d / "report.html").exists()


def test_dncs_page_table_beside_a_page_run(tmp_path):
    """DNCS-HTTP3's page table (study dncs-http3) beside a synthetic page-only run on the LAN: the
    seed's printed units converted (10.1 MB, 3.96 sec), its identical weights ranked as ties, and a
    condition with a rate that drops not matched (the seed had no emulated impairment)."""
    rng = np.random.default_rng(2)
    rows = []
    for c in ("dncs_lan", "abr_spikes"):
        for p, load in (("h1", 700.0), ("h2", 600.0), ("h3", 800.0)):
            for rep in range(1, 5):
                rows.append({"key": f"{c}|page:realistic|{p}|r{rep}", "condition": c, "workload": "page:realistic",
                             "kind": "page", "protocol": p, "rep": rep, "status": "ok",
                             "page_load_ms": load * float(rng.lognormal(0, 0.05)), "page_ttfb_ms": 2.0 + rep / 10,
                             "dom_content_loaded_ms": load / 2, "page_weight_bytes": 10_240_000 + rep,
                             "page_requests": 125})
    heads = {"dncs_lan": {"delay_ms": 0.5, "loss_pct": 0.0, "rate_mbit": None, "jitter_ms": 0.0, "spikes": False},
             "abr_spikes": {"delay_ms": 20.0, "loss_pct": 0.0, "rate_mbit": 8.0, "jitter_ms": 0.0, "spikes": True}}
    plan = {"name": "dncs-pages", "study": "dncs-http3", "workloads": [{"kind": "page", "page": "realistic"}]}
    (tmp_path / "meta.json").write_text(json.dumps({"run_id": "p", "plan": plan, "conditions": heads}))
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = build_report_data(load_run(tmp_path))
    (sd,) = data.studies
    assert set(sd.refs["condition"]) == {"dncs_lan"} and set(sd.refs["ref_kind"]) == {"page"}
    (table,) = [t for t in sd.tables if t.get("id") == "dncs-page"]
    rows_by = {r["metric"]: r for r in table["groups"][0]["rows"]}
    assert list(rows_by) == ["page_weight_bytes", "page_ttfb_ms", "page_load_ms", "page_requests"]
    assert rows_by["page_load_ms"]["ref"] == {"h1": pytest.approx(2490), "h2": pytest.approx(2570),
                                              "h3": pytest.approx(3960)}
    assert rows_by["page_weight_bytes"]["ref_rank"] == "h1 = h2 = h3"
    assert not rows_by["page_weight_bytes"]["ours"]["differs"]          # ties are not a ranking to differ from
    # our means put h2 before h1 where the seed put h1 first, but h2 vs h1 is inconclusive: no ≠
    ours = rows_by["page_load_ms"]["ours"]
    assert ours["rank"] == "h2 < h1 < h3" and ours["differs_by_estimate"] and "inconclusive vs h1" in ours["verdict"]
    assert not ours["differs"] and not ours["best_differs"]


def _go_quick_methods_row(tmp_path, rows, size, pages):
    """A go-quick-seed run at 25_1 from these rows; its methods table's one row."""
    workloads = [{"size": f"{size}B", "count": 10, "connections": "per-object"}]
    if pages:
        workloads.append({"kind": "page", "size": f"{size}B", "count": 10})
    plan = {"name": "go-quick-seed", "study": "go-quick", "protocols": ["h1", "h2", "h3"], "workloads": workloads,
            "conditions": [{"name": "25_1", "delay_ms": 25, "loss_pct": 1}]}
    d = tmp_path / "run"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"run_id": "run", "plan": plan, "conditions": {"25_1": {
        "delay_ms": 25, "loss_pct": 1, "rate_mbit": None, "jitter_ms": 0, "spikes": False, "rtt_ms": 50}}}))
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (sd,) = build_report_data(load_run(d)).studies
    (group,) = next(t for t in sd.tables if t["id"] == "methods")["groups"]
    (row,) = group["rows"]
    return d, row


def test_go_quick_seeds_method_takes_h2_from_page_loads(tmp_path):
    """Go-Quick measured h1/h3 with getFiles (one connection per file) and h2 with Chrome page loads:
    the methods table's "the seed's method" column takes h2's cell from the page workload, h1's and
    h3's from the per-object downloads, and tests the best against each other protocol on their own
    trials (Welch on log goodput, Holm over the table's comparisons)."""
    rng = np.random.default_rng(7)
    size, reps = 1069168, 6
    obj, page = "10x1069168B/p10/per-object", "page:10x1069168B"
    mean = {(obj, "h1"): 20.0, (obj, "h2"): 21.0, (obj, "h3"): 9.0, (page, "h1"): 30.0, (page, "h2"): 3.0}
    rows = []
    for (w, p), g0 in mean.items():
        for rep in range(1, reps + 1):
            g = g0 * float(rng.lognormal(0, 0.05))
            rows.append({"key": f"25_1|{w}|{p}|caddy|r{rep}", "condition": "25_1", "workload": w, "protocol": p,
                         "kind": "page" if w == page else "objects", "server": "caddy", "rep": rep, "status": "ok",
                         "client": "browser" if w == page else "qb-load", "size_bytes": size, "count": 10,
                         "parallel": 10, "bytes": 10 * size, "goodput_mbps": g, "page_load_ms": 8e4 * size / g / 1e6,
                         "total_time_s": 80 * size / (g * 1e6)})
    d, row = _go_quick_methods_row(tmp_path, rows, size, pages=True)
    seed_way = row["the seed's method"]
    assert seed_way["workloads"] == {"h1": obj, "h2": page, "h3": obj}
    assert seed_way["cells"]["h2"]["mean"] == pytest.approx(np.exp(np.log(sample(d, "25_1", page, "h2")).mean()))
    assert seed_way["rank"] == "h1 > h3 > h2" and seed_way["best"] == "h1"
    # h1 (objects) against h3 (objects) and h2 (pages): Welch on logs, Holm over these two
    raw = {p: st.ttest_ind(np.log(sample(d, "25_1", obj, "h1")), np.log(sample(d, "25_1", w, p)),
                           equal_var=False).pvalue for p, w in (("h3", obj), ("h2", page))}
    assert seed_way["verdict"] == "ahead of all" and seed_way["p"] == pytest.approx(max(holm(raw).values()))
    # the other ways: every protocol per object; the Chrome pages of h1 and h2
    assert row["per-object"]["workloads"] == {"h1": obj, "h2": obj, "h3": obj}
    pages = row["Chrome pages"]
    assert pages["workloads"]["h1"] == pages["workloads"]["h2"] == page and pages["cells"]["h3"] is None
    assert row["ref_rank"].startswith("http") is False and row["ref"]["h2"] == pytest.approx(31.96)


def test_go_quick_seeds_method_without_page_loads_judges_only_its_own_protocols(tmp_path):
    """A run of the getFiles part alone (no page loads): the seed's method has h1 and h3, both per
    object. Its verdict compares those two, never the per-object h2 the way left out."""
    rng = np.random.default_rng(8)
    size, reps = 1069168, 6
    obj = "10x1069168B/p10/per-object"
    mean = {"h1": 20.0, "h2": 40.0, "h3": 9.0}     # per-object h2 far ahead: it must not show
    rows = []
    for p, g0 in mean.items():
        for rep in range(1, reps + 1):
            g = g0 * float(rng.lognormal(0, 0.05))
            rows.append({"key": f"25_1|{obj}|{p}|caddy|r{rep}", "condition": "25_1", "workload": obj, "protocol": p,
                         "kind": "objects", "server": "caddy", "rep": rep, "status": "ok", "client": "qb-load",
                         "size_bytes": size, "count": 10, "parallel": 10, "bytes": 10 * size, "goodput_mbps": g,
                         "total_time_s": 80 * size / (g * 1e6)})
    d, row = _go_quick_methods_row(tmp_path, rows, size, pages=False)
    seed_way = row["the seed's method"]
    assert seed_way["workloads"] == {"h1": obj, "h3": obj} and seed_way["rank"] == "h1 > h3"
    p = st.ttest_ind(np.log(sample(d, "25_1", obj, "h1")), np.log(sample(d, "25_1", obj, "h3")),
                     equal_var=False).pvalue
    assert seed_way["best"] == "h1" and seed_way["verdict"] == "ahead of all" and seed_way["p"] == pytest.approx(p)
    # the per-object way has h2, and its verdict speaks of it
    assert row["per-object"]["best"] == "h2"


def test_variants_table_says_what_one_factor_does(tmp_path):
    """The factors study: each cell of a variant condition (base name + suffix) over the same cell of
    its base, the ratio of geometric means with its CI, Welch on logs, Holm over the table."""
    rng = np.random.default_rng(3)
    rows = []
    means = {("25_1", "h1"): 12.0, ("25_1", "h3"): 4.0, ("25_1_noreorder", "h1"): 11.0,
             ("25_1_noreorder", "h3"): 10.0}
    for (c, p), g0 in means.items():
        for rep in range(1, 7):
            g = g0 * float(rng.lognormal(0, 0.05))
            rows.append({"key": f"{c}|1x1MB/p1|{p}|caddy|r{rep}", "condition": c, "workload": "1x1MB/p1",
                         "kind": "objects", "protocol": p, "server": "caddy", "client": "qb-load", "rep": rep,
                         "status": "ok", "size_bytes": 1_000_000, "count": 1, "parallel": 1, "bytes": 1_000_000,
                         "goodput_mbps": g, "total_time_s": 8 / g})
    plan = {"name": "factor-run", "study": "factors", "workloads": [{"size": "1MB"}],
            "conditions": [{"name": "25_1", "delay_ms": 25, "loss_pct": 1, "jitter_ms": 2.5, "reorder": True},
                           {"name": "25_1_noreorder", "delay_ms": 25, "loss_pct": 1, "jitter_ms": 2.5}]}
    d = tmp_path / "run"
    d.mkdir()
    heads = {c: {"delay_ms": 25, "loss_pct": 1, "rate_mbit": None, "jitter_ms": 2.5, "spikes": False, "rtt_ms": 50}
             for c in ("25_1", "25_1_noreorder")}
    (d / "meta.json").write_text(json.dumps({"run_id": "run", "plan": plan, "conditions": heads}))
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (sd,) = build_report_data(load_run(d)).studies
    (tbl,) = sd.tables
    got = {r["protocol"]: r for r in tbl["variants"]}
    assert set(got) == {"h1", "h3"} and all(r["variant_name"] == "without reordering" for r in got.values())
    raw = {}
    for p in ("h1", "h3"):
        xb, xv = np.log(sample(d, "25_1", "1x1MB/p1", p)), np.log(sample(d, "25_1_noreorder", "1x1MB/p1", p))
        res = got[p]["test"]
        assert res.ratio == pytest.approx(math.exp(xv.mean() - xb.mean()))
        assert res.ratio_low <= res.ratio <= res.ratio_high
        raw[p] = st.ttest_ind(xv, xb, equal_var=False).pvalue
    for p, adj in holm(raw).items():
        assert got[p]["test"].p == pytest.approx(adj)
    assert got["h3"]["test"].verdict == "different" and got["h3"]["test"].ratio > 2
    md = report_markdown(d)
    assert "## One factor at a time: each variant over its condition" in md and "without reordering" in md


def _objects_run(d: Path, plan: dict, heads: dict, cells: dict) -> Path:
    """A synthetic run of one 33.6 MB download per trial: cells = {(condition, protocol): goodput}."""
    rng = np.random.default_rng(5)
    rows = []
    for (c, p), gp in cells.items():
        for rep in range(1, 5):
            g = gp * float(rng.lognormal(0, 0.02))
            rows.append({"key": f"{c}|1x33.6MB/p1|{p}|r{rep}", "condition": c, "workload": "1x33.6MB/p1",
                         "kind": "objects", "size_bytes": 33_600_000, "count": 1, "protocol": p, "rep": rep,
                         "status": "ok", "goodput_mbps": g, "total_time_s": 33.6 * 8 / g,
                         "overhead_pct": 7.0 if p == "h1" else 8.5})
    (d / "meta.json").write_text(json.dumps({"run_id": "c", "plan": plan, "conditions": heads}))
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_cvart_cells_it_plotted_without_numbers_keep_their_rows(tmp_path):
    """CVart printed no number: a cell its plots cover is still a row (the seed's '–' beside ours),
    a cell they do not cover (a delay CVart's series did not name) is none."""
    heads = {c: {"delay_ms": d, "loss_pct": 0.0, "rate_mbit": 100.0, "jitter_ms": 0.0, "spikes": False}
             for c, d in (("bw100_d20", 20.0), ("bw100_d30", 30.0))}
    plan = {"name": "cvart-delay-series", "study": "cvart", "workloads": [{"kind": "objects", "size": "33.6MB"}]}
    run = _objects_run(tmp_path, plan, heads, {(c, p): g for c in heads for p, g in (("h1", 90.0), ("h3", 93.0))})
    (sd,) = build_report_data(load_run(run)).studies
    (table,) = [t for t in sd.tables if t.get("id") == "cvart-matrix"]
    (group,) = table["groups"]                       # the delay series plots total transfer time only
    assert group["group"] == "total transfer time"
    (row,) = group["rows"]
    assert row["condition"] == "bw100_d20" and row["ref_text"] == {"h1": "–", "h3": "–"}
    assert row["ours"]["cells"]["h1"]["mean"] == pytest.approx(33.6 * 8 / 90.0, rel=0.05)
    assert row["ours"]["rank"] == "h3 < h1"


def test_dncs_httpstat_table_reads_the_page_trials_phases(tmp_path):
    rows = []
    for p in ("h1", "h2", "h3"):
        for rep in range(1, 5):
            rows.append({"key": f"dncs_lan|page:realistic|{p}|r{rep}", "condition": "dncs_lan",
                         "workload": "page:realistic", "kind": "page", "protocol": p, "rep": rep, "status": "ok",
                         "page_load_ms": 500.0 + rep, "httpstat_connect_ms": 1.0 + rep / 100,
                         "httpstat_tls_ms": None if p == "h3" else 2.0 + rep / 100,
                         "httpstat_server_ms": 1.5, "httpstat_transfer_ms": 2.0, "httpstat_total_ms": 7.0})
    heads = {"dncs_lan": {"delay_ms": 0.5, "loss_pct": 0.0, "rate_mbit": None, "jitter_ms": 0.0, "spikes": False}}
    plan = {"name": "dncs", "study": "dncs-http3", "workloads": [{"kind": "page", "page": "realistic"}]}
    (tmp_path / "meta.json").write_text(json.dumps({"run_id": "p", "plan": plan, "conditions": heads}))
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (sd,) = build_report_data(load_run(tmp_path)).studies
    (table,) = [t for t in sd.tables if t.get("id") == "dncs-httpstat"]
    rows_by = {r["metric"]: r for r in table["groups"][0]["rows"]}
    assert rows_by["httpstat_connect_ms"]["ref"]["h2"] == pytest.approx(1.0)
    connect = [r["httpstat_connect_ms"] for r in rows if r.get("protocol") == "h2" and r.get("httpstat_connect_ms")]
    assert rows_by["httpstat_connect_ms"]["ours"]["cells"]["h2"]["mean"] == pytest.approx(np.exp(np.mean(np.log(connect))))
    assert rows_by["httpstat_tls_ms"]["ours"]["cells"]["h3"] is None          # QUIC: in the handshake
    assert rows_by["DNS Lookup"]["ours"]["cells"] == {"h1": None, "h2": None, "h3": None}


def _with_claims(tmp_path: Path, checks: str) -> Path:
    """The toy study with its claim's checks replaced (TOML inline tables, one per line)."""
    text = TOY.read_text()
    start = text.index("checks = [", text.index("[[claims]]"))
    end = text.index("]\n", text.index("}", start)) + 2
    study = tmp_path / "toy-thresholds.toml"
    study.write_text(text[:start] + "checks = [\n" + checks + "\n]\n" + text[end:])
    return study


def one_sided_at_bound(a: np.ndarray, b: np.ndarray, bound: float) -> tuple[float, float]:
    """Independently: Welch's t on logs against ln(bound); (log ratio over the bound, one-sided p
    in the direction it lies)."""
    la, lb = np.log(a), np.log(b)
    va, vb = la.var(ddof=1) / la.size, lb.var(ddof=1) / lb.size
    d = la.mean() - lb.mean() - math.log(bound)
    df = (va + vb) ** 2 / (va ** 2 / (la.size - 1) + vb ** 2 / (lb.size - 1))
    return d, float(st.t.sf(abs(d) / math.sqrt(va + vb), df))


def test_a_magnitude_word_is_a_stated_bound_shown_by_a_one_sided_test(tmp_path):
    """'much higher' = h3/h1 at least 1.5 here: agreed where a one-sided test at the bound shows the
    ratio above it, contradicted where one shows it below (h3 ahead, but not by that much), else
    undecided; Holm over the judged cells; the bound and its source are printed with the check."""
    src = "'much higher': a toy reading of the paper's word"
    study = _with_claims(tmp_path, f'{{ metric = "goodput_mbps", a = "h3", b = "h1", expect = "higher", ratio = 1.5, '
                                   f'threshold_source = "{src}" }},')
    d = synthetic_run(tmp_path / "run", study=str(study), reps=8)
    data = build_report_data(load_run(d))
    (check,) = data.studies[0].claims[0]["checks"]
    w = "1x1MB/p1"
    est = {c: one_sided_at_bound(sample(d, c, w, "h3"), sample(d, c, w, "h1"), 1.5) for c, _, _ in CONDS}
    adj = holm({c: p for c, (_, p) in est.items()})
    cells = {x["condition"]: x for x in check["cells"] if x["workload"] == w}
    assert set(cells) == {"near", "far", "lossy"}
    for c, (dd, _) in est.items():
        assert cells[c]["p"] == pytest.approx(adj[c])
        want = ("agrees" if dd > 0 else "contradicts") if adj[c] < 0.01 else "undecided"
        assert cells[c]["outcome"] == want
    # h3 is behind near the server, ahead by 1.33 under loss (below 1.5) and by 1.63 far away
    assert cells["near"]["outcome"] == "contradicts" and cells["lossy"]["outcome"] == "contradicts"
    assert cells["far"]["outcome"] in ("agrees", "undecided")
    # a plain "higher" would agree under loss: the bound is what contradicts it
    md = report_markdown(d)
    assert "h3 higher than h1 on goodput_mbps ≥ ×1.5" in md and src in md


def test_very_close_is_equivalence_within_the_stated_margin(tmp_path):
    # h2/h1 = 1.025 far away (the one cell at 100 ms): shown within ±10 %, not within ±1 %
    checks = ('{ metric = "goodput_mbps", a = "h2", b = "h1", expect = "equivalent", margin_pct = 10, '
              'threshold_source = "toy", conditions = { delay_ms = [100] } },\n'
              '{ metric = "goodput_mbps", a = "h2", b = "h1", expect = "equivalent", margin_pct = 1, '
              'threshold_source = "toy", conditions = { delay_ms = [100] } },')
    d = synthetic_run(tmp_path / "run", study=str(_with_claims(tmp_path, checks)), reps=10)
    wide, narrow = build_report_data(load_run(d)).studies[0].claims[0]["checks"]
    assert len(wide["cells"]) == 1 and wide["result"] == "reproduced" and wide["agrees"] == 1   # the paper's 1 MB
    assert narrow["agrees"] == 0 and narrow["result"] != "reproduced"


def test_a_cpu_bound_cell_is_not_judged(tmp_path):
    d = synthetic_run(tmp_path / "run")
    rows = [json.loads(l) for l in (d / "trials.jsonl").read_text().splitlines()]
    for r in rows:
        r["cpu_bound"] = r["condition"] == "near" and r["protocol"] == "h3" and r["rep"] == 1
        r["link_late"] = r["condition"] == "lossy" and r["protocol"] == "h1" and r["rep"] == 2
    (d / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = build_report_data(load_run(d))
    (check,) = data.studies[0].claims[0]["checks"]
    cells = {x["condition"]: x for x in check["cells"] if x["workload"] == "1x1MB/p1"}
    assert cells["near"]["outcome"] == "cpu_bound" and cells["lossy"]["outcome"] == "link_late"
    assert "p" not in cells["near"]                       # not tested, so not in the Holm family
    assert check["result"] == "not judged here (CPU-bound)"
    md = report_markdown(d)
    assert "| 1 / 1 | not judged here (CPU-bound) |" in md


def test_claim_results_are_judged_on_the_cells_that_are_neither_cpu_bound_nor_link_late():
    from quicbench.analysis.studies import claim_result
    assert claim_result({"agrees": 2, "cpu_bound": 3}) == "reproduced"
    assert claim_result({"agrees": 1, "undecided": 1, "cpu_bound": 3}) == "reproduced in part"
    assert claim_result({"contradicts": 1, "undecided": 1}) == "contradicted in part"
    assert claim_result({"agrees": 1, "contradicts": 1}) == "mixed"
    assert claim_result({"undecided": 2, "equivalent": 1}) == "not decided"
    assert claim_result({"cpu_bound": 1, "link_late": 2}) == "not judged here (CPU-bound)"
    assert claim_result({"link_late": 2}) == "not judged here (link-late)"
    assert claim_result({}) == "not measured"


@pytest.mark.parametrize("check, field", [
    ('{ metric = "goodput_mbps", a = "h3", b = "h1", expect = "equivalent", ratio = 1.25, threshold_source = "x" }',
     "ratio"),
    ('{ metric = "goodput_mbps", a = "h3", b = "h1", expect = "higher", ratio = 0.8, threshold_source = "x" }',
     "ratio 0.8"),
    ('{ metric = "goodput_mbps", a = "h3", b = "h1", expect = "lower", ratio = 1.25, threshold_source = "x" }',
     "ratio 1.25"),
    ('{ metric = "goodput_mbps", a = "h3", b = "h1", expect = "higher", ratio = 1.25 }', "threshold_source"),
    ('{ metric = "goodput_mbps", a = "h3", b = "h1", expect = "higher", margin_pct = 10, threshold_source = "x" }',
     "margin_pct"),
    ('{ metric = "goodput_mbps", a = "h3", b = "h1", expect = "higher", protocols = { h3 = { colour = "red" } } }',
     "colour"),
])
def test_a_bad_threshold_or_way_is_refused_naming_the_field(tmp_path, check, field):
    with pytest.raises(QuicbenchError, match=field):
        load_study(_with_claims(tmp_path, check + ","))


def test_a_ranking_differs_only_on_pairs_ordered_the_other_way():
    from quicbench.analysis.studies import _swapped_pairs
    ref = {"h1": 50.0, "h2": 40.0, "h3": None}
    assert _swapped_pairs(ref, {"h1": 10.0, "h2": 20.0, "h3": 30.0}, higher=True) == [("h2", "h1")]
    assert _swapped_pairs(ref, {"h1": 30.0, "h2": 20.0, "h3": 1.0}, higher=True) == []
    # lower is better: the reference puts h2 first, ours h1
    assert _swapped_pairs(ref, {"h1": 20.0, "h2": 30.0, "h3": 1.0}, higher=False) == [("h1", "h2")]
    assert _swapped_pairs({"h1": 5.0, "h2": 5.0}, {"h1": 1.0, "h2": 2.0}, higher=True) == []   # a tie: no order
