"""Statistics of repeated trials: means, 95 % intervals that keep a quantity's range, comparisons
with three verdicts, Holm, and the comparisons' intervals at their verdict's level.

Intervals (SCALES): ci() is the Student-t interval of the mean (signed quantities); positive_ci()
the log-t interval of the geometric mean (goodputs and times, never below zero); count_ci() the
Poisson / quasi-Poisson interval of a mean count; bootstrap_ci() the BCa bootstrap interval (fixed
seed) of a non-negative mean that can be 0; wilson() a proportion's. A comparison's ratio or
difference interval is at the confidence level its verdict was tested at (holm_levels).

Comparisons (compare): the method matches the interval. Goodputs and times are compared on
their logarithms: Welch's t-test of the difference of log means (the log of the ratio of
geometric means), reported as that ratio with its CI at the verdict's level (h3/h2 = 0.82 [0.75, 0.9]). Each
comparison ends in one of three verdicts: 'different' (the difference test is significant
after the family's Holm correction), 'equivalent' (two one-sided tests show the ratio within
[1/(1+M), 1+M], M = 10 % by default, after Holm over the family's equivalence tests), or
'inconclusive' (with the repetitions that would likely decide it). Never a claim below 3 values
per side ('n too small'). alpha = 0.01 by default.

Pure functions on sequences of numbers; None, NaN and inf are dropped first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import special as _sp
from scipy import stats as _st


# Student's t and the normal distribution through scipy.special's ufuncs: what scipy.stats.t and
# norm compute inside (stdtr, stdtrit, ndtri), without their per-call argument handling, which
# dominated a report's (and the simulations') time.
def _t_ppf(q: float, df: float) -> float:
    return float(_sp.stdtrit(df, q))


def _t_sf(x: float, df: float) -> float:
    return float(_sp.stdtr(df, -x))


def _t_cdf(x: float, df: float) -> float:
    return float(_sp.stdtr(df, x))


def _z(q: float) -> float:
    return float(_sp.ndtri(q))

ALPHA = 0.01
MIN_N = 3
CONFIDENCE = 0.95
MARGIN = 0.10          # equivalence: the ratio within [1/1.1, 1.1]
TESTS = {
    "welch-log": ("Welch's t-test on log values (two-sided), the ratio of geometric means with its interval at "
                  "the verdict's level"),
    "welch": "Welch's t-test (two-sided, unequal variances) on the values",
    "mwu": "Mann-Whitney U test (two-sided)",
}
DEFAULT_TEST = "welch-log"
PAIRED_TEST = "paired-log"   # compare_paired: twins of two runs with seeded link draws
CORRECTIONS = {"holm": "Holm-Bonferroni correction", "none": "no multiple-comparison correction"}
DEFAULT_CORRECTION = "holm"

# verdicts of a comparison (never "≈" or "tied": equivalence is tested, or the result is inconclusive)
DIFFERENT = "different"
SIGNIFICANT = DIFFERENT
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
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
    gmean: float = math.nan     # the geometric mean (scale 'log' with every value > 0), else nan
    scale: str = "signed"       # the interval's method (SCALES)

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    @property
    def center(self) -> float:
        """The value the interval is for: the geometric mean on the log scale, else the arithmetic mean."""
        return self.gmean if math.isfinite(self.gmean) else self.mean


def mean(values: Iterable[float | None]) -> float:
    x = clean(values)
    return float(x.mean()) if x.size else math.nan


def ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student-t confidence interval of the mean; (nan, nan) with fewer than 2 values."""
    x = clean(values)
    if x.size < 2:
        return (math.nan, math.nan)
    m = float(x.mean())
    half = _t_ppf(0.5 + confidence / 2, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
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
    half = _t_ppf(0.5 + confidence / 2, y.size - 1) * float(y.std(ddof=1)) / math.sqrt(y.size)
    m = float(y.mean())
    return (math.exp(m - half), math.exp(m + half))


def positive_ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The 95 % interval of a quantity that cannot be negative (a goodput, a time): never below zero.

    log_ci() when every value is > 0. When some values are 0 (a TLS time of 0 where QUIC's
    handshake is inside connect, a server wait clipped at 0) the logarithm is undefined: the
    bootstrap interval of the arithmetic mean (bootstrap_ci), which stays within the values' range.
    Fewer than 2 values -> (nan, nan).
    """
    x = clean(values)
    if x.size < 2:
        return (math.nan, math.nan)
    if (x > 0).all():
        return log_ci(x, confidence)
    return bootstrap_ci(x, confidence)


BOOTSTRAP_SEED = 20261127      # fixed: the same run gives the same report
BOOTSTRAP_RESAMPLES = 4999


def bootstrap_ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The bias-corrected and accelerated (BCa) bootstrap interval of the arithmetic mean (Efron
    & Tibshirani 1993, ch. 14), from a fixed seed so that a report is reproducible. For
    non-negative, skewed quantities that can be 0 (CPU seconds, link lateness, sojourn times, stall
    time, a per-trial ratio): every bound is a quantile of resampled means, so the interval never
    leaves the values' range (never below 0; a ratio never above 1). The percentile interval where
    BCa's correction is undefined (few distinct values). Like every bootstrap it undercovers at the
    n of a testbed cell (test_intervals: about 86 % for 95 % at n = 10 on zero-inflated skewed
    data). Fewer than 2 values -> (nan, nan); all values equal -> (x, x).

    The same computation as scipy.stats.bootstrap(method="BCa") (test_intervals compares them),
    written out on numpy arrays: scipy's per-call argument handling made it 20 times slower, and a
    report computes it for every cell's CPU, link and video quantities."""
    x = clean(values)
    if x.size < 2:
        return (math.nan, math.nan)
    lo_x, hi_x = float(x.min()), float(x.max())
    if lo_x == hi_x:
        return (lo_x, lo_x)
    n = x.size
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = x[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
    theta = float(x.mean())
    a = 1 - confidence
    # bias: the (mid-rank) share of resampled means below the estimate; acceleration: the jackknife's skewness
    share = (np.count_nonzero(means < theta) + np.count_nonzero(means <= theta)) / (2 * means.size)
    jack = (x.sum() - x) / (n - 1)
    d = jack.mean() - jack
    den = 6 * float((d ** 2).sum()) ** 1.5
    q = [a / 2, 1 - a / 2]
    if 0 < share < 1 and den > 0:
        z0, acc = float(_sp.ndtri(share)), float((d ** 3).sum()) / den
        q = [float(_sp.ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z)))) for z in (_z(a / 2), _z(1 - a / 2))]
    lo, hi = (float(v) for v in np.quantile(means, q))
    return (max(lo, lo_x), min(hi, hi_x))


