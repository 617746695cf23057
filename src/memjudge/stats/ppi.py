"""Prediction-powered inference (PPI++) for a support rate: pure numpy, vectorised.

Convention (spec §10, pinned): the **labelled set** is the gold items — gold verdict Y and the
judge's verdict Ŷ on the same items; the **unlabelled set** is the judge's verdicts on the items
*without* gold (ppi_py's ``Yhat_unlabeled``). Verdicts are 1.0 (supported) / 0.0 (not).

Estimator (Angelopoulos, Duchi & Zrnic 2023, arXiv 2311.01453), with weights w normalised to
sum to n on the labelled set and to N on the unlabelled set (as ppi_py does):

    θ(λ) = λ · mean_u(w_u Ŷ_u) + mean_l(w (Y − λ Ŷ))

λ = None tunes it as ``ppi_py.ppi_mean_pointestimate(lam=None)`` does: a pilot θ(1), then
λ = cov(g, ĝ) / ((1 + n/N) var(ĝ ∪ ĝ_u)) with g = w(Y − θ1), ĝ = w(Ŷ − θ1), clipped to [0, 1].
λ = 1 is plain PPI, λ = 0 the gold-only (classical) mean.

Every quantity is a function of a few weighted sums (``LABELLED_FEATURES``,
``UNLABELLED_FEATURES``), so ``ppi_from_sums`` works on sums with any leading shape: the sums of
all items give the point estimate; per-persona sums multiplied by a bootstrap weight matrix
(``memjudge.stats.bootstrap.cluster_weights``) give B resamples at once, with λ re-tuned in each.

Degenerate cases are decided here, never left as a silent NaN: no gold item → PPI undefined
(NaN, the caller says why); no unlabelled item → the gold-only mean (λ = 0: there is nothing to
impute); a judge whose verdicts do not vary → λ = 0 (θ does not depend on λ then).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _z(level: float) -> float:
    """The two-sided normal quantile of `level`. scipy.stats is imported here, not with the
    module: it is most of a second of every command that imports this one (diff, report)."""
    from scipy.stats import norm

    return norm.ppf(1 - (1 - level) / 2)


# Per-item features summed over the labelled (gold) items: counts, weighted first moments and
# the weighted second moments that the variance and λ need.
# Pseudo gold items of each disagreement (Y=1, Ŷ=0 and Y=0, Ŷ=1) behind the bootstrap interval's
# small-count floor (see three_estimates): 2 ≈ z²/2, the pseudo-count of Agresti–Coull's interval.
# bench/ppi.py, sim:lenient overall: 93.0% coverage with 1, 94.5% with 2, for 5% more width.
PAD_PER_DISAGREEMENT = 2.0

LABELLED_FEATURES = ("n", "w", "wY", "wYh", "w2", "w2Y", "w2Yh", "w2YY", "w2YhYh", "w2YYh")
UNLABELLED_FEATURES = ("n", "w", "wYh", "w2", "w2Yh", "w2YhYh")


def labelled_features(y, yhat, w=None) -> np.ndarray:
    """(n, 10) per-item features of the labelled set (raw weights; normalisation is done on sums)."""
    y = np.asarray(y, dtype=float).ravel()
    yhat = np.asarray(yhat, dtype=float).ravel()
    w = np.ones_like(y) if w is None else np.asarray(w, dtype=float).ravel()
    w2 = w * w
    return np.column_stack([np.ones_like(y), w, w * y, w * yhat, w2, w2 * y, w2 * yhat,
                            w2 * y * y, w2 * yhat * yhat, w2 * y * yhat])


def unlabelled_features(yhat, w=None) -> np.ndarray:
    """(N, 6) per-item features of the unlabelled set."""
    yhat = np.asarray(yhat, dtype=float).ravel()
    w = np.ones_like(yhat) if w is None else np.asarray(w, dtype=float).ravel()
    w2 = w * w
    return np.column_stack([np.ones_like(yhat), w, w * yhat, w2, w2 * yhat, w2 * yhat * yhat])


def _moments(L, U):
    """Normalised weighted sums (weights rescaled to sum to n and N, as ppi_py does)."""
    L = np.asarray(L, dtype=float)
    U = np.asarray(U, dtype=float)
    n, N = L[..., 0], U[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where(L[..., 1] > 0, n / L[..., 1], np.nan)
        cu = np.where(U[..., 1] > 0, N / U[..., 1], np.nan)
    m = dict(n=n, N=N,
             wY=c * L[..., 2], wYh=c * L[..., 3], w2=c * c * L[..., 4], w2Y=c * c * L[..., 5],
             w2Yh=c * c * L[..., 6], w2YY=c * c * L[..., 7], w2YhYh=c * c * L[..., 8],
             w2YYh=c * c * L[..., 9],
             u_wYh=cu * U[..., 2], u_w2=cu * cu * U[..., 3], u_w2Yh=cu * cu * U[..., 4],
             u_w2YhYh=cu * cu * U[..., 5])
    return m


def _theta(m, lam):
    with np.errstate(invalid="ignore", divide="ignore"):
        imputed = np.where(m["N"] > 0, m["u_wYh"] / m["N"], 0.0)
        return lam * imputed + (m["wY"] - lam * m["wYh"]) / m["n"]


def _tuned_lambda(m):
    """ppi_py's power-tuned λ (``_calc_lam_glm`` for a mean, clip=True) from the moments."""
    n, N = m["n"], m["N"]
    with np.errstate(invalid="ignore", divide="ignore"):
        t1 = _theta(m, 1.0)
        sg = m["wY"] - t1 * n                     # Σ w(Y − θ1)   (Σw = n after normalising)
        sgh = m["wYh"] - t1 * n                   # Σ w(Ŷ − θ1)
        sggh = m["w2YYh"] - t1 * (m["w2Y"] + m["w2Yh"]) + t1 * t1 * m["w2"]
        cov = sggh / n - (sg / n) * (sgh / n)     # population covariance (ddof 0), as ppi_py
        sv = sgh + (m["u_wYh"] - t1 * N)
        sv2 = (m["w2YhYh"] - 2 * t1 * m["w2Yh"] + t1 * t1 * m["w2"]
               + m["u_w2YhYh"] - 2 * t1 * m["u_w2Yh"] + t1 * t1 * m["u_w2"])
        tot = n + N
        var = (sv2 - sv * sv / tot) / (tot - 1)   # np.cov over labelled ∪ unlabelled (ddof 1)
        lam = cov / ((1.0 + n / N) * var)
    lam = np.clip(lam, 0.0, 1.0)
    # Judge verdicts constant (var 0): θ does not depend on λ; nothing to impute (N = 0): λ = 0.
    degenerate = ~(var > 1e-15) | ~(N > 0)
    return np.where(degenerate & (n > 0), 0.0, lam)


