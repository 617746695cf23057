"""PPI++ core (memjudge.stats.ppi) against the reference implementation ppi_py (PyPI ppi-python)."""

import numpy as np
import pytest

ppi_py = pytest.importorskip("ppi_py")

from memjudge.stats.ppi import ppi_mean_clt, ppi_mean_point  # noqa: E402


def _case(seed, n=150, N=2000, acc=0.85, p=0.7):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < p).astype(float)
    flip = rng.random(n) > acc
    yhat = np.where(flip, 1 - y, y)
    yu_true = (rng.random(N) < p).astype(float)
    yhat_u = np.where(rng.random(N) > acc, 1 - yu_true, yu_true)
    return y, yhat, yhat_u


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [None, 0.0, 0.5, 1.0])
def test_point_equals_ppi_py(seed, lam):
    y, yhat, yhat_u = _case(seed, acc=0.6 + 0.07 * seed)
    ref = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)
    est, lam_used = ppi_mean_point(y, yhat, yhat_u, lam=lam)
    assert est == pytest.approx(float(np.ravel(ref)[0]), abs=1e-9)
    if lam is not None:
        assert lam_used == lam


@pytest.mark.parametrize("seed", range(6))
def test_point_with_weights_equals_ppi_py(seed):
    y, yhat, yhat_u = _case(seed)
    rng = np.random.default_rng(100 + seed)
    w = rng.uniform(0.2, 5.0, len(y))
    wu = rng.uniform(0.5, 2.0, len(yhat_u))
    ref = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=None, w=w, w_unlabeled=wu)
    est, _ = ppi_mean_point(y, yhat, yhat_u, w_gold=w, w_unlabeled=wu)
    assert est == pytest.approx(float(np.ravel(ref)[0]), abs=1e-9)


def test_lambda_is_tuned_and_clipped():
    # An uninformative judge (independent of Y) gets a λ near 0; a perfect one λ near 1; an
    # anti-correlated one would give a negative λ, which is clipped to 0 as ppi_py does.
    y, _, yhat_u = _case(1)
    rng = np.random.default_rng(5)
    _, lam_perfect = ppi_mean_point(y, y, yhat_u)
    _, lam_anti = ppi_mean_point(y, 1 - y, yhat_u)
    _, lam_noise = ppi_mean_point(y, (rng.random(len(y)) < 0.5).astype(float), yhat_u)
    assert lam_perfect > 0.8  # ≈ 1/(1 + n/N) for a perfect judge
    assert lam_anti == 0.0
    assert lam_noise < 0.3


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [False, True])
def test_clt_interval_equals_ppi_mean_ci(seed, weighted):
    y, yhat, yhat_u = _case(seed)
    rng = np.random.default_rng(7 + seed)
    w = rng.uniform(0.2, 5.0, len(y)) if weighted else None
    wu = rng.uniform(0.5, 2.0, len(yhat_u)) if weighted else None
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=None, w=w, w_unlabeled=wu)
    est, mlo, mhi, _ = ppi_mean_clt(y, yhat, yhat_u, w_gold=w, w_unlabeled=wu)
    assert mlo == pytest.approx(float(np.ravel(lo)[0]), abs=1e-9)
    assert mhi == pytest.approx(float(np.ravel(hi)[0]), abs=1e-9)
    assert mlo < est < mhi


def test_degenerate_cases_are_decided():
    # No gold item: undefined (NaN, the caller reports it); no unlabelled item: gold-only mean.
    est, lam = ppi_mean_point(np.array([]), np.array([]), np.array([1.0, 0.0]))
    assert np.isnan(est) and np.isnan(lam)
    est, lam = ppi_mean_point(np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0, 1.0]), np.array([]))
    assert est == pytest.approx(2 / 3) and lam == 0.0
    # A constant judge: θ does not depend on λ, so λ = 0 and θ is the gold mean.
    est, lam = ppi_mean_point(np.array([1.0, 0.0, 1.0, 1.0]), np.ones(4), np.ones(10))
    assert est == pytest.approx(0.75) and lam == 0.0
