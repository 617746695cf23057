"""Inverse-probability-weighted PPI and active sampling designs (spec §15): pure numpy.

Estimator (Zrnic & Candès, *Active Statistical Inference*, ICML 2024), for a support rate over
N items of which the gold ones (ξ_i = 1) were drawn with inclusion probability π_i:

    θ(λ) = λ · (1/N) Σ_all Ŷ_i  +  Σ_gold w_i (Y_i − λ Ŷ_i) / Σ_gold w_i,     w_i = 1/π_i

The judge's verdict is known for *every* item, so its mean is taken over all of them (no design
weight): an item or a stratum at π = 1 is then counted once, whatever the design (stratified,
Poisson, a union of both). The rectifier is the Hájek (ratio) form of the paper's
Horvitz–Thompson sum (Σ_gold w = N exactly for a stratified design; for a Poisson design it
adjusts for the random sample size). λ = 0 is gold only (the Hájek mean of the gold labels).

Variance ("the paper's formula"): the linearised per-item terms
z_i = λ(Ŷ_i − Ā) + ξ_i w̃_i (r_i − R), r = Y − λŶ, w̃ = w·N/Σ_gold w, and V = Σ z_i² / N²: the
paper's i.i.d. variance for items drawn independently (a Poisson design); it ignores the
persona clustering, which the persona-cluster bootstrap keeps. V is a quadratic in λ, so the
power-tuned λ (the paper's: the λ of least estimated variance) is its vertex, clipped to [0, 1].

Post-stratified (what ``ipw_three_estimates`` reports as PPI): with cells k nested in the judge's
verdict (the verdict itself, or category × verdict) and a prediction f (the verdict, or the judge's
calibrated P(supported), ``predictor``), θ = Σ_k (N_k/N)·(mean of f over the cell's items + R_k),
R_k the gold's weighted (Hájek) mean of Y − f in cell k. The cell counts N_k are known (the verdict
is known for every item), so the random share of gold in each verdict class, which a Poisson draw
adds, costs nothing; with f the verdict θ is Σ_k (N_k/N)·Ȳ_k, the stratified mean, and λ plays no
part (reported as 1). V = Σ z²/N² with z = f + R_k − θ on every item plus w̃(r − R_k) on gold,
w̃ = w·N_k/Σ_k w. A cell with items but no gold falls back to the verdict's cells, then to the
pooled θ(λ) above.

Every quantity is a function of the per-item feature sums ``FEATURES`` and the per-cell sums
``CELL_FEATURES``, so per-persona sums times a bootstrap weight matrix give B resamples at once,
λ re-tuned in each (as stats/ppi.py does).

Design: ``active_probabilities`` scales an uncertainty u_i ≥ 0 to π_i = clip(c·u_i, p_min, 1)
with Σ π = n (the optimum for V is π ∝ sqrt(E[(Y − Ŷ)² | x]), the square root of the chance that
the judge is wrong); ``mix_uniform`` mixes it with the uniform design, π = W·n/N + (1 − W)·π_active
(Li, Zrnic & Candès 2025: W = 1 is uniform, so a W chosen to minimise the estimated variance
never loses much to uniform); ``choose_mix`` picks W from gold labels already in hand.
``error_model`` fits P(judge wrong | verdict, score) on gold (a small logistic regression).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memjudge.stats.ppi import settle

FEATURES = ("one", "yh", "yh2", "g", "gw", "gwY", "gwYh", "gwYhY", "gwYh2",
            "gw2", "gw2Y", "gw2Yh", "gw2Y2", "gw2Yh2", "gw2YYh")
# Pseudo gold items of each disagreement behind the bootstrap's small-count floor (as stats/ppi.py).
PAD_PER_DISAGREEMENT = 2.0
MIX_GRID = np.linspace(0.0, 1.0, 21)


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - (1 - level) / 2))


def ipw_features(y, yhat, gold, w) -> np.ndarray:
    """(N, 15) per-item features: every item's verdict, and the gold items' weighted moments.
    ``y`` is read only where ``gold``; ``w`` = 1/π_i (read only where ``gold``)."""
    gold = np.asarray(gold, dtype=bool).ravel()
    yhat = np.asarray(yhat, dtype=float).ravel()
    y = np.where(gold, np.asarray(y, dtype=float).ravel(), 0.0)
    g = gold.astype(float)
    w = np.where(gold, np.asarray(w, dtype=float).ravel(), 0.0)
    gw, gw2 = g * w, g * w * w
    return np.column_stack([np.ones_like(yhat), yhat, yhat * yhat, g, gw, gw * y, gw * yhat, gw * yhat * y,
                            gw * yhat * yhat, gw2, gw2 * y, gw2 * yhat, gw2 * y * y, gw2 * yhat * yhat,
                            gw2 * y * yhat])


def _parts(S):
    S = np.asarray(S, dtype=float)
    return [S[..., k] for k in range(len(FEATURES))]


def _theta_var(S, lam):
    """The pooled θ(λ) and V(λ) (module doc) from sums of any leading shape; λ broadcasts."""
    N, S1, S2, n, S4, S5, S6, S7, S8, S9, S10, S11, S12, S13, S14 = _parts(S)
    lam = np.asarray(lam, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        A = S1 / N
        R = (S5 - lam * S6) / S4
        c = N / S4
        t1 = lam * lam * (S2 - S1 * S1 / N)
        cross = S7 - lam * S8 - R * S6 - A * S5 + lam * A * S6 + A * R * S4
        t2 = 2 * lam * c * cross
        sr2 = S12 - 2 * lam * S14 + lam * lam * S13
        sr = S10 - lam * S11
        t3 = c * c * (sr2 - 2 * R * sr + R * R * S9)
        theta = lam * A + R
        var = np.maximum((t1 + t2 + t3) / (N * N), 0.0)
    no_gold = ~(S4 > 0)
    return np.where(no_gold, np.nan, theta), np.where(no_gold, np.nan, var)


def tuned_lambda(S) -> np.ndarray:
    """The λ in [0, 1] of least V(λ): V is exactly quadratic in λ, so three values give it."""
    _, v0 = _theta_var(S, 0.0)
    _, v1 = _theta_var(S, 1.0)
    _, vm = _theta_var(S, -1.0)
    gamma = (v1 + vm) / 2 - v0
    beta = (v1 - vm) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(gamma > 1e-18, -beta / (2 * gamma), np.where(v1 < v0, 1.0, 0.0))
    return np.clip(np.nan_to_num(lam, nan=0.0), 0.0, 1.0)


CELL_FEATURES = ("n", "f", "f2", "gw", "gwr", "gwf", "gwfr", "gw2", "gw2r", "gw2r2")


def cell_sums(cluster, cell, y, f, gold, w, n_clusters: int, n_cells: int) -> np.ndarray:
    """(n_clusters, n_cells, 10) sums of ``CELL_FEATURES`` per persona and post-stratum (one
    bincount): the prediction f on every item, and r = Y − f on the gold weighted by w."""
    gold = np.asarray(gold, dtype=bool)
    g = gold.astype(float)
    f = np.asarray(f, dtype=float)
    r = np.where(gold, np.asarray(y, dtype=float) - f, 0.0)
    w = np.where(gold, np.asarray(w, dtype=float), 0.0)
    gw, gw2 = g * w, g * w * w
    F = np.column_stack([np.ones(len(g)), f, f * f, gw, gw * r, gw * f, gw * f * r, gw2, gw2 * r, gw2 * r * r])
    k = np.asarray(cluster, np.int64) * n_cells + np.asarray(cell, np.int64)
    idx = (k[:, None] * 10 + np.arange(10)).ravel()
    out = np.bincount(idx, weights=F.ravel(), minlength=n_clusters * n_cells * 10)
    return out.reshape(n_clusters, n_cells, 10)


def post_from_cells(C):
    """θ and V post-stratified over cells (..., K, 10): Σ_k (N_k/N)·(mean of f over the cell's items
    + R_k), R_k the gold's weighted mean of Y − f in cell k; V = Σ z²/N² over the linearised terms
    z = f + R_k − θ on every item plus w̃(r − R_k) on gold, w̃ = w·N_k/Σ_k w. ``ok`` where every cell
    with items has gold. With f the verdict (constant in each cell) θ is Σ_k (N_k/N)·Ȳ_k."""
    C = np.asarray(C, dtype=float)
    Nk, sf, sf2, sw, swr, swf, swfr, sw2, sw2r, sw2r2 = (C[..., j] for j in range(10))
    with np.errstate(invalid="ignore", divide="ignore"):
        has = Nk > 0.5
        ok = np.all(~has | (sw > 0), axis=-1)
        R = np.where(has & (sw > 0), swr / sw, 0.0)
        N = Nk.sum(axis=-1)
        theta = (sf + Nk * R).sum(axis=-1) / N
        a = R - theta[..., None]
        c = np.where(sw > 0, Nk / sw, 0.0)
        v = (sf2 + 2 * a * sf + Nk * a * a + 2 * c * (swfr - R * swf)
             + c * c * (sw2r2 - 2 * R * sw2r + R * R * sw2)).sum(axis=-1)
        var = np.maximum(v / (N * N), 0.0)
    return theta, var, ok


def _ppi_from(S, C=None, C_verdict=None):
    """(θ, λ, V) of the PPI estimate: post-stratified over the cells ``C`` where each has gold,
    else over the judge's verdict ``C_verdict``, else the pooled estimator at its tuned λ (λ plays
    no part post-stratified: reported as 1)."""
    lam = tuned_lambda(S)
    theta, var = _theta_var(S, lam)
    lam = np.asarray(lam, float)
    for CC in (C_verdict, C):   # the finer last: it wins where it is defined
        if CC is None:
            continue
        tp, vp, ok = post_from_cells(CC)
        theta, var, lam = np.where(ok, tp, theta), np.where(ok, vp, var), np.where(ok, 1.0, lam)
    return theta, lam, var


def ipw_from_sums(S, lam=None, C=None, C_verdict=None):
    """(θ, λ, V) from feature sums of any leading shape. ``lam`` None: the PPI estimate
    (``_ppi_from``, post-stratified over ``C``/``C_verdict`` when given); a number: the pooled
    estimator at that λ (0: gold only)."""
    if lam is None:
        theta, lam_arr, var = _ppi_from(S, C, C_verdict)
    else:
        lam_arr = np.broadcast_to(np.asarray(lam, float), np.shape(np.asarray(S)[..., 0]))
        theta, var = _theta_var(S, lam_arr)
    return theta, np.where(np.isfinite(theta), lam_arr, np.nan), var


def ipw_mean(y, yhat, gold, w, lam=None, level: float = 0.95, cells=None) -> dict:
    """IPW PPI estimate with the paper's CLT interval, for one set of items (iid, no clustering);
    post-stratified by the (binary) verdict ``yhat`` and, given, by ``cells`` nested in it."""
    S = ipw_features(y, yhat, gold, w).sum(axis=0)
    Cv, Cc = _cells(np.zeros(len(np.asarray(yhat)), np.int64), y, yhat, gold, w, 1, cells)
    theta, lam_used, var = ipw_from_sums(S, lam, None if Cc is None else Cc[0], Cv[0])
    half = _z(level) * np.sqrt(var)
    return {"value": float(theta), "lo": float(theta - half), "hi": float(theta + half), "lam": float(lam_used),
            "var": float(var)}


def effective_uniform_n(value: float, var: float, N: int) -> float:
    """The gold sample size a uniform draw (gold only, without replacement from N items) needs for
    variance ``var``: σ²/n·(N − n)/(N − 1) = var with σ² = θ(1 − θ); never above N."""
    p = min(max(value, 1e-6), 1 - 1e-6)
    s2 = p * (1 - p)
    if not (np.isfinite(var) and var >= 0 and N >= 1):
        return float("nan")
    return float(N * s2 / ((N - 1) * var + s2))


def _cells(persona, y, yhat, gold, w, n_p, cells, f=None):
    """Per-persona post-stratum sums: by the verdict (Ŷ ∈ {0, 1}), and by ``cells`` (codes nested in
    the verdict, e.g. category × verdict) when given; the prediction ``f`` (default Ŷ)."""
    v = (np.asarray(yhat, dtype=float) > 0.5).astype(np.int64)
    f = np.asarray(yhat, dtype=float) if f is None else np.asarray(f, dtype=float)
    Cv = cell_sums(persona, v, y, f, gold, w, n_p, 2)
    if cells is None:
        return Cv, None
    cells = np.asarray(cells, dtype=np.int64)
    return Cv, cell_sums(persona, cells, y, f, gold, w, n_p, int(cells.max()) + 1 if len(cells) else 1)


def ipw_three_estimates(persona, y, yhat, gold, judge_valid, judge_sup, w, *, n_personas: int | None = None,
                        interval: str = "bootstrap", W=None, B: int = 2000, seed: int = 0, level: float = 0.95,
                        pad: bool = True, cells=None, f=None) -> dict:
    """Judge-only, gold-only and IPW PPI support rates with intervals; the dict of
    ``stats.ppi.three_estimates`` (judge/gold/ppi value, lo, hi, var; ppi_lambda; n_gold;
    effective_gold_n; sums). ``w`` = 1/π of the gold items.

    "bootstrap": personas resampled with ``W`` (λ re-tuned in each), percentile interval,
    widened where needed by the small-count floor (``pad``: the paper's variance with two pseudo
    gold items of each disagreement added at the mean gold weight). "clt": the paper's variance.
    effective_gold_n: ``effective_uniform_n`` of the PPI variance (≤ the number of items).
    ``cells``: post-strata codes nested in the verdict (e.g. category × verdict), else the verdict.
    ``f``: the judge's calibrated P(supported) per item (``predictor``), else its verdict Ŷ.
    """
    from memjudge.stats.bootstrap import cluster_sums, cluster_weights, percentile_interval

    persona = np.asarray(persona, dtype=np.int64)
    gold = np.asarray(gold, dtype=bool)
    yhat = np.asarray(yhat, dtype=float)
    n_p = int(n_personas if n_personas is not None else (persona.max() + 1 if len(persona) else 0))
    F = ipw_features(y, yhat if f is None else f, gold, w)
    Jf = np.column_stack([np.asarray(judge_valid, float), np.asarray(judge_sup, float) * np.asarray(judge_valid, float)])
    Fp, Jp = cluster_sums(persona, F, n_p), cluster_sums(persona, Jf, n_p)
    Cvp, Ccp = _cells(persona, y, yhat, gold, w, n_p, cells, f)
    S, J, Cv = Fp.sum(0), Jp.sum(0), Cvp.sum(0)
    Cc = None if Ccp is None else Ccp.sum(0)
    theta, lam, v_ppi = ipw_from_sums(S, None, Cc, Cv)
    g0, _, v_gold = ipw_from_sums(S, 0.0)
    j0 = float(J[1] / J[0]) if J[0] > 0 else float("nan")
    n_gold = int(gold.sum())
    out: dict[str, Any] = dict(judge_value=j0, gold_value=float(g0), ppi_value=float(theta), ppi_lambda=float(lam),
                               n_gold=n_gold, n_items=int(len(persona)))
    z = _z(level)
    if interval == "clt":
        v_judge = j0 * (1 - j0) / J[0] if J[0] > 0 else np.nan
        for name, val, var in (("judge", j0, v_judge), ("gold", float(g0), float(v_gold)), ("ppi", float(theta), float(v_ppi))):
            se = np.sqrt(var) if np.isfinite(var) else np.nan
            out.update({f"{name}_lo": val - z * se, f"{name}_hi": val + z * se, f"{name}_var": float(var)})
    elif interval == "bootstrap":
        if W is None:
            W = cluster_weights(n_p, B, seed) if n_p >= 2 else None
        if W is None:
            for name in ("judge", "gold", "ppi"):
                out.update({f"{name}_lo": np.nan, f"{name}_hi": np.nan, f"{name}_var": np.nan})
        else:
            Sb, Jb = W @ Fp, W @ Jp
            Cvb = np.tensordot(W, Cvp, axes=1)
            Ccb = None if Ccp is None else np.tensordot(W, Ccp, axes=1)
            tb, _, _ = ipw_from_sums(Sb, None, Ccb, Cvb)
            gb, _, _ = ipw_from_sums(Sb, 0.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                jb = np.where(Jb[:, 0] > 0, Jb[:, 1] / Jb[:, 0], np.nan)
            for name, reps in (("judge", jb), ("gold", gb), ("ppi", tb)):
                lo, hi = percentile_interval(reps, level)
                ok = np.isfinite(reps)
                var = float(np.var(reps[ok], ddof=1)) if ok.sum() > 1 else np.nan
                out.update({f"{name}_lo": float(lo), f"{name}_hi": float(hi), f"{name}_var": var})
            if pad and n_gold > 0:
                # Resampling cannot show judge errors the gold sample happened not to contain
                # (stats/ppi.py's small-count floor): each verdict class whose gold shows fewer than
                # PAD_PER_DISAGREEMENT disagreements gets pseudo ones up to that count, at the mean
                # gold weight, and the interval is widened where needed to the variance with them.
                # Classes that show their errors are left alone: with weights, a pseudo error in the
                # large, lightly sampled `supported` class would cost far more width than it buys.
                yy = np.where(gold, np.asarray(y, dtype=float), 0.0)
                v1 = yhat > 0.5
                seen = (np.sum(gold & ~v1 & (yy > 0.5)), np.sum(gold & v1 & (yy < 0.5)))
                add = [max(PAD_PER_DISAGREEMENT - float(k), 0.0) for k in seen]
                wbar = S[4] / S[3]
                pseudo = (add[0] * ipw_features([1.0], [0.0], [True], [wbar]) + add[1] * ipw_features([0.0], [1.0], [True], [wbar])).sum(axis=0)
                Spad = S + pseudo
                Spad[:3] = S[:3]  # pseudo items are gold rows only: the judge's mean stays the items'
                pc = cell_sums(np.zeros(2, np.int64), np.array([0, 1]), [1.0, 0.0], [0.0, 1.0], [True, True],
                               [wbar, wbar], 1, 2)[0] * np.array(add)[:, None]
                Cvpad = Cv + pc
                Cvpad[:, :3] = Cv[:, :3]
                if any(a > 0 for a in add):
                    for name in ("gold", "ppi"):
                        vpad = _theta_var(Spad, 0.0)[1] if name == "gold" else _ppi_from(Spad, None, Cvpad)[2]
                        val = float(g0) if name == "gold" else float(theta)
                        half = z * np.sqrt(float(vpad))
                        out[f"{name}_lo"] = float(np.fmin(out[f"{name}_lo"], val - half))
                        out[f"{name}_hi"] = float(np.fmax(out[f"{name}_hi"], val + half))
    else:
        raise ValueError(f"interval must be 'bootstrap' or 'clt', got {interval!r}")
    settle(out)
    vp = out["ppi_var"]
    out["effective_gold_n"] = (effective_uniform_n(out["ppi_value"], vp, len(persona))
                               if n_gold > 0 and np.isfinite(vp) and vp > 0 else np.nan)
    out["sums"] = S
    return out


# ---------------------------------------------------------------------------------------
# the design

def active_probabilities(u, n: float, min_prob: float = 0.0, pool=None) -> np.ndarray:
    """π_i = clip(c·u_i, min_prob, 1) with Σ_pool π = n (c found by bisection; items of u = 0 sit
    at the floor). ``pool`` (a mask; default every item) is where the draw happens (a top-up
    draws among the items not yet sampled); items outside it get the same rule's value, which
    says what the design would have given them. Raises ValueError when n cannot be reached:
    min_prob·N > n, or n > N (N the pool's size)."""
    u_all = np.asarray(u, dtype=float)
    pool = np.ones(len(u_all), bool) if pool is None else np.asarray(pool, dtype=bool)
    if not np.all(np.isfinite(u_all)) or np.any(u_all < 0):
        raise ValueError("uncertainties must be finite and non-negative")
    u = u_all[pool]
    N = len(u)
    if n > N:
        raise ValueError(f"expected size {n:g} is larger than the {N} items")
    if min_prob * N > n + 1e-9:
        raise ValueError(f"a minimum probability of {min_prob:g} over {N} items already expects {min_prob * N:.1f} "
                         f"labels, more than n = {n:g}")
    if n >= N - 1e-12:
        return np.ones(len(u_all))
    if not np.any(u > 0):
        return np.full(len(u_all), n / N)

    def total(c):
        return np.clip(c * u, min_prob, 1.0).sum()

    lo, hi = 0.0, 1.0
    while total(hi) < n:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if total(mid) < n:
            lo = mid
        else:
            hi = mid
    c = hi
    free = (np.clip(c * u, min_prob, 1.0) > min_prob) & (c * u < 1.0)
    if free.any():
        # Remove the bisection's last rounding so that Σπ = n to machine precision (only the
        # items strictly between the floor and 1 move).
        fixed = np.clip(c * u, min_prob, 1.0)[~free].sum()
        c = (n - fixed) / u[free].sum()
    return np.clip(c * u_all, min_prob, 1.0)


def mix_uniform(pi_active, W: float) -> np.ndarray:
    """π = W·(uniform) + (1 − W)·π_active, at the same expected size (Σ π_active / N each)."""
    pi_active = np.asarray(pi_active, dtype=float)
    if not 0.0 <= W <= 1.0:
        raise ValueError(f"the mixing weight W must be in [0, 1], got {W}")
    return W * pi_active.mean() + (1.0 - W) * pi_active


def design_variance(resid2, w_pilot, pi) -> float:
    """Σ_i E[r_i²](1/π_i − 1) estimated from gold in hand: Σ_gold w_pilot·r²·(1/π − 1), the part of
    V that the design controls (up to 1/N²)."""
    resid2, w_pilot, pi = (np.asarray(a, dtype=float) for a in (resid2, w_pilot, pi))
    return float(np.sum(w_pilot * resid2 * (1.0 / pi - 1.0)))


def choose_mix(resid2, w_pilot, pi_active_gold, pi_uniform_gold, grid=MIX_GRID) -> tuple[float, np.ndarray]:
    """The robust rule's W: the grid value of least ``design_variance`` on the gold in hand
    (resid2 = (Y − Ŷ)², w_pilot = 1/π of the draw that chose them, and on those items the π the
    active and the uniform design would give them). The gold labels measure the judge's real
    errors, so a confidence that predicts nothing earns no weight. Ties go to the larger W
    (nearer uniform). Returns (W, the variance at each grid value)."""
    pa = np.asarray(pi_active_gold, dtype=float)
    pu = np.asarray(pi_uniform_gold, dtype=float)
    v = np.array([design_variance(resid2, w_pilot, W * pu + (1 - W) * pa) for W in grid])
    best = np.flatnonzero(v <= v.min() * (1 + 1e-9) + 1e-300)
    return float(grid[best[-1]]), v


NO_GOLD_MIX = 0.5


def active_design(score, sup, valid, n: float, *, pool=None, pi1=None, gold=None, y=None, min_prob: float = 0.0,
                  mix: float | None = None) -> dict:
    """The active draw's probabilities (stats/active_sampling.py's module doc), arrays over all N items.

    ``score`` the judge's log-odds (NaN: none), ``sup``/``valid`` its verdict; ``pool`` the items
    that may be drawn (default all), ``pi1`` the first draw's probabilities (top-up; default 0);
    ``gold``/``y`` the gold in hand (mask, 1/0). ``mix`` W, or None: chosen on gold (0.5 without).
    Returns {"pi": π of this draw, "union": π1 + (1 − π1)·π, "W", "W_how" (given/chosen/fixed),
    "coef" (the error model, None without gold), "n_fit", "n_errors", "p_err"}. ValueError when n
    cannot be reached or the gold is too thin to calibrate on.
    """
    score = np.asarray(score, dtype=float)
    sup = np.asarray(sup, dtype=bool)
    valid = np.asarray(valid, dtype=bool)
    N = len(score)
    pool = np.ones(N, bool) if pool is None else np.asarray(pool, dtype=bool)
    pi1 = np.zeros(N) if pi1 is None else np.asarray(pi1, dtype=float)
    have = valid & np.isfinite(score)
    s0 = np.where(have, score, 0.0)
    coef, n_fit, n_err = None, 0, 0
    w1 = 1.0 / np.where(pi1 > 0, pi1, 1.0)   # gold from the first draw weighs 1/π1, other gold 1
    if gold is not None:
        gold = np.asarray(gold, dtype=bool)
        err = (np.asarray(y, dtype=float) != sup.astype(float)).astype(float)
        fit = gold & have
        n_fit, n_err = int(fit.sum()), int(err[fit].sum())
        if n_fit < 2:
            raise ValueError(f"{n_fit} gold item(s) with a judge verdict and score: too few to calibrate the judge's "
                             f"confidence (label a first batch: --strategy stratified)")
        coef = error_model(score[fit], sup[fit], err[fit], w1[fit])
        p_err = error_probability(coef, s0, sup)
    else:
        p_err = 1.0 / (1.0 + np.exp(np.minimum(np.abs(s0), 700.0)))
    u = np.sqrt(p_err)
    # an item without a verdict or a score: as unsure as the most unsure
    u = np.where(have, u, u[have].max() if have.any() else 1.0)
    pa = active_probabilities(u, n, min_prob, pool=pool)
    pu = np.full(N, n / pool.sum())

    if mix is not None:
        W, how = float(mix), "given"
    elif gold is not None:
        fit_all = gold & valid
        p1 = pi1[fit_all]
        # the design variance of the union, which the estimate will weigh by
        W, _ = choose_mix(err[fit_all], w1[fit_all], p1 + (1 - p1) * pa[fit_all], p1 + (1 - p1) * pu[fit_all])
        how = "chosen"
    else:
        W, how = NO_GOLD_MIX, "fixed"
    pi = W * pu + (1 - W) * pa
    union = np.minimum(pi1 + (1 - pi1) * pi, 1.0)
    return {"pi": pi, "union": union, "W": W, "W_how": how, "coef": coef, "n_fit": n_fit, "n_errors": n_err,
            "p_err": p_err}


def error_model(score, verdict_sup, err, weight=None, ridge: float = 1.0) -> np.ndarray:
    """Coefficients of logit P(judge wrong) = b0 + b1·v + b2·|s| + b3·v·|s| (v = the judge said
    supported, |s| = its confidence), fitted by Newton's method on gold items (``err`` = the gold
    disagrees with the verdict), weighted (1/π of the draw that chose them, normalised to mean 1),
    with a ridge penalty ``ridge`` on b1..b3 so that few errors (or none) give a finite fit."""
    X = error_features(score, verdict_sup)
    yv = np.asarray(err, dtype=float)
    wt = np.ones(len(yv)) if weight is None else np.asarray(weight, dtype=float)
    wt = wt / wt.mean() if len(wt) and wt.mean() > 0 else wt
    pen = np.full(X.shape[1], ridge)
    pen[0] = 1e-6
    p0 = np.clip(np.average(yv, weights=wt) if len(yv) else 0.5, 1e-3, 1 - 1e-3)
    b = np.zeros(X.shape[1])
    b[0] = np.log(p0 / (1 - p0))
    for _ in range(200):
        eta = np.clip(X @ b, -50, 50)
        p = 1.0 / (1.0 + np.exp(-eta))
        grad = X.T @ (wt * (yv - p)) - pen * b
        H = (X * (wt * p * (1 - p))[:, None]).T @ X + np.diag(pen)
        step = np.linalg.solve(H, grad)
        # damped Newton: a large step (near-separation, few errors) is cut to a norm of 2
        step = step * min(1.0, 2.0 / max(float(np.linalg.norm(step)), 1e-300))
        b = b + step
        if np.max(np.abs(step)) < 1e-10:
            break
    return b


def predictor(coef, score, verdict_sup, valid) -> np.ndarray:
    """The judge's calibrated P(supported): 1 − P(wrong) where it says supported, P(wrong) where it
    does not (``error_model``); its verdict (1/0) where it has no score."""
    score = np.asarray(score, dtype=float)
    sup = np.asarray(verdict_sup, dtype=bool)
    have = np.asarray(valid, dtype=bool) & np.isfinite(score)
    pe = error_probability(coef, np.where(have, score, 0.0), sup)
    return np.where(have, np.where(sup, 1.0 - pe, pe), sup.astype(float))


def error_features(score, verdict_sup) -> np.ndarray:
    s = np.abs(np.asarray(score, dtype=float))
    v = np.asarray(verdict_sup, dtype=float)
    return np.column_stack([np.ones_like(s), v, s, v * s])


def error_probability(coef, score, verdict_sup) -> np.ndarray:
    eta = np.clip(error_features(score, verdict_sup) @ np.asarray(coef, dtype=float), -50, 50)
    return 1.0 / (1.0 + np.exp(-eta))


__all__ = ["FEATURES", "active_design", "active_probabilities", "choose_mix", "design_variance",
           "effective_uniform_n", "error_model", "error_probability", "ipw_features", "ipw_from_sums", "ipw_mean",
           "ipw_three_estimates", "mix_uniform", "predictor", "post_from_cells", "cell_sums", "settle", "tuned_lambda"]
