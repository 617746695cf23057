"""Persona-cluster bootstrap (spec §7): assertions about one persona are not independent,
so intervals resample whole personas.

Statistics are computed from per-persona sufficient statistics (counts, confusion cells):
resampling personas with replacement is then a matrix product of a multinomial weight
matrix (B × personas) with those statistics, never a loop over DataFrames.
"""

from __future__ import annotations

import warnings

import numpy as np

from memjudge.formats.estimate import Estimate

B_DEFAULT = 2000
LEVEL = 0.95


def cluster_weights(n_clusters: int, B: int = B_DEFAULT, seed: int = 0) -> np.ndarray:
    """(B, n_clusters) counts: how often each persona is drawn in each resample.

    Row b is one draw of n_clusters personas with replacement, i.e. Multinomial(n, 1/n).
    """
    if n_clusters <= 0:
        return np.zeros((B, 0))
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=B).astype(np.float64)


def percentile_interval(samples: np.ndarray, level: float = LEVEL, axis: int = 0) -> np.ndarray:
    """Percentile interval of bootstrap replicates along `axis`, ignoring NaN replicates
    (a resample where a statistic is undefined, e.g. no items of a category).

    Returns [lo, hi] (stacked on a new first axis); NaN where every replicate is NaN.
    """
    a = (1.0 - level) / 2.0
    samples = np.asarray(samples, dtype=float)
    # An all-NaN slice (a statistic undefined in every resample) warns and gives NaN: NaN is
    # the intended answer there.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(samples, [100 * a, 100 * (1 - a)], axis=axis)


def ratio_interval(num: np.ndarray, den: np.ndarray, weights: np.ndarray, level: float = LEVEL) -> np.ndarray:
    """Interval for sum(num)/sum(den) where num, den are per-persona totals (the common case
    of a rate: supported / valid). Returns [lo, hi]."""
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = (weights @ num) / (weights @ den)
    return percentile_interval(reps, level)


def cluster_sums(cluster: np.ndarray, values: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per-persona totals of per-item statistics: (n_items, F) values → (n_clusters, F).

    One `bincount` over a combined (cluster, column) index, so the cost is one pass over
    the items whatever F is; the result is what `cluster_weights(...) @` resamples.
    """
    cluster = np.asarray(cluster, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    n, f = values.shape
    if n == 0 or f == 0:
        return np.zeros((n_clusters, f))
    idx = (cluster[:, None] * f + np.arange(f)).ravel()
    return np.bincount(idx, weights=values.ravel(), minlength=n_clusters * f).reshape(n_clusters, f)


def interval_pairs(samples: np.ndarray, level: float = LEVEL) -> np.ndarray:
    """Percentile intervals of (B, ...) replicates as (..., 2) [lo, hi] pairs (NaN when undefined)."""
    lo_hi = percentile_interval(samples, level, axis=0)
    return np.moveaxis(lo_hi, 0, -1)


def cluster_counts(cluster: np.ndarray, cell: np.ndarray, n_clusters: int, n_cells: int,
                   weights: np.ndarray | None = None) -> np.ndarray:
    """Per-persona counts of categorical cells (e.g. confusion cells a*q + b): (n_clusters, n_cells).

    With per-item `weights` (e.g. supported / valid flags), per-persona sums of the weights
    in each cell instead of counts."""
    cluster = np.asarray(cluster, dtype=np.int64)
    cell = np.asarray(cell, dtype=np.int64)
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
    return np.bincount(cluster * n_cells + cell, weights=weights,
                       minlength=n_clusters * n_cells).reshape(n_clusters, n_cells).astype(np.float64)


def percentile_estimate(value, replicates: np.ndarray, level: float = LEVEL) -> Estimate:
    """A point estimate with the percentile interval of its (B,) bootstrap replicates, in the
    one JSON shape (`Estimate`); NaN replicates are left out, an all-NaN set gives no interval."""
    lo, hi = percentile_interval(np.asarray(replicates, dtype=float).ravel(), level)
    return Estimate(value, lo, hi)
