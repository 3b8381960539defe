"""The prose check of `quicbench results check` (report/prose.py): a sentence that says a cell did
not move, is the same, fell or rose by X %, or that something explains why, must cite the table
rows whose verdicts show it; a planted contradicting sentence is caught, in a toy page and in a
copy of a real result page; every Markdown table keeps its columns."""

import shutil

import pytest

from conftest import REPO, run_qb
from quicbench.report.prose import check, default_pages, sentences

TABLE = """| cell | hogs ÷ quiet [95 % CI] | verdict |
|---|---|---|
| broadband\\|h1 | 0.918 [0.860, 0.980] | inconclusive |
| broadband\\|h2 | 0.996 [0.990, 1.001] | equivalent within ±5 % |
| broadband\\|h3 | 0.979 [0.972, 0.987] | slower with the hogs, inside the ±5 % margin |
| lan\\|h3 | 0.904 [0.862, 0.949] | slower with the hogs |
| mobile\\|h3 | 1.30 [1.10, 1.52] | different |
"""


def page(tmp_path, prose: str, table: str = TABLE, name: str = "page.md"):
    p = tmp_path / name
    p.write_text(f"# A result\n\n{table}\n{prose}\n")
    return p


def problems(tmp_path, prose, **kw):
    return check([page(tmp_path, prose, **kw)])


def test_the_published_pages_and_readmes_pass():
    assert check(default_pages(REPO)) == []


@pytest.mark.parametrize("sentence", [
    "Broadband h1 falls 8 % with the hogs.",
    "Broadband h2 did not move.",
    "The load moves broadband h1 and nothing else moves.",
    "The hogs move no cell by 5 %.",
    "Broadband h3 stays where it was.",
    "The lead is the same at 5, 40 and 100 Mbit/s.",
    "That undo explains why it does not collapse.",
    "h1 and h2 are unchanged.",
])
def test_a_claim_about_a_cell_without_a_cited_row_is_caught(tmp_path, sentence):
    (p,) = problems(tmp_path, sentence)
    assert "cites no table row" in p and "quicbench:says" in p


def test_a_planted_contradicting_sentence_is_caught_by_its_row(tmp_path):
    # broadband h1's verdict is inconclusive: "falls 8 %" is not what it says, nor "did not move"
    (p,) = problems(tmp_path, 'Broadband h1 falls 8 % <!-- quicbench:says fell rows="broadband\\|h1" -->.')
    assert "not a difference" in p and "broadband\\|h1" in p
    (p,) = problems(tmp_path, 'Broadband h1 did not move <!-- quicbench:says same rows="broadband\\|h1" -->.')
    assert "within its margin" in p
    # lan h3 fell, shown: 5.1–13.8 % allowed by its interval, so 30 % is caught, 10 % is not
    (p,) = problems(tmp_path, 'LAN h3 falls 30 % <!-- quicbench:says fell rows="lan\\|h3" -->.')
    assert "outside the change" in p
    assert problems(tmp_path, 'LAN h3 falls 10 % <!-- quicbench:says fell rows="lan\\|h3" -->.') == []
    # a rise said of a fall
    (p,) = problems(tmp_path, 'LAN h3 rose 10 % <!-- quicbench:says rose rows="lan\\|h3" -->.')
    assert "not above 1" in p
    assert problems(tmp_path, 'Mobile h3 rose 30 % <!-- quicbench:says rose rows="mobile\\|h3" -->.') == []


def test_the_same_needs_every_cited_row_within_its_margin(tmp_path):
    ok = 'Broadband h2 and h3 stay the same <!-- quicbench:says same rows="broadband\\|h2; broadband\\|h3" -->.'
    assert problems(tmp_path, ok) == []          # equivalent, and different inside the margin
    bad = 'Broadband stays the same <!-- quicbench:says same rows="broadband\\|h2; lan\\|h3" -->.'
    (p,) = problems(tmp_path, bad)
    assert "lan\\|h3" in p


def test_a_cited_row_must_be_there_and_be_one(tmp_path):
    (p,) = problems(tmp_path, 'Satellite did not move <!-- quicbench:says same rows="satellite" -->.')
    assert "no table row" in p
    (p,) = problems(tmp_path, 'h3 did not move <!-- quicbench:says same rows="h3" -->.')
    assert "3 rows" in p
    unknown, uncited = problems(tmp_path, 'h3 did not move <!-- quicbench:says moved rows="h3" -->.')
    assert "'moved': unknown kind; accepted: same, fell, rose, measured" in unknown and "cites no table row" in uncited


def test_a_mechanism_names_its_measurement_or_says_it_is_not_measured(tmp_path):
    assert problems(tmp_path, "That undo explains why it does not collapse: our reading, not measured.") == []
    assert problems(tmp_path, 'That is why it falls behind <!-- quicbench:says measured rows="lan\\|h3" -->.') == []


