"""Published result pages: every table of docs/results is what its committed data give, and the
mechanism (publish, update, check) does what docs/results/README.md says."""

import gzip
import math
import sys

import pytest

from conftest import REPO
from quicbench.errors import QuicbenchError
from quicbench.report.published import blocks, check, publish, regenerate, section_body, update

FIXTURE = REPO / "tests" / "fixtures" / "goquick-small"
RESULTS = REPO / "docs" / "results"
CPU_RULE_DIR = RESULTS / "runs" / "cpu-rule"     # the CPU-rule experiments' full pages (docs/results/cpu-rule.md sums them up)
PAGES = [p for p in sorted((REPO / "docs" / "results").glob("*.md")) if blocks(p.read_text())]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_published_table_is_what_its_data_give(page):
    assert check(page) == []


def _page(tmp_path, section="Table 1: goodput"):
    data = publish(FIXTURE, tmp_path / "runs" / "small")
    page = tmp_path / "page.md"
    page.write_text(f"# A result\n\nProse stays.\n\n<!-- quicbench:table data=runs/small section=\"{section}\" -->\n"
                    f"<!-- /quicbench:table -->\n\nMore prose.\n")
    return page, data


def test_update_fills_the_table_and_check_then_passes(tmp_path):
    page, _ = _page(tmp_path)
    assert len(check(page)) == 1                       # the empty block is stale
    assert update(page) == 1 and check(page) == [] and update(page) == 0
    text = page.read_text()
    assert text.startswith("# A result\n\nProse stays.\n") and text.endswith("More prose.\n")
    body = blocks(text)[0].body
    assert "| condition |" in body and "Mbit/s" in body


def test_a_number_edited_by_hand_is_caught(tmp_path):
    page, _ = _page(tmp_path)
    update(page)
    text = page.read_text()
    body = blocks(text)[0].body
    digit = next(i for i, ch in enumerate(body) if ch.isdigit() and i > body.index("| 0_0"))
    edited = body[:digit] + str((int(body[digit]) + 1) % 10) + body[digit + 1:]
    page.write_text(text.replace(body, edited))
    problems = check(page)
    assert len(problems) == 1 and "Table 1: goodput" in problems[0] and "results update" in problems[0]


def test_published_data_are_deterministic_and_compressed(tmp_path):
    a = publish(FIXTURE, tmp_path / "a")
    b = publish(FIXTURE, tmp_path / "b")
    assert (a / "trials.jsonl.gz").read_bytes() == (b / "trials.jsonl.gz").read_bytes()
    assert gzip.decompress((a / "trials.jsonl.gz").read_bytes()) == (FIXTURE / "trials.jsonl").read_bytes()


def test_errors_name_the_section_and_the_data(tmp_path):
    page, data = _page(tmp_path, section="No such table")
    with pytest.raises(QuicbenchError, match='section "No such table": no such heading.*Table 1: goodput'):
        regenerate(page)
    (data / "trials.jsonl.gz").unlink()
    with pytest.raises(QuicbenchError, match="missing trials.jsonl.gz"):
        regenerate(page)
    empty = tmp_path / "empty.md"
    empty.write_text("# nothing generated\n")
    with pytest.raises(QuicbenchError, match="no <!-- quicbench:table"):
        regenerate(empty)


def test_section_body_stops_at_the_next_heading_of_its_level():
    md = "# R\n\n## A\n\ntext a\n\n### A.1\n\nsub\n\n## B\n\ntext b\n"
    assert section_body(md, "A") == "text a\n\n### A.1\n\nsub\n"
    assert section_body(md, "A.1") == "sub\n"


def test_a_block_may_name_the_studies_its_report_is_set_beside():
    from quicbench.report.published import blocks
    text = ('intro\n<!-- quicbench:table data=runs/x section="Table 1: goodput" study="go-quick,factors" -->\n'
            'old\n<!-- /quicbench:table -->\n<!-- quicbench:table data=runs/x section="Run" -->\nb\n'
            '<!-- /quicbench:table -->\n')
    a, b = blocks(text)
    assert (a.section, a.study, a.body) == ("Table 1: goodput", "go-quick,factors", "old\n")
    assert (b.section, b.study) == ("Run", None)


