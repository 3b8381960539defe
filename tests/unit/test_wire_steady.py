"""The steadiness of a transfer from its capture's time series (CVart's "stability")."""

import statistics

import pytest

from quicbench.run.wire import steady_cv


def test_a_steady_transfer_has_no_variation_whatever_its_slow_start_and_tail():
    bins = [1_000, 5_000] + [125_000] * 24 + [40_000]       # slow start, a full link, the tail
    assert steady_cv(bins) == pytest.approx(0.0)


def test_the_middle_bins_give_the_population_cv():
    mid = [100, 140, 60, 100, 140, 60, 100, 140, 60, 100]
    bins = [1] + mid + [1]                       # 12 bins: one left out at each end
    assert steady_cv(bins) == pytest.approx(100 * statistics.pstdev(mid) / statistics.mean(mid))


def test_too_short_a_transfer_has_none():
    assert steady_cv([10, 100, 100, 100, 100, 5]) is None          # 4 bins in the middle
    assert steady_cv([]) is None and steady_cv([0] * 20) is None
