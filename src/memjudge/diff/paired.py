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
from dataclasses import dataclass

import numpy as np

from memjudge.formats.estimate import Estimate
from memjudge.stats.bootstrap import interval
from memjudge.stats.ppi import ppi_from_sums

__all__ = ["INTERVAL", "PairedDraws", "mcnemar_exact", "more_needed", "paired_draws", "paired_ppi", "paired_ratios",
           "simultaneous_bounds"]


# Every interval of a diff: the persona bootstrap's percentile interval is narrow at the ~100
# personas of a run (`memjudge.stats.bootstrap`, `bench/diff_methods.py`); the expanded one
# corrects that without moving its centre. One choice for the figures and the gate alike.
INTERVAL = "expanded"


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _bounds(reps: np.ndarray, level: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = interval(reps, level, method=INTERVAL, n=n)
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


@dataclass(frozen=True)
class PairedDraws:
    """Ratios of sums of two runs over the same personas: the point estimates (groups,) of BASE,
    NEW and NEW − BASE, and their (B, groups) resampled values under the same weight rows
    (None: no interval); ``n`` personas were resampled."""

    base: np.ndarray
    new: np.ndarray
    n: int
    reps_base: np.ndarray | None = None
    reps_new: np.ndarray | None = None

    @property
    def difference(self) -> np.ndarray:
        return self.new - self.base

    @property
    def reps_difference(self) -> np.ndarray | None:
        return None if self.reps_base is None or self.reps_new is None else self.reps_new - self.reps_base

    def estimates(self, level: float = 0.95) -> tuple[list[Estimate], list[Estimate], list[Estimate]]:
        out = []
        for point, reps in ((self.base, self.reps_base), (self.new, self.reps_new),
                            (self.difference, self.reps_difference)):
            if reps is None:
                out.append([Estimate(v) for v in point])
            else:
                lo, hi = _bounds(reps, level, self.n)
                out.append([Estimate(v, a, b) for v, a, b in zip(point, lo, hi)])
        return out[0], out[1], out[2]


def paired_draws(num_base: np.ndarray, den_base: np.ndarray, num_new: np.ndarray, den_new: np.ndarray,
                 W: np.ndarray | None) -> PairedDraws:
    """The one place the resampled ratios of a comparison are computed (`PairedDraws`).

    Inputs are (personas, groups) per-persona sums of the *common* personas, in one persona
    order for both runs; ``W`` is the (B, personas) resampling matrix (None: no interval).
    A resample in which a group has no denominator in a run gives no replicate for it (NaN, left
    out of the interval)."""
    arrays = [np.asarray(a, dtype=float) for a in (num_base, den_base, num_new, den_new)]
    nb, db, nn, dn = (a if a.ndim == 2 else a[:, None] for a in arrays)
    base, new = _ratio(nb.sum(0), db.sum(0)), _ratio(nn.sum(0), dn.sum(0))
    if W is None or W.shape[0] == 0:
        return PairedDraws(base, new, nb.shape[0])
    return PairedDraws(base, new, nb.shape[0], _ratio(W @ nb, W @ db), _ratio(W @ nn, W @ dn))


def paired_ratios(num_base: np.ndarray, den_base: np.ndarray, num_new: np.ndarray, den_new: np.ndarray,
                  W: np.ndarray | None, level: float = 0.95) -> tuple[list[Estimate], list[Estimate], list[Estimate]]:
    """BASE, NEW and NEW − BASE ratio-of-sums estimates, one per column, each with its
    expanded persona-bootstrap interval (`paired_draws` says what the inputs are)."""
    return paired_draws(num_base, den_base, num_new, den_new, W).estimates(level)


def simultaneous_bounds(draws: np.ndarray, level: float, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of each column of the (B, groups) resampled differences at the Bonferroni level for
    `k` figures tested together: each two-sided interval at 1 − (1 − level)/k, by the method of
    every other interval of a diff (``n`` personas resampled), so the chance that any of the k
    one-sided ends misses its truth is at most (1 − level)/2 (k = 1: the ordinary interval)."""
    return _bounds(draws, 1 - (1 - level) / max(k, 1), n)


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
    lo, hi = _bounds(reps, level, W.shape[1])
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
