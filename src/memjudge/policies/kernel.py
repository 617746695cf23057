"""The one fitting kernel of the retention policies (spec §8), on arrays.

Both the frame-level estimators (`memjudge.policies.estimators`) and the comparison's
cross-validation protocol (`memjudge.comparison.protocol`) fit through `SortedSample.fit`, so
a policy fitted on a fold and a policy fitted and exported on all personas follow one path.

**The rule**: candidate thresholds are −∞ and the distinct confidences (of the gated
categories for the targeted policy); the chosen one maximises faithfulness (supported / valid
verdicts among the retained) subject to retention (retained / *all* candidates, valid or not)
≥ floor; ties go to the lowest threshold. A threshold whose retained set has no valid verdict
has no faithfulness and is never preferred; when no threshold has both, −∞ (keep all) is
chosen. A kept candidate is one with ``confidence >= threshold`` — the gate (`memjudge.gate`)
applies exactly this comparison, so an exported policy reproduces the fitted decisions.

**The computation** is one sort and cumulative sums: with the gated confidences sorted
ascending, the threshold equal to the value starting run ``i`` removes exactly items
``0..i-1``, so every candidate threshold's counts are read off the cumulative sums at once (no
loop over thresholds). `SortedSample` sorts a sample once (by confidence, and by category then
confidence) so that fitting on any subset of it — a cross-validation fold — is masks and
cumulative sums. Categories are integer codes ``0..C-1`` in name order, so "first by name"
and "lowest code" are the same tie-break.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memjudge.errors import UsageError

NEG_INF = float("-inf")
PER_CATEGORY_METHODS = ("greedy", "exact")
# The policies the kernel fits (write-all has nothing to fit).
FITTED_KINDS = ("global", "targeted", "per_category")


def check_method(method: str) -> None:
    if method not in PER_CATEGORY_METHODS:
        raise UsageError(f"per-category method must be one of {', '.join(PER_CATEGORY_METHODS)}, got {method!r}")


@dataclass(frozen=True)
class Options:
    """Candidate thresholds of one sorted set and what each removes (counts, valid, supported)."""

    thresholds: np.ndarray
    removed: np.ndarray
    removed_valid: np.ndarray
    removed_supported: np.ndarray
    n: int
    valid: int
    supported: int


def sorted_options(conf_sorted: np.ndarray, valid_sorted: np.ndarray, sup_sorted: np.ndarray) -> Options:
    """Options −∞ then each distinct confidence, for items already sorted by confidence."""
    m = len(conf_sorted)
    cv = np.zeros(m + 1, dtype=np.int64)
    cs = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(valid_sorted, out=cv[1:])
    np.cumsum(sup_sorted, out=cs[1:])
    if m:
        starts = np.flatnonzero(np.r_[True, conf_sorted[1:] != conf_sorted[:-1]])
    else:
        starts = np.zeros(0, dtype=np.int64)
    removed = np.r_[0, starts].astype(np.int64)
    thresholds = np.r_[NEG_INF, conf_sorted[starts]].astype(float)
    return Options(thresholds, removed, cv[removed], cs[removed], m, int(cv[-1]), int(cs[-1]))


def feasible_faithfulness(kept, valid, sup, n_total, floor):
    """Faithfulness of each option where retention meets the floor and a valid verdict is
    kept, else −∞ (never preferred)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        faith = sup / valid
        ok = (kept / n_total >= floor) & (valid > 0)
    return np.where(ok, faith, -np.inf)


def choose(opt: Options, n_total: int, fixed_kept: int, fixed_valid: int, fixed_sup: int, floor: float) -> int:
    """Index of the chosen option: max faithfulness s.t. retention ≥ floor; ties → lowest.

    ``fixed_*`` are the always-kept items of the set (the ungated categories)."""
    kept = fixed_kept + opt.n - opt.removed
    valid = fixed_valid + opt.valid - opt.removed_valid
    sup = fixed_sup + opt.supported - opt.removed_supported
    score = feasible_faithfulness(kept, valid, sup, n_total, floor)
    j = int(np.argmax(score))  # first maximum = lowest threshold
    return 0 if score[j] == -np.inf else j


