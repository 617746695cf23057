"""The comparison protocol (spec §8): persona-grouped repeated K-fold cross-validation of the
retention policies, and the summaries of its per-fold figures.

Folds: `memjudge.policies.splitter.RepeatedGroupKFold` (personas sorted as strings; for r in
0..R−1, ``perm = numpy.random.default_rng(seed + r).permutation(n_personas)``,
``folds = numpy.array_split(perm, K)``). Each fold is held out in turn and the policies are
fitted on the other personas by the one fitting kernel (`memjudge.policies.kernel`, which the
policy estimators use too). On the held-out fold:

- faithfulness = supported / valid verdicts among retained candidates (a third verdict is
  valid and not supported unless strict_binary; see `memjudge.comparison.prepare`);
- retention = retained / all held-out candidates (valid verdict or not);
- estimated coverage = share of the held-out personas' judged reference facts stated by at
  least one retained candidate; null everywhere when no judged fact is left.

Summaries: per policy, fold mean ± SD (ddof = 1) of each metric. Paired targeted − global per
metric: mean, 2.5/97.5 percentiles of per-fold differences, folds with the same sign as the
mean, and the Nadeau–Bengio corrected resampled-t interval: variance × (1/J + n_test/n_train),
t with J − 1 df, J = R·K, n_test/n_train measured in personas (the unit that is split) and
averaged over folds. A fold where a metric is undefined (no valid retained verdict, or no
judged fact) is null in ``folds_detail`` and left out of means and intervals.

The write-all figures are full-sample values with persona-cluster bootstrap percentile
intervals (`memjudge.stats.bootstrap`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from memjudge.comparison.prepare import Prepared
from memjudge.errors import UsageError
from memjudge.formats.estimate import Estimate
from memjudge.policies.kernel import NEG_INF, SortedSample
from memjudge.policies.splitter import RepeatedGroupKFold, fold_assignment

POLICY_NAMES = ("global", "targeted", "per_category")
METRICS = ("faithfulness", "retention", "coverage")
POLICY_LABELS = {"write_all": "Write-all (full sample)", "global": "Global threshold",
                 "targeted": "Targeted", "per_category": "Per-category"}


def num(v):
    """A finite float, or None (JSON has no NaN)."""
    if v is None:
        return None
    v = float(v)
    return None if not np.isfinite(v) else v


def nan_if_none(v):
    return np.nan if v is None else v


def delta(a, b):
    """a − b, or None when either is missing."""
    return None if a is None or b is None else float(a - b)


def resolve_gate(gate, categories: np.ndarray):
    if gate == "auto":
        return "auto"
    if isinstance(gate, str):
        gate = [g.strip() for g in gate.split(",") if g.strip()]
    gate = list(dict.fromkeys(str(g) for g in gate))
    if not gate:
        raise UsageError("--gate needs at least one category (or 'auto')")
    unknown = [g for g in gate if g not in set(categories.tolist())]
    if unknown:
        raise UsageError(f"gate category {unknown[0]!r} is not among the candidates' categories "
                         f"({', '.join(categories.tolist())})")
    return gate


def nadeau_bengio(diff, test_train_ratio: float, level: float = 0.95):
    """Corrected resampled-t interval (Nadeau & Bengio 2003) for the mean of per-fold diffs."""
    from scipy import stats

    d = np.asarray(diff, dtype=float)
    d = d[np.isfinite(d)]
    J = len(d)
    if J < 2:
        return (float("nan"), float("nan"))
    mean = d.mean()
    se = np.sqrt((1.0 / J + test_train_ratio) * d.var(ddof=1))
    t = stats.t.ppf(0.5 + level / 2.0, J - 1)
    return (float(mean - t * se), float(mean + t * se))


def change_summary(diff) -> dict:
    """Per-fold differences (undefined folds left out): the mean with the 2.5/97.5 percentiles
    as an `Estimate`, and the number of folds whose difference has the sign of the mean:
    {"value", "lo", "hi", "same_sign"}."""
    d = np.asarray(diff, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return {**Estimate(None).to_dict(), "same_sign": 0}
    mean = float(d.mean())
    lo, hi = np.percentile(d, [2.5, 97.5])
    return {**Estimate(mean, float(lo), float(hi)).to_dict(), "same_sign": int((np.sign(d) == np.sign(mean)).sum())}


def paired_summary(diff, test_train_ratio: float) -> dict:
    """`change_summary` plus the Nadeau–Bengio interval beside it:
    {"value", "lo", "hi", "same_sign", "nb_lo", "nb_hi"}."""
    out = change_summary(diff)
    if out["value"] is None:
        return {**out, "nb_lo": None, "nb_hi": None}
    nb_lo, nb_hi = nadeau_bengio(diff, test_train_ratio)
    return {**out, "nb_lo": nb_lo, "nb_hi": nb_hi}


def rate_interval(numer: np.ndarray, den: np.ndarray, weights: np.ndarray) -> dict:
    """A rate sum(num)/sum(den) of per-persona totals with its persona-cluster bootstrap
    percentile interval: {"value", "lo", "hi", "n"} (n = sum(den)); null when undefined."""
    from memjudge.stats.bootstrap import ratio_interval

    n = float(np.sum(den))
    lo, hi = ratio_interval(np.asarray(numer, float), np.asarray(den, float), weights)
    return {**Estimate(num(np.sum(numer) / n) if n else None, num(lo), num(hi)).to_dict(), "n": int(round(n))}


def overall_support(prep: Prepared, weights: np.ndarray) -> dict:
    """Support rate of all candidates (supported / valid verdicts; spec §7 "overall") with its
    persona-cluster interval: {"value", "lo", "hi", "n"}, n = valid verdicts."""
    P = len(prep.personas)
    sup = np.bincount(prep.persona, weights=prep.sup & prep.valid, minlength=P)
    valid = np.bincount(prep.persona, weights=prep.valid, minlength=P)
    return rate_interval(sup, valid, weights)


def write_all_intervals(prep: Prepared, weights: np.ndarray) -> dict:
    """Write-all faithfulness (the overall support rate) and coverage on the full sample with
    persona-cluster intervals, from per-persona totals (supported/valid, covered/judged facts)."""
    P = len(prep.personas)
    out = {"faithfulness": overall_support(prep, weights), "coverage": None}
    if prep.coverage_measured:
        covered = np.zeros(len(prep.fact_persona), bool)
        covered[prep.pair_fact] = True
        facts = np.bincount(prep.fact_persona, minlength=P)
        out["coverage"] = rate_interval(np.bincount(prep.fact_persona, weights=covered, minlength=P), facts, weights)
    return out


def mean_sd(x: np.ndarray) -> dict:
    """Fold mean as an `Estimate` without an interval (lo, hi null) and the SD (ddof = 1) beside
    it: {"value", "lo", "hi", "sd"}; null when no fold is defined."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return {**Estimate(None).to_dict(), "sd": None}
    return {**Estimate(float(x.mean())).to_dict(), "sd": float(x.std(ddof=1)) if len(x) > 1 else None}