def poisson_ci(total: float, n: int = 1, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Garwood's exact interval of a Poisson mean per unit, from a total count over n units
    (Garwood 1936): [chi2(a/2; 2k) / 2n, chi2(1 - a/2; 2k + 2) / 2n], lower bound 0 for k = 0
    (k = 0, n = 1 at 95 %: [0, 3.689])."""
    if n <= 0:
        return (math.nan, math.nan)
    a = 1 - confidence
    k = float(total)
    # chi2.ppf(q, df) through scipy.special's inverse survival function chdtri(df, 1 - q)
    lo = 0.0 if k <= 0 else float(_sp.chdtri(2 * k, 1 - a / 2)) / 2
    hi = float(_sp.chdtri(2 * k + 2, a / 2)) / 2
    return (lo / n, hi / n)


def count_ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The interval of the mean of a count per trial (retransmitted segments, lost packets, stalls):
    never below zero. With no more spread than a Poisson count (variance <= mean, or every count 0)
    Garwood's exact Poisson interval of the total (poisson_ci); counts of network events are
    usually overdispersed (variance >> mean: one trial meets a loss burst), and then the
    quasi-Poisson interval, the Wald interval of ln(mean) with the dispersion estimated from the
    sample (se = s / (mean sqrt(n)), Student-t on n - 1 degrees of freedom; the intercept-only
    quasi-Poisson GLM of McCullagh & Nelder 1989, 9.2), transformed back: the negative-binomial
    family's mean-variance relation is not assumed, only that the variance grows with the mean.
    Fewer than 2 values -> (nan, nan)."""
    x = clean(values)
    if x.size < 2:
        return (math.nan, math.nan)
    if (x < 0).any():
        return ci(x, confidence)        # not a count: the Student-t interval
    m, v = float(x.mean()), float(x.var(ddof=1))
    if m == 0 or v <= m:
        return poisson_ci(float(x.sum()), int(x.size), confidence)
    half = _t_ppf(0.5 + confidence / 2, x.size - 1) * math.sqrt(v) / (m * math.sqrt(x.size))
    return (m * math.exp(-half), m * math.exp(half))


def gmean(values: Iterable[float | None]) -> float:
    """The geometric mean exp(mean(ln x)); nan when a value is <= 0 or there is none."""
    x = clean(values)
    if not x.size or (x <= 0).any():
        return math.nan
    if (x == x[0]).all():
        return float(x[0])          # exactly, not exp(ln x) one rounding away
    return float(math.exp(np.log(x).mean()))


# how a quantity's interval is built (docs/report.md, "Intervals"): its range decides
LOG, COUNT, NONNEG, SIGNED = "log", "count", "nonneg", "signed"
SCALES = {
    LOG: "strictly positive and multiplicative (goodputs, times, latencies): the geometric mean with the log-t "
         "interval; with a value of 0 in the cell, the arithmetic mean with the BCa bootstrap interval",
    COUNT: "a count per trial: the arithmetic mean with Garwood's exact Poisson interval, or the quasi-Poisson "
           "interval when the counts are overdispersed",
    NONNEG: "non-negative and skewed, with zeros (CPU seconds, link lateness, sojourn times, stall time, ratios): "
            "the arithmetic mean with the BCa bootstrap interval (fixed seed)",
    SIGNED: "can be negative (QoE): the arithmetic mean with the Student-t interval",
}


def interval(values: Iterable[float | None], positive: bool = False,
             confidence: float = CONFIDENCE, scale: str | None = None) -> tuple[float, float]:
    """The 95 % interval of a quantity on its scale (SCALES; positive=True is the log scale):
    positive_ci, count_ci, bootstrap_ci or the Student-t ci()."""
    scale = scale or (LOG if positive else SIGNED)
    if scale == LOG:
        return positive_ci(values, confidence)
    if scale == COUNT:
        return count_ci(values, confidence)
    if scale == NONNEG:
        return bootstrap_ci(values, confidence)
    return ci(values, confidence)


def summarize(values: Iterable[float | None], confidence: float = CONFIDENCE, positive: bool = False,
              scale: str | None = None) -> Summary:
    """n, mean, sd, 95 % interval on the quantity's scale (interval()), median, min, max, and the
    geometric mean on the log scale."""
    scale = scale or (LOG if positive else SIGNED)
    x = clean(values)
    if not x.size:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan, scale)
    lo, hi = interval(x, confidence=confidence, scale=scale)
    return Summary(int(x.size), float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else math.nan,
                   lo, hi, float(np.median(x)), float(x.min()), float(x.max()),
                   gmean(x) if scale == LOG else math.nan, scale)


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
class LogWelch:
    """Welch's t on ln(a) and ln(b): the difference of the log means d (ln of the ratio of the
    geometric means), its standard error and Welch-Satterthwaite degrees of freedom."""
    d: float
    se: float
    df: float

    @property
    def t(self) -> float:
        return self.d / self.se if self.se > 0 else math.copysign(math.inf, self.d) if self.d else 0.0

    def p_two_sided(self) -> float:
        if self.se == 0:
            return 1.0 if self.d == 0 else 0.0
        return 2 * _t_sf(abs(self.t), self.df)

    def ratio_ci(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        if self.se == 0:
            return (math.exp(self.d), math.exp(self.d))
        half = _t_ppf(0.5 + confidence / 2, self.df) * self.se
        return (math.exp(self.d - half), math.exp(self.d + half))

    def p_equivalent(self, margin: float) -> float:
        """Two one-sided tests (Schuirmann's TOST) of |d| < ln(1 + margin): the larger of the two
        one-sided p-values; small means the ratio lies within [1/(1+margin), 1+margin]."""
        delta = math.log1p(margin)
        if self.se == 0:
            return 0.0 if abs(self.d) < delta else 1.0
        p_low = _t_sf((self.d + delta) / self.se, self.df)     # H0: d <= -delta
        p_high = _t_cdf((self.d - delta) / self.se, self.df)   # H0: d >= +delta
        return max(p_low, p_high)


def log_welch(a: np.ndarray, b: np.ndarray) -> LogWelch:
    la, lb = np.log(a), np.log(b)
    va, vb = float(la.var(ddof=1)) / la.size, float(lb.var(ddof=1)) / lb.size
    se = math.sqrt(va + vb)
    if se == 0:
        return LogWelch(float(la.mean() - lb.mean()), 0.0, float(la.size + lb.size - 2))
    df = (va + vb) ** 2 / ((va ** 2 / (la.size - 1) if va else 0.0) + (vb ** 2 / (lb.size - 1) if vb else 0.0))
    return LogWelch(float(la.mean() - lb.mean()), se, df)


@dataclass(frozen=True)
class TestResult:
    """One comparison of a with b. verdict: 'different' (significant after the family's
    correction: a is higher or lower, see ratio), 'equivalent' (the ratio is shown to lie within
    ±margin by two one-sided tests, after the correction), 'inconclusive' (neither), or
    'n too small'. ratio is the ratio of geometric means a/b with its interval at the verdict's
    level (log-Welch; `level`)."""
    test: str
    n_a: int
    n_b: int
    statistic: float | None
    p: float | None                 # the difference test's p after correction (raw without one)
    alpha: float
    verdict: str
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    p_raw: float | None = None
    p_equiv: float | None = None    # TOST p after correction
    p_equiv_raw: float | None = None
    margin: float = 0.10
    reps_to_decide: int | None = None   # inconclusive: repetitions per side that would likely decide
    # the difference scale (compare_difference): mean a - mean b with its interval at the verdict's
    # level; margin is then
    # absolute (in the metric's unit), or None when no equivalence margin is declared
    difference: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None
    margin_abs: float | None = None
    no_variation: bool = False          # both samples constant: a t-test has nothing to go on
    # the estimate behind the test, on its scale (log ratio, or a - b), its standard error and the
    # equivalence bound on that scale: what reps_to_decide needs when a correction moves the verdict
    effect: float | None = None
    effect_se: float | None = None
    equiv_bound: float | None = None
    paired: bool = False                # compare_paired: n_a = n_b pairs, the effect's df n - 1
    effect_df: float | None = None      # the effect's degrees of freedom (Welch-Satterthwaite, or n - 1)
    # the confidence level of ratio_low/high (diff_low/high): the level the verdict was tested at,
    # 1 - alpha for one comparison, 1 - alpha/k at Holm's step k (with_level); so the interval
    # excludes 1 (0 on the difference scale) exactly when the difference test says 'different'
    level: float = 1 - ALPHA

    @property
    def significant(self) -> bool:
        return self.verdict == DIFFERENT

    @property
    def inside_margin(self) -> bool:
        """A difference shown to be smaller than the equivalence margin: both tests decided
        (different, and equivalent within the margin). Said beside the verdict, so a real but
        small difference is never read as a large one."""
        return inside_margin(self.verdict, self.p_equiv, self.alpha)

    @property
    def higher(self) -> bool | None:
        """a above b (a 'different' verdict's direction)."""
        if self.ratio is not None:
            return self.ratio > 1
        return None if self.difference is None else self.difference > 0

    def with_p(self, p: float | None, p_equiv: float | None = None, family: int = 1) -> "TestResult":
        """The same result judged with other (e.g. Holm-adjusted over `family` comparisons)
        p-values; an inconclusive one's repetitions to decide are those at alpha / family, the
        strictest threshold Holm can apply to it (Bonferroni's: an upper bound for Holm)."""
        if self.verdict == N_TOO_SMALL:
            return self
        p = self.p if p is None else p
        p_equiv = self.p_equiv if p_equiv is None else p_equiv
        verdict = _verdict(p, p_equiv, self.alpha)
        need = None
        if verdict == INCONCLUSIVE:
            need = self.reps_to_decide
            if self.effect is not None and self.effect_se is not None:
                need = reps_to_decide(LogWelch(self.effect, self.effect_se, 0.0), self.n_a, self.n_b,
                                      self.alpha / max(family, 1), None, delta=self.equiv_bound, paired=self.paired)
        return replace(self, p=p, p_equiv=p_equiv, verdict=verdict, reps_to_decide=need)

    def with_level(self, level: float) -> "TestResult":
        """The same result with its interval (ratio or difference) at confidence `level`, from the
        effect, its standard error and degrees of freedom; unchanged without them."""
        if self.effect is None or self.effect_se is None or self.effect_df is None:
            return replace(self, level=level)
        half = _t_ppf(0.5 + level / 2, self.effect_df) * self.effect_se if self.effect_se > 0 else 0.0
        lo, hi = self.effect - half, self.effect + half
        if self.ratio is not None:
            return replace(self, ratio_low=math.exp(lo), ratio_high=math.exp(hi), level=level)
        if self.difference is not None:
            return replace(self, diff_low=lo, diff_high=hi, level=level)
        return replace(self, level=level)


def inside_margin(verdict: str | None, p_equiv: float | None, alpha: float | None) -> bool:
    """Different, and also equivalent within the margin (p_equiv, after correction, below alpha)."""
    return bool(verdict == DIFFERENT and p_equiv is not None and alpha is not None and p_equiv == p_equiv
                and p_equiv < alpha)


def margin_label(margin: float, margin_abs: float | None = None) -> str:
    """'±10 %' for a ratio's margin (a fraction), '±0.5' for a difference's (in the metric's unit)."""
    return f"±{margin_abs:g}" if margin_abs is not None else f"±{100 * margin:g} %"


def margin_text(t: "TestResult") -> str | None:
    """The margin a different result was also shown equivalent within ('±10 %', or '±0.5' on the
    difference scale); None when it was not."""
    if not t.inside_margin:
        return None
    return margin_label(t.margin, t.margin_abs if t.difference is not None and t.ratio is None else None)


def inside_margin_words(within: str | None) -> str:
    """How a different result inside the margin `within` ('±10 %') is said; '' without one."""
    return f"inside the {within} margin" if within else ""


def _verdict(p: float | None, p_equiv: float | None, alpha: float) -> str:
    if p is not None and p < alpha:
        return DIFFERENT
    if p_equiv is not None and p_equiv < alpha:
        return EQUIVALENT
    return INCONCLUSIVE


def reps_to_decide(lw: LogWelch, n_a: int, n_b: int, alpha: float, margin: float | None, cap: int = 1000,
                   delta: float | None = None, paired: bool = False) -> int | None:
    """Repetitions per side that would likely (80 % power) decide an inconclusive comparison, at
    the observed variance: enough to show the observed difference, or enough to show
    equivalence if the observed ratio lies well inside the margin; the smaller of the two, and
    always more than either side has now. Each is the smallest n with n >= 2 s^2 (q_a + q_b)^2 / e^2
    on t quantiles at 2n - 2 degrees of freedom (the normal approximation's z undercounts at the
    small n of a testbed). None when neither is within reach (cap). delta: the equivalence bound
    on lw's scale (default ln(1 + margin); None with no margin: no equivalence test). paired: lw is
    a paired comparison of n_a = n_b pairs (compare_paired): the same requirement (2 x half the
    per-pair variance) on t quantiles at n - 1 degrees of freedom."""
    if lw.se == 0:
        return None
    var1 = lw.se ** 2 / (1 / n_a + 1 / n_b)          # the per-observation variance of a log value
    if delta is None and margin is not None:
        delta = math.log1p(margin)
    room = (delta - abs(lw.d)) if delta is not None else 0.0
    floor = max(MIN_N, max(n_a, n_b) + 1)

    def smallest_n(effect: float, tail: float) -> int | None:
        z = _z(1 - tail) + _z(0.8)
        n = max(floor, math.ceil(2 * var1 * z ** 2 / effect ** 2))     # the normal estimate: a lower bound
        while n <= cap:
            df = n - 1 if paired else 2 * n - 2
            q = _t_ppf(1 - tail, df) + _t_ppf(0.8, df)
            if n >= 2 * var1 * q ** 2 / effect ** 2:
                return n
            n += 1
        return None

    need = [n for n in (smallest_n(lw.d, alpha / 2) if lw.d != 0 else None,
                        smallest_n(room, alpha) if room > 0 else None) if n is not None]
    return min(need) if need else None


def compare(a: Iterable[float | None], b: Iterable[float | None], test: str = DEFAULT_TEST,
            alpha: float = ALPHA, min_n: int = MIN_N, margin: float = MARGIN) -> TestResult:
    """Compare samples a and b: ratio of geometric means with its interval at 1 - alpha (the
    verdict's level; adjust() moves it to Holm's), a two-sided test of a
    difference and a TOST of equivalence within ±margin (both on log values for 'welch-log');
    never a claim below min_n. Samples with a value <= 0 have no logarithm: then 'welch-log'
    runs Welch on the values themselves (test 'welch', no ratio interval, no equivalence test)."""
    if test not in TESTS:
        raise ValueError(f"unknown test '{test}', accepted: {', '.join(TESTS)}")
    xa, xb = clean(a), clean(b)
    if xa.size < min_n or xb.size < min_n:
        return TestResult(test, int(xa.size), int(xb.size), None, None, alpha, N_TOO_SMALL, margin=margin)
    positive = bool((xa > 0).all() and (xb > 0).all())
    if test == "welch-log" and not positive:
        test = "welch"
    ratio = lo = hi = p_equiv = None
    need = None
    if positive:
        lw = log_welch(xa, xb)
        ratio = math.exp(lw.d)
        lo, hi = lw.ratio_ci(1 - alpha)
        if test == "welch-log":
            p_equiv = lw.p_equivalent(margin)
    if test == "welch-log":
        stat, p = lw.t, lw.p_two_sided()
    elif test == "welch":
        stat, p = welch(xa, xb)
    else:
        stat, p = mann_whitney(xa, xb)
    verdict = _verdict(p, p_equiv, alpha)
    if verdict == INCONCLUSIVE and positive:
        need = reps_to_decide(lw, int(xa.size), int(xb.size), alpha, margin)
    return TestResult(test, int(xa.size), int(xb.size), stat, p, alpha, verdict, ratio, lo, hi, p, p_equiv,
                      p_equiv, margin, need,
                      level=1 - alpha,
                      **(dict(effect=lw.d, effect_se=lw.se, effect_df=lw.df, equiv_bound=math.log1p(margin))
                         if positive else {}))


def compare_paired(a: Sequence[float | None], b: Sequence[float | None], alpha: float = ALPHA,
                   min_n: int = MIN_N, margin: float = MARGIN) -> TestResult:
    """a vs b measured in pairs, a[i] with b[i] (twins: two runs' trials that met the same seeded
    link draws): the paired t-test on the log ratios ln(a_i / b_i) — the ratio of geometric means
    with its interval at 1 - alpha, a two-sided test of a difference and a TOST of equivalence within ±margin, on
    n - 1 degrees of freedom. Valid whatever the twins' correlation; where they are alike it is far
    more powerful than the unpaired test. A pair with a missing or non-positive value is left out."""
    both = ((finite(x), finite(y)) for x, y in zip(a, b))
    pairs = [(x, y) for x, y in both if x is not None and y is not None and x > 0 and y > 0]
    n = len(pairs)
    if n < min_n:
        return TestResult(PAIRED_TEST, n, n, None, None, alpha, N_TOO_SMALL, margin=margin, paired=True)
    d = np.log([x for x, _ in pairs]) - np.log([y for _, y in pairs])
    lw = LogWelch(float(d.mean()), float(d.std(ddof=1)) / math.sqrt(n), float(n - 1))
    p, p_equiv = lw.p_two_sided(), lw.p_equivalent(margin)
    lo, hi = lw.ratio_ci(1 - alpha)
    verdict = _verdict(p, p_equiv, alpha)
    need = reps_to_decide(lw, n, n, alpha, margin, paired=True) if verdict == INCONCLUSIVE else None
    return TestResult(PAIRED_TEST, n, n, lw.t, p, alpha, verdict, math.exp(lw.d), lo, hi, p, p_equiv, p_equiv,
                      margin, need, no_variation=lw.se == 0, effect=lw.d, effect_se=lw.se,
                      equiv_bound=math.log1p(margin), paired=True, effect_df=lw.df, level=1 - alpha)


def welch_difference(a: np.ndarray, b: np.ndarray) -> LogWelch:
    """Welch's t on the values: the difference of the means (mean a - mean b), its standard error
    and Welch-Satterthwaite degrees of freedom (LogWelch's fields on the value scale)."""
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se = math.sqrt(va + vb)
    d = float(a.mean() - b.mean())
    if se == 0:
        return LogWelch(d, 0.0, float(a.size + b.size - 2))
    df = (va + vb) ** 2 / ((va ** 2 / (a.size - 1) if va else 0.0) + (vb ** 2 / (b.size - 1) if vb else 0.0))
    return LogWelch(d, se, df)


def compare_difference(a: Iterable[float | None], b: Iterable[float | None], alpha: float = ALPHA,
                       min_n: int = MIN_N, margin_abs: float | None = None) -> TestResult:
    """Compare samples whose values can be 0 or negative (stall time, QoE), where a geometric mean
    is undefined: the difference of the means a - b with its interval at 1 - alpha (Welch-Satterthwaite), Welch's
    two-sided t-test, and, when an equivalence margin is declared in the metric's unit, two
    one-sided tests of |a - b| < margin_abs. Two samples without any variation (every stall time
    0) give no verdict beyond inconclusive unless their means differ: a t-test has no variance to
    work with (no_variation is set, so the report can say 'the same in every trial')."""
    xa, xb = clean(a), clean(b)
    if xa.size < min_n or xb.size < min_n:
        return TestResult("welch-diff", int(xa.size), int(xb.size), None, None, alpha, N_TOO_SMALL,
                          margin=0.0, margin_abs=margin_abs)
    w = welch_difference(xa, xb)
    # two identical constant samples: no test to make (no p, so no place in a Holm family)
    p = None if w.se == 0 and w.d == 0 else w.p_two_sided()
    if w.se > 0:
        half = _t_ppf(1 - alpha / 2, w.df) * w.se
        lo, hi = w.d - half, w.d + half
    else:
        lo = hi = w.d
    p_equiv = None
    if margin_abs is not None and w.se > 0:
        p_low = _t_sf((w.d + margin_abs) / w.se, w.df)     # H0: d <= -margin
        p_high = _t_cdf((w.d - margin_abs) / w.se, w.df)   # H0: d >= +margin
        p_equiv = max(p_low, p_high)
    verdict = _verdict(p, p_equiv, alpha)
    need = reps_to_decide(w, int(xa.size), int(xb.size), alpha, None, delta=margin_abs) \
        if verdict == INCONCLUSIVE else None
    return TestResult("welch-diff", int(xa.size), int(xb.size), w.t, p, alpha, verdict, p_raw=p, p_equiv=p_equiv,
                      p_equiv_raw=p_equiv, margin=0.0, reps_to_decide=need, difference=w.d, diff_low=lo,
                      diff_high=hi, margin_abs=margin_abs, no_variation=w.se == 0, effect=w.d, effect_se=w.se,
                      equiv_bound=margin_abs, effect_df=w.df, level=1 - alpha)


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a proportion k/n (nan, nan for n = 0)."""
    if n <= 0:
        return math.nan, math.nan
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def compare_proportions(k_a: int, n_a: int, k_b: int, n_b: int, alpha: float = ALPHA,
                        min_n: int = MIN_N) -> TestResult:
    """Proportion a (k_a of n_a) against b: Fisher's exact test, two-sided. 'different' or
    'inconclusive' only (no equivalence margin for a proportion); `difference` is k_a/n_a − k_b/n_b."""
    if n_a < min_n or n_b < min_n:
        return TestResult("fisher", int(n_a), int(n_b), None, None, alpha, N_TOO_SMALL, margin=0.0)
    res = _st.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]])
    p = float(res.pvalue)
    return TestResult("fisher", int(n_a), int(n_b), float(res.statistic), p, alpha, _verdict(p, None, alpha),
                      p_raw=p, margin=0.0, difference=k_a / n_a - k_b / n_b)


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


def adjust(results: Sequence[TestResult], correction: str = DEFAULT_CORRECTION) -> list[TestResult]:
    """Apply a multiple-comparison correction over one family of comparisons: Holm over the
    difference tests' p-values, and Holm over the equivalence tests' p-values."""
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction '{correction}', accepted: {', '.join(CORRECTIONS)}")
    if correction == "none":
        return list(results)
    raw = [r.p_raw if r.p_raw is not None else r.p for r in results]
    adj = holm(raw)
    adj_eq = holm([r.p_equiv_raw for r in results])
    family = sum(p is not None and not math.isnan(p) for p in raw)
    judged = [r.with_p(p, pe, family) for r, p, pe in zip(results, adj, adj_eq)]
    return [r.with_level(level) if level is not None else r
            for r, level in zip(judged, holm_levels(raw, [r.alpha for r in judged]))]


def holm_levels(pvalues: Sequence[float | None], alphas: Sequence[float]) -> list[float | None]:
    """The confidence level of each comparison's interval at the level Holm tested it (Aickin &
    Gensler 1996, Am J Public Health 86:726): the hypothesis of rank k (1-based, smallest p first)
    among the r that Holm rejects gets 1 - alpha/(m - k + 1), every other 1 - alpha/(m - r). A
    rejected comparison's interval then excludes the null and no other's does, so an interval
    beside a verdict never says more or less than the verdict. None for entries without a p."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    rejected = 0
    for rank, i in enumerate(order):
        if float(pvalues[i]) < alphas[i] / (m - rank):  # type: ignore[arg-type]
            out[i] = 1 - alphas[i] / (m - rank)
            rejected += 1
        else:
            break
    for i in order[rejected:]:
        out[i] = 1 - alphas[i] / (m - rejected)
    return out