def fit_threshold(conf, valid, sup, gated, floor: float) -> float:
    """Fit a single threshold on the gated items of one set (unsorted arrays)."""
    conf = np.asarray(conf, dtype=float)
    valid = np.asarray(valid, dtype=bool)
    sup = np.asarray(sup, dtype=bool) & valid
    gated = np.asarray(gated, dtype=bool)
    g = np.flatnonzero(gated)
    order = g[np.argsort(conf[g], kind="stable")]
    opt = sorted_options(conf[order], valid[order], sup[order])
    ng = ~gated
    j = choose(opt, len(conf), int(ng.sum()), int((valid & ng).sum()), int((sup & ng).sum()), floor)
    return float(opt.thresholds[j])


def category_options(conf_sorted, valid_sorted, sup_sorted, all_conf_sorted) -> Options:
    """Per-category options: −∞, the category's distinct confidences and, so that a category
    can be dropped whole, the lowest confidence of the whole set above the category's maximum
    (when there is one). Every global threshold maps onto one of these with identical decisions
    on the set."""
    opt = sorted_options(conf_sorted, valid_sorted, sup_sorted)
    if opt.n == 0:
        return opt
    k = np.searchsorted(all_conf_sorted, conf_sorted[-1], side="right")
    if k >= len(all_conf_sorted):
        return opt
    return Options(
        np.r_[opt.thresholds, all_conf_sorted[k]], np.r_[opt.removed, opt.n],
        np.r_[opt.removed_valid, opt.valid], np.r_[opt.removed_supported, opt.supported],
        opt.n, opt.valid, opt.supported,
    )


def option_for_threshold(opt: Options, conf_sorted: np.ndarray, t: float) -> int:
    """The lowest option making the same decisions on this category as threshold t."""
    r = int(np.searchsorted(conf_sorted, t, side="left"))
    return int(np.searchsorted(opt.removed, r, side="left"))


def fit_per_category_sorted(segments, all_conf_sorted, n_total: int, floor: float, starts,
                            method: str = "greedy") -> list[float]:
    """Per-category fit (see `PerCategory`), greedy or exact.

    segments: per category, (conf, valid, supported) sorted by confidence (possibly empty);
    starts: candidate starting points, each a list of one threshold per category. Returns one
    threshold per category."""
    check_method(method)
    opts = [category_options(c, v, s, all_conf_sorted) for c, v, s in segments]
    C = len(opts)
    V = sum(o.valid for o in opts)
    S = sum(o.supported for o in opts)

    def state_value(idx):
        rn = sum(int(o.removed[i]) for o, i in zip(opts, idx))
        rv = sum(int(o.removed_valid[i]) for o, i in zip(opts, idx))
        rs = sum(int(o.removed_supported[i]) for o, i in zip(opts, idx))
        kept = n_total - rn
        sc = feasible_faithfulness(np.array([kept]), np.array([V - rv]), np.array([S - rs]), n_total, floor)[0]
        return (sc, kept), (rn, rv, rs)

    best: tuple | None = None
    for st in starts:
        idx = [option_for_threshold(o, seg[0], t) for o, seg, t in zip(opts, segments, st)]
        val, _ = state_value(idx)
        if best is None or val > best[0]:
            best = (val, idx)
    if best is None:  # no starting point: keep everything
        return [NEG_INF] * C
    (cur_score, cur_kept), idx = best
    idx = list(idx)
    for _ in range(100 * max(C, 1)):
        changed = False
        for c, o in enumerate(opts):
            if len(o.thresholds) <= 1:
                continue
            _, (rn, rv, rs) = state_value(idx)
            rn -= int(o.removed[idx[c]])
            rv -= int(o.removed_valid[idx[c]])
            rs -= int(o.removed_supported[idx[c]])
            kept = n_total - rn - o.removed
            score = feasible_faithfulness(kept, V - rv - o.removed_valid, S - rs - o.removed_supported, n_total, floor)
            j = int(np.argmax(score))
            cand = (float(score[j]), int(kept[j]))
            if cand > (cur_score, cur_kept):
                idx[c] = j
                cur_score, cur_kept = cand
                changed = True
        if not changed:
            break
    if method == "exact" and V > 0:
        idx = exact_per_category(opts, n_total, floor, V, S, idx)
    return [float(o.thresholds[i]) for o, i in zip(opts, idx)]