CPU_RULE_PAGES = {      # page: (quiet runs, hog runs) in pair order
    "bulk.md": (["cpu-rule-bulk-a-quiet", "cpu-rule-bulk-b-quiet"], ["cpu-rule-bulk-a-hog", "cpu-rule-bulk-b-hog"]),
    "short.md": (["cpu-rule-short-a-quiet", "cpu-rule-short-b-quiet"], ["cpu-rule-short-a-hog", "cpu-rule-short-b-hog"]),
    "short-heldout.md": (["cpu-rule-short-c-quiet"], ["cpu-rule-short-c-hog"]),
    "default.md": ([f"cpu-rule-default-{x}-quiet" for x in "abcd"], [f"cpu-rule-default-{x}-hog" for x in "abcd"]),
    "default-heldout.md": ([f"cpu-rule-default-{x}-quiet" for x in "efgh"],
                           [f"cpu-rule-default-{x}-hog" for x in "efgh"]),
    "default-seeded.md": ([f"cpu-rule-seeded-{x}-quiet" for x in "abcd"], [f"cpu-rule-seeded-{x}-hog" for x in "abcd"]),
    "default-all.md": ([f"cpu-rule-default-{x}-quiet" for x in "abcdefgh"],
                       [f"cpu-rule-default-{x}-hog" for x in "abcdefgh"]),
    "default-hogs4.md": ([f"cpu-rule-hogs4-{x}-quiet" for x in "abcd"], [f"cpu-rule-hogs4-{x}-hog" for x in "abcd"]),
}
CPU_RULE_NOTES = {"default-all.md": "cpu-rule-default-all-notes.md"}     # pages that pool other pages' runs