def sorted_sample(prep: Prepared) -> SortedSample:
    """The prepared sample sorted once for the fitting kernel."""
    return SortedSample(prep.cat, prep.conf, prep.valid, prep.sup, len(prep.categories))


def fit_policies(sample: SortedSample, mask, gate, floor: float, policies=POLICY_NAMES,
                 method: str = "greedy") -> tuple[dict, np.ndarray]:
    """Per-category threshold arrays of each policy fitted on `mask` (the kernel always fits
    global and targeted), and the gated category codes used."""
    k = sample.fit(mask, gate=gate, floor=floor, per_category="per_category" in policies, method=method)
    names = ("global", "targeted") + (("per_category",) if "per_category" in policies else ())
    return {name: k.thresholds(name) for name in names}, k.gate_codes


class Evaluator:
    """Held-out figures of per-category thresholds on one prepared sample."""

    def __init__(self, prep: Prepared):
        self.p = prep
        self.sup = prep.sup & prep.valid

    def evaluate(self, te: np.ndarray, thr: np.ndarray, test_facts: np.ndarray, pf: np.ndarray, pc: np.ndarray):
        """(faithfulness, retention, coverage) of per-category thresholds on held-out items."""
        p = self.p
        keep = p.conf[te] >= thr[p.cat[te]]
        kv = int((keep & p.valid[te]).sum())
        faith = (keep & self.sup[te]).sum() / kv if kv else np.nan
        ret = keep.sum() / len(te) if len(te) else np.nan
        cov = np.nan
        if p.has_coverage and len(test_facts):
            kept = np.zeros(p.n, bool)
            kept[te[keep]] = True
            covered = np.zeros(len(p.fact_persona), bool)
            covered[pf[kept[pc]]] = True
            cov = covered[test_facts].sum() / len(test_facts)
        return float(faith), float(ret), float(cov)


