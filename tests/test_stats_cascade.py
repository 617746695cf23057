"""The cascade's certificate (memjudge.stats.cascade): exact Clopper-Pearson bounds against
scipy and statsmodels, fixed-sequence testing and the replay on hand-worked cases, and a
small simulation in which the guarantee must hold and the point-estimate rule must not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, binom
from statsmodels.stats.proportion import proportion_confint

from memjudge.errors import UsageError
from memjudge.stats import cascade as C


@pytest.mark.parametrize("delta", [0.05, 0.1, 0.2])
def test_clopper_pearson_upper_bound_is_statsmodels_and_scipy(delta):
    for n in (1, 7, 50, 300):
        for e in sorted({0, 1, n // 10, n // 2, n - 1} - {n}):
            want = proportion_confint(e, n, alpha=2 * delta, method="beta")[1]  # two-sided at 1 - 2 delta
            assert C.cp_upper(e, n, delta) == pytest.approx(want, abs=1e-10)
            assert C.cp_upper(e, n, delta) == pytest.approx(beta.ppf(1 - delta, e + 1, n - e), abs=1e-12)
    assert C.cp_upper(5, 5, delta) == 1.0 and C.cp_upper(0, 0, delta) == 1.0
    assert np.allclose(C.cp_upper([0, 3], [10, 10], delta), [C.cp_upper(0, 10, delta), C.cp_upper(3, 10, delta)])


def test_hand_worked_zero_errors_and_the_smallest_gold_set():
    # No error in n: the bound solves (1 - p)^n = delta, so p = 1 - delta^(1/n).
    assert C.cp_upper(0, 114, 0.1) == pytest.approx(1 - 0.1 ** (1 / 114), abs=1e-12)
    # 0.98^114 = 0.0999 <= 0.1 < 0.98^113 = 0.1019: 114 items, all right, certify 0.98 at 0.1.
    assert 0.98 ** 114 <= 0.1 < 0.98 ** 113
    assert C.min_certifiable_n(0.98, 0.1) == 114 == math.ceil(math.log(0.1) / math.log(0.98))
    assert C.cp_upper(0, 114, 0.1) <= 0.02 < C.cp_upper(0, 113, 0.1)
    # with a third of the gold set choosing the path, 171 - round(171/3) = 114 certify
    assert C.min_gold_n(0.98, 0.1) == 171
    with pytest.raises(UsageError, match=r"cannot certify agreement 0.98 at delta 0.1.*at least 114 gold items"):
        C.certify_cascade(np.ones((100, 1)), np.ones((100, 1), bool), 0.98, 0.1, select=(np.ones((5, 1)), np.ones((5, 1), bool)))


def test_p_value_and_bound_agree_on_what_is_certified():
    for n in (20, 114, 300):
        for e in range(0, 12):
            p = C.binomial_p_value(e, n, 0.02)
            assert p == pytest.approx(binom.cdf(e, n, 0.02), abs=1e-12)
            assert (p <= 0.1) == (C.cp_upper(e, n, 0.1) <= 0.02)
    assert C.binomial_p_value(0, 0, 0.02) == 1.0


def test_fixed_sequence_stops_at_the_first_level_not_rejected():
    assert C.fixed_sequence([0.01, 0.05, 0.2, 0.01], 0.1) == 1
    assert C.fixed_sequence([0.5, 0.01], 0.1) == -1
    assert C.fixed_sequence([0.1, 0.1], 0.1) == 1
    assert C.fixed_sequence([], 0.1) == -1


def test_replay_and_level_thresholds_by_hand():
    conf = np.array([[3.0, 9.0], [1.0, 2.0], [0.5, 0.1], [np.nan, 5.0]])
    assert C.replay(conf, [2.0, 1.0]).tolist() == [0, 1, -1, 1]
    assert C.replay(conf, [np.inf, 0.0]).tolist() == [1, 1, 1, 1]
    right = np.array([[True, True], [False, True], [True, False], [True, True]])
    t, e = C.replay_counts(conf, right, [[2.0, 1.0], [0.0, 0.0]])
    assert t.tolist() == [3, 4] and e.tolist() == [0, 1]  # item 3 has no stage-0 answer: stage 1 takes it
    # stage 0, items by confidence 3, 1, 0.5: smoothed rates (0+1)/2, (1+1)/3, (1+1)/4
    lam = C.level_thresholds(conf, right, levels=[0.4, 0.5, 0.6, 0.7])
    assert lam[:, 0].tolist() == [np.inf, 0.5, 0.5, 0.5]
    # stage 1, by 9, 5, 2, 0.1: (0+1)/2, (0+1)/3, (0+1)/4, (1+1)/5
    assert lam[:, 1].tolist() == [0.1, 0.1, 0.1, 0.1]


def test_certify_walks_the_path_and_reports_the_bound():
    rng = np.random.default_rng(3)
    n = 400
    conf = rng.exponential(size=(n, 2))
    right = np.column_stack([rng.random(n) < 0.55 + 0.1 * np.minimum(conf[:, 0], 4), rng.random(n) < 0.999])
    sel_conf = rng.exponential(size=(n, 2))
    sel_right = np.column_stack([rng.random(n) < 0.55 + 0.1 * np.minimum(sel_conf[:, 0], 4), np.ones(n, bool)])
    cert = C.certify_cascade(conf, right, 0.97, 0.1, select=(sel_conf, sel_right))
    assert cert.certified and cert.n == n and cert.n_certify == n and cert.n_select == n
    lam = np.array([np.inf if x is None else x for x in cert.thresholds])
    by = C.replay(conf, lam)
    kept = by >= 0
    assert cert.trusted == kept.sum() and cert.errors == (~right[np.flatnonzero(kept), by[kept]]).sum()
    assert cert.bound == pytest.approx(beta.ppf(0.9, cert.errors + 1, cert.trusted - cert.errors))
    assert cert.bound <= 0.03 and cert.decided_by == by.tolist()
    # the next level on the path (if any was tested beyond) was not certifiable, or the path ended
    assert cert.tested >= 1


def _population(rng, n, shared=0.5):
    """Three stages of rising accuracy whose errors share an item difficulty; |score| tells
    right from wrong (binormal)."""
    d = rng.normal(size=n)
    conf, right = [], []
    for acc, auc in ((0.88, 0.88), (0.96, 0.9), (0.998, 0.9)):
        w = math.sqrt(shared) * d + math.sqrt(1 - shared) * rng.normal(size=n)
        from scipy.stats import norm

        r = norm.cdf(w) < acc
        z = math.sqrt(2) * norm.ppf(auc) * r + rng.normal(size=n)
        conf.append(np.logaddexp(0, 2 * z))
        right.append(r)
    return np.column_stack(conf), np.column_stack(right)


def test_the_guarantee_holds_in_simulation_and_the_point_estimate_rule_does_not():
    rng = np.random.default_rng(11)
    pop_conf, pop_right = _population(rng, 40_000)
    target, delta, draws = 0.98, 0.1, 60
    held = naive_held = certified = 0
    for _ in range(draws):
        idx = rng.choice(len(pop_conf), 600, replace=False)
        gold, sel = idx[:300], idx[300:]
        sel_right = pop_right[sel] == pop_right[sel][:, [-1]]  # agreement with the last stage
        cert = C.certify_cascade(pop_conf[gold], pop_right[gold], target, delta, select=(pop_conf[sel], sel_right))
        certified += cert.certified

        def agreement(lam):
            by = C.replay(pop_conf, lam)
            kept = by >= 0
            return pop_right[np.flatnonzero(kept), by[kept]].mean() if kept.any() else 1.0

        held += agreement([np.inf if x is None else x for x in cert.thresholds]) >= target
        # naive: the most trusting level whose gold point estimate meets the target
        paths = C.level_thresholds(pop_conf[gold], pop_right[gold])
        t, e = C.replay_counts(pop_conf[gold], pop_right[gold], paths)
        ok = np.flatnonzero((t > 0) & (e <= (1 - target) * t))
        naive_held += agreement(paths[ok[-1]]) >= target
    # exact at 1 - delta = 0.9: 60 draws fall below 48 with probability < 0.3% if it holds
    assert held >= 48, held
    assert naive_held <= 0.6 * draws, naive_held
    assert certified >= 0.7 * draws
