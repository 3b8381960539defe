"""Number formatting shared by the HTML and Markdown reports, and a minimal table type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from quicbench.stats import estimate_digits, finite as _finite, inside_margin_words




def num(x: Any, sig: int = 4) -> str:
    """4 significant digits, never scientific notation for report-sized numbers; '–' if missing."""
    f = _finite(x)
    if f is None:
        return "–"
    if f == 0:
        return "0"
    if abs(f) >= 10 ** sig:
        return f"{f:.0f}"
    if abs(f) < 1e-3:
        return f"{f:.2e}"
    return f"{f:.{sig}g}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def pval(p: Any) -> str:
    f = _finite(p)
    if f is None:
        return "–"
    return "<0.0001" if f < 1e-4 else f"{f:.2g}"


def p_is(p: Any) -> str:
    """'p = 0.0042' or 'p < 0.0001'."""
    s = pval(p)
    return f"p {s[0]} {s[1:]}" if s.startswith("<") else f"p = {s}"


def pct(x: Any, signed: bool = True) -> str:
    """'+4.2 %' (a difference) or, unsigned, '4.2 %' (a share); '–' if missing."""
    f = _finite(x)
    return "–" if f is None else (f"{f:+.1f} %" if signed else f"{f:.1f} %")


def ci(lo: Any, hi: Any) -> str:
    """'[lo, hi]', or '' when the interval is missing (n < 2)."""
    if _finite(lo) is None or _finite(hi) is None:
        return ""
    return f"[{num(lo)}, {num(hi)}]"


def mean_ci(mean: Any, lo: Any, hi: Any) -> str:
    """'mean [lo, hi]', the interval left out when missing; ' †' when the mean lies above the interval
    (an interval of the geometric mean, below the arithmetic mean of very unequal trials)."""
    m, h = _finite(mean), _finite(hi)
    above = m is not None and h is not None and _finite(lo) is not None and m > h
    return f"{num(mean)} {ci(lo, hi)}".strip() + (" †" if above else "")


def ratio_ci(ratio: Any, lo: Any, hi: Any) -> str:
    """'0.82 [0.75, 0.9]' (a ratio of geometric means with its interval at the verdict's level), '–'
    when missing; digits adapt so that distinct bounds print distinct and a bound that is not 1 never
    prints as 1."""
    r = _finite(ratio)
    if r is None:
        return "–"
    if _finite(lo) is None or _finite(hi) is None:
        return f"{r:.3g}"
    e, a, b = estimate_digits(r, _finite(lo), _finite(hi))
    return f"{e} [{a}, {b}]"


def center_ci(row: Any, metric: str) -> str:
    """A summary row's value of `metric` with its 95 % interval: the geometric mean where the
    interval is the geometric mean's (`{metric}_gmean`), else the arithmetic mean."""
    return mean_ci(center(row, metric), row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high"))


def center(row: Any, metric: str) -> Any:
    """The value a summary row's interval of `metric` is for: `{metric}_gmean` when it has one, else
    `{metric}_mean`."""
    g = _finite(row.get(f"{metric}_gmean"))
    return g if g is not None else row.get(f"{metric}_mean")


def verdict_text(verdict: Any, reps: Any = None, within: Any = None) -> str:
    """A comparison's verdict for a table: 'different', 'different, inside the ±10 % margin' (also
    shown equivalent within it), 'equivalent', 'inconclusive (n≥N to decide)'."""
    v = str(verdict) if verdict is not None and verdict == verdict else "–"
    n = _finite(reps)
    if v == "different" and isinstance(within, str) and within:
        return f"{v}, {inside_margin_words(within)}"
    return f"{v} (n≥{int(n)} to decide)" if v == "inconclusive" and n is not None else v


@dataclass
class SimpleTable:
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""

    def __bool__(self) -> bool:
        return bool(self.rows)

    def markdown(self) -> str:
        def esc(s: str) -> str:
            return str(s).replace("|", "\\|").replace("\n", " ")
        lines = ["| " + " | ".join(esc(h) for h in self.headers) + " |",
                 "|" + "|".join("---" for _ in self.headers) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in self.rows]
        return "\n".join(lines)
