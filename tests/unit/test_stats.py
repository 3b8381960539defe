"""Statistics on synthetic data with known answers."""

import math

import numpy as np
import pytest
from scipy import stats as st

from quicbench import stats


def welch_by_hand(a, b):
    """Welch's t and two-sided p from the textbook formulas (Welch-Satterthwaite df)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    return t, 2 * st.t.sf(abs(t), df)


def test_mean_sd_ci_textbook():
    s = stats.summarize([1, 2, 3, 4, 5])
    assert (s.n, s.mean, s.median, s.min, s.max) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s.sd == pytest.approx(math.sqrt(2.5))
    half = 2.776445 * math.sqrt(2.5) / math.sqrt(5)   # t(0.975, 4) from tables
    assert s.ci_low == pytest.approx(3 - half, rel=1e-6) and s.ci_high == pytest.approx(3 + half, rel=1e-6)
    assert s.half_width == pytest.approx(half, rel=1e-6)


def test_missing_values_are_dropped_and_small_samples_have_no_interval():
    assert stats.summarize([1.0, None, float("nan"), 3.0, float("inf")]).n == 2
    assert stats.mean([1.0, None, 3.0]) == 2.0
    assert all(math.isnan(v) for v in stats.ci([5.0]))
    empty = stats.summarize([])
    assert empty.n == 0 and math.isnan(empty.mean)


@pytest.mark.parametrize("n", [3, 5, 10, 20])
def test_ci_coverage_is_95_percent_for_normal_data(n):
    rng = np.random.default_rng(1000 + n)
    sims, mu = 4000, 50.0
    hits = 0
    for _ in range(sims):
        lo, hi = stats.ci(rng.normal(mu, 7.0, n))
        hits += lo <= mu <= hi
    # binomial sd of the coverage is 0.0034: +-0.015 is 4.4 sd
    assert abs(hits / sims - 0.95) < 0.015


def test_ci_coverage_near_95_percent_for_skewed_goodput_like_data():
    rng = np.random.default_rng(7)
    sims, n, sigma = 3000, 10, 0.3
    true_mean = math.exp(sigma ** 2 / 2) * 100
    hits = sum(lo <= true_mean <= hi for lo, hi in (stats.ci(100 * rng.lognormal(0, sigma, n)) for _ in range(sims)))
    assert 0.92 < hits / sims < 0.97


def test_welch_matches_the_formula():
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 1, 8), rng.normal(11, 3, 12)
    t, p = stats.welch(a, b)
    t2, p2 = welch_by_hand(a, b)
    assert t == pytest.approx(t2) and p == pytest.approx(p2)


def test_real_difference_is_found():
    rng = np.random.default_rng(11)
    r = stats.compare(rng.normal(100, 5, 10), rng.normal(80, 5, 10))
    assert r.significant and r.verdict == stats.DIFFERENT and r.p < 0.01 and r.test == "welch-log"
    assert r.ratio_low < r.ratio < r.ratio_high and r.ratio > 1
    # power: a 2-sd difference with n = 10 per side is found almost always
    found = sum(stats.compare(rng.normal(2, 1, 10), rng.normal(0, 1, 10)).significant for _ in range(500))
    assert found / 500 > 0.85


def test_no_difference_is_not_claimed():
    rng = np.random.default_rng(12)
    sims = 3000
    false_pos = sum(stats.compare(rng.normal(5, 1, 10), rng.normal(5, 1, 10)).significant for _ in range(sims))
    # alpha = 0.01: about 30 expected, binomial sd 5.4
    assert 0.003 < false_pos / sims < 0.02
    same = stats.compare([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    assert same.p == 1.0 and not same.significant


def test_n_too_small_makes_no_claim_even_for_huge_differences():
    r = stats.compare([1.0, 2.0], [100.0, 101.0, 102.0])
    assert r.verdict == stats.N_TOO_SMALL and r.p is None and not r.significant
    assert stats.compare([1, 2, 3], [7, 8, 9]).verdict != stats.N_TOO_SMALL


def test_mann_whitney_exact_small_sample_p_values():
    # completely separated samples: p = 2 / C(n1 + n2, n1)
    r5 = stats.compare([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], test="mwu")
    assert r5.p == pytest.approx(2 / math.comb(10, 5)) and r5.significant and r5.test == "mwu"
    r4 = stats.compare([1, 2, 3, 4], [6, 7, 8, 9], test="mwu")
    assert r4.p == pytest.approx(2 / math.comb(8, 4)) and not r4.significant
    with pytest.raises(ValueError):
        stats.compare([1, 2, 3], [4, 5, 6], test="anova")


def test_constant_samples():
    assert stats.welch([5, 5, 5], [6, 6, 6])[1] == 0.0
    assert stats.welch([5, 5, 5], [5, 5, 5])[1] == 1.0


def test_holm_known_values():
    adj = stats.holm([0.01, 0.04, 0.03, 0.005, None])
    assert adj[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02]) and adj[4] is None
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 2 x 0.8 capped at 1, monotone


def test_holm_adjustment_can_remove_significance():
    results = [stats.TestResult("welch", 5, 5, 1.0, p, 0.01, stats.DIFFERENT if p < 0.01 else stats.INCONCLUSIVE,
                                p_raw=p)
               for p in (0.004, 0.005, 0.02)]
    assert [r.significant for r in stats.adjust(results, "none")] == [True, True, False]
    adjusted = stats.adjust(results, "holm")
    assert [r.p for r in adjusted] == pytest.approx([0.012, 0.012, 0.02])
    assert not any(r.significant for r in adjusted)
    small = stats.TestResult("welch", 2, 5, None, None, 0.01, stats.N_TOO_SMALL)
    assert stats.adjust([small], "holm")[0].verdict == stats.N_TOO_SMALL


def test_pct_diff_and_method_text():
    assert stats.pct_diff(120, 100) == pytest.approx(20.0)
    assert math.isnan(stats.pct_diff(1, 0)) and math.isnan(stats.pct_diff(float("nan"), 1))
    text = stats.method_text("welch", 0.01, "none", n_tests=20)
    assert "Welch" in text and "p < 0.01" in text and "no multiple-comparison correction" in text and "0.2" in text
    assert "Holm" in stats.method_text("mwu", 0.01, "holm", n_tests=5) and "Mann-Whitney" in stats.method_short("mwu")


# -- intervals of positive quantities (log-t: the geometric mean's) ---------------------------------
@pytest.mark.parametrize("n", [5, 10])
def test_log_ci_covers_the_lognormal_median_95_percent(n):
    # the log-t interval targets the geometric mean exp(mu), the median of a log-normal
    rng = np.random.default_rng(2000 + n)
    sims, mu, sigma = 2000, math.log(100.0), 0.6
    hits = 0
    for _ in range(sims):
        lo, hi = stats.log_ci(rng.lognormal(mu, sigma, n))
        hits += lo <= math.exp(mu) <= hi
    # binomial sd of the coverage is 0.0049: [0.93, 0.97] is +-4 sd
    assert 0.93 <= hits / sims <= 0.97


def test_log_ci_is_the_t_interval_of_the_logs():
    x = [12.0, 30.0, 7.5, 55.0]
    y = np.log(x)
    half = st.t.ppf(0.975, 3) * y.std(ddof=1) / 2
    assert stats.log_ci(x) == pytest.approx((math.exp(y.mean() - half), math.exp(y.mean() + half)))
    assert stats.positive_ci(x) == stats.log_ci(x)
    lo, hi = stats.log_ci(x)
    assert lo < st.gmean(x) < hi


@pytest.mark.parametrize("n", [2, 3])
def test_positive_interval_never_below_zero_where_student_t_is(n):
    rng = np.random.default_rng(40 + n)
    below_t = 0
    for _ in range(500):
        x = rng.lognormal(0, 3.0, n) * 100   # spreads of orders of magnitude
        lo, hi = stats.positive_ci(x)
        assert 0 < lo <= hi and math.isfinite(hi)
        below_t += stats.ci(x)[0] < 0
    assert below_t > 100   # the Student-t interval does go below zero on these samples
    # the report's example: n = 3, Student-t gives about -107 .. 353 Mbit/s
    x = [20.0, 60.0, 290.0]
    assert stats.ci(x)[0] < 0 and stats.positive_ci(x)[0] > 0
    s = stats.summarize(x, positive=True)
    assert (s.ci_low, s.ci_high) == stats.positive_ci(x) and s.mean == pytest.approx(370 / 3)


def test_positive_interval_degenerate_inputs():
    # fewer than 2 values: no interval
    assert all(math.isnan(v) for v in stats.log_ci([5.0]))
    assert all(math.isnan(v) for v in stats.positive_ci([5.0, None, float("nan")]))
    assert all(math.isnan(v) for v in stats.positive_ci([]))
    # all equal: a zero-width interval at the value, exactly
    assert stats.log_ci([3.7, 3.7, 3.7]) == (3.7, 3.7)
    assert stats.positive_ci([3.7, 3.7]) == (3.7, 3.7)
    # a value <= 0: no log interval; positive_ci falls back to the bootstrap interval of the mean,
    # inside the values' range (the Student-t interval would reach below 0: -1.48)
    assert all(math.isnan(v) for v in stats.log_ci([0.0, 1.0, 2.0]))
    assert all(math.isnan(v) for v in stats.log_ci([-1.0, 1.0, 2.0]))
    assert stats.ci([0.0, 1.0, 2.0])[0] < 0
    lo, hi = stats.positive_ci([0.0, 1.0, 2.0])
    assert (lo, hi) == stats.bootstrap_ci([0.0, 1.0, 2.0]) and 0.0 <= lo < 1.0 < hi <= 2.0
    assert stats.positive_ci([0.0, 0.0, 0.0]) == (0.0, 0.0)
    assert stats.positive_ci([5.0, 6.0, 7.0]) == stats.log_ci([5.0, 6.0, 7.0])
    # summarize uses it only when asked
    assert stats.summarize([1.0, 2.0, 3.0]).ci_low == pytest.approx(stats.ci([1.0, 2.0, 3.0])[0])
    assert stats.interval([1.0, 2.0, 3.0], positive=True) == stats.log_ci([1.0, 2.0, 3.0])


def test_difference_of_means_for_metrics_that_can_be_zero():
    """Stall time and QoE can be 0 or negative (no geometric mean): Welch on the values, the
    difference of the means with its Welch-Satterthwaite interval at the verdict's level, TOST on an absolute margin."""
    import scipy.stats as sst
    a = [0.0, 0.4, 1.2, 0.0, 2.5, 0.9]
    b = [3.1, 2.2, 4.0, 5.5, 2.8, 3.9]
    r = stats.compare_difference(a, b, margin_abs=0.5)
    t = sst.ttest_ind(a, b, equal_var=False)
    assert r.p == pytest.approx(t.pvalue) and r.difference == pytest.approx(np.mean(a) - np.mean(b))
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = sst.t.ppf(1 - r.alpha / 2, df) * math.sqrt(va + vb)      # at the verdict's level, 1 - alpha
    assert r.level == 1 - r.alpha
    assert (r.diff_low, r.diff_high) == pytest.approx((r.difference - half, r.difference + half))
    assert r.ratio is None and r.verdict == stats.DIFFERENT and r.higher is False
    # equivalence within ±0.5 s: two one-sided tests on the difference
    c = [0.1, 0.0, 0.2, 0.1, 0.0, 0.15, 0.05, 0.1]
    d = [0.0, 0.1, 0.1, 0.2, 0.05, 0.1, 0.0, 0.15]
    e = stats.compare_difference(c, d, margin_abs=0.5)
    se = math.sqrt(np.var(c, ddof=1) / 8 + np.var(d, ddof=1) / 8)
    diff = np.mean(c) - np.mean(d)
    dfe = se ** 4 / ((np.var(c, ddof=1) / 8) ** 2 / 7 + (np.var(d, ddof=1) / 8) ** 2 / 7)
    p_tost = max(sst.t.sf((diff + 0.5) / se, dfe), sst.t.cdf((diff - 0.5) / se, dfe))
    assert e.p_equiv == pytest.approx(p_tost) and e.verdict == stats.EQUIVALENT
    # without a declared margin there is no equivalence verdict, however close
    assert stats.compare_difference(c, d, margin_abs=None).verdict == stats.INCONCLUSIVE
    # two samples of zeros: nothing to test (no p: left out of a Holm family), said as such
    z = stats.compare_difference([0, 0, 0, 0], [0, 0, 0], margin_abs=0.5)
    assert z.no_variation and z.p is None and z.verdict == stats.INCONCLUSIVE
    assert stats.adjust([z, r], "holm")[1].p == pytest.approx(t.pvalue)     # a family of one test


