"""Statistics of repeated trials: mean, 95 % intervals, two-sample tests, Holm correction.

Intervals: ci() is the Student-t interval of the mean; positive_ci() is the log-t interval
(of the geometric mean) the report uses for goodputs and times, which cannot go below zero.

Pure functions on sequences of numbers; None, NaN and inf are dropped first. The defaults
are the report's method: Welch's two-sided t-test (unequal variances), alpha = 0.01, and
no claim at all when either sample has fewer than 3 values ("n too small").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import stats as _st

ALPHA = 0.01
MIN_N = 3
CONFIDENCE = 0.95
TESTS = {
    "welch": "Welch's t-test (two-sided, unequal variances)",
    "mwu": "Mann-Whitney U test (two-sided)",
}
CORRECTIONS = {"none": "no multiple-comparison correction", "holm": "Holm-Bonferroni correction"}

SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
N_TOO_SMALL = "n too small"


def clean(values: Iterable[float | None]) -> np.ndarray:
    """The finite values as a float array (None, NaN, pandas NA, inf dropped)."""
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return np.array(out, dtype=float)


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    sd: float
    ci_low: float
    ci_high: float
    median: float
    min: float
    max: float

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


def mean(values: Iterable[float | None]) -> float:
    x = clean(values)
    return float(x.mean()) if x.size else math.nan


def ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student-t confidence interval of the mean; (nan, nan) with fewer than 2 values."""
    x = clean(values)
    if x.size < 2:
        return (math.nan, math.nan)
    m = float(x.mean())
    half = float(_st.t.ppf(0.5 + confidence / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return (m - half, m + half)


def log_ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Log-t interval: the Student-t interval of the mean of ln(x), transformed back with exp.

    It is the confidence interval of the geometric mean exp(E[ln X]), which is the median of
    a log-normal population (not its arithmetic mean). Both bounds are > 0 for any sample,
    however small and spread out (with n = 2 a bound can underflow to 0.0 only for spreads of
    hundreds of orders of magnitude).

    Why this interval for goodputs and times: they are positive and multiplicative (a rate is
    bytes over a time; loss and delay scale them), so their spread grows with their level and
    is skewed to the right: close to log-normal. On logs the t-interval is then exact at every
    n >= 2 (95 % coverage of the geometric mean), and it is deterministic: the same run gives
    the same report. A bootstrap percentile interval would target the arithmetic mean but
    needs a random seed, and undercovers at the n of most benchmark cells (simulated on
    log-normal samples with sigma = 0.6: 81 % at n = 5, 87 % at n = 10). The Student-t
    interval of the mean, symmetric around it, goes below zero at n = 3 with large spreads.

    The arithmetic mean is at least the geometric mean; it lies above this interval's upper
    bound only when the trials are very unequal: for log-normal data when the standard
    deviation s of the logs exceeds about 2·t/√n (0.9 at n = 20, 2.5 at n = 5), e.g. some
    trials stall while others run at full speed.

    Degenerate inputs: fewer than 2 values -> (nan, nan); all values equal -> (x, x); any
    value <= 0 -> (nan, nan) (the logarithm is undefined: see positive_ci for the fallback).
    """
    x = clean(values)
    if x.size < 2 or (x <= 0).any():
        return (math.nan, math.nan)
    if (x == x[0]).all():
        return (float(x[0]), float(x[0]))
    y = np.log(x)
    half = float(_st.t.ppf(0.5 + confidence / 2, y.size - 1)) * float(y.std(ddof=1)) / math.sqrt(y.size)
    m = float(y.mean())
    return (math.exp(m - half), math.exp(m + half))


def positive_ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The 95 % interval of a quantity that cannot be negative (a goodput, a time): never below zero.

    log_ci() when every value is > 0. When some values are 0 (a TLS time of 0 where QUIC's
    handshake is inside connect, a server wait clipped at 0) or, wrongly, negative, the
    logarithm is undefined: the Student-t interval of the mean with its lower bound raised
    to 0. Fewer than 2 values -> (nan, nan).
    """
    x = clean(values)
    if x.size < 2:
        return (math.nan, math.nan)
    if (x > 0).all():
        return log_ci(x, confidence)
    lo, hi = ci(x, confidence)
    return (max(lo, 0.0), hi)


def interval(values: Iterable[float | None], positive: bool = False,
             confidence: float = CONFIDENCE) -> tuple[float, float]:
    """positive_ci() for quantities that cannot be negative, else the Student-t ci()."""
    return positive_ci(values, confidence) if positive else ci(values, confidence)


def summarize(values: Iterable[float | None], confidence: float = CONFIDENCE, positive: bool = False) -> Summary:
    """n, mean, sd, 95 % interval (positive_ci when positive, else Student-t), median, min, max."""
    x = clean(values)
    if not x.size:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan)
    lo, hi = interval(x, positive, confidence)
    return Summary(int(x.size), float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else math.nan,
                   lo, hi, float(np.median(x)), float(x.min()), float(x.max()))


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's two-sided t-test: (t, p). Two constant samples give p = 1 if equal, else 0."""
    a, b = clean(a), clean(b)
    va, vb = a.var(ddof=1), b.var(ddof=1)
    if va == 0 and vb == 0:
        same = a.mean() == b.mean()
        return (0.0 if same else math.copysign(math.inf, a.mean() - b.mean()), 1.0 if same else 0.0)
    r = _st.ttest_ind(a, b, equal_var=False)
    return float(r.statistic), float(r.pvalue)


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Mann-Whitney U, two-sided (exact for small samples without ties): (U of a, p)."""
    a, b = clean(a), clean(b)
    r = _st.mannwhitneyu(a, b, alternative="two-sided")
    return float(r.statistic), float(r.pvalue)


@dataclass(frozen=True)
class TestResult:
    test: str
    n_a: int
    n_b: int
    statistic: float | None
    p: float | None
    alpha: float
    verdict: str       # "significant", "not significant" or "n too small"

    @property
    def significant(self) -> bool:
        return self.verdict == SIGNIFICANT

    def with_p(self, p: float | None) -> "TestResult":
        """The same result judged with another (e.g. Holm-adjusted) p-value."""
        if p is None or self.verdict == N_TOO_SMALL:
            return self
        return TestResult(self.test, self.n_a, self.n_b, self.statistic, p, self.alpha,
                          SIGNIFICANT if p < self.alpha else NOT_SIGNIFICANT)


def compare(a: Iterable[float | None], b: Iterable[float | None], test: str = "welch",
            alpha: float = ALPHA, min_n: int = MIN_N) -> TestResult:
    """Is the difference between samples a and b significant at alpha? Never claimed below min_n."""
    if test not in TESTS:
        raise ValueError(f"unknown test '{test}', accepted: {', '.join(TESTS)}")
    xa, xb = clean(a), clean(b)
    if xa.size < min_n or xb.size < min_n:
        return TestResult(test, int(xa.size), int(xb.size), None, None, alpha, N_TOO_SMALL)
    stat, p = welch(xa, xb) if test == "welch" else mann_whitney(xa, xb)
    return TestResult(test, int(xa.size), int(xb.size), stat, p, alpha,
                      SIGNIFICANT if p < alpha else NOT_SIGNIFICANT)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (None entries are skipped and kept as None)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):  # type: ignore[arg-type, return-value]
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


def adjust(results: Sequence[TestResult], correction: str = "none") -> list[TestResult]:
    """Apply a multiple-comparison correction over one family of tests."""
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction '{correction}', accepted: {', '.join(CORRECTIONS)}")
    if correction == "none":
        return list(results)
    adj = holm([r.p for r in results])
    return [r.with_p(p) for r, p in zip(results, adj)]


def pct_diff(a: float, b: float) -> float:
    """How much larger a is than b, in % of b (nan when b is 0 or missing)."""
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b == 0:
        return math.nan
    return 100.0 * (a - b) / b


def method_short(test: str = "welch", alpha: float = ALPHA, correction: str = "none") -> str:
    """'Welch's t-test (two-sided, unequal variances), p < 0.01' (+ ', Holm-adjusted')."""
    return f"{TESTS[test]}, p < {alpha:g}" + (", Holm-adjusted" if correction == "holm" else "")


def method_text(test: str = "welch", alpha: float = ALPHA, correction: str = "none",
                n_tests: int | None = None, min_n: int = MIN_N) -> str:
    """One sentence stating how significance was decided, for the report."""
    s = (f"{TESTS[test]} on per-trial values, significant when p < {alpha:g}; "
         f"cells with fewer than {min_n} successful trials on either side are marked '{N_TOO_SMALL}'")
    if correction == "holm":
        s += f"; p-values Holm-adjusted over the {n_tests} tests of each table" if n_tests is not None \
            else "; p-values Holm-adjusted within each table"
    else:
        s += "; no multiple-comparison correction"
        if n_tests:
            s += f" ({n_tests} tests: about {alpha * n_tests:.2g} false positives expected by chance)"
    return s + (". " + INTERVAL_TEXT)


INTERVAL_TEXT = ("Intervals of goodputs and times are 95 % confidence intervals of the geometric mean: a Student-t "
                 "interval on the logarithms of the values, transformed back, so they never go below zero (goodputs "
                 "and times are positive and skewed, close to log-normal, for which this interval is exact even at "
                 "n = 3); the value shown is the arithmetic mean, which is at least the geometric mean and lies above "
                 "the interval only when the trials are very unequal (marked †). Other quantities (CPU cost, bytes, "
                 "counts) get Student-t 95 % confidence intervals of the mean.")


def finite(v: Any) -> float | None:
    """v as a float, or None when it is missing, not a number or not finite."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