def _clt_var(m, lam):
    """ppi_mean_ci's variance of θ(λ): imputed + rectifier, each a ddof-0 variance over its set."""
    n, N = m["n"], m["N"]
    with np.errstate(invalid="ignore", divide="ignore"):
        mu_u = m["u_wYh"] / N
        v_imp = np.where(N > 0, lam * lam * (m["u_w2YhYh"] / N - mu_u * mu_u) / N, 0.0)
        r1 = (m["wY"] - lam * m["wYh"]) / n
        r2 = (m["w2YY"] - 2 * lam * m["w2YYh"] + lam * lam * m["w2YhYh"]) / n
        v_rect = (r2 - r1 * r1) / n
    return np.maximum(v_imp, 0.0) + np.maximum(v_rect, 0.0)


def _hajek_var(m, lam):
    """Linearised (Hájek) variance of θ(λ): Σw²(r − r̄)² / (Σw)² per set, r = Y − λŶ on the gold
    items and λŶ on the others. Without weights it equals ``_clt_var`` (ppi_py's); with
    inclusion-probability weights it centres the residuals before weighting, where ppi_py's
    formula takes the variance of w·r, inflated by the spread of the weights themselves."""
    n, N = m["n"], m["N"]
    with np.errstate(invalid="ignore", divide="ignore"):
        rbar = (m["wY"] - lam * m["wYh"]) / n
        s_rr = m["w2YY"] - 2 * lam * m["w2YYh"] + lam * lam * m["w2YhYh"]
        s_r = m["w2Y"] - lam * m["w2Yh"]
        v_rect = (s_rr - 2 * rbar * s_r + rbar * rbar * m["w2"]) / (n * n)
        mu = m["u_wYh"] / N
        v_imp = np.where(N > 0, lam * lam * (m["u_w2YhYh"] - 2 * mu * m["u_w2Yh"] + mu * mu * m["u_w2"]) / (N * N), 0.0)
    return np.maximum(v_imp, 0.0) + np.maximum(v_rect, 0.0)


