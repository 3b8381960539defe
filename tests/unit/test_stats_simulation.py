"""The comparison method keeps its stated error rates, by simulation (issue 23.5).

Log-normal samples (goodputs and times are close to log-normal), fixed seeds. Each bound has a
binomial allowance of three standard errors over the number of simulations, so a correct method
passes and a wrong one (an uncorrected family, an arithmetic test with a log interval, a TOST at
the wrong margin) fails.
"""

import math

import numpy as np

from quicbench import stats

ALPHA = 0.01


def allowance(rate: float, sims: int) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / sims)


def test_family_wise_false_positives_stay_below_alpha_with_holm():
    """2,000 tables of 12 comparisons between identical populations: the share of tables with
    at least one 'different' is at most alpha (Holm); without a correction it is near 1-(1-a)^12."""
    rng = np.random.default_rng(23)
    tables, m, n = 2000, 12, 10
    any_holm = any_raw = 0
    for _ in range(tables):
        sigma = rng.uniform(0.05, 0.6)
        res = [stats.compare(rng.lognormal(3, sigma, n), rng.lognormal(3, sigma * rng.uniform(0.5, 2), n),
                             alpha=ALPHA) for _ in range(m)]
        any_raw += any(r.verdict == stats.DIFFERENT for r in res)
        any_holm += any(r.verdict == stats.DIFFERENT for r in stats.adjust(res, "holm"))
    assert any_holm / tables <= ALPHA + allowance(ALPHA, tables)
    assert any_raw / tables > 3 * ALPHA          # the family needs the correction: the test can fail


def test_ratio_interval_covers_the_true_ratio():
    """The 95 % CI of the ratio of geometric means covers the true ratio at least 94 % of the time,
    at small n and unequal variances (Welch)."""
    rng = np.random.default_rng(24)
    sims, covered = 2000, 0
    for i in range(sims):
        n_a, n_b = (5, 10) if i % 2 else (10, 4)
        true_ratio = 0.8
        a = rng.lognormal(math.log(true_ratio) + 2, 0.5, n_a)
        b = rng.lognormal(2, 0.2, n_b)
        r = stats.compare(a, b, alpha=0.05)       # the interval at the verdict's level: 95 %
        covered += r.ratio_low <= true_ratio <= r.ratio_high
    assert covered / sims >= 0.94


def test_equivalence_error_is_at_most_alpha_at_the_margin():
    """A true ratio exactly at the margin (1.1) is declared equivalent at most alpha of the time;
    well inside it (1.0, tight data) it is found."""
    rng = np.random.default_rng(25)
    sims, wrong = 3000, 0
    for _ in range(sims):
        a, b = rng.lognormal(math.log(1.1), 0.1, 10), rng.lognormal(0, 0.1, 10)
        wrong += stats.compare(a, b, alpha=ALPHA, margin=0.10).verdict == stats.EQUIVALENT
    assert wrong / sims <= ALPHA + allowance(ALPHA, sims)
    found = sum(stats.compare(rng.lognormal(0, 0.03, 10), rng.lognormal(0, 0.03, 10)).verdict == stats.EQUIVALENT
                for _ in range(200))
    assert found / 200 > 0.9


def test_inconclusive_says_how_many_trials_would_decide():
    rng = np.random.default_rng(26)
    a, b = rng.lognormal(0.15, 0.3, 5), rng.lognormal(0, 0.3, 5)
    r = stats.compare(a, b)
    assert r.verdict == stats.INCONCLUSIVE and r.reps_to_decide is not None and r.reps_to_decide > 5
    # following the advice decides it most of the time (the figure has 80 % power at the observed effect)
    decided = 0
    for _ in range(200):
        big = stats.compare(rng.lognormal(0.15, 0.3, r.reps_to_decide), rng.lognormal(0, 0.3, r.reps_to_decide))
        decided += big.verdict != stats.INCONCLUSIVE
    assert decided / 200 > 0.6


def test_repetitions_to_decide_count_the_family_and_exceed_what_the_cell_has():
    rng = np.random.default_rng(27)
    # one real difference among nine null comparisons: raw p below alpha, but not after Holm over ten
    for _ in range(200):
        a, b = rng.lognormal(0.12, 0.05, 4), rng.lognormal(0, 0.05, 4)
        real = stats.compare(a, b)
        if stats.ALPHA / 10 < real.p < stats.ALPHA:
            break
    else:
        raise AssertionError("no comparison significant before Holm only")
    family = [real] + [stats.compare(rng.lognormal(0, 0.05, 4), rng.lognormal(0, 0.05, 4)) for _ in range(9)]
    adjusted = stats.adjust(family)[0]
    assert real.verdict == stats.DIFFERENT and adjusted.verdict == stats.INCONCLUSIVE
    assert adjusted.reps_to_decide is not None and adjusted.reps_to_decide > 4
    # the figure's promise: at the observed difference and variance, that many repetitions per side
    # decide it at alpha / 10 (Holm's strictest threshold in a family of ten) 80 % of the time
    n = adjusted.reps_to_decide
    sd = adjusted.effect_se / math.sqrt(1 / 4 + 1 / 4)
    decided = sum(stats.compare(np.exp(rng.normal(adjusted.effect, sd, n)), np.exp(rng.normal(0, sd, n))).p
                  < stats.ALPHA / 10 for _ in range(400))
    assert 0.7 < decided / 400 < 0.95, decided      # 80 %: neither too few nor needlessly many
    # never a figure at or below what the cell already has, however small the estimate
    tight = stats.compare([1.0, 1.02, 0.99], [1.05, 1.06, 1.08])
    if tight.verdict == stats.INCONCLUSIVE:
        assert tight.reps_to_decide is None or tight.reps_to_decide > 3
    lw = stats.LogWelch(0.5, 0.01, 4.0)
    assert stats.reps_to_decide(lw, 3, 3, stats.ALPHA, 0.10) == 4


