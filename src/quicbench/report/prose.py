"""Prose that matches the tables: sentences of the result pages and the READMEs that say a cell did
not move, is the same, fell or rose by X %, or that something explains why, checked against the
verdicts of the table rows they cite (`quicbench results check`).

A sentence with such a phrase (PHRASES) cites the rows that back it with a marker inside it, before
its full stop (an HTML comment: invisible when the page is rendered)::

    Broadband h1 falls 8 % <!-- quicbench:says fell rows="broadband|1x30MB/p1|h1" --> and the rest ...
    ... h2 and h3 stay the same <!-- quicbench:says same rows="broadband + h2; broadband + h3"
        page="cpu-rule.md" --> ...

``rows``: one table row per ``;``, each given by text that all appears in one row of a Markdown
table (``+`` joins several pieces); ``page``: the page that holds them, relative to the page the
sentence is in (default: that page); ``section``: only the tables under the heading that starts
with it (when two tables have rows alike). What each kind needs of every row it cites:

- ``same`` (did not move, is the same, unchanged): the row shows the cell within its margin
  ("equivalent", or "different, inside the ±X % margin");
- ``fell`` / ``rose`` (fell by X %): the row's verdict is a difference ("different", "slower",
  "faster") whose ratio interval (the row's last ``x [lo, hi]``) lies below 1 (fell) or above 1
  (rose), and an X % the sentence states lies within that interval's change (to the rounding of X);
- ``measured`` (explains why): the rows that hold the measurement on the same cells (they must
  exist); a mechanism that is not measured says "our reading, not measured" instead of a marker;
- ``shows`` (any sentence, e.g. a finding): every ratio with its interval the sentence quotes
  ("×1.67 [1.60, 1.75]") is, as written, in one of the rows it cites; so a number quoted in prose
  cannot drift from the table it comes from.

A sentence with a phrase and no marker of its kind is a problem, as is a marker whose rows say
otherwise. A phrase in double quotes is quoted (a seed's claim), and one in `code` an example:
neither is said. "Trials that did not move" (the CPU-rule pages' own per-trial truth) is not a
cell's verdict and is not checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARK_RE = re.compile(r'<!--\s*quicbench:says\s+(?P<kind>[a-z]+)(?P<attrs>(?:\s+[a-z]+="[^"]*")*)\s*-->', re.S)
ATTR_RE = re.compile(r'([a-z]+)="([^"]*)"')
KINDS = ("same", "fell", "rose", "measured", "shows")
_PCT = r"(?:by |about |some )?(?P<pct>[0-9]+(?:\.[0-9]+)?) ?%"
# phrase -> the kind of marker that backs it
PHRASES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:did|does|do) not move\b|\bmoves? no (?:cell|one)\b|\bnothing else moves\b|"
                r"\bstays? where (?:it|they) (?:was|were)\b|\b(?:is|are|was|were|stays?|stayed|remains?) the same\b|"
                r"\bthe same at\b|\bunchanged\b|\bno change\b", re.I), "same"),
    (re.compile(r"\b(?:fell|falls?|dropped|drops?|lost)\s+" + _PCT, re.I), "fell"),
    (re.compile(r"\b(?:rose|rises?|grew|grows?|gained)\s+" + _PCT, re.I), "rose"),
    (re.compile(r"\bexplains? why\b|\bthat is why\b|\bwhich is why\b", re.I), "measured"),
]
NOT_MEASURED = "our reading, not measured"
# a trial's own "moved" (the CPU-rule pages' truth), not a cell's verdict
TRIAL_MOVED_RE = re.compile(r"\btrials?\b[^.;:]{0,40}\b(?:did|does|do) not move\b", re.I)
RATIO_CI_RE = re.compile(r"(?P<x>[0-9]+(?:\.[0-9]+)?) \[(?P<lo>[0-9]+(?:\.[0-9]+)?), (?P<hi>[0-9]+(?:\.[0-9]+)?)\]")
INLINE_CODE_RE = re.compile(r"`[^`]*`")
QUOTED_RE = re.compile(r'"[^"\n]*"|“[^”]*”')
SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\[`\"“])")


ATTRS = ("rows", "page", "section")


@dataclass(frozen=True)
class Mark:
    """A quicbench:says marker: its kind and the rows it cites (on `page`, under `section`)."""
    kind: str
    rows: str = ""
    page: str = ""
    section: str = ""
    bad_attrs: tuple[str, ...] = ()

    @classmethod
    def of(cls, m: re.Match[str]) -> "Mark":
        attrs = dict(ATTR_RE.findall(m["attrs"] or ""))
        return cls(m["kind"], attrs.get("rows", ""), attrs.get("page", ""), attrs.get("section", ""),
                   tuple(k for k in attrs if k not in ATTRS))


def _section(text: str, heading: str) -> str | None:
    """The lines under the first heading that starts with `heading`, up to the next heading of the
    same or a higher level."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        h = re.match(r"^(#+) (.*)$", line)
        if h and h[2].startswith(heading):
            out = []
            for nxt in lines[i + 1:]:
                n = re.match(r"^(#+) ", nxt)
                if n and len(n[1]) <= len(h[1]):
                    break
                out.append(nxt)
            return "\n".join(out)
    return None


@dataclass(frozen=True)
class Sentence:
    page: Path
    line: int
    text: str


def sentences(page: Path, text: str | None = None) -> list[Sentence]:
    """The page's prose sentences, each with the line it starts on: paragraphs and list items (one
    run of text each), headings, and the cells of tables written by hand; not code blocks, nor the
    tables the tool writes (between quicbench:table markers: their numbers are checked as data)."""
    text = page.read_text() if text is None else text
    out: list[Sentence] = []
    para: list[str] = []
    start = 0
    in_code = in_block = False

    def flush() -> None:
        if para:
            joined = " ".join(s.strip() for s in para)
            for s in SENTENCE_SPLIT_RE.split(joined):
                out.append(Sentence(page, start, s))
            para.clear()

    for i, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        if stripped.startswith("<!-- quicbench:table") or stripped.startswith("<!-- /quicbench:table"):
            flush()
            in_block = stripped.startswith("<!-- quicbench:table")
            continue
        if in_block:
            continue
        if not stripped or stripped.startswith(("|", "#")):
            flush()
            if stripped.startswith("#"):
                out.append(Sentence(page, i, stripped.lstrip("#").strip()))
            elif stripped.startswith("|") and not set(stripped) <= set("|-: "):
                for cell in re.split(r"(?<!\\)\|", stripped.strip("|")):
                    out += [Sentence(page, i, x) for x in SENTENCE_SPLIT_RE.split(cell.strip()) if x]
            continue
        if stripped.startswith(("- ", "* ", "1. ")) or re.match(r"^\d+\. ", stripped):
            flush()
        if not para:
            start = i
        para.append(line)
    flush()
    return out


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.lstrip().startswith("|") and not set(line.strip()) <= set("|-: ")]