def cpu_rule_tool():
    import importlib.util
    spec = importlib.util.spec_from_file_location("cpu_rule", RESULTS.parents[1] / "tools" / "experiments" / "cpu_rule.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules["cpu_rule"] = tool           # its dataclasses look their module up
    spec.loader.exec_module(tool)
    return tool


@pytest.mark.parametrize("name", sorted(CPU_RULE_PAGES))
def test_the_cpu_rule_pages_are_what_their_committed_runs_give(tmp_path, name):
    """The CPU-rule pages (docs/results/runs/cpu-rule/) are written by tools/experiments/cpu_rule.py
    from pairs of runs; with their committed rows the tool writes the same pages again."""
    quiet, hog = ([str(RESULTS / "runs" / d) for d in ds] for ds in CPU_RULE_PAGES[name])
    tool = cpu_rule_tool()
    out = tmp_path / name
    notes = ["--notes", str(RESULTS / "runs" / CPU_RULE_NOTES[name])] if name in CPU_RULE_NOTES else []
    assert tool.main(["--quiet", *quiet, "--hog", *hog, *notes, "--page", str(out)]) == 0
    assert out.read_text() == (CPU_RULE_DIR / name).read_text()


def test_a_trial_slower_than_its_siblings_is_flagged_only_when_the_cpu_waits_cover_the_extra_time():
    from quicbench.cpu import PathCpu
    tool = cpu_rule_tool()

    def trial(seconds: float, client_wait: float) -> object:
        e = PathCpu(seconds, {"client": 0.01, "server": 0.01, "link": 0.0},
                    {"client": client_wait, "server": 0.0, "link": 0.0})
        return tool.Trial("hog", 0, "c|r1", {}, e, True, cell_median_s=0.2)

    rule = tool.slower_than_siblings(0.05, 1.0)
    assert rule(trial(0.23, 0.03)) == ["client"]       # 15 % slower, waited all of the 30 ms
    assert rule(trial(0.23, 0.02)) == []               # waited 20 of the 30 ms
    assert rule(trial(0.205, 0.05)) == []              # 2.5 % slower: within a loss-free cell's spread
    assert tool.slower_than_siblings(0.05, 0.5)(trial(0.23, 0.02)) == ["client"]


@pytest.mark.parametrize("pair", "abcd")
def test_the_report_flags_the_trials_the_experiment_judged_slowed_by_the_cpu(pair):
    """The report's after-the-run judgement (honesty.cpu_slowed_trials) and the experiment's
    (tools/experiments/cpu_rule.py) flag the same trials of a committed default-plan hog run."""
    from quicbench.analysis.honesty import cpu_slowed_trials
    from quicbench.analysis.load import load_run
    tool = cpu_rule_tool()
    run_dir = RESULTS / "runs" / f"cpu-rule-default-{pair}-hog"
    trials, _ = tool.build_trials([(RESULTS / "runs" / f"cpu-rule-default-{pair}-quiet", run_dir)], tool.MIN_CHANGE)
    rule = tool.slower_than_siblings(0.05, 1.0)
    by_tool = sorted(t.key for t in trials if t.run == "hog" and rule(t))
    report = cpu_slowed_trials(load_run(run_dir))
    by_report = sorted(f"{c}|{w}|{p}|caddy|r{r}" for c, w, p, r in
                       zip(report["condition"], report["workload"], report["protocol"], report["rep"]))
    assert by_report == by_tool
    assert pair == "a" or by_tool              # pairs b-d each have broadband trials the hogs slowed


def test_the_report_lists_the_trials_the_cpu_slowed():
    from quicbench.report.published import report_of
    text = report_of(RESULTS / "runs" / "cpu-rule-default-d-hog")
    assert "3 of 63 successful trials took ≥ 5 % longer than their cell's median" in text
    table = section_body(text, "Trials the CPU slowed (judged after the run)")
    assert [line.split(" | ")[2:4] for line in table.splitlines() if line.startswith("| broadband")] == \
        [["h1", "1"], ["h1", "5"], ["h3", "2"]]


def test_the_noise_floor_only_takes_moves_out_of_the_truth_and_a_flag_on_a_closed_path_counts_against_the_rule():
    from quicbench.cpu import PathCpu
    tool = cpu_rule_tool()
    e = PathCpu(0.2, {"client": 0.01, "server": 0.01, "link": 0.0}, {"client": 0.0, "server": 0.0, "link": 0.0})
    trials = [tool.Trial("hog", 0, f"{c}|w|h1|caddy|r{i}", {"condition": c}, e, moved)
              for c, i, moved in (("lossy", 1, True), ("lossy", 2, False), ("fast", 1, True), ("fast", 2, False))]
    tool.apply_noise_floor(trials, {"lossy": False, "fast": True})
    assert [t.moved_over_floor for t in trials] == [False, False, True, False]
    every = lambda _: ["client"]                        # noqa: E731  flags every trial
    plain, floor = tool.score("all", every, trials), tool.score("all", every, trials, truth_of="moved_over_floor")
    assert (plain.tp, plain.fp, plain.fn) == (2, 2, 0)
    assert (floor.tp, floor.fp, floor.fn) == (1, 3, 0)   # the lossy path's move is now a false positive
    tool.apply_noise_floor(trials, {})                  # one pair: no quiet run to leave out, not judged
    assert [t.moved_over_floor for t in trials] == [False, False, True, False]    # unchanged


def test_a_seeded_runs_report_says_its_samples_share_their_draws():
    """A run with link_seed (plans/default-seeded.toml) says so in the report's method; an unseeded one does not."""
    from quicbench.analysis.load import load_run
    from quicbench.analysis.report_data import build_report_data
    seeded = build_report_data(load_run(RESULTS / "runs" / "cpu-rule-seeded-a-quiet")).method_text
    plain = build_report_data(load_run(RESULTS / "runs" / "cpu-rule-default-a-quiet")).method_text
    assert "link_seed" in seeded and "negatively" in seeded and "without link_seed" in seeded
    assert "link_seed" not in plain


def test_the_seed_pairing_page_is_what_its_committed_runs_give(tmp_path):
    """docs/results/seed-pairing.md is written by tools/experiments/seed_pairing.py from committed
    quiet runs; with them the tool writes the same page again."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("seed_pairing", REPO / "tools" / "experiments" / "seed_pairing.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = tmp_path / "seed-pairing.md"
    runs = RESULTS / "runs"
    assert tool.main(["--seeded", *[str(runs / f"cpu-rule-seeded-{x}-quiet") for x in "abcd"],
                      "--unseeded", *[str(runs / f"cpu-rule-default-{x}-quiet") for x in "abcdefgh"],
                      "--page", str(out)]) == 0
    assert out.read_text() == (RESULTS / "seed-pairing.md").read_text()


def _trial(tool, run, cond, proto, wait, moved, goodput=10.0, i=1):
    from quicbench.cpu import PathCpu
    e = PathCpu(1.0, {"client": 0.1, "server": 0.1, "link": 0.0}, {"client": wait, "server": 0.0, "link": 0.0},
                goodput_mbps=goodput, link_mbit=100.0)
    return tool.Trial(run, 0, f"{cond}|w|{proto}|caddy|r{i}", {"condition": cond, "protocol": proto,
                                                              "goodput_mbps": goodput}, e, moved)


def test_the_ceiling_fits_a_threshold_per_condition_and_protocol_and_never_flags_a_quiet_trial():
    tool = cpu_rule_tool()
    # path A separates (the moved trials waited longest), path B not at all (the moved one waited least)
    trials = [_trial(tool, "hog", "A", "h1", w, m) for w, m in ((0.5, True), (0.4, True), (0.1, False), (0.05, False))]
    trials += [_trial(tool, "hog", "B", "h1", w, m) for w, m in ((0.01, True), (0.3, False), (0.2, False))]
    trials += [_trial(tool, "quiet", "A", "h1", 0.9, False)]      # a quiet trial that waited longest: not flagged
    c = tool.evidence_ceiling(trials)
    assert c.positives == 3
    # flag A's two (2 TP, 0 FP): precision 1, recall 2/3; taking B's too flags all of B (1 TP, 2 FP): 3/5, 1
    assert (c.tp, c.fp) == (2, 0) and c.worst == pytest.approx(2 / 3)
    sep = {g: p for g, _, _, p in tool.wait_separation(trials)}
    assert sep[("A", "h1")] < 0.2 < 0.9 < sep[("B", "h1")]
    trials[4].moved = None                                        # a trial the truth cannot judge is left out
    assert tool.evidence_ceiling(trials).positives == 2


def test_a_cells_shift_with_the_hogs_is_tested_with_the_reports_method():
    import random
    tool = cpu_rule_tool()
    rng = random.Random(3)
    trials = []
    for i in range(30):
        g = math.exp(rng.gauss(0, 0.02))
        jitter = math.exp(rng.gauss(0, 0.005))
        trials += [_trial(tool, "quiet", "same", "h1", 0, False, 10 * g, i),
                   _trial(tool, "hog", "same", "h1", 0, False, 10 * g * jitter, i)]
        trials += [_trial(tool, "quiet", "slow", "h1", 0, False, 10 * g, i), _trial(tool, "hog", "slow", "h1", 0, False, 7 * g, i)]
    shifts = dict(tool.cell_shifts(trials, 0.05))
    assert tool.shift_verdict(shifts["same|w|h1|caddy"]) == "equivalent within ±5 %"
    slow = shifts["slow|w|h1|caddy"]
    assert tool.shift_verdict(slow) == "slower with the hogs" and slow.ratio == pytest.approx(0.7, rel=0.02)


def test_compare_tests_two_runs_seeded_alike_in_pairs_of_twins():
    """Two quiet runs of plans/default-seeded.toml: every cell compared in pairs (same row
    link_seed), the satellite ratios far tighter than two unseeded runs' unpaired ones; with
    another plan seed in one of them, no pairs and the unpaired test."""
    from quicbench.analysis.compare import build_compare_data
    from quicbench.analysis.load import load_run
    runs = RESULTS / "runs"
    a, b = load_run(runs / "cpu-rule-seeded-a-quiet"), load_run(runs / "cpu-rule-seeded-b-quiet")
    seeded = build_compare_data(a, b)
    assert "in pairs" in seeded.method_text and seeded.n_tested == 9
    plain = build_compare_data(load_run(runs / "cpu-rule-default-a-quiet"), load_run(runs / "cpu-rule-default-b-quiet"))
    assert "in pairs" not in plain.method_text

    def width(data, condition):
        f = data.frame[data.frame["condition"] == condition]
        return float((f["ratio_high"] / f["ratio_low"]).max())
    assert width(seeded, "satellite") < 1.01 < width(plain, "satellite")
    b.meta["plan"]["seed"] = 2
    assert "in pairs" not in build_compare_data(a, b).method_text
