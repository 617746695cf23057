"""Persona-cluster bootstrap building blocks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memjudge._util.text import coef, estimate, with_interval
from memjudge.formats.estimate import Estimate
from memjudge.stats.bootstrap import (
    bca_levels,
    cluster_counts,
    cluster_sums,
    cluster_weights,
    expanded_level,
    interval,
    interval_pairs,
    jackknife_ratios,
    percentile_estimate,
    percentile_interval,
    quantiles,
    ratio_interval,
)


def test_weights_are_multinomial_draws_of_all_personas():
    W = cluster_weights(50, B=400, seed=1)
    assert W.shape == (400, 50)
    assert (W.sum(axis=1) == 50).all() and (W >= 0).all()
    assert np.array_equal(W, cluster_weights(50, B=400, seed=1))
    assert not np.array_equal(W, cluster_weights(50, B=400, seed=2))
    # each persona is drawn once per resample on average
    assert W.mean() == pytest.approx(1.0) and abs(W.mean(axis=0) - 1).max() < 0.25
    assert cluster_weights(0, B=5).shape == (5, 0)


def test_cluster_sums_equal_groupby():
    rng = np.random.default_rng(0)
    cluster = rng.integers(0, 7, size=300)
    values = rng.random((300, 3))
    got = cluster_sums(cluster, values, 9)  # clusters 7 and 8 have no items
    ref = pd.DataFrame(values).groupby(cluster).sum().reindex(range(9), fill_value=0.0).to_numpy()
    assert got.shape == (9, 3) and np.allclose(got, ref, atol=1e-12)
    assert cluster_sums(cluster, values[:, 0], 9).shape == (9, 1)
    assert cluster_sums(np.array([], dtype=int), np.zeros((0, 2)), 4).shape == (4, 2)


def test_cluster_counts_equal_crosstab():
    rng = np.random.default_rng(1)
    cluster, cell = rng.integers(0, 5, size=200), rng.integers(0, 4, size=200)
    got = cluster_counts(cluster, cell, 5, 4)
    ref = pd.crosstab(cluster, cell).reindex(index=range(5), columns=range(4), fill_value=0).to_numpy()
    assert np.array_equal(got, ref)


def test_resampled_totals_equal_explicit_resampling():
    """W @ per-persona totals is the total of the resample that repeats persona p W[b, p] times."""
    rng = np.random.default_rng(2)
    cluster = rng.integers(0, 10, size=100)
    x = rng.random(100)
    W = cluster_weights(10, B=20, seed=3)
    fast = W @ cluster_sums(cluster, x, 10)
    for b in range(20):
        slow = sum(x[cluster == p].sum() * W[b, p] for p in range(10))
        assert fast[b, 0] == pytest.approx(slow, abs=1e-12)


def test_percentile_intervals_ignore_undefined_resamples():
    s = np.arange(1001, dtype=float)
    lo, hi = percentile_interval(s)
    assert np.allclose([lo, hi], np.percentile(s, [2.5, 97.5]), rtol=0, atol=1e-9)
    with_nan = np.concatenate([s, [np.nan] * 50])
    assert np.array_equal(percentile_interval(with_nan), [lo, hi])
    assert np.isnan(percentile_interval(np.full(10, np.nan))).all()
    pairs = interval_pairs(np.column_stack([s, 2 * s]))
    assert pairs.shape == (2, 2) and np.allclose(pairs[1], [2 * lo, 2 * hi])


def test_ratio_interval():
    num, den = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 4.0])
    W = cluster_weights(3, B=100, seed=0)
    lo, hi = ratio_interval(num, den, W)
    reps = (W @ num) / (W @ den)
    assert np.allclose([lo, hi], np.percentile(reps, [2.5, 97.5]), rtol=0, atol=1e-12)


def test_format_interval():
    """The one number convention (`memjudge._util.text`) that replaced bootstrap.format_interval."""
    assert with_interval(coef, 0.95117, 0.9424, 0.959) == "0.951 [0.942, 0.959]"
    assert with_interval(coef, float("nan")) == "—" and with_interval(coef, None) == "—"
    assert with_interval(coef, 0.5, float("nan"), float("nan")) == "0.500"
    assert estimate(Estimate(0.95117, 0.9424, 0.959), coef) == "0.951 [0.942, 0.959]"
    assert estimate(Estimate(0.1234, 0.1, 0.15)) == "12.34 [10.00, 15.00]"


def test_percentile_estimate_is_the_value_with_the_percentile_interval():
    reps = np.random.default_rng(3).normal(0.5, 0.1, size=2000)
    reps[::7] = np.nan  # undefined resamples are left out
    e = percentile_estimate(0.5, reps)
    ok = reps[~np.isnan(reps)]
    assert e.value == 0.5 and (e.lo, e.hi) == pytest.approx(tuple(np.percentile(ok, [2.5, 97.5])), abs=1e-12)
    assert e.to_dict() == {"value": 0.5, "lo": e.lo, "hi": e.hi} and Estimate.from_dict(e.to_dict()) == e
    assert percentile_estimate(0.5, np.full(10, np.nan)) == Estimate(0.5)


# ---------------------------------------------------------------------------------------
# interval(method=...): expanded percentile and BCa from the persona jackknife


def _skewed_personas(P=20, seed=4):
    """Per-persona (supported, items) of a rate near 1 with uneven persona sizes: a ratio of sums
    whose bootstrap distribution is visibly skewed, so BCa and percentile differ."""
    rng = np.random.default_rng(seed)
    m = np.maximum(rng.poisson(10 * rng.lognormal(0, 0.8, P)), 1).astype(float)
    p = 1 / (1 + np.exp(-(2.5 + rng.normal(0, 1.2, P))))
    return rng.binomial(m.astype(int), p).astype(float), m


def _ratio_stat(a, b, axis=-1):
    return a.sum(axis=axis) / b.sum(axis=axis)


def test_quantiles_at_per_column_levels_equal_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(999, 4))
    x[:100, 1] = np.nan              # a statistic undefined in some resamples
    x[:, 3] = np.nan                 # ... or in all of them
    q = np.array([0.025, 0.5, 0.975])
    got = quantiles(x, q)
    assert np.allclose(got[:, :3], np.nanquantile(x[:, :3], q, axis=0), rtol=0, atol=1e-12)
    assert np.isnan(got[:, 3]).all()
    per_col = np.array([[0.01, 0.2, 0.0, 0.5], [0.99, 0.7, 1.0, 0.5]])
    got = quantiles(x, per_col)
    for j in range(3):
        assert np.allclose(got[:, j], np.nanquantile(x[:, j], per_col[:, j]), rtol=0, atol=1e-12)
    assert np.isnan(quantiles(x[:, :1], np.array([np.nan, 0.5]))[0, 0])


def test_expanded_level_hand_worked():
    """√(n/(n−1))·t_{n−1}(0.975) from the printed t table: n = 100, t = 1.98422 → z = 1.99421,
    level 2Φ(z) − 1 = 0.95387; n = 5, t = 2.77645 → z = 3.10416, level 0.99809."""
    assert expanded_level(0.95, 100) == pytest.approx(0.95387, abs=2e-5)
    assert expanded_level(0.95, 5) == pytest.approx(0.99809, abs=2e-5)
    assert expanded_level(0.95, 1) == 0.95                      # nothing to expand with one cluster
    assert 0.95 < expanded_level(0.95, 10_000) < 0.9501          # the percentile interval in the limit
    reps = np.random.default_rng(1).normal(size=(4000, 2))
    a = (1 - expanded_level(0.95, 30)) / 2
    assert np.allclose(interval(reps, method="expanded", n=30), np.percentile(reps, [100 * a, 100 * (1 - a)], axis=0))
    with pytest.raises(ValueError, match="needs n"):
        interval(reps, method="expanded")
    with pytest.raises(ValueError, match="method must be one of"):
        interval(reps, method="studentized")


def test_jackknife_ratios_leave_one_persona_out():
    num, den = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 5.0]]), np.array([[2.0, 0.0], [2.0, 0.0], [4.0, 5.0]])
    got = jackknife_ratios(num, den)
    assert np.allclose(got[:, 0], [5 / 6, 4 / 6, 3 / 4])
    assert np.isnan(got[2, 1]) and np.allclose(got[:2, 1], 1.0)  # without persona 3 the group is empty
    assert np.isnan(jackknife_ratios(np.array([1.0]), np.array([2.0]))).all()   # one persona: nothing left


def test_bca_equals_scipy_on_the_same_resamples():
    """scipy.stats.bootstrap(method="BCa", paired=True) over the per-persona rows, handed our
    resamples (bootstrap_result with n_resamples=0), computes its own jackknife and bias
    correction: the interval must be the same to rounding."""
    from dataclasses import replace

    from scipy import stats

    num, den = _skewed_personas()
    W = cluster_weights(len(num), B=5000, seed=1)
    reps = (W @ num) / (W @ den)
    ours = interval(reps, method="bca", point=num.sum() / den.sum(), jackknife=jackknife_ratios(num, den))
    seed_result = stats.bootstrap((num, den), _ratio_stat, paired=True, n_resamples=2, method="percentile", rng=0)
    ref = stats.bootstrap((num, den), _ratio_stat, paired=True, n_resamples=0, method="BCa",
                          bootstrap_result=replace(seed_result, bootstrap_distribution=reps))
    assert ours == pytest.approx([ref.confidence_interval.low, ref.confidence_interval.high], abs=1e-12)
    pct = interval(reps)
    assert abs(ours[0] - pct[0]) > 0.1 * reps.std()          # the case tells BCa from percentile


def test_bca_agrees_with_scipy_own_resamples_within_monte_carlo_error():
    """Independent resamples (scipy's own, B = 20000 each): the ends agree within a tenth of the
    bootstrap SD, about five Monte-Carlo SEs of the difference of two 2.5% quantiles at that B."""
    from scipy import stats

    num, den = _skewed_personas()
    W = cluster_weights(len(num), B=20_000, seed=2)
    reps = (W @ num) / (W @ den)
    ours = interval(reps, method="bca", point=num.sum() / den.sum(), jackknife=jackknife_ratios(num, den))
    ref = stats.bootstrap((num, den), _ratio_stat, paired=True, n_resamples=20_000, method="BCa", rng=3)
    assert ours == pytest.approx([ref.confidence_interval.low, ref.confidence_interval.high], abs=0.1 * reps.std())


def test_bca_hand_worked_levels():
    """No bias and no skew (replicates and jackknife symmetric about the point): z0 = 0, a = 0,
    the percentile levels. 84.13% of replicates below the point: z0 = Φ⁻¹(0.8413) = 1, and with
    a = 0 the levels are Φ(2 ∓ 1.96)."""
    from scipy.stats import norm

    sym = np.linspace(-1, 1, 2001)      # the point itself is one replicate: a tie, counted half
    jack = np.array([-1.0, 1.0, -2.0, 2.0])
    assert bca_levels(sym, 0.0, jack) == pytest.approx([0.025, 0.975], abs=1e-12)
    below = norm.cdf(1.0)
    shifted = np.concatenate([np.full(int(round(below * 100_000)), -1.0), np.full(100_000 - int(round(below * 100_000)), 1.0)])
    assert bca_levels(shifted, 0.0, jack) == pytest.approx(norm.cdf([2 - 1.959964, 2 + 1.959964]), abs=1e-4)
    # undefined bias correction (every replicate on one side): the percentile interval
    one_sided = np.linspace(1, 2, 101)
    assert np.allclose(interval(one_sided, method="bca", point=0.0, jackknife=jack), percentile_interval(one_sided))
    assert np.isnan(interval(np.full((10, 1), np.nan), method="bca", point=np.array([0.5]),
                             jackknife=np.zeros((3, 1)))).all()
    with pytest.raises(ValueError, match="needs the point"):
        interval(sym, method="bca")