def _sequential(rng, ratio: float, looks: int, step: int, alpha_each: float, sigma: float = 0.3) -> str | None:
    """One cell run as --until-decided does: compare at n = step, 2 step, ...; stop once decided.
    Returns the verdict that stopped it, or None (undecided at the last look)."""
    a, b = np.empty(0), np.empty(0)
    for _ in range(looks):
        a = np.concatenate([a, rng.lognormal(3 + math.log(ratio), sigma, step)])
        b = np.concatenate([b, rng.lognormal(3, sigma, step)])
        r = stats.compare(a, b, alpha=alpha_each)
        if r.verdict in (stats.DIFFERENT, stats.EQUIVALENT):
            return r.verdict
    return None


def test_sequential_looks_keep_both_error_rates():
    """--until-decided: 4 looks at alpha / 4 each (analysis/sequential.py). Between identical
    populations a false 'different' at any look stays below alpha; at a true ratio on the margin
    a false 'equivalent' at any look stays below alpha. Testing every look at the full alpha
    breaks the first bound (the test can fail)."""
    from quicbench.analysis.sequential import design
    alpha, sims = 0.05, 2000
    d = design(3, 12)
    assert d.looks == 4 and d.step == 3
    rng = np.random.default_rng(42)
    spent = [_sequential(rng, 1.0, d.looks, d.step, alpha / d.looks) for _ in range(sims)]
    assert spent.count(stats.DIFFERENT) / sims <= alpha + allowance(alpha, sims)
    naive = [_sequential(rng, 1.0, d.looks, d.step, alpha) for _ in range(sims)]
    assert naive.count(stats.DIFFERENT) / sims > alpha + allowance(alpha, sims)
    at_margin = [_sequential(rng, 1.0 + stats.MARGIN, d.looks, d.step, alpha / d.looks) for _ in range(sims)]
    assert at_margin.count(stats.EQUIVALENT) / sims <= alpha + allowance(alpha, sims)


def _twins(rng, n, shared, own, rho_sign=1.0, ratio=1.0):
    """n pairs of log-normal values: a common part (the twins' shared draws) with sd `shared`, taken
    with rho_sign (−1: the twins move against each other), and each its own part with sd `own`."""
    common = rng.normal(0, shared, n)
    a = np.exp(3 + math.log(ratio) + common + rng.normal(0, own, n))
    b = np.exp(3 + rho_sign * common + rng.normal(0, own, n))
    return a, b


def test_paired_comparison_keeps_alpha_whatever_the_twins_correlation():
    """Twins with equal means, correlated positively or negatively: the paired test says
    'different' at most alpha of the time; under negative correlation the unpaired test does more
    often (why seeded runs are not compared unpaired, docs/results/seed-pairing.md)."""
    rng = np.random.default_rng(26)
    sims, alpha = 2000, 0.05
    for sign in (1.0, -1.0):
        paired = unpaired = 0
        for _ in range(sims):
            a, b = _twins(rng, 7, 0.3, 0.1, sign)
            paired += stats.compare_paired(a, b, alpha=alpha).verdict == stats.DIFFERENT
            unpaired += stats.compare(a, b, alpha=alpha).verdict == stats.DIFFERENT
        assert paired / sims <= alpha + allowance(alpha, sims), (sign, paired / sims)
        if sign < 0:
            assert unpaired / sims > alpha + allowance(alpha, sims), unpaired / sims


def test_paired_comparison_covers_the_ratio_and_finds_what_twins_share():
    """The paired ratio CI covers the true ratio ≥ 94 % of the time; twins alike (shared draws
    large, own noise small) reveal a 5 % difference at n = 7 that the unpaired test misses, and
    an inconclusive pair needs fewer repetitions."""
    rng = np.random.default_rng(27)
    sims, covered, found_paired, found_unpaired = 2000, 0, 0, 0
    for _ in range(sims):
        a, b = _twins(rng, 7, 0.4, 0.015, 1.0, ratio=0.95)     # each twin its own 1.5 % (seeded twins: 1.2 %)
        r = stats.compare_paired(a, b, alpha=0.05)
        covered += r.ratio_low <= 0.95 <= r.ratio_high
        found_paired += r.verdict == stats.DIFFERENT
        found_unpaired += stats.compare(a, b).verdict == stats.DIFFERENT
    assert covered / sims >= 0.94
    assert found_paired / sims > 0.9 and found_unpaired / sims < 0.1
    a, b = _twins(np.random.default_rng(28), 5, 0.4, 0.05, 1.0, ratio=0.97)
    p, u = stats.compare_paired(a, b, alpha=0.01), stats.compare(a, b, alpha=0.01)
    assert p.paired and p.n_a == p.n_b == 5 and p.test == stats.PAIRED_TEST
    if p.verdict == u.verdict == stats.INCONCLUSIVE:
        assert p.reps_to_decide < u.reps_to_decide


def test_paired_comparison_leaves_out_incomplete_pairs():
    r = stats.compare_paired([10.0, None, 12.0, 11.0, 0.0, 13.0], [9.0, 9.5, 11.0, 10.0, 10.0, float("nan")])
    assert r.n_a == r.n_b == 3
    assert stats.compare_paired([1.0, 2.0], [1.0, 2.0]).verdict == stats.N_TOO_SMALL
