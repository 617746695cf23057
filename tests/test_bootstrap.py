"""Persona-cluster bootstrap building blocks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memjudge._util.text import coef, estimate, with_interval
from memjudge.formats.estimate import Estimate
from memjudge.stats.bootstrap import (
    cluster_counts,
    cluster_sums,
    cluster_weights,
    interval_pairs,
    percentile_estimate,
    percentile_interval,
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