def pct_diff(a: float, b: float) -> float:
    """How much larger a is than b, in % of b (nan when b is 0 or missing)."""
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b == 0:
        return math.nan
    return 100.0 * (a - b) / b


def method_short(test: str = DEFAULT_TEST, alpha: float = ALPHA, correction: str = DEFAULT_CORRECTION,
                 margin: float = MARGIN) -> str:
    """'log-Welch, Holm over 12 comparisons, alpha 0.01, equivalence ±10 %' (the terminal's line)."""
    name = {"welch-log": "Welch on logs", "welch": "Welch", "mwu": "Mann-Whitney U"}[test]
    corr = "Holm" if correction == "holm" else "no correction"
    return f"{name}, {corr}, alpha {alpha:g}" + (f", equivalence ±{100 * margin:g} %" if test == "welch-log" else "")


def method_text(test: str = DEFAULT_TEST, alpha: float = ALPHA, correction: str = DEFAULT_CORRECTION,
                n_tests: int | None = None, min_n: int = MIN_N, margin: float = MARGIN,
                family: str = "the comparisons of each table") -> str:
    """How comparisons were decided, for the report: the test, the family, the three verdicts."""
    s = f"{TESTS[test]}. Verdicts: different (p < {alpha:g}"
    if correction == "holm":
        s += f" after Holm-Bonferroni over {family}" + (f", {n_tests} comparisons" if n_tests is not None else "")
    else:
        s += ", no multiple-comparison correction" + (
            f": with {n_tests} comparisons about {alpha * n_tests:.2g} false ones are expected by chance" if n_tests else "")
    s += ")"
    if test == "welch-log":
        s += (f"; equivalent within ±{100 * margin:g} % (two one-sided tests on logs show the ratio within "
              f"[{1 / (1 + margin):.3f}, {1 + margin:g}], p < {alpha:g}"
              + (", Holm over the same family" if correction == "holm" else "") + ")")
    s += (f"; otherwise inconclusive, with the repetitions per side that would likely decide it (80 % power at "
          "the observed variance" + (", at alpha over the family's size" if correction == "holm" else "")
          + f"). Cells with fewer than {min_n} successful trials on either side are "
          f"'{N_TOO_SMALL}'. Nothing is called equal, tied or ≈ without the equivalence test")
    return s + ". " + INTERVAL_TEXT


