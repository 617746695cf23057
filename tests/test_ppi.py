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


def _clustered_study(rng, n_personas=60, m=8, n_gold=80, mu=0.85, k=6.0):
    """Personas with their own support probability p_i ~ Beta(mu·k, (1 − mu)·k) (strong clustering),
    m items each; a lenient judge (says supported for 97% of supported items and 60% of the others);
    a uniform gold sample. The population support rate is mu."""
    p = rng.beta(mu * k, (1 - mu) * k, n_personas)
    persona = np.repeat(np.arange(n_personas), m)
    y = (rng.random(len(persona)) < p[persona]).astype(float)
    yhat = np.where(y == 1, rng.random(len(y)) < 0.97, rng.random(len(y)) < 0.60).astype(float)
    gold = np.zeros(len(y), bool)
    gold[rng.choice(len(y), n_gold, replace=False)] = True
    return persona, y, yhat, gold


def test_interval_coverage_in_simulation():
    """100 simulated studies with known truth: the persona-bootstrap PPI++ interval covers the
    population rate (≥ 88% of 100 studies: 3 binomial SDs below 95%), is narrower than gold only,
    and the biased judge's own interval almost never covers."""
    from memjudge.stats.bootstrap import cluster_weights
    from memjudge.stats.ppi import three_estimates

    rng = np.random.default_rng(2024)
    W = cluster_weights(60, 1000, 3)
    cov = {"judge": 0, "gold": 0, "ppi": 0}
    width = {"gold": [], "ppi": []}
    for _ in range(100):
        persona, y, yhat, gold = _clustered_study(rng)
        r = three_estimates(persona, y, yhat, gold, np.ones(len(y), bool), yhat.astype(bool),
                            n_personas=60, interval="bootstrap", W=W)
        for k in cov:
            cov[k] += r[f"{k}_lo"] <= 0.85 <= r[f"{k}_hi"]
        width["gold"].append(r["gold_hi"] - r["gold_lo"])
        width["ppi"].append(r["ppi_hi"] - r["ppi_lo"])
    # Measured here: PPI++ bootstrap 91, gold only 95, judge only 2; PPI++'s iid CLT interval, which
    # ignores the persona clustering, covers 83 of 100 and would fail this bound.
    assert cov["ppi"] >= 88 and cov["gold"] >= 88
    assert cov["judge"] <= 20
    assert np.mean(width["ppi"]) < np.mean(width["gold"])
    assert np.mean(width["ppi"]) < 0.25   # an interval can't buy coverage by being uselessly wide


def test_linearised_variance_equals_ppi_py_without_weights_and_a_direct_sum_with():
    from memjudge.stats.ppi import _hajek_var, _moments, labelled_features, unlabelled_features

    y, yhat, yu = _case(3)
    L, U = labelled_features(y, yhat).sum(0), unlabelled_features(yu).sum(0)
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, yu, alpha=0.05, lam=0.7)
    from scipy.stats import norm
    assert np.sqrt(_hajek_var(_moments(L, U), 0.7)) * 2 * norm.ppf(0.975) == pytest.approx(
        float(np.ravel(hi - lo)[0]), abs=1e-9)
    rng = np.random.default_rng(0)
    w, wu = rng.uniform(1, 20, len(y)), rng.uniform(1, 2, len(yu))
    L, U = labelled_features(y, yhat, w).sum(0), unlabelled_features(yu, wu).sum(0)
    r = y - 0.7 * yhat
    rb = np.sum(w * r) / np.sum(w)
    mu = np.sum(wu * yu) / np.sum(wu)
    direct = np.sum(w**2 * (r - rb) ** 2) / np.sum(w) ** 2 + 0.49 * np.sum(wu**2 * (yu - mu) ** 2) / np.sum(wu) ** 2
    assert _hajek_var(_moments(L, U), 0.7) == pytest.approx(direct, rel=1e-9)
