"""The columns table and what is made from it: docs/data.md's column tables, the derived columns'
declared derivations, the directions and titles the analysis and the terminal show, and
meta.json's copy of the table across format versions."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quicbench.errors import QuicbenchError
from quicbench.model import columns
from quicbench.model.columns import COLUMNS, DERIVED, DOC_GROUPS, docs_markers, with_docs_tables

ROOT = Path(__file__).resolve().parents[2]
DATA_MD = ROOT / "docs" / "data.md"


def _doc_rows(group: str) -> list[tuple[str, str, str, str]]:
    """(name, type, unit, meaning) of each row of docs/data.md's table of the group, as written there."""
    begin, end = docs_markers(group)
    text = DATA_MD.read_text()
    assert begin in text and end in text, f"docs/data.md has no table for the {group} columns"
    rows = []
    for line in text[text.index(begin):text.index(end)].splitlines():
        if line.startswith("| `"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.append((cells[0].strip("`"), cells[1], cells[2], cells[3]))
    return rows


@pytest.mark.parametrize("group", DOC_GROUPS)
def test_docs_tables_are_the_columns_table(group):
    """Each column table of docs/data.md lists exactly the group's columns, in the table's order,
    with their types, units and meanings (`python -m quicbench.model.columns write` makes them)."""
    table = DERIVED if group == "derived" else [c for c in COLUMNS if c.group == group]
    assert _doc_rows(group) == [(c.name, c.type, c.unit, c.meaning) for c in table], \
        f"docs/data.md's {group} columns differ: run `python -m quicbench.model.columns write`"


def test_docs_file_is_what_write_makes():
    text = DATA_MD.read_text()
    assert with_docs_tables(text) == text, "run `python -m quicbench.model.columns write`"
    assert {c.group for c in COLUMNS} | {"derived"} == set(DOC_GROUPS)      # no group without a table


def test_a_meaning_edited_by_hand_is_caught_and_rewritten():
    """The check compares meanings, units and types, not only names: a hand edit of one cell
    differs from what the table makes, and `write` puts the table's text back."""
    text = DATA_MD.read_text()
    col = next(c for c in COLUMNS if c.name == "goodput_mbps")
    for old, new in ((col.meaning, col.meaning + ", edited"), (f"| {col.unit} |", "| kbit/s |")):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{col.name}` |"))
        edited = text.replace(row, row.replace(old, new, 1))
        assert edited != text and with_docs_tables(edited) == text


# -- derived columns ---------------------------------------------------------------------------------

def _frame(n: int | None = None, **cols) -> pd.DataFrame:
    return pd.DataFrame(cols, index=None if n is None else range(n))


def test_each_derivation_reads_only_its_declared_inputs():
    """A derivation computes from a table holding only the columns it declares (a formula that
    read another column would fail here)."""
    n = 3
    sample = {"key": ["a", "b", "a"], "status": ["ok", "ok", "failed"], "superseded": [True, False, False],
              "warmup": [False, False, False], "goodput_mbps": [1.0, np.nan, 2.0], "page_load_ms": [np.nan] * n,
              "startup_s": [np.nan] * n, "client_cpu_s": [0.5, 1.0, np.nan], "server_cpu_s": [0.2, 0.4, 0.1],
              "bytes": [500_000_000, 0, 10], "client_cpu_s_per_gb": [1.0, np.nan, 2.0],
              "server_cpu_s_per_gb": [0.5, 0.5, np.nan], "ttfb_ms": [10.0, 3.0, np.nan],
              "connect_ms": [2.0, np.nan, 1.0], "tls_ms": [3.0, 5.0, 1.0]}
    for col in columns.derived("run") + columns.derived("row"):
        d = col.derivation
        assert set(d.inputs) <= set(sample), (col.name, d.inputs)
        out = pd.Series(d.compute(_frame(n, **{k: sample[k] for k in d.inputs})))
        assert len(out) == n, col.name
    for col in columns.derived("condition"):
        assert col.derivation.compute is None and len(col.derivation.inputs) == 1


def test_derived_values():
    t = _frame(key=["a", "b", "a"], status=["ok", "ok", "ok"], warmup=[False, True, False],
               goodput_mbps=[1.0, 1.0, np.nan], page_load_ms=[np.nan, np.nan, 900.0], startup_s=[np.nan] * 3,
               bytes=[500_000_000, 0, 10**9], client_cpu_s=[0.5, 1.0, 2.0], server_cpu_s=[1.0, 1.0, 1.0],
               ttfb_ms=[10.0, 3.0, 8.0], connect_ms=[2.0, np.nan, 1.0], tls_ms=[3.0, 5.0, np.nan])
    for col in columns.derived("run") + columns.derived("row"):
        t[col.name] = col.derivation.compute(t)
    assert list(t["row_index"]) == [0, 1, 2]
    assert list(t["superseded"]) == [True, False, False]          # the retry (the last "a") counts
    assert list(t["used"]) == [False, False, True]                # superseded; warm-up; a page load
    assert t["client_cpu_s_per_gb"].tolist()[0] == 1.0 and math.isnan(t["client_cpu_s_per_gb"][1])
    assert t["cpu_s_per_gb"].tolist()[2] == 3.0
    assert t["wait_ms"].tolist() == [5.0, 0.0, 7.0]               # empty connect/TLS count 0; clipped at 0


def test_the_derived_names_are_one_list():
    """The analysis, the export and the studies take their derived columns from the table."""
    from quicbench.analysis.load import frame_from_rows
    from quicbench.model import study
    df = frame_from_rows([{"key": "k", "condition": "c", "protocol": "h1", "status": "ok", "bytes": 10**9,
                           "goodput_mbps": 1.0, "client_cpu_s": 1.0, "server_cpu_s": 2.0}])
    assert [c for c in df.columns if c in columns.DERIVED_BY_NAME] == [c.name for c in columns.derived("run")
                                                                       + columns.derived("row")]
    assert df["cpu_s_per_gb"].tolist() == [3.0]
    assert {c.name for c in columns.derived("row")} <= study.METRIC_NAMES
    assert not {c.name for c in columns.derived("run") + columns.derived("condition")} & study.METRIC_NAMES
    assert study.METRIC_UNITS["wait_ms"] == "ms"


# -- how columns are shown -------------------------------------------------------------------------

def test_titles_and_directions_come_from_the_columns():
    from quicbench.analysis import tables
    for name, label in {**tables.METRICS, **tables.OPTIONAL_METRICS}.items():
        assert label == columns.metric(name).label
    assert tables.METRICS["goodput_mbps"] == "goodput (Mbit/s)" and tables.METRICS["wait_ms"] == "server wait (ms)"
    for c in (*COLUMNS, *DERIVED):
        assert tables.higher_is_better(c.name) == (c.better != "lower")
    assert not tables.higher_is_better("page_load_ms") and tables.higher_is_better("qoe_lin")
    assert not tables.higher_is_better("cpu_s_per_gb")


def test_the_terminal_shows_each_kinds_metrics_as_their_columns_say():
    """Every metric a workload kind shows has a column with a header and digits, and the terminal's
    tables take them (and the direction) from it; a kind's own declaration, while it has one,
    says the same."""
    from quicbench.model.workload_kinds import KINDS
    from quicbench.report import terminal
    for kind in KINDS:
        for m, shown in zip(kind.metrics, terminal.KIND_METRICS[kind.name]):
            col = columns.metric(m.name)
            assert col is not None and col.header and col.digits is not None, m.name
            assert shown == (m.name, col.header, col.digits, col.higher_is_better)
            for field, value in (("header", col.header), ("digits", col.digits),
                                 ("higher_is_better", col.higher_is_better)):
                assert getattr(m, field, value) == value, (kind.name, m.name, field)
    for metric, (_, unit, digits, _) in terminal.VIEWER_WORDS.items():
        assert (unit, digits) == (columns.metric(metric).unit, columns.metric(metric).digits)


def test_direction_and_digits_are_declared_values():
    assert {c.better for c in (*COLUMNS, *DERIVED)} <= {"higher", "lower", ""}
    assert all(c.digits is None or (isinstance(c.digits, int) and 0 <= c.digits <= 6) for c in COLUMNS)
    assert all(c.better == "" for c in COLUMNS if c.type in ("text", "json"))


# -- meta.json's copy ---------------------------------------------------------------------------------

def _run_dir(tmp_path: Path, meta: dict) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps(meta))
    (d / "trials.jsonl").write_text("")
    return d


def test_meta_carries_the_table_with_its_format():
    described = columns.describe()
    assert [c["name"] for c in described] == [c.name for c in COLUMNS]
    assert all(tuple(c) == columns.DESCRIBED for c in described)
    json.dumps(described)
    goodput = next(c for c in described if c["name"] == "goodput_mbps")
    assert goodput["better"] == "higher" and goodput["digits"] == 1 and goodput["title"] == "goodput (Mbit/s)"


def test_format_2_meta_reads_upgraded(tmp_path):
    """A run directory of format 2 (columns without title, header, direction, digits) still reads:
    the known columns get this table's, an unknown one empty ones; its own fields stay."""
    from quicbench.store import RunLayout, read_meta
    old = [{"name": "goodput_mbps", "type": "float", "unit": "Mbit/s", "meaning": "as it was", "group": "trial"},
           {"name": "gone_ms", "type": "float", "unit": "ms", "meaning": "a column since removed", "group": "trial"}]
    d = _run_dir(tmp_path, {"run_id": "r", "format_version": 2, "columns": old})
    meta = read_meta(RunLayout(d))
    assert meta["format_version"] == columns.FORMAT_VERSION == 3 and meta["upgraded_from"] == 2
    goodput, gone = meta["columns"]
    assert goodput["meaning"] == "as it was" and goodput["better"] == "higher" and goodput["header"] == "Mbit/s"
    assert gone == {**old[1], "title": "", "header": "", "better": "", "digits": None}
    from quicbench.analysis.load import load_run
    assert load_run(d).meta["format_version"] == 3


def test_format_1_meta_gets_the_whole_table_and_newer_is_refused(tmp_path):
    from quicbench.store import RunLayout, read_meta
    meta = read_meta(RunLayout(_run_dir(tmp_path, {"run_id": "r"})))
    assert meta["columns"] == columns.describe() and meta["upgraded_from"] == 1
    (tmp_path / "n").mkdir()
    newer = _run_dir(tmp_path / "n", {"run_id": "r", "format_version": columns.FORMAT_VERSION + 1})
    with pytest.raises(QuicbenchError, match="newer than this quicbench"):
        read_meta(RunLayout(newer))


def test_current_format_meta_is_read_as_written(tmp_path):
    from quicbench.store import RunLayout, read_meta
    written = {"run_id": "r", "format_version": columns.FORMAT_VERSION, "columns": columns.describe()}
    assert read_meta(RunLayout(_run_dir(tmp_path, written))) == written