INTERVAL_TEXT = ("The interval beside a verdict (a ratio or a difference) is at the level that verdict was tested at: "
                 "1 − alpha for a single comparison, 1 − alpha/k at Holm's step k (Aickin & Gensler 1996), so it "
                 "excludes 1 (0 for a difference) exactly when the verdict is 'different'. The interval beside a "
                 "cell's value is a 95 % confidence interval that keeps the quantity's range: goodputs and times "
                 "are shown as their geometric mean with the Student-t interval of the logarithms, transformed back "
                 "(never below zero, exact for log-normal data even at n = 3; with a 0 in the cell, the arithmetic "
                 "mean with a bootstrap interval); counts per trial get Garwood's Poisson interval, or the "
                 "quasi-Poisson one when overdispersed; other non-negative quantities (CPU seconds, lateness, "
                 "sojourn, stall time, ratios) the arithmetic mean with a BCa bootstrap interval (fixed seed); "
                 "counted outcomes Wilson's; QoE, which can be negative, the Student-t interval.")


def finite(v: Any) -> float | None:
    """v as a float, or None when it is missing, not a number or not finite."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def estimate_digits(est: float, lo: float | None, hi: float | None, null: float | None = 1.0, sig: int = 3,
                    signed: bool = False, most: int = 8) -> tuple[str, str, str]:
    """An estimate and its interval as text with enough significant digits to tell them apart: at
    least `sig`, more until distinct bounds print distinct and a bound that is not the null value
    (1 for a ratio, 0 for a difference) does not print as it (never '1 [1, 1]' for a ratio shown to
    differ from 1)."""
    def f(x: float, k: int) -> str:
        return f"{x:+.{k}g}" if signed else f"{x:.{k}g}"
    if lo is None or hi is None:
        return f(est, sig), "", ""
    k = sig
    while k < most:
        a, b = f(lo, k), f(hi, k)
        nulls = [] if null is None else [f(null, k)]
        clash = (lo != hi and a == b) or (null is not None and ((lo != null and a in nulls)
                                                                or (hi != null and b in nulls)))
        if not clash:
            break
        k += 1
    return f(est, k), f(lo, k), f(hi, k)


def _p_text(p: float | None) -> str:
    return "p < 0.0001" if p is not None and p < 1e-4 else f"p {p:.2g}" if p is not None else ""


def comparison_phrase(other: str, verdict: str | None, ratio: float | None, lo: float | None, hi: float | None,
                      p: float | None, reps: float | None, difference: float | None = None,
                      diff_low: float | None = None, diff_high: float | None = None,
                      within: str | None = None) -> str:
    """One comparison in words for a table cell: 'vs h1: different, 1.32 [1.10, 1.58], p 0.003'
    (the ratio is the row's protocol over other); on the difference scale 'vs h1: different,
    diff +0.8 [+0.3, +1.3], p 0.003' (the row's protocol minus other). `within`: the margin (e.g.
    '±10 %') a different result was also shown equivalent within: 'inside the ±10 % margin'."""
    r = ""
    if ratio is not None:
        e, a, b = estimate_digits(ratio, lo, hi)
        r = f"{e} [{a}, {b}]" if a else e
    elif difference is not None:
        e, a, b = estimate_digits(difference, diff_low, diff_high, null=0.0, signed=True)
        r = f"diff {e}" + (f" [{a}, {b}]" if a else "")
    bits = [f"vs {other}: {verdict}"] + ([r] if r else [])
    if verdict == DIFFERENT and p is not None:
        bits.append(_p_text(p))
    if verdict == DIFFERENT and within:
        bits.append(inside_margin_words(within))
    if verdict == INCONCLUSIVE and reps is not None:
        bits.append(f"n>={int(reps)} to decide")
    return ", ".join(bits)