def _within_margin(row: str) -> bool:
    return ("equivalent" in row and "inconclusive" not in row) or \
        bool(re.search(r"inside the ±[0-9.]+ ?%? margin", row))


def _differs(row: str) -> bool:
    return bool(re.search(r"\bdifferent\b|\bslower\b|\bfaster\b", row)) and "inside the" not in row \
        and "inconclusive" not in row


def _check_row(kind: str, row: str, pct: str | None) -> str | None:
    """Why the row does not back a sentence of this kind (None: it does); pct: the X % the
    sentence states, as written."""
    if kind == "measured":
        return None
    if kind == "same":
        return None if _within_margin(row) else "its verdict does not show the cell within its margin"
    if not _differs(row):
        return "its verdict is not a difference beyond the margin"
    # the row's last "x [lo, hi]": the ratio (a variants table gives both cells' means with their
    # intervals first, then the ratio)
    found = list(RATIO_CI_RE.finditer(row))
    if not found:
        return "it has no ratio [interval] to read the direction from"
    m = found[-1]
    lo, hi = float(m["lo"]), float(m["hi"])
    if kind == "fell" and not hi < 1:
        return f"its interval [{m['lo']}, {m['hi']}] is not below 1"
    if kind == "rose" and not lo > 1:
        return f"its interval [{m['lo']}, {m['hi']}] is not above 1"
    if pct is not None:
        # the change the interval allows, in %, to the rounding of the stated number (half its last digit)
        change = sorted([abs(1 - lo) * 100, abs(1 - hi) * 100])
        slack = 0.5 * 10 ** -(len(pct.split(".")[1]) if "." in pct else 0)
        if not change[0] - slack <= float(pct) <= change[1] + slack:
            return f"{pct} % is outside the change its interval allows ({change[0]:.1f}–{change[1]:.1f} %)"
    return None


def check_sentence(s: Sentence, read: dict[Path, str]) -> list[str]:
    """Problems of one sentence: a phrase without the marker of its kind, or a marker whose cited
    rows do not back it."""
    text = INLINE_CODE_RE.sub("", s.text)         # a marker or phrase quoted as code is an example
    # a phrase in quotes is quoted (a seed's claim, the rule's own words), not said
    plain = QUOTED_RE.sub('""', MARK_RE.sub("", text))
    said = TRIAL_MOVED_RE.sub("", plain)
    needs: list[tuple[str, str, str | None]] = []
    for pat, kind in PHRASES:
        for m in pat.finditer(said):
            needs.append((kind, m.group(0), m["pct"] if "pct" in pat.groupindex else None))
    marks = [Mark.of(m) for m in MARK_RE.finditer(text)]
    problems = []
    where = f"{s.page}:{s.line}"
    for m in marks:
        if m.kind not in KINDS:
            problems.append(f"{where}: quicbench:says {m.kind!r}: unknown kind; accepted: {', '.join(KINDS)}")
        elif m.bad_attrs:
            problems.append(f"{where}: quicbench:says {m.kind}: unknown attribute {m.bad_attrs[0]!r}; accepted: "
                            f"{', '.join(ATTRS)}")
        elif m.kind == "shows":
            problems += _check_shows(m, s, read, where, plain)
    for kind, phrase, pct in needs:
        if kind == "measured" and NOT_MEASURED in plain:
            continue
        backing = [m for m in marks if m.kind == kind]
        if not backing:
            hint = f' (or say "{NOT_MEASURED}")' if kind == "measured" else ""
            problems.append(f"{where}: \"{phrase}\" cites no table row: add <!-- quicbench:says {kind} rows=\"...\" "
                            f"--> naming the rows whose verdicts show it{hint}, or say what the verdicts say: "
                            f"{_short(plain)}")
            continue
        for m in backing:
            problems += _check_mark(m, s, read, where, pct)
    return list(dict.fromkeys(problems))