def test_rows_on_another_page_are_cited_with_page(tmp_path):
    page(tmp_path, "", name="data.md")
    readme = tmp_path / "README.md"
    readme.write_text('Broadband h2 did not move <!-- quicbench:says same rows="broadband\\|h2" page="data.md" -->.\n')
    assert check([readme]) == []
    readme.write_text('Broadband h1 did not move <!-- quicbench:says same rows="broadband\\|h1" page="data.md" -->.\n')
    assert len(check([readme])) == 1


def test_what_is_not_a_cell_claim_is_left_alone(tmp_path):
    # a trial's own "moved" (the CPU-rule pages' truth), a quoted claim, code, and tables the tool writes
    text = ("26 trials that waited as long did not move.\n\nThe seed says \"throughput is the same\".\n\n"
            "Write `did not move <!-- quicbench:says same rows=\"x\" -->` to cite.\n\n"
            "```\nthe same at every run\n```\n\n"
            "<!-- quicbench:table data=runs/x section=\"S\" -->\n| a | b |\n|---|---|\n| x did not move | 1 |\n"
            "<!-- /quicbench:table -->\n")
    assert problems(tmp_path, text) == []


def test_a_table_row_that_loses_its_columns_is_caught(tmp_path):
    broken = TABLE + "| broadband|h1|caddy | 1.0 [0.9, 1.1] | inconclusive |\n"
    (p,) = problems(tmp_path, "", table=broken)
    assert "5 columns under a header of 3" in p


def test_sentences_are_split_with_the_line_they_start_on(tmp_path):
    p = page(tmp_path, "First one. Second one\ncontinues here.\n\n- An item. Its second.")
    got = [(s.line, s.text) for s in sentences(p) if not s.text.startswith(("A result", "cell", "broadband",
                                                                                  "lan", "mobile", "0.", "1.", "inc",
                                                                                  "equ", "slo", "dif", "hogs",
                                                                                  "verdict"))]
    assert (11, "First one.") in got and (11, "Second one continues here.") in got
    assert (14, "- An item.") in got and (14, "Its second.") in got


def test_results_check_exits_1_naming_a_planted_sentence(tmp_path):
    real = REPO / "docs" / "results" / "runs" / "cpu-rule" / "default-hogs4.md"
    copy = tmp_path / "default-hogs4.md"
    shutil.copyfile(real, copy)
    ok = run_qb("results", "check", str(copy))
    assert ok.returncode == 0, ok.stderr
    # the page's own shift table says broadband h1 is inconclusive (0.918 [0.860, 0.980])
    copy.write_text(real.read_text() + '\nBroadband h1 falls 8 % <!-- quicbench:says fell '
                    'rows="broadband\\|10x50KB/p10\\|h1\\|caddy" --> with twice the load.\n')
    bad = run_qb("results", "check", str(copy))
    assert bad.returncode == 1 and "falls" not in bad.stdout
    assert "default-hogs4.md" in bad.stderr and "not a difference beyond the margin" in bad.stderr


def test_the_ratio_is_the_rows_last_interval(tmp_path):
    # a variants table's row: both cells' means with their intervals, then the ratio
    table = ("| condition | variant | condition [95 % CI] | variant [95 % CI] | variant / condition [95 % CI] | "
             "verdict |\n|---|---|---|---|---|---|\n"
             "| 25_1 | without reordering | 12.13 [11.81, 12.44] | 30.65 [27.64, 33.44] | 2.51 [2.28, 2.76] | "
             "different |\n")
    rose = 'h3 rose 151 % without reordering <!-- quicbench:says rose rows="without reordering" -->.'
    assert problems(tmp_path, rose, table=table) == []
    (p,) = problems(tmp_path, rose.replace("rose", "fell"), table=table)
    assert "[2.28, 2.76] is not below 1" in p


def test_a_quoted_ratio_must_be_the_cited_rows(tmp_path):
    ok = 'LAN h3 is slower, ×0.904 [0.862, 0.949] <!-- quicbench:says shows rows="lan\\|h3" -->.'
    assert problems(tmp_path, ok) == []
    (p,) = problems(tmp_path, ok.replace("0.904", "0.85"))
    assert "'0.85 [0.862, 0.949]', which no row it cites holds" in p


def test_section_tells_alike_rows_apart(tmp_path):
    two = f"## First run\n\n{TABLE}\n## Second run\n\n" + TABLE.replace("0.904 [0.862, 0.949]", "0.8 [0.7, 0.9]")
    cite = 'LAN h3 ×0.8 [0.7, 0.9] <!-- quicbench:says shows rows="lan\\|h3"{} -->.'
    (p,) = problems(tmp_path, cite.format(""), table=two)
    assert "2 rows" in p and 'section="..."' in p
    assert problems(tmp_path, cite.format(' section="Second run"'), table=two) == []
    (p,) = problems(tmp_path, cite.format(' section="First run"'), table=two)
    assert "which no row it cites holds" in p
    (p,) = problems(tmp_path, cite.format(' colour="red"'), table=two)
    assert "unknown attribute 'colour'; accepted: rows, page, section" in p