def exact_per_category(opts, n_total: int, floor: float, V: int, S: int, idx) -> list[int]:
    """Exact optimum: Dinkelbach iterations on the ratio, each a multiple-choice knapsack solved
    by dynamic programming over the total number removed (0..cap), in integer arithmetic.

    With the current ratio a/b, maximise Σ_c (a·removed_valid_c − b·removed_supported_c)
    subject to Σ_c removed_c ≤ cap; a solution with b·kept_supported − a·kept_valid > 0 has a
    higher ratio and becomes the next a/b. When none has, a/b is optimal; among the optimal
    solutions the one removing fewest is taken (ties in the DP → lowest option)."""
    r = np.arange(n_total + 1)
    cap = int(np.flatnonzero((n_total - r) / n_total >= floor).max())

    def totals(ix):
        return (sum(int(o.removed_valid[i]) for o, i in zip(opts, ix)),
                sum(int(o.removed_supported[i]) for o, i in zip(opts, ix)))

    rv, rs = totals(idx)
    a, b = (S - rs, V - rv) if V - rv > 0 else (0, 1)
    NEG = -(2 ** 62)
    W = np.arange(cap + 1)
    C = len(opts)
    for _ in range(10_000):
        dp = np.full(cap + 1, NEG, np.int64)
        dp[0] = 0
        choice = np.zeros((C, cap + 1), np.int64)
        for c, o in enumerate(opts):
            m = int(np.searchsorted(o.removed, cap, side="right"))
            g = a * o.removed_valid[:m].astype(np.int64) - b * o.removed_supported[:m].astype(np.int64)
            src = W[None, :] - o.removed[:m, None]
            prev = dp[np.clip(src, 0, None)]
            vals = np.where((src >= 0) & (prev > NEG), prev + g[:, None], NEG)
            j = vals.argmax(axis=0)  # first maximum = lowest option
            dp = vals[j, W]
            choice[c] = j

        def backtrack(w, choice=choice):  # the table of this pass
            ix = [0] * C
            for c in range(C - 1, -1, -1):
                ix[c] = int(choice[c, w])
                w -= int(opts[c].removed[ix[c]])
            return ix

        gain = np.where(dp > NEG, dp + (b * S - a * V), NEG)
        best = int(gain.max())
        if best > 0:
            ix = backtrack(int(gain.argmax()))
            rv, rs = totals(ix)
            a, b = S - rs, V - rv
            g = math.gcd(a, b) or 1
            a, b = a // g, b // g
            continue
        for w in np.flatnonzero(gain == 0):
            ix = backtrack(int(w))
            if V - totals(ix)[0] > 0:
                return ix
        return list(idx)
    return list(idx)


def support_by_category(cat, valid, sup) -> dict[str, float]:
    out = {}
    for c in sorted(set(cat.tolist())):
        m = (cat == c) & valid
        out[c] = float(sup[m].sum() / m.sum()) if m.any() else float("nan")
    return out


def lowest_support_category(cat, valid, sup) -> str | None:
    """The category with the lowest support rate (ties → first by name; none without verdicts)."""
    rates = {c: r for c, r in support_by_category(cat, valid, sup).items() if not np.isnan(r)}
    if not rates:
        return None
    low = min(rates.values())
    return min(c for c, r in rates.items() if r == low)


# ---------------------------------------------------------------------------------------
# one sample, sorted once, fitted on any subset