def ppi_from_sums(L, U, lam=None):
    """PPI++ from feature sums of any leading shape (..., 10) and (..., 6).

    Returns (theta, lam, clt_var), each of the leading shape. ``lam`` None tunes λ per entry
    (e.g. per bootstrap resample); a number fixes it. NaN where there is no gold item.
    """
    m = _moments(L, U)
    if lam is None:
        lam_arr = _tuned_lambda(m)
    else:
        lam_arr = np.broadcast_to(np.asarray(lam, dtype=float), np.shape(m["n"])).copy()
        # Nothing to impute: any λ gives the gold-only mean only if the imputed term is dropped;
        # ppi_py would divide by N = 0. λ = 0 is the honest answer.
        lam_arr = np.where(m["N"] > 0, lam_arr, 0.0)
    theta = _theta(m, lam_arr)
    var = _clt_var(m, lam_arr)
    no_gold = ~(m["n"] > 0)
    theta = np.where(no_gold, np.nan, theta)
    lam_arr = np.where(no_gold, np.nan, lam_arr)
    var = np.where(no_gold, np.nan, var)
    return theta, lam_arr, var


def ppi_mean_point(y_gold, yhat_gold, yhat_unlabeled, *, w_gold=None, w_unlabeled=None, lam=None
                   ) -> tuple[float, float]:
    """PPI++ estimate of a mean and the power-tuned lambda used (lam=None tunes it; lam=1 plain PPI; lam=0 gold only).
    y_gold, yhat_gold: float arrays over the gold items (gold verdict 1/0, judge verdict 1/0);
    yhat_unlabeled: the judge's verdicts on items WITHOUT gold (ppi_py's Yhat_unlabeled). Weights optional (inclusion-prob weighting).

    Equals ``ppi_py.ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled, lam=lam, w=w_gold,
    w_unlabeled=w_unlabeled)`` (λ clipped to [0, 1] as ppi_py does)."""
    L = labelled_features(y_gold, yhat_gold, w_gold).sum(axis=0)
    U = unlabelled_features(yhat_unlabeled, w_unlabeled).sum(axis=0)
    theta, lam_used, _ = ppi_from_sums(L, U, lam)
    return float(theta), float(lam_used)


def ppi_mean_clt(y_gold, yhat_gold, yhat_unlabeled, *, w_gold=None, w_unlabeled=None, lam=None,
                 level: float = 0.95) -> tuple[float, float, float, float]:
    """(estimate, lo, hi, λ): the iid CLT interval, equal to ``ppi_py.ppi_mean_ci(..., alpha=1-level)``."""
    L = labelled_features(y_gold, yhat_gold, w_gold).sum(axis=0)
    U = unlabelled_features(yhat_unlabeled, w_unlabeled).sum(axis=0)
    theta, lam_used, var = ppi_from_sums(L, U, lam)
    z = _z(level)
    se = np.sqrt(var)
    return float(theta), float(theta - z * se), float(theta + z * se), float(lam_used)


def settle(out: dict, names=("judge", "gold", "ppi")) -> dict:
    """A rate lies in [0, 1] and inside its own interval: clip value and ends to [0, 1] and
    widen an interval that misses its (clipped) value (a percentile interval can, in skewed
    resamples; cutting at 0 and 1 keeps coverage, the truth being a rate)."""
    for name in names:
        v = out.get(f"{name}_value")
        if v is None or not np.isfinite(v):
            continue
        v = float(min(max(v, 0.0), 1.0))
        out[f"{name}_value"] = v
        lo, hi = out.get(f"{name}_lo"), out.get(f"{name}_hi")
        if lo is not None and np.isfinite(lo):
            out[f"{name}_lo"] = float(min(max(lo, 0.0), v))
        if hi is not None and np.isfinite(hi):
            out[f"{name}_hi"] = float(max(min(hi, 1.0), v))
    return out


# ---------------------------------------------------------------------------------------
# judge-only, gold-only and PPI++ side by side, per group, with intervals

