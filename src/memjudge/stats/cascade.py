"""Certified cascades (spec §14; Jung, Brahman and Choi, *Trust or Escalate*, ICLR 2025).

A cascade asks its stages in turn; stage k's answer is trusted when its confidence reaches the
threshold lambda_k, else the item goes on to stage k + 1, and an item no stage trusts is left
to people (abstained). On gold items that every stage answered, the whole cascade can be
replayed for any thresholds: which stage decides each item, and whether it agrees with gold.
The risk of thresholds lambda is R(lambda) = P(the deciding stage is wrong | some stage decides)
over the population the gold items are drawn from; the certificate is

    P( R(lambda_hat) <= 1 - target ) >= 1 - delta,

over the draw of the gold items. How:

* The thresholds move along one *path*, indexed by an error level eps: at level eps each
  stage's threshold is the lowest at which its own error rate ((errors + 1) / (items + 1), a
  stage alone) on the *selection* items is at most eps. The path, and where on it to start
  (the most cautious level the selection items predict certifiable), are chosen on items
  that take no part in the certificate: a sample of other candidates that every stage
  answered, "correct" there meaning agreement with the last stage (`select`), or else a
  seeded third of the gold items (`select_share`; the certificate then rests on the rest).
* On the gold items (all of them, or the rest), fixed-sequence testing walks the path from the
  start towards more trusting levels: level j is certified when the exact binomial
  (Clopper-Pearson) upper bound of the replayed cascade's error among its trusted items is at
  most 1 - target at confidence 1 - delta (equivalently P(Bin(n_trusted, alpha) <= errors) <=
  delta); the walk stops at the first level that is not. Fixed-sequence testing keeps the
  chance that any certified level is wrong within delta without splitting delta, because the
  order was fixed before the certifying items were looked at; the most trusting certified
  level is used.

Choosing the path on the very items that certify it (select_share = 0) is not exact: the
levels whose gold errors happened to be few look best. bench/cascade.py measures what that
costs (and what the two exact ways cost). Everything here reads arrays and returns numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from memjudge.errors import UsageError

# Error levels of the path: fine enough that a step adds a few items of a few hundred.
LEVELS = np.round(np.arange(0, 0.5001, 0.001), 6)
SELECT_SHARE = 1 / 3


def check_target(target: float, delta: float) -> None:
    """The ranges a certificate makes sense in: agreement in (0.5, 1), delta in (0, 0.5)."""
    if not (isinstance(target, (int, float)) and 0.5 < target < 1):
        raise UsageError(f"--target must be an agreement in (0.5, 1), got {target}")
    if not (isinstance(delta, (int, float)) and 0 < delta < 0.5):
        raise UsageError(f"--delta must be in (0, 0.5), got {delta}")


def cp_upper(errors, n, delta: float):
    """One-sided Clopper-Pearson upper bound, at confidence 1 - delta, of an error rate seen as
    `errors` of `n` (1 where n = 0). Arrays broadcast; real-valued counts are allowed (a
    prediction scaled from another sample)."""
    from scipy.stats import beta  # here: importing scipy.stats costs most of a second

    e, m = np.broadcast_arrays(np.asarray(errors, dtype=float), np.asarray(n, dtype=float))
    out = np.ones(e.shape)
    ok = (m > 0) & (e < m)
    out[ok] = beta.ppf(1 - delta, e[ok] + 1, m[ok] - e[ok])
    return out if out.ndim else float(out)


def binomial_p_value(errors, n, alpha: float):
    """p-value of H: risk > alpha, having seen `errors` of `n`: P(Bin(n, alpha) <= errors)
    (1 where n = 0). cp_upper(errors, n, delta) <= alpha exactly when this is <= delta."""
    from scipy.stats import binom

    e, m = np.broadcast_arrays(np.asarray(errors), np.asarray(n))
    out = np.where(m > 0, binom.cdf(e, np.maximum(m, 1), alpha), 1.0)
    return out if out.ndim else float(out)


def min_certifiable_n(target: float, delta: float) -> int:
    """Fewest trusted items that can certify `target` at `delta`: all of them right."""
    return math.ceil(math.log(delta) / math.log(target))


def min_gold_n(target: float, delta: float, select_share: float = SELECT_SHARE) -> int:
    """Fewest gold items whose certification part can hold min_certifiable_n items."""
    need = min_certifiable_n(target, delta)
    n = need
    while n - _n_select(n, select_share) < need:
        n += 1
    return n


def _n_select(n: int, share: float) -> int:
    return int(round(n * share))


def fixed_sequence(p_values, delta: float) -> int:
    """Index of the last hypothesis rejected by fixed-sequence testing in the given order (each
    at delta, stopping at the first not rejected); -1 when none is."""
    last = -1
    for j, p in enumerate(np.asarray(p_values, dtype=float)):
        if not p <= delta:
            break
        last = j
    return last


def replay(confidence, thresholds) -> np.ndarray:
    """The stage (0-based) that decides each item: the first whose confidence reaches its
    threshold; -1 where none does (abstained). confidence is (items, stages); NaN never reaches."""
    conf = np.asarray(confidence, dtype=float)
    lam = np.asarray(thresholds, dtype=float)
    with np.errstate(invalid="ignore"):
        trusted = conf >= lam[None, :]
    first = np.argmax(trusted, axis=1)
    return np.where(trusted.any(axis=1), first, -1)


def replay_counts(confidence, correct, paths) -> tuple[np.ndarray, np.ndarray]:
    """(trusted, errors) of the replayed cascade at each row of `paths` (levels, stages)."""
    conf = np.asarray(confidence, dtype=float)
    right = np.asarray(correct, dtype=bool)
    trusted, errors = [], []
    for lam in np.asarray(paths, dtype=float):
        by = replay(conf, lam)
        kept = by >= 0
        trusted.append(int(kept.sum()))
        errors.append(int((~right[np.flatnonzero(kept), by[kept]]).sum()))
    return np.array(trusted), np.array(errors)


def level_thresholds(confidence, correct, levels=LEVELS) -> np.ndarray:
    """(levels, stages): at each error level, each stage's lowest threshold whose items (those
    at or above it, the stage alone) have an error rate of at most the level; +inf where none has."""
    conf = np.asarray(confidence, dtype=float)
    right = np.asarray(correct, dtype=bool)
    levels = np.asarray(levels, dtype=float)
    out = np.full((levels.size, conf.shape[1]), np.inf)
    for k in range(conf.shape[1]):
        ok = np.isfinite(conf[:, k])
        c, wrong = conf[ok, k], ~right[ok, k]
        if not c.size:
            continue
        values, inverse = np.unique(-c, return_inverse=True)  # descending confidence, ties together
        count = np.bincount(inverse, minlength=values.size).cumsum()
        errs = np.bincount(inverse, weights=wrong, minlength=values.size).cumsum()
        # An error rate read from the top few items is mostly luck: (errors + 1) / (items + 1)
        # keeps a stage from being trusted on a handful of lucky answers.
        rate = (errs + 1) / (count + 1)
        for j, eps in enumerate(levels):
            at = np.flatnonzero(rate <= eps + 1e-12)
            if at.size:
                out[j, k] = -values[at[-1]]
    return out


@dataclass
class Certificate:
    """Thresholds per stage (None: the stage trusts nothing) and what backs them."""

    target: float
    delta: float
    certified: bool
    thresholds: list[float | None]
    level: float | None  # the path's error level certified
    bound: float | None  # Clopper-Pearson upper bound of the trusted items' error (certification part)
    n: int  # gold items
    n_select: int
    n_certify: int
    trusted: int  # certification items the cascade trusts at the thresholds
    errors: int  # of those, wrong
    tested: int  # levels tested on the certification part
    min_gold: int  # fewest gold items that could certify the target at delta
    decided_by: list[int] = field(default_factory=list)  # every gold item's deciding stage (-1: abstained)
    message: str = ""

    @property
    def agreement_bound(self) -> float | None:
        return None if self.bound is None else 1 - self.bound

    def as_dict(self) -> dict:
        d = asdict(self)
        d["agreement_bound"] = self.agreement_bound
        return d


def certify_cascade(confidence, correct, target: float, delta: float, *, select=None, select_share: float = SELECT_SHARE,
                    seed: int = 0, levels=LEVELS) -> Certificate:
    """Thresholds certifying agreement >= target on the trusted items at 1 - delta.

    confidence: (n, stages) confidence of each stage on each gold item (NaN: no valid answer);
    correct: (n, stages) whether that stage's verdict is the gold one. `select`, a pair of such
    arrays on other items (correct: agreeing with the last stage), chooses the path and all the
    gold items certify it; without it select_share of the gold items (a seeded random split)
    choose the path and the rest certify it (select_share 0: the same items do both, which is
    not exact). A gold set too small for any certificate is a UsageError naming the smallest
    that could be."""
    check_target(target, delta)
    conf = np.asarray(confidence, dtype=float)
    right = np.asarray(correct, dtype=bool)
    if conf.ndim != 2 or conf.shape != right.shape or conf.shape[1] < 1:
        raise ValueError("confidence and correct must be (items, stages) arrays of one shape")
    n = conf.shape[0]
    alpha = 1 - target
    need = min_gold_n(target, delta, select_share) if (select is None and select_share > 0) else min_certifiable_n(target, delta)
    if n < need:
        raise UsageError(f"{n} gold items cannot certify agreement {target} at delta {delta}: even with every "
                         f"trusted item right it takes at least {need} gold items "
                         f"({min_certifiable_n(target, delta)} certifying)")
    if select is not None:
        s_conf, s_right = np.asarray(select[0], dtype=float), np.asarray(select[1], dtype=bool)
        cer = np.arange(n)
    elif select_share > 0:
        order = np.random.default_rng(seed).permutation(n)
        sel, cer = np.sort(order[:_n_select(n, select_share)]), np.sort(order[_n_select(n, select_share):])
        s_conf, s_right = conf[sel], right[sel]
    else:
        cer = np.arange(n)
        s_conf, s_right = conf, right
    paths = level_thresholds(s_conf, s_right, levels)
    if select is not None:
        # The selection items know the last stage only as their own yardstick: where it is
        # trusted at all, it is trusted on every answer it gives (confidences are >= 0).
        paths[:, -1] = np.where(np.isfinite(paths[:, -1]), 0.0, np.inf)
    # Where to start: the most cautious level that the selection items predict certifiable at
    # the certification items' number (else the one they predict closest).
    t_sel, e_sel = replay_counts(s_conf, s_right, paths)
    scale = cer.size / max(s_conf.shape[0], 1)
    predicted = cp_upper(e_sel * scale, t_sel * scale, delta)
    fits = np.flatnonzero(predicted <= alpha)
    start = int(fits[0]) if fits.size else int(np.argmin(predicted))
    seq = paths[start:]
    t_cer, e_cer = replay_counts(conf[cer], right[cer], seq)
    p = binomial_p_value(e_cer, t_cer, alpha)
    last = fixed_sequence(p, delta)
    tested = min(last + 2, len(seq))
    stages = conf.shape[1]
    if last < 0:
        return Certificate(target=target, delta=delta, certified=False, thresholds=[None] * stages, level=None, bound=None,
                           n=n, n_select=int(s_conf.shape[0]) if (select is not None or select_share > 0) else 0, n_certify=int(cer.size), trusted=0, errors=0,
                           tested=tested, min_gold=need, decided_by=[-1] * n,
                           message=f"no thresholds certify agreement {target} at delta {delta} on these {n} gold items: "
                                   "every item is left to people (more gold items, or a lower target, may certify)")
    lam = seq[last]
    return Certificate(
        target=target, delta=delta, certified=True, thresholds=[None if not np.isfinite(x) else float(x) for x in lam],
        level=float(levels[start + last]), bound=float(cp_upper(e_cer[last], t_cer[last], delta)), n=n,
        n_select=int(s_conf.shape[0]) if (select is not None or select_share > 0) else 0, n_certify=int(cer.size), trusted=int(t_cer[last]),
        errors=int(e_cer[last]), tested=tested, min_gold=need, decided_by=[int(x) for x in replay(conf, lam)],
    )


__all__ = [
    "Certificate", "LEVELS", "SELECT_SHARE", "binomial_p_value", "certify_cascade", "check_target", "cp_upper",
    "fixed_sequence", "level_thresholds", "min_certifiable_n", "min_gold_n", "replay", "replay_counts",
]