@dataclass(frozen=True)
class KernelFit:
    """The thresholds fitted on one subset: global and targeted always (the per-category fit
    starts from them), per-category when asked; `gate_codes` are the gated category codes
    (the requested ones, or the subset's lowest-support category for ``"auto"``)."""

    global_threshold: float
    targeted_threshold: float
    gate_codes: np.ndarray
    per_category_thresholds: np.ndarray | None
    n_categories: int

    def thresholds(self, kind: str) -> np.ndarray:
        """One threshold per category code for `kind` (−∞ = keep every confidence)."""
        C = self.n_categories
        if kind == "write_all":
            return np.full(C, NEG_INF)
        if kind == "global":
            return np.full(C, self.global_threshold)
        if kind == "targeted":
            gated = np.zeros(C, bool)
            gated[self.gate_codes] = True
            return np.where(gated, self.targeted_threshold, NEG_INF)
        if kind == "per_category" and self.per_category_thresholds is not None:
            return self.per_category_thresholds
        raise UsageError(f"policy {kind!r} was not fitted")


class SortedSample:
    """One sample (category codes, confidences, valid and supported flags per item) sorted once,
    so that each fit on a subset is masks and cumulative sums."""

    def __init__(self, cat, conf, valid, sup, n_categories: int | None = None):
        self.cat = np.asarray(cat, dtype=np.int64)
        self.conf = np.asarray(conf, dtype=float)
        self.valid = np.asarray(valid, dtype=bool)
        self.sup = np.asarray(sup, dtype=bool) & self.valid
        self.C = int(n_categories if n_categories is not None else (self.cat.max() + 1 if len(self.cat) else 0))
        self.order_all = np.argsort(self.conf, kind="stable")
        self.order_cat = np.lexsort((self.conf, self.cat))
        self.cat_bounds = np.searchsorted(self.cat[self.order_cat], np.arange(self.C + 1))

    @property
    def n(self) -> int:
        return len(self.conf)

    def fit(self, mask=None, *, gate, floor: float, per_category: bool = True,
            method: str = "greedy") -> KernelFit:
        """Fit on the items of `mask` (all when None). `gate`: gated category codes, or
        ``"auto"`` (the subset's lowest-support category, ties → lowest code)."""
        fit = np.ones(self.n, bool) if mask is None else np.asarray(mask, dtype=bool)
        conf, valid, sup, cat, C = self.conf, self.valid, self.sup, self.cat, self.C
        n_fit = int(fit.sum())
        idx_all = self.order_all[fit[self.order_all]]
        opt_g = sorted_options(conf[idx_all], valid[idx_all], sup[idx_all])
        tg = float(opt_g.thresholds[choose(opt_g, n_fit, 0, 0, 0, floor)])
        if isinstance(gate, str):  # "auto"
            low = lowest_support_category(cat[fit], valid[fit], sup[fit])
            gcodes = np.array([int(low)] if low is not None else [], dtype=np.int64)
        else:
            gcodes = np.asarray(gate, dtype=np.int64)
        segs = []
        for c in range(C):
            s = self.order_cat[self.cat_bounds[c]:self.cat_bounds[c + 1]]
            segs.append(s[fit[s]])
        gidx = [segs[c] for c in gcodes]
        gi = np.concatenate(gidx) if gidx else np.zeros(0, np.int64)
        if len(gcodes) > 1:
            gi = gi[np.argsort(conf[gi], kind="stable")]
        gated_fit = np.zeros(C, bool)
        gated_fit[gcodes] = True
        ng = fit & ~gated_fit[cat]
        opt_t = sorted_options(conf[gi], valid[gi], sup[gi])
        tt = float(opt_t.thresholds[choose(opt_t, n_fit, int(ng.sum()), int(valid[ng].sum()), int(sup[ng].sum()),
                                           floor)])
        per_cat = None
        if per_category:
            segments = [(conf[s], valid[s], sup[s]) for s in segs]
            starts = [[tg] * C, list(np.where(gated_fit, tt, NEG_INF))]
            per_cat = np.array(fit_per_category_sorted(segments, conf[idx_all], n_fit, floor, starts, method),
                               dtype=float)
        return KernelFit(tg, tt, gcodes, per_cat, C)


__all__ = [
    "FITTED_KINDS", "KernelFit", "NEG_INF", "Options", "PER_CATEGORY_METHODS", "SortedSample", "category_options",
    "check_method", "choose", "exact_per_category", "feasible_faithfulness", "fit_per_category_sorted",
    "fit_threshold", "lowest_support_category", "option_for_threshold", "sorted_options", "support_by_category",
]