def full_sample(prep: Prepared, thr: np.ndarray | None = None) -> dict:
    """Faithfulness, retention, coverage of per-category thresholds on the whole sample."""
    e = Evaluator(prep)
    if thr is None:
        thr = np.full(len(prep.categories), NEG_INF)
    f, r, c = e.evaluate(np.arange(prep.n), thr, np.arange(len(prep.fact_persona)), prep.pair_fact, prep.pair_cand)
    return {"faithfulness": f, "retention": r, "coverage": c if prep.coverage_measured else None}


def run_protocol(prep: Prepared, *, gate, floor: float, repeats: int, folds: int, seed: int,
                 policies=POLICY_NAMES, per_category: str = "greedy"):
    """Per-fold results as a DataFrame (repeat, fold, policy, threshold, metrics) plus the
    per-fold gated categories and the mean held-out/fit persona ratio."""
    P = len(prep.personas)
    if folds < 2:
        raise UsageError("--folds must be at least 2 (each fold is held out while the rest fit)")
    if folds > P:
        raise UsageError(f"--folds {folds} exceeds the number of personas ({P})")
    if not 0.0 <= floor <= 1.0:
        raise UsageError(f"--floor must be in [0, 1], got {floor}")
    e = Evaluator(prep)
    sample = sorted_sample(prep)
    splitter = RepeatedGroupKFold(folds, repeats, seed)
    gate_arg = "auto" if gate == "auto" else prep.gate_codes(gate)
    rows = []
    gates = []
    ratios = []
    nf = len(prep.fact_persona)
    all_names = ("write_all",) + tuple(policies)
    cats = prep.categories.tolist()
    for i, (_, te) in enumerate(splitter.split(prep.persona)):
        r, k = divmod(i, folds)
        test_p = np.zeros(P, bool)
        test_p[prep.persona[te]] = True
        test = test_p[prep.persona]
        fitted, gcodes = fit_policies(sample, ~test, gate_arg, floor, policies, per_category)
        gates.append([cats[c] for c in gcodes])
        n_held = int(test_p.sum())
        ratios.append(n_held / (P - n_held))
        test_facts = np.flatnonzero(test_p[prep.fact_persona]) if nf else np.zeros(0, np.int64)
        pair_test = test[prep.pair_cand] if len(prep.pair_cand) else np.zeros(0, bool)
        pf, pc = prep.pair_fact[pair_test], prep.pair_cand[pair_test]
        for name in all_names:
            t: float | dict | None
            thr = fitted.get(name, np.full(len(cats), NEG_INF))
            f, ret, cov = e.evaluate(te, thr, test_facts, pf, pc)
            if name == "write_all":
                t = None
            elif name == "per_category":
                t = {c: (None if v == NEG_INF else float(v)) for c, v in zip(cats, thr)}
            elif name == "targeted":
                t = None if not len(gcodes) or thr[gcodes[0]] == NEG_INF else float(thr[gcodes[0]])
            else:
                t = None if thr[0] == NEG_INF else float(thr[0])
            rows.append((r, k, name, t, f, ret, cov if prep.coverage_measured else np.nan))
    df = pd.DataFrame(rows, columns=["repeat", "fold", "policy", "threshold", *METRICS])
    return df, gates, float(np.mean(ratios))


__all__ = ["METRICS", "NEG_INF", "POLICY_LABELS", "POLICY_NAMES", "Evaluator", "change_summary", "delta",
           "fit_policies", "fold_assignment", "full_sample", "mean_sd", "nadeau_bengio", "nan_if_none", "num",
           "overall_support", "paired_summary", "rate_interval", "resolve_gate", "run_protocol", "sorted_sample",
           "write_all_intervals"]
