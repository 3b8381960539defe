"""Published results: pages whose tables are regenerated from committed run data.

A page (docs/results/*.md) marks each table the tool wrote::

    <!-- quicbench:table data=runs/go-quick-seed section="Table 1: goodput" -->
    ...what `quicbench results update` wrote...
    <!-- /quicbench:table -->

``data`` is a directory beside the page (``quicbench results publish RUN_DIR DEST`` makes it)
holding the run's ``meta.json`` and its per-trial rows as ``trials.jsonl.gz``; ``section`` is a
heading of the run's Markdown report (``quicbench report RUN --format md``): the block is that
section's body, up to the next heading of the same or a higher level; an optional
``study="go-quick,factors"`` after it sets the run beside those studies instead of its plan's
(``quicbench report --study``). ``quicbench results
check`` regenerates every block and fails naming the first that differs, so a published number
is always the one the committed data give (tests/unit/test_published_results.py checks every
page of docs/results); ``quicbench results update`` rewrites the blocks after the analysis
changed. Prose outside the markers is the author's.
"""

from __future__ import annotations

import gzip
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from quicbench.errors import QuicbenchError

# markers open a line (an example of them inside a code block, indented or quoted, is not one)
BLOCK_RE = re.compile(r'^<!-- quicbench:table data=(?P<data>\S+) section="(?P<section>[^"]+)"'
                      r'(?: study="(?P<study>[^"]+)")? -->\n'
                      r'(?P<body>.*?)^<!-- /quicbench:table -->', re.S | re.M)
HEADING_RE = re.compile(r"^(#+) (.*)$")
DATA_FILES = ("meta.json", "trials.jsonl.gz")
MAX_PUBLISHED_BYTES = 5_000_000     # the compressed rows of one run: a few MB at most


@dataclass(frozen=True)
class Block:
    data: str          # the data directory, relative to the page
    section: str       # the report heading whose body the block holds
    body: str          # what the page holds now
    start: int         # offsets of the body in the page text
    end: int
    study: str | None = None   # the studies the report sets the run beside (comma-separated), else its plan's


def blocks(text: str) -> list[Block]:
    return [Block(m["data"], m["section"], m["body"], m.start("body"), m.end("body"), m["study"])
            for m in BLOCK_RE.finditer(text)]


def section_body(markdown: str, heading: str) -> str:
    """The lines under the first heading that starts with ``heading``, up to the next heading
    of the same or a higher level, without blank lines at either end."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        m = HEADING_RE.match(line)
        if m and m[2].startswith(heading):
            level = len(m[1])
            body = []
            for nxt in lines[i + 1:]:
                n = HEADING_RE.match(nxt)
                if n and len(n[1]) <= level:
                    break
                body.append(nxt)
            return "\n".join(body).strip("\n") + "\n"
    headings = [HEADING_RE.match(x)[2] for x in lines if HEADING_RE.match(x)]     # type: ignore[index]
    raise QuicbenchError(f"section \"{heading}\": no such heading in the report; headings: {'; '.join(headings)}")


def report_of(data_dir: Path, studies: list[str] | None = None) -> str:
    """The Markdown report of committed run data (meta.json + trials.jsonl.gz), set beside the
    studies named (default: the run's plan's)."""
    from quicbench.report import report_markdown
    missing = [f for f in DATA_FILES if not (data_dir / f).is_file()]
    if missing:
        raise QuicbenchError(f"data={data_dir}: missing {', '.join(missing)} (make it with "
                             f"'quicbench results publish RUN_DIR {data_dir}')")
    return report_markdown(data_dir, studies=studies)     # a published run loads as it is (analysis.load)


def regenerate(page: Path) -> tuple[str, list[Block]]:
    """The page with every block regenerated, and the blocks whose content changed."""
    text = page.read_text()
    found = blocks(text)
    if not found:
        raise QuicbenchError(f"{page}: no <!-- quicbench:table data=... section=\"...\" --> block")
    reports: dict[tuple[Path, str | None], str] = {}
    out, pos, stale = [], 0, []
    for b in found:
        key = ((page.parent / b.data).resolve(), b.study)
        if key not in reports:
            reports[key] = report_of(key[0], [s.strip() for s in b.study.split(",")] if b.study else None)
        try:
            new = section_body(reports[key], b.section)
        except QuicbenchError as e:
            raise QuicbenchError(f"{page}: {e}") from None
        if new != b.body:
            stale.append(b)
        out += [text[pos:b.start], new]
        pos = b.end
    out.append(text[pos:])
    return "".join(out), stale


def check(page: Path) -> list[str]:
    """Problems of a page: each block whose committed data give another table."""
    _, stale = regenerate(page)
    return [f"{page}: the table of section \"{b.section}\" (data={b.data}) is not what the data give; "
            f"'quicbench results update {page}' rewrites it" for b in stale]


def update(page: Path) -> int:
    """Rewrite the page's blocks from their data; the number of blocks that changed."""
    text, stale = regenerate(page)
    if stale:
        page.write_text(text)
    return len(stale)


def publish(run_dir: Path, dest: Path) -> Path:
    """Copy a run's meta.json and its rows (gzip, deterministic) into dest for a page to cite."""
    from quicbench.analysis import load_run
    from quicbench.store import RunLayout, read_jsonl_checked, refuse_if_written
    refuse_if_written(RunLayout(run_dir), "publish")    # a run being written is published when it ends
    load_run(run_dir)                          # a run directory quicbench can read, or a clear error
    trials = run_dir / "trials.jsonl"
    read = read_jsonl_checked(trials)
    if read.torn:
        raise QuicbenchError(f"{trials}: line {read.torn[0]} is not a row (a torn write); publish whole rows only: "
                             f"resume the run (it runs that trial again) or remove the line")
    if not read.rows:
        raise QuicbenchError(f"{run_dir}: no trials to publish")
    if dest.exists() and not dest.is_dir():
        raise QuicbenchError(f"DEST {dest}: exists and is not a directory; name a directory for meta.json and "
                             f"trials.jsonl.gz")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise QuicbenchError(f"DEST {dest}: cannot be made ({e.strerror})") from None
    shutil.copyfile(run_dir / "meta.json", dest / "meta.json")
    with open(dest / "trials.jsonl.gz", "wb") as raw:
        # mtime 0 and no file name: the same rows give the same bytes (a clean git diff)
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
            gz.write(trials.read_bytes())
    size = (dest / "trials.jsonl.gz").stat().st_size
    if size > MAX_PUBLISHED_BYTES:
        raise QuicbenchError(f"{dest / 'trials.jsonl.gz'}: {size} bytes, more than {MAX_PUBLISHED_BYTES} "
                             f"to commit; publish a smaller run (or a selection of it)")
    return dest