def _cited_rows(m: Mark, s: Sentence, read: dict[Path, str], where: str
                ) -> tuple[list[tuple[str, str]], list[str]]:
    """The (citation, table row) pairs a marker names, and the problems of those it cannot find
    (no such row, or more than one)."""
    target = (s.page.parent / m.page).resolve() if m.page else s.page.resolve()
    if target not in read:
        if not target.is_file():
            return [], [f"{where}: quicbench:says {m.kind}: page {m.page!r} not found"]
        read[target] = target.read_text()
    text = read[target]
    if m.section:
        body = _section(text, m.section)
        if body is None:
            return [], [f"{where}: quicbench:says {m.kind}: no heading {m.section!r} in {target.name}"]
        text = body
    rows = table_rows(text)
    cited = [r.strip() for r in m.rows.split(";") if r.strip()]
    if not cited:
        return [], [f"{where}: quicbench:says {m.kind}: no rows=\"...\" (the table rows that back the sentence)"]
    found, problems = [], []
    for c in cited:
        pieces = [p.strip() for p in c.split("+") if p.strip()]
        hits = [r for r in rows if all(p in r for p in pieces)]
        if len(hits) > 1:
            # several rows hold the text: the one with a cell that is exactly a piece (a row's key)
            exact = [r for r in hits if {c.strip() for c in CELL_SEP_RE.split(r.strip().strip("|"))} & set(pieces)]
            hits = exact if len(exact) == 1 else hits
        if not hits:
            problems.append(f"{where}: quicbench:says {m.kind}: no table row of {target.name} holds {c!r}")
        elif len(hits) > 1:
            problems.append(f"{where}: quicbench:says {m.kind}: {len(hits)} rows of {target.name} hold {c!r}; "
                            f"name one (join more of its text with +, or give section=\"...\")")
        else:
            found.append((c, hits[0]))
    return found, problems


def _check_mark(m: Mark, s: Sentence, read: dict[Path, str], where: str, pct: str | None) -> list[str]:
    found, problems = _cited_rows(m, s, read, where)
    for c, row in found:
        why = _check_row(m.kind, row, pct)
        if why:
            problems.append(f"{where}: says \"{m.kind}\" of {c!r}, but {why}: {_short(row)}")
    return problems


def _check_shows(m: Mark, s: Sentence, read: dict[Path, str], where: str, plain: str) -> list[str]:
    """A `shows` marker: every "x [lo, hi]" the sentence quotes is, as written, in a row it cites."""
    found, problems = _cited_rows(m, s, read, where)
    if problems:
        return problems
    for q in RATIO_CI_RE.finditer(plain):
        if not any(q.group(0) in row for _, row in found):
            problems.append(f"{where}: quotes {q.group(0)!r}, which no row it cites holds (the tables say otherwise "
                            f"now: 'quicbench results check' regenerated them from their data): "
                            f"{'; '.join(_short(r, 80) for _, r in found)}")
    return problems


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"


CELL_SEP_RE = re.compile(r"(?<!\\)\|")


def table_problems(page: Path, text: str) -> list[str]:
    """Markdown table rows with another number of columns than their header (an unescaped '|' in a
    cell: the row's last columns vanish when the page is rendered)."""
    out = []
    width = None
    in_code = False
    for i, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if s.startswith("```"):
            in_code = not in_code
        if in_code or not s.startswith("|"):
            width = None
            continue
        n = len(CELL_SEP_RE.findall(s.strip("|"))) + 1
        if width is None:
            width = n
        elif n != width:
            out.append(f"{page}:{i}: a table row of {n} columns under a header of {width} (escape '|' in a cell "
                       f"as '\\|'): {_short(s)}")
    return out


def check(pages: list[Path]) -> list[str]:
    """Every problem of the pages' prose and tables' shape."""
    read: dict[Path, str] = {}
    out: list[str] = []
    for page in pages:
        text = page.read_text()
        read[page.resolve()] = text
        out += table_problems(page, text)
        for s in sentences(page, text):
            out += check_sentence(s, read)
    return out


def default_pages(root: Path = Path(".")) -> list[Path]:
    """The READMEs and the result pages under root: docs/results/*.md and the experiments' full
    pages under docs/results/runs/ (not the notes their tool puts into them: checked there)."""
    results = root / "docs" / "results"
    found = [root / "README.md", results / "README.md", *sorted(results.glob("*.md")),
             *sorted(p for p in results.glob("runs/**/*.md") if not p.name.endswith("notes.md"))]
    return list(dict.fromkeys(p for p in found if p.is_file()))
