"""Retention policies (spec §8): which candidate assertions a memory system writes.

Four policies, each with a scikit-learn-like ``fit(frame)`` / ``apply(frame)``:

- ``WriteAll``: keep everything.
- ``GlobalThreshold``: keep if ``confidence >= t``.
- ``Targeted(gate=["values"] | "auto")``: keep if the category is not gated or
  ``confidence >= t``; ``"auto"`` gates the lowest-support category of the fit set.
- ``PerCategory``: one threshold per category.

``frame`` is a DataFrame with ``category``, ``confidence`` and ``verdict`` (a string, or
null for "no valid verdict"; only ``"supported"`` counts as supported). A third verdict
(``"partial"``, or any label but supported/unsupported) is a valid verdict that is not
supported, so it lowers faithfulness; with ``strict_binary=True`` it is no valid verdict
(left out of faithfulness like null, still counted in retention).

**Fitting** (spec §8): candidate thresholds are −∞ and the distinct confidences (of the gated
categories for ``Targeted``); the chosen one maximises faithfulness (supported / valid verdicts
among the retained) subject to retention (retained / *all* candidates, valid or not) ≥ floor;
ties go to the lowest threshold. A threshold whose retained set has no valid verdict has no
faithfulness and is never preferred; when no threshold has both, −∞ (keep all) is chosen.
A kept candidate is one with ``confidence >= threshold`` — the gate (`memjudge.gate`) applies
exactly this comparison, so an exported policy reproduces the fitted decisions.

The fit is one sort and cumulative sums: with the gated confidences sorted ascending, the
threshold equal to the value starting run ``i`` removes exactly items ``0..i-1``, so every
candidate threshold's counts are read off the cumulative sums at once (no loop over thresholds).
The array-level functions here (`sorted_options`, `choose`, `fit_per_category_sorted`) are
what `memjudge.comparison` calls per fold on pre-sorted data.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from memjudge.errors import UsageError
from memjudge.gate import FORMAT as POLICY_FORMAT, SUPPORTED_VERSIONS

POLICY_VERSION = SUPPORTED_VERSIONS[-1]  # written files are the newest version the gate reads
NEG_INF = float("-inf")
PER_CATEGORY_METHODS = ("greedy", "exact")

# ---------------------------------------------------------------------------------------
# array level


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


def _scores(kept, valid, sup, n_total, floor):
    """Faithfulness where feasible and defined, else −∞ (never preferred)."""
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
    score = _scores(kept, valid, sup, n_total, floor)
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


def _option_for_threshold(opt: Options, conf_sorted: np.ndarray, t: float) -> int:
    """The lowest option making the same decisions on this category as threshold t."""
    r = int(np.searchsorted(conf_sorted, t, side="left"))
    return int(np.searchsorted(opt.removed, r, side="left"))


def fit_per_category_sorted(segments, all_conf_sorted, n_total: int, floor: float, starts,
                            method: str = "greedy") -> list[float]:
    """Per-category fit (see `PerCategory`), greedy or exact.

    segments: per category, (conf, valid, supported) sorted by confidence (possibly empty);
    starts: candidate starting points, each a list of one threshold per category. Returns one
    threshold per category."""
    if method not in PER_CATEGORY_METHODS:
        raise UsageError(f"per-category method must be one of {', '.join(PER_CATEGORY_METHODS)}, got {method!r}")
    opts = [category_options(c, v, s, all_conf_sorted) for c, v, s in segments]
    C = len(opts)
    V = sum(o.valid for o in opts)
    S = sum(o.supported for o in opts)

    def state_value(idx):
        rn = sum(int(o.removed[i]) for o, i in zip(opts, idx))
        rv = sum(int(o.removed_valid[i]) for o, i in zip(opts, idx))
        rs = sum(int(o.removed_supported[i]) for o, i in zip(opts, idx))
        kept = n_total - rn
        sc = _scores(np.array([kept]), np.array([V - rv]), np.array([S - rs]), n_total, floor)[0]
        return (sc, kept), (rn, rv, rs)

    best = None
    for st in starts:
        idx = [_option_for_threshold(o, seg[0], t) for o, seg, t in zip(opts, segments, st)]
        val, _ = state_value(idx)
        if best is None or val > best[0]:
            best = (val, idx)
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
            score = _scores(kept, V - rv - o.removed_valid, S - rs - o.removed_supported, n_total, floor)
            j = int(np.argmax(score))
            cand = (float(score[j]), int(kept[j]))
            if cand > (cur_score, cur_kept):
                idx[c] = j
                cur_score, cur_kept = cand
                changed = True
        if not changed:
            break
    if method == "exact" and V > 0:
        idx = _exact_per_category(opts, n_total, floor, V, S, idx)
    return [float(o.thresholds[i]) for o, i in zip(opts, idx)]


def _exact_per_category(opts, n_total: int, floor: float, V: int, S: int, idx) -> list[int]:
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

        def backtrack(w):
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


# ---------------------------------------------------------------------------------------
# frame level


def frame_arrays(frame: pd.DataFrame, strict_binary: bool = False):
    """(category, confidence, valid, supported) arrays from a frame with a verdict column
    (or boolean ``valid``/``supported`` columns). `strict_binary`: only supported/unsupported
    verdicts are valid."""
    for col in ("category", "confidence"):
        if col not in frame.columns:
            raise UsageError(f"policy frame needs a {col!r} column")
    cat = frame["category"].astype(str).to_numpy()
    conf = frame["confidence"].to_numpy(dtype=float)
    if np.isnan(conf).any():
        raise UsageError("every candidate needs a confidence to fit or apply a retention policy")
    if "verdict" in frame.columns:
        v = frame["verdict"]
        valid = (v.isin(("supported", "unsupported")) if strict_binary else v.notna()).to_numpy()
        sup = (v == "supported").to_numpy() & valid
    elif "supported" in frame.columns:
        valid = frame["valid"].to_numpy(dtype=bool) if "valid" in frame.columns else np.ones(len(frame), bool)
        sup = frame["supported"].to_numpy(dtype=bool) & valid
    else:
        valid = np.zeros(len(frame), bool)
        sup = valid
    return cat, conf, valid, sup


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


def _fit_summary(keep, valid, sup) -> dict:
    n = len(keep)
    kv = (keep & valid).sum()
    return {
        "n": int(n),
        "faithfulness": float((keep & sup).sum() / kv) if kv else None,
        "retention": float(keep.sum() / n) if n else None,
    }


class _Policy:
    kind = ""

    def __init__(self, floor: float = 0.8, *, strict_binary: bool = False):
        if not 0.0 <= floor <= 1.0:
            raise UsageError(f"floor must be in [0, 1], got {floor}")
        self.floor = float(floor)
        self.strict_binary = bool(strict_binary)
        self.fit_info_: dict = {}

    def _arrays(self, frame):
        return frame_arrays(frame, self.strict_binary)

    def _finish_fit(self, frame):
        cat, conf, valid, sup = self._arrays(frame)
        self.fit_info_ = {**_fit_summary(self._keep(cat, conf), valid, sup), "strict_binary": self.strict_binary}
        return self

    def apply(self, frame: pd.DataFrame) -> np.ndarray:
        """Boolean mask: True = write this candidate to memory."""
        cat, conf, _, _ = frame_arrays(frame)
        return self._keep(cat, conf)

    def thresholds(self) -> dict[str, float]:
        return {}

    def default_threshold(self) -> float:
        return NEG_INF

    def gate(self) -> list[str] | None:
        return None

    def to_dict(self, **fitted_on) -> dict:
        """The exported policy (read by `memjudge.gate`); −∞ is written as null."""
        def num(t):
            return None if t == NEG_INF else float(t)

        return {
            "format": POLICY_FORMAT,
            "version": POLICY_VERSION,
            "kind": self.kind,
            "thresholds": {c: num(t) for c, t in sorted(self.thresholds().items())},
            "default_threshold": num(self.default_threshold()),
            "gate": self.gate(),
            "floor": self.floor,
            "fitted_on": {**self.fit_info_, **fitted_on,
                          "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")},
        }


class WriteAll(_Policy):
    """Keep every candidate."""

    kind = "write_all"

    def fit(self, frame):
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        return np.ones(len(conf), dtype=bool)


class GlobalThreshold(_Policy):
    """Keep if confidence ≥ t, one t for all categories."""

    kind = "global"

    def fit(self, frame):
        cat, conf, valid, sup = self._arrays(frame)
        self.threshold_ = fit_threshold(conf, valid, sup, np.ones(len(conf), bool), self.floor)
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        return conf >= self.threshold_

    def default_threshold(self):
        return self.threshold_


class Targeted(_Policy):
    """Keep if the category is not gated or confidence ≥ t (one t for the gated categories)."""

    kind = "targeted"

    def __init__(self, gate=("values",), floor: float = 0.8, *, strict_binary: bool = False):
        super().__init__(floor, strict_binary=strict_binary)
        self.gate_spec = gate if gate == "auto" else list(gate)

    def fit(self, frame):
        cat, conf, valid, sup = self._arrays(frame)
        if self.gate_spec == "auto":
            low = lowest_support_category(cat, valid, sup)
            self.gate_ = [low] if low is not None else []
        else:
            self.gate_ = list(self.gate_spec)
        gated = np.isin(cat, self.gate_)
        self.threshold_ = fit_threshold(conf, valid, sup, gated, self.floor)
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        return ~np.isin(cat, self.gate_) | (conf >= self.threshold_)

    def thresholds(self):
        return {c: self.threshold_ for c in self.gate_}

    def gate(self):
        return list(self.gate_)


class PerCategory(_Policy):
    """One threshold per category, fitted to maximise faithfulness subject to the floor.

    Candidate thresholds of a category: −∞, its distinct confidences, and the lowest confidence
    of the whole fit set above its maximum (so the category can be dropped whole). Every global
    or targeted threshold maps onto this grid with identical decisions on the fit set.

    ``method="greedy"`` (default; linear in the data) — coordinate ascent:

    1. Start from the better — by (faithfulness, retained) — of the fitted global and targeted
       solutions (``gate`` as for `Targeted`), mapped onto the grid (the lowest grid threshold
       making the same decisions).
    2. Visit the categories in sorted order; for each, take the best feasible threshold given
       the others (max faithfulness, ties → lowest threshold) and accept it when
       (faithfulness, retained) improves lexicographically. Repeat full passes until one
       changes nothing.

    Step 1 and the monotone acceptance rule make it never worse on the fit set than
    `GlobalThreshold` or `Targeted`; it ends where no single category's threshold can improve,
    which is not always the global optimum.

    ``method="exact"`` — the global optimum on the grid: from the greedy solution, Dinkelbach
    iterations on the ratio, each an exact multiple-choice knapsack (dynamic programming over
    the number removed, integer arithmetic); among optimal solutions, the one retaining most
    (then the lowest thresholds, resolved from the last category backwards). Its cost grows
    with (number of removable candidates) × (grid points), so it suits paper-scale data.

    A category unseen at fit time is admitted (threshold −∞).
    """

    kind = "per_category"

    def __init__(self, gate=("values",), floor: float = 0.8, method: str = "greedy", *, strict_binary: bool = False):
        super().__init__(floor, strict_binary=strict_binary)
        if method not in PER_CATEGORY_METHODS:
            raise UsageError(f"per-category method must be one of {', '.join(PER_CATEGORY_METHODS)}, got {method!r}")
        self.gate_spec = gate if gate == "auto" else list(gate)
        self.method = method

    def fit(self, frame):
        cat, conf, valid, sup = self._arrays(frame)
        g = GlobalThreshold(self.floor, strict_binary=self.strict_binary).fit(frame)
        t = Targeted(self.gate_spec, self.floor, strict_binary=self.strict_binary).fit(frame)
        cats = sorted(set(cat.tolist()))
        segments = []
        for c in cats:
            idx = np.flatnonzero(cat == c)
            idx = idx[np.argsort(conf[idx], kind="stable")]
            segments.append((conf[idx], valid[idx], sup[idx]))
        starts = [[g.threshold_] * len(cats),
                  [t.threshold_ if c in t.gate_ else NEG_INF for c in cats]]
        th = fit_per_category_sorted(segments, np.sort(conf), len(conf), self.floor, starts, self.method)
        self.thresholds_ = dict(zip(cats, th))
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        thr = pd.Series(cat).map(self.thresholds_).fillna(NEG_INF).to_numpy(dtype=float)
        return conf >= thr

    def thresholds(self):
        return dict(self.thresholds_)


POLICIES = {"write_all": WriteAll, "global": GlobalThreshold, "targeted": Targeted, "per_category": PerCategory}


def make_policy(kind: str, *, gate=("values",), floor: float = 0.8, method: str = "greedy",
                strict_binary: bool = False) -> _Policy:
    if kind not in POLICIES:
        raise UsageError(f"unknown policy {kind!r} (expected one of {', '.join(POLICIES)})")
    if kind == "per_category":
        return PerCategory(gate=gate, floor=floor, method=method, strict_binary=strict_binary)
    if kind == "targeted":
        return POLICIES[kind](gate=gate, floor=floor, strict_binary=strict_binary)
    return POLICIES[kind](floor=floor, strict_binary=strict_binary)


def export_policy(policy: _Policy, path, **fitted_on) -> dict:
    """Write a fitted policy as the JSON that `memjudge.gate.load_policy` reads."""
    from memjudge.formats import write_json

    d = policy.to_dict(**fitted_on)
    write_json(path, d)
    return d