def test_a_difference_smaller_than_the_margin_is_named_as_such():
    from quicbench.report.fmt import verdict_text
    a = [101.0, 101.05, 101.0, 101.05, 101.0, 101.05]
    b = [100.0, 100.05, 100.1, 100.0, 100.05, 100.1]
    r = stats.compare(a, b)
    assert r.verdict == stats.DIFFERENT and r.inside_margin and stats.margin_text(r) == "±10 %"
    assert "inside the ±10 % margin" in stats.comparison_phrase("h1", r.verdict, r.ratio, r.ratio_low, r.ratio_high,
                                                                r.p, r.reps_to_decide, within=stats.margin_text(r))
    assert verdict_text(r.verdict, None, stats.margin_text(r)) == "different, inside the ±10 % margin"
    far = stats.compare([130.0, 131.0, 130.5, 131.5], [100.0, 100.5, 101.0, 100.2])
    assert far.verdict == stats.DIFFERENT and not far.inside_margin and stats.margin_text(far) is None


def test_a_cells_verdict_says_when_the_best_is_ahead_by_less_than_the_margin():
    from quicbench.analysis.tables import FASTER_THAN_ALL, cell_verdict

    def result(p: float, p_equiv: float, verdict: str = stats.DIFFERENT) -> stats.TestResult:
        return stats.TestResult("log-welch", 7, 7, 3.0, p, 0.05, verdict, ratio=1.05, p_equiv=p_equiv)

    big, small = result(0.001, 0.6), result(0.002, 0.01)
    assert cell_verdict({"h1": big, "h2": big}) == (FASTER_THAN_ALL, 0.001)
    assert cell_verdict({"h1": small, "h2": small}) == ("ahead of all, inside the ±10 % margin", 0.002)
    assert cell_verdict({"h1": big, "h2": small}) == ("ahead of h1; ahead of h2 inside the ±10 % margin", 0.002)
    assert cell_verdict({"h1": small, "h2": result(0.4, 0.3, stats.INCONCLUSIVE)}) == \
        ("ahead of h1 inside the ±10 % margin; inconclusive vs h2", 0.002)