def _judge_only(J):
    """Support rate of the judge's valid verdicts from (..., 2) sums [valid, supported]."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(J[..., 0] > 0, J[..., 1] / J[..., 0], np.nan)


def three_estimates(persona, y, yhat, gold, judge_valid, judge_sup, *, w=None, w_unlabeled=None,
                    n_personas: int | None = None, interval: str = "bootstrap", W=None,
                    B: int = 2000, seed: int = 0, level: float = 0.95, pad: bool = True) -> dict:
    """Judge-only, gold-only and PPI++ support rates with `level` intervals for one set of items.

    Per item (all arrays of one length): ``persona`` an integer code 0..n_personas-1; ``gold``
    True where a gold verdict exists and then ``y`` ∈ {0, 1} is it; ``yhat`` ∈ {0, 1} the judge's
    prediction used by PPI; ``judge_valid``/``judge_sup`` the judge's valid / supported flags
    (judge-only = supported / valid); ``w`` the gold items' weights (1/inclusion probability),
    ``w_unlabeled`` the other items' weights.

    interval "bootstrap": resample personas with ``W`` (or ``cluster_weights(n_personas, B,
    seed)``), recomputing λ and every estimate in each resample from per-persona sums;
    percentile interval, widened where needed by the small-count floor (``pad``, see the code);
    variances are the replicates' variances. "clt": the iid CLT intervals
    (PPI++ equal to ``ppi_py.ppi_mean_ci``; gold-only its λ = 0 case; judge-only Wald).

    Returns a dict of floats: judge/gold/ppi value, lo, hi, var; ppi lambda; n_gold;
    effective_gold_n = n_gold · var(gold-only) / var(PPI++) (NaN where undefined).
    """
    from memjudge.stats.bootstrap import cluster_sums, cluster_weights, percentile_interval

    persona = np.asarray(persona, dtype=np.int64)
    gold = np.asarray(gold, dtype=bool)
    y = np.where(gold, np.asarray(y, dtype=float), 0.0)
    yhat = np.asarray(yhat, dtype=float)
    w = np.ones(len(persona)) if w is None else np.asarray(w, dtype=float)
    wu = np.ones(len(persona)) if w_unlabeled is None else np.asarray(w_unlabeled, dtype=float)
    n_p = int(n_personas if n_personas is not None else (persona.max() + 1 if len(persona) else 0))
    Lf = labelled_features(y, yhat, w) * gold[:, None]
    Uf = unlabelled_features(yhat, wu) * (~gold)[:, None]
    Jf = np.column_stack([np.asarray(judge_valid, float), np.asarray(judge_sup, float) * np.asarray(judge_valid, float)])
    Lp, Up, Jp = (cluster_sums(persona, f, n_p) for f in (Lf, Uf, Jf))
    L, U, J = Lp.sum(0), Up.sum(0), Jp.sum(0)
    theta, lam, v_ppi = ppi_from_sums(L, U)
    g0, _, v_gold = ppi_from_sums(L, U, lam=0.0)
    j0 = float(_judge_only(J))
    out: dict[str, Any] = dict(judge_value=j0, gold_value=float(g0), ppi_value=float(theta), ppi_lambda=float(lam),
                               n_gold=int(L[0]), n_items=int(len(persona)))
    z = _z(level)
    if interval == "clt":
        v_judge = j0 * (1 - j0) / J[0] if J[0] > 0 else np.nan
        for name, val, var in (("judge", j0, v_judge), ("gold", float(g0), float(v_gold)), ("ppi", float(theta), float(v_ppi))):
            se = np.sqrt(var) if np.isfinite(var) else np.nan
            out.update({f"{name}_lo": val - z * se, f"{name}_hi": val + z * se, f"{name}_var": float(var)})
    elif interval == "bootstrap":
        if W is None:
            W = cluster_weights(n_p, B, seed) if n_p >= 2 else None
        if W is None:  # one persona: nothing to resample
            for name in ("judge", "gold", "ppi"):
                out.update({f"{name}_lo": np.nan, f"{name}_hi": np.nan, f"{name}_var": np.nan})
        else:
            Lb, Ub, Jb = W @ Lp, W @ Up, W @ Jp
            tb, _, _ = ppi_from_sums(Lb, Ub)          # λ re-tuned in every resample
            gb, _, _ = ppi_from_sums(Lb, Ub, lam=0.0)
            jb = _judge_only(Jb)
            for name, reps in (("judge", jb), ("gold", gb), ("ppi", tb)):
                lo, hi = percentile_interval(reps, level)
                ok = np.isfinite(reps)
                var = float(np.var(reps[ok], ddof=1)) if ok.sum() > 1 else np.nan
                out.update({f"{name}_lo": float(lo), f"{name}_hi": float(hi), f"{name}_var": var})
            if pad and L[0] > 0:
                # Small-count floor. Resampling cannot show judge errors the gold sample happened
                # not to contain: with few gold items and an accurate judge, the rectifier's
                # replicates barely vary and the percentile interval collapses onto the judge's
                # (bench/ppi.py: 50% coverage when no gold item disagreed with the judge). So the
                # interval is widened, where needed, to the CLT interval at the same λ computed
                # with two pseudo gold items of each disagreement added (Y=1, Ŷ=0 and Y=0, Ŷ=1,
                # at the mean gold weight) — Agresti–Coull's remedy for rare counts. The
                # variance is the linearised one (ppi_py's without weights; with weights it
                # does not count the weights' own spread as noise).
                wbar = L[1] / L[0]
                Lpad = L + PAD_PER_DISAGREEMENT * labelled_features([1.0, 0.0], [0.0, 1.0], [wbar, wbar]).sum(axis=0)
                mpad = _moments(Lpad, U)
                for name, lam_p in (("gold", 0.0), ("ppi", float(lam))):
                    vpad = _hajek_var(mpad, lam_p)
                    val = float(g0) if name == "gold" else float(theta)
                    half = z * np.sqrt(float(vpad))
                    out[f"{name}_lo"] = float(np.fmin(out[f"{name}_lo"], val - half))
                    out[f"{name}_hi"] = float(np.fmax(out[f"{name}_hi"], val + half))
    else:
        raise ValueError(f"interval must be 'bootstrap' or 'clt', got {interval!r}")
    settle(out)
    vg, vp = out["gold_var"], out["ppi_var"]
    # Never more than the items there are (a judge almost always right can make var(PPI++) tiny).
    out["effective_gold_n"] = (float(min(out["n_gold"] * vg / vp, len(persona)))
                               if np.isfinite(vg) and np.isfinite(vp) and vp > 0 else np.nan)
    out["sums"] = (L, U)
    return out


def planned_gold_n(L, U, half_width: float, measured_var: float, level: float = 0.95) -> dict:
    """How many gold items give a PPI++ interval of half-width ``half_width``.

    The CLT variance of θ(λ) at the measured per-item moments (judge variance, judge–gold
    covariance, gold variance: the pilot's ``L``, ``U`` sums), with λ re-optimised for each n,
    is var(n) = λ² s_u / (N_total − n) + (s_y − 2λc + λ² s_ŷ) / n. It is scaled by
    measured_var / var(n_pilot), which carries the pilot's design effect (persona clustering
    under the bootstrap, weights) over to larger n. Returns n_total_needed (None when even
    labelling every item would not do), n_more, and the predicted half-width at that n.
    """
    m = _moments(L, U)
    n0, N0 = float(m["n"]), float(m["N"])
    total = n0 + N0
    if n0 < 2 or not np.isfinite(measured_var):
        return {"half_width": half_width, "n_gold_needed": None, "n_more": None, "reachable": False,
                "note": "needs at least 2 gold items and a finite pilot variance"}
    s_y = m["w2YY"] / n0 - (m["wY"] / n0) ** 2
    c = m["w2YYh"] / n0 - (m["wY"] / n0) * (m["wYh"] / n0)
    s_yh = m["w2YhYh"] / n0 - (m["wYh"] / n0) ** 2
    s_u = (m["u_w2YhYh"] / N0 - (m["u_wYh"] / N0) ** 2) if N0 > 0 else s_yh

    def var_at(n):
        nu = np.maximum(total - n, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            lam = np.where(nu > 0, (c / n) / (s_u / np.maximum(nu, 1) + s_yh / n), 0.0)
            lam = np.clip(np.nan_to_num(lam), 0.0, 1.0)
            v = np.where(nu > 0, lam * lam * s_u / np.maximum(nu, 1), 0.0) + (s_y - 2 * lam * c + lam * lam * s_yh) / n
        return np.maximum(v, 0.0)

    z = _z(level)
    v0 = float(var_at(np.array([n0]))[0])
    scale = measured_var / v0 if v0 > 0 else 1.0
    ns = np.arange(int(n0), int(total) + 1, dtype=float)
    hw = z * np.sqrt(scale * var_at(ns))
    ok = np.flatnonzero(hw <= half_width)
    if len(ok) == 0:
        return {"half_width": half_width, "n_gold_needed": None, "n_more": None, "reachable": False,
                "predicted_half_width_all_gold": float(hw[-1]),
                "note": f"not reachable even with every item labelled (predicted half-width {hw[-1]:.4f}): "
                        f"the persona sampling and the design set a floor that only more personas lower"}
    n_need = int(ns[ok[0]])
    return {"half_width": half_width, "n_gold_needed": n_need, "n_more": n_need - int(n0), "reachable": True,
            "predicted_half_width": float(hw[ok[0]]), "design_effect": float(scale)}
