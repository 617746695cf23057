"""The statistics of `memjudge diff`: paired differences of rates between two runs (spec §12).

Every figure is a ratio of sums over personas (supported / valid verdicts, covered / judged
facts, ...). Two runs are paired at the persona level: the personas common to both are drawn
*jointly*, one multinomial weight row per resample (`memjudge.stats.bootstrap.cluster_weights`),
and each run's ratio of sums is recomputed from its per-persona sums under the same row, so the
difference NEW − BASE in each resample carries the covariance of the two runs on one persona
(an easy persona is easy for both extractors). Columns are groups (overall, categories), so all
groups of a comparison cost one matrix product per run.

McNemar's exact test (same candidates, item-paired): the two-sided binomial test of the
discordant pairs, b = supported by BASE only and c = by NEW only, equal to statsmodels'
``mcnemar([[a, b], [c, d]], exact=True)``.
"""

from __future__ import annotations

import math

import numpy as np

from memjudge.formats.estimate import Estimate
from memjudge.stats.bootstrap import percentile_interval
from memjudge.stats.ppi import ppi_from_sums

__all__ = ["difference_draws", "mcnemar_exact", "more_needed", "paired_ppi", "paired_ratios", "simultaneous_bounds"]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _estimates(point: np.ndarray, reps: np.ndarray | None, level: float) -> list[Estimate]:
    if reps is None:
        return [Estimate(v) for v in point]
    lo, hi = percentile_interval(reps, level, axis=0)
    return [Estimate(v, a, b) for v, a, b in zip(point, lo, hi)]


def paired_ratios(num_base: np.ndarray, den_base: np.ndarray, num_new: np.ndarray, den_new: np.ndarray,
                  W: np.ndarray | None, level: float = 0.95) -> tuple[list[Estimate], list[Estimate], list[Estimate]]:
    """BASE, NEW and NEW − BASE ratio-of-sums estimates, one per column.

    Inputs are (personas, groups) per-persona sums of the *common* personas, in one persona
    order for both runs; ``W`` is the (B, personas) resampling matrix (None: no interval).
    A resample in which a group has no denominator in a run gives no replicate for it (NaN, left
    out of the percentile interval)."""
    arrays = [np.asarray(a, dtype=float) for a in (num_base, den_base, num_new, den_new)]
    nb, db, nn, dn = (a if a.ndim == 2 else a[:, None] for a in arrays)
    base = _ratio(nb.sum(0), db.sum(0))
    new = _ratio(nn.sum(0), dn.sum(0))
    if W is None or W.shape[0] == 0:
        rb = rn = None
    else:
        rb = _ratio(W @ nb, W @ db)
        rn = _ratio(W @ nn, W @ dn)
    diff_reps = None if rb is None or rn is None else rn - rb
    return (_estimates(base, rb, level), _estimates(new, rn, level), _estimates(new - base, diff_reps, level))


def difference_draws(num_base: np.ndarray, den_base: np.ndarray, num_new: np.ndarray, den_new: np.ndarray,
                     W: np.ndarray | None) -> np.ndarray | None:
    """The (B, groups) resampled differences NEW − BASE of `paired_ratios` (None: no interval),
    kept so a gate over several groups can take them at a family-wise level."""
    if W is None or W.shape[0] == 0:
        return None
    arrays = [np.asarray(a, dtype=float) for a in (num_base, den_base, num_new, den_new)]
    nb, db, nn, dn = (a if a.ndim == 2 else a[:, None] for a in arrays)
    return _ratio(W @ nn, W @ dn) - _ratio(W @ nb, W @ db)


def simultaneous_bounds(draws: np.ndarray, level: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bounds of each column at the Bonferroni level for `k` figures tested together:
    each two-sided interval at 1 − (1 − level)/k, so the chance that any of the k one-sided
    ends misses its truth is at most (1 − level)/2 (k = 1: the ordinary interval)."""
    lo, hi = percentile_interval(draws, 1 - (1 - level) / max(k, 1), axis=0)
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


def paired_ppi(L_base: np.ndarray, U_base: np.ndarray, L_new: np.ndarray, U_new: np.ndarray,
               W: np.ndarray | None, level: float = 0.95) -> tuple[Estimate, Estimate, Estimate]:
    """PPI++ support rates of BASE and NEW and their difference from per-persona feature sums
    (``memjudge.stats.ppi``'s labelled (P, 10) and unlabelled (P, 6) sums of each run over the
    common personas). λ is power-tuned on each run's own sums and re-tuned in every resample,
    as `memjudge estimate` does; the two runs share the resampling rows."""
    tb, _, _ = ppi_from_sums(L_base.sum(0), U_base.sum(0))
    tn, _, _ = ppi_from_sums(L_new.sum(0), U_new.sum(0))
    point = np.array([float(tb), float(tn), float(tn) - float(tb)])
    if W is None or W.shape[0] == 0:
        return Estimate(point[0]), Estimate(point[1]), Estimate(point[2])
    rb, _, _ = ppi_from_sums(W @ L_base, W @ U_base)
    rn, _, _ = ppi_from_sums(W @ L_new, W @ U_new)
    reps = np.column_stack([rb, rn, rn - rb])
    lo, hi = percentile_interval(reps, level, axis=0)
    out = [Estimate(v, a, b) for v, a, b in zip(point, lo, hi)]
    return out[0], out[1], out[2]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of the discordant counts b and c (1.0 when b + c = 0)."""
    from scipy.stats import binomtest

    n = int(b) + int(c)
    if n == 0:
        return 1.0
    return float(min(1.0, binomtest(min(int(b), int(c)), n, 0.5, alternative="two-sided").pvalue))


def more_needed(difference: Estimate, n: int, margin: float) -> int | None:
    """How many units (personas, or items) in all a non-inferiority comparison would need for the
    interval's lower end to clear −margin, if the point estimate stayed where it is: the lower
    half-width shrinks as 1/√n. None when no amount would do (the estimate itself is at or
    below −margin) or nothing is known (no interval)."""
    if not difference.has_interval or difference.value is None or n < 1:
        return None
    assert difference.lo is not None
    room = difference.value + margin           # how far the lower end may reach below the estimate
    half = difference.value - difference.lo    # how far it reaches now
    if room <= 0:
        return None
    if half <= room:
        return n
    return int(math.ceil(n * (half / room) ** 2))
