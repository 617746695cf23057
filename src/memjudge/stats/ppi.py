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
(``memjudge.bootstrap.cluster_weights``) give B resamples at once, with λ re-tuned in each.

Degenerate cases are decided here, never left as a silent NaN: no gold item → PPI undefined
(NaN, the caller says why); no unlabelled item → the gold-only mean (λ = 0: there is nothing to
impute); a judge whose verdicts do not vary → λ = 0 (θ does not depend on λ then).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

# Per-item features summed over the labelled (gold) items: counts, weighted first moments and
# the weighted second moments that the variance and λ need.
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
    z = norm.ppf(1 - (1 - level) / 2)
    se = np.sqrt(var)
    return float(theta), float(theta - z * se), float(theta + z * se), float(lam_used)
