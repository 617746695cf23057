"""Retention-policy comparison by persona-grouped repeated cross-validation (spec §8), Table 1
and the paired targeted − global comparison.

Protocol (exact, so results reproduce across implementations): personas sorted as strings;
for r in 0..R−1, ``perm = numpy.random.default_rng(seed + r).permutation(n_personas)``,
``folds = numpy.array_split(perm, K)``; each fold is held out in turn and the policies are fitted
on the other personas (`memjudge.policies` explains the fit). On the held-out fold:

- faithfulness = supported / valid verdicts among retained candidates ("supported" counts as
  supported, any other label as not; candidates without a valid verdict are left out). A third
  verdict (``partial``, or any label but supported/unsupported) is therefore a valid verdict
  that is not supported and lowers faithfulness; with ``strict_binary=True``
  (``--strict-binary``) it is no valid verdict, exactly like null — left out of faithfulness,
  support rates and majorities, still counted in retention. The notes count such candidates;
- retention = retained / all held-out candidates (valid verdict or not);
- estimated coverage = share of the held-out personas' judged reference facts stated by at
  least one retained candidate (fact → assertion map from a coverage file judged once on the
  full candidate set; a fact whose ``covered_by`` is null was not judged and is excluded, and
  so is a fact of a persona without candidates; both are counted in the notes). With no judged
  fact left (an empty file, every ``covered_by`` null, ...) coverage is null everywhere and
  every other figure is computed as without a coverage file.

Table 1: per policy, fold mean ± SD (ddof = 1) of each metric; the write-all row holds the
full-sample values and the change against write-all uses that row (as the paper does). Paired
targeted − global per metric: mean, 2.5/97.5 percentiles of per-fold differences, folds with the
same sign as the mean, and the Nadeau–Bengio corrected resampled-t interval: variance ×
(1/J + n_test/n_train), t with J − 1 df, J = R·K, n_test/n_train measured in personas (the unit
that is split) and averaged over folds. A fold where a metric is undefined (no valid retained
verdict, or no judged fact) is null in ``folds_detail`` and left out of means and intervals.

Files written by ``memjudge compare --out RUN_DIR`` (all fractions, null never NaN):

``compare.json`` — exactly `CompareResult.to_json()` (keys in the issue / README).

``compare_inputs.json`` — ``{"candidates": PATH, "labels": [PATH, ...], "coverage": PATH|null,
"judge": SPEC, "replicate": 0|"majority", "per_category_method": "greedy"|"exact"}``.

``per_category`` is fitted greedily by default or exactly with ``per_category="exact"``
(``--per-category-method exact``); see `memjudge.policies.PerCategory`.

``sweep.json`` — the global-threshold sweep on the full sample::

    {"judge": SPEC, "replicate": 0|"majority", "floor": 0.8, "gate": [CAT, ...],
     "write_all": {"faithfulness", "retention", "coverage"},
     "global":   [{"threshold": null|t, "faithfulness", "retention", "coverage"}, ...],
     "targeted": [{"threshold": null|t, "faithfulness", "retention", "coverage"}, ...],
     "fitted": {"global": {"threshold", "faithfulness", "retention", "coverage"},
                "targeted": {"threshold", "gate": [CAT, ...], "faithfulness", "retention", "coverage"},
                "per_category": {"threshold": {CAT: null|t}, "faithfulness", "retention", "coverage"}}}

  ``global`` has one row per candidate threshold (−∞ as null, then every distinct
  confidence, ascending); ``targeted`` the same over the gated categories' confidences;
  ``fitted`` is each policy fitted on all personas (what ``--export-policy`` writes).
  ``coverage`` is null throughout when no coverage file was given.

``calibration.json`` — support rate by confidence bin within each category, chosen judge::

    {"judge": SPEC, "replicate": 0|"majority", "B": 2000, "level": 0.95,
     "categories": [{"category", "n", "valid", "supported", "support_rate", "ci_lo", "ci_hi",
                     "binning": "distinct"|"deciles",
                     "bins": [{"conf_lo", "conf_hi", "n", "valid", "supported",
                               "support_rate", "ci_lo", "ci_hi"}, ...]}, ...]}

  A category with at most 10 distinct confidences gets one bin per value (conf_lo = conf_hi);
  otherwise fixed deciles [0, .1), [.1, .2), …, [.9, 1] — only populated bins are listed.
  ci_lo/ci_hi are persona-cluster bootstrap percentile intervals (`memjudge.stats.bootstrap`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from memjudge.stats.agreement import majority_votes
from memjudge.stats.bootstrap import B_DEFAULT
from memjudge.errors import UsageError
from memjudge.formats import json_safe, only_rubric, rubric_name
from memjudge.policies import (
    NEG_INF, Options, choose, fit_per_category_sorted, lowest_support_category, sorted_options,
)

POLICY_NAMES = ("global", "targeted", "per_category")
METRICS = ("faithfulness", "retention", "coverage")
# The two labels of the support rubric; any other label (e.g. "partial") is a third verdict.
BINARY = ("supported", "unsupported")


# ---------------------------------------------------------------------------------------
# inputs


@dataclass
class Prepared:
    """Candidates joined to one judge's verdicts, as arrays (index = candidate)."""

    personas: np.ndarray          # sorted persona ids (str)
    categories: np.ndarray        # sorted category names (str)
    persona: np.ndarray           # persona code per candidate
    cat: np.ndarray               # category code per candidate
    conf: np.ndarray
    valid: np.ndarray
    sup: np.ndarray
    assertion_ids: np.ndarray
    judge: str | None
    replicate: object
    # coverage: judged facts only; pairs (fact, candidate) with the candidate of the same persona
    has_coverage: bool = False
    fact_persona: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pair_fact: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pair_cand: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    n_facts_unjudged: int = 0
    n_facts_without_candidates: int = 0
    n_unlabelled: int = 0
    n_labels_unmatched: int = 0
    # candidates whose standing verdict is a third label: valid and not supported by default,
    # no valid verdict with strict_binary
    n_nonbinary: int = 0
    strict_binary: bool = False
    inputs: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.conf)

    @property
    def coverage_measured(self) -> bool:
        """A coverage map with at least one judged fact of a persona with candidates: without
        one, coverage is null everywhere (not 0, not NaN) and the notes say why."""
        return self.has_coverage and len(self.fact_persona) > 0

    def gate_codes(self, gate) -> np.ndarray:
        return np.flatnonzero(np.isin(self.categories, list(gate)))


def _load_candidates(candidates) -> pd.DataFrame:
    from memjudge.formats import read_candidates

    if isinstance(candidates, (str, os.PathLike)):
        return read_candidates(candidates, require_confidence=True)
    df = candidates.copy()
    missing = [c for c in ("persona_id", "assertion_id", "category", "confidence") if c not in df.columns]
    if missing:
        raise UsageError(f"candidates need column(s): {', '.join(missing)}")
    conf = pd.to_numeric(df["confidence"], errors="coerce").to_numpy(dtype=float)
    if np.isnan(conf).any() or (conf < 0).any() or (conf > 1).any():
        raise UsageError("every candidate needs a confidence in [0, 1] for policy comparison")
    if df["assertion_id"].astype(str).duplicated().any():
        raise UsageError("candidates: assertion_id must be unique")
    df["confidence"] = conf
    for c in ("persona_id", "assertion_id", "category"):
        df[c] = df[c].astype(str)
    return df


def _load_labels(labels) -> pd.DataFrame:
    from memjudge.formats import read_labels

    if isinstance(labels, (str, os.PathLike)) or (isinstance(labels, (list, tuple)) and labels
                                                   and all(isinstance(p, (str, os.PathLike)) for p in labels)):
        return read_labels(labels)
    df = labels.copy()
    missing = [c for c in ("assertion_id", "verdict") if c not in df.columns]
    if missing:
        raise UsageError(f"labels need column(s): {', '.join(missing)}")
    if "judge" not in df.columns:
        df["judge"] = "unnamed"
    if "replicate" not in df.columns:
        df["replicate"] = 0
    df["assertion_id"] = df["assertion_id"].astype(str)
    df["verdict"] = df["verdict"].where(df["verdict"].notna(), None)
    return df


def judges_in(labels: pd.DataFrame) -> list[str]:
    return sorted(labels["judge"].dropna().astype(str).unique().tolist())


def select_verdicts(labels: pd.DataFrame, judge: str | None, replicate) -> tuple[pd.Series, str]:
    """verdict per assertion_id (None = no valid verdict) for one judge and replicate choice."""
    if "rubric" in labels.columns:
        labels = only_rubric(labels, "support")
        rubrics = sorted(labels["rubric"].dropna().astype(str).map(rubric_name).unique().tolist())
        if len(rubrics) > 1:
            raise UsageError(f"labels hold several rubrics ({', '.join(rubrics)}) and none is 'support'")
    judges = judges_in(labels)
    if not judges:
        raise UsageError("labels hold no judge")
    if judge is None:
        if len(judges) > 1:
            raise UsageError(f"labels hold several judges ({', '.join(judges)}); choose one with --judge")
        judge = judges[0]
    elif judge not in judges:
        raise UsageError(f"judge {judge!r} not in labels (judges: {', '.join(judges)})")
    lab = labels[labels["judge"].astype(str) == judge]
    if replicate == "majority":
        # A tie between labels has no majority: no valid verdict.
        chosen, _ = majority_votes(lab[lab["verdict"].notna()], ["assertion_id"])
        ids = lab["assertion_id"].unique()
        majority = chosen.set_index("assertion_id")["verdict"]
        return majority.reindex(ids).astype(object).where(lambda s: s.notna(), None), judge
    reps = sorted(int(r) for r in lab["replicate"].unique())
    if int(replicate) not in reps:
        raise UsageError(f"judge {judge!r} has no replicate {replicate} (replicates: {', '.join(map(str, reps))})")
    lab = lab[lab["replicate"].astype(int) == int(replicate)]
    if lab["assertion_id"].duplicated().any():
        dup = lab["assertion_id"][lab["assertion_id"].duplicated()].iloc[0]
        raise UsageError(f"labels: more than one verdict for {dup!r} (judge {judge}, replicate {replicate})")
    return pd.Series(lab["verdict"].to_numpy(), index=lab["assertion_id"].to_numpy(), dtype=object), judge


def _load_coverage(coverage, judge, replicate) -> pd.DataFrame | None:
    from memjudge.formats import read_coverage

    if coverage is None:
        return None
    if isinstance(coverage, (str, os.PathLike)) or (isinstance(coverage, (list, tuple))
                                                     and all(isinstance(p, (str, os.PathLike)) for p in coverage)):
        cov = read_coverage(coverage)
    else:
        cov = coverage.copy()
        missing = [c for c in ("persona_id", "fact_id", "covered_by") if c not in cov.columns]
        if missing:
            raise UsageError(f"coverage needs column(s): {', '.join(missing)}")
    cov["persona_id"] = cov["persona_id"].astype(str)
    cov["fact_id"] = cov["fact_id"].astype(str)
    if "judge" in cov.columns and cov["judge"].notna().any():
        cj = sorted(cov["judge"].dropna().astype(str).unique().tolist())
        if len(cj) > 1:
            if judge not in cj:
                raise UsageError(f"coverage holds several judges ({', '.join(cj)}) and none is {judge!r}")
            cov = cov[cov["judge"].astype(str) == judge]
    if "replicate" in cov.columns and cov["replicate"].notna().any():
        reps = sorted(set(int(r) for r in cov["replicate"].dropna()))
        if len(reps) > 1:
            r = int(replicate) if replicate != "majority" and int(replicate) in reps else reps[0]
            cov = cov[cov["replicate"].fillna(-1).astype(int) == r]
    if cov.duplicated(subset=["persona_id", "fact_id"]).any():
        d = cov[cov.duplicated(subset=["persona_id", "fact_id"])].iloc[0]
        raise UsageError(f"coverage: fact {d['fact_id']!r} of persona {d['persona_id']!r} appears more than once")
    return cov


def binary_only(labels: pd.DataFrame) -> pd.DataFrame:
    """Labels with every verdict other than supported/unsupported set to null (strict_binary)."""
    v = labels["verdict"]
    return labels.assign(verdict=v.astype(object).where(v.isin(BINARY), None))


def prepare(candidates, labels, coverage=None, *, judge=None, replicate=0, strict_binary: bool = False) -> Prepared:
    """Join candidates to one judge's verdicts (and the coverage map) as arrays.

    candidates/labels/coverage: DataFrames or paths (labels and coverage: one path or a list).
    A candidate without a label for the judge counts as "no valid verdict". A third verdict
    (any label but supported/unsupported) is valid and not supported, or — with
    `strict_binary` — no valid verdict, exactly like null (so it takes no part in a majority)."""
    inputs = {
        "candidates": str(candidates) if isinstance(candidates, (str, os.PathLike)) else None,
        "labels": ([str(labels)] if isinstance(labels, (str, os.PathLike)) else
                   [str(p) for p in labels] if isinstance(labels, (list, tuple)) else None),
        "coverage": (str(coverage) if isinstance(coverage, (str, os.PathLike)) else
                     [str(p) for p in coverage] if isinstance(coverage, (list, tuple)) else None),
    }
    if replicate != "majority":
        try:
            replicate = int(replicate)
        except (TypeError, ValueError):
            raise UsageError(f"replicate must be an index or 'majority', got {replicate!r}") from None
    cand = _load_candidates(candidates)
    lab = _load_labels(labels) if not isinstance(labels, pd.Series) else labels
    verdicts, judge = select_verdicts(lab, judge, replicate)
    personas, persona = np.unique(cand["persona_id"].astype(str).to_numpy(), return_inverse=True)
    categories, cat = np.unique(cand["category"].astype(str).to_numpy(), return_inverse=True)
    aid = cand["assertion_id"].astype(str).to_numpy()
    v = verdicts.reindex(aid)
    nonbinary = (v.notna() & ~v.isin(BINARY)).to_numpy()
    if strict_binary:
        v = select_verdicts(binary_only(lab), judge, replicate)[0].reindex(aid)
    valid = v.notna().to_numpy()
    sup = (v == "supported").to_numpy() & valid
    prep = Prepared(
        personas=personas.astype(str), categories=categories.astype(str), persona=persona.astype(np.int64),
        cat=cat.astype(np.int64), conf=cand["confidence"].to_numpy(dtype=float), valid=valid, sup=sup,
        assertion_ids=aid, judge=judge, replicate=replicate,
        n_unlabelled=int((~aid_in(aid, verdicts.index)).sum()),
        n_labels_unmatched=int((~aid_in(np.asarray(verdicts.index, dtype=str), aid)).sum()), inputs=inputs,
        n_nonbinary=int(nonbinary.sum()), strict_binary=bool(strict_binary),
    )
    cov = _load_coverage(coverage, judge, replicate)
    if cov is not None:
        _attach_coverage(prep, cov)
    return prep


def aid_in(aid: np.ndarray, index) -> np.ndarray:
    return pd.Index(index).get_indexer(aid) >= 0


def _attach_coverage(prep: Prepared, cov: pd.DataFrame) -> None:
    # Masks as numpy bools: a boolean Series of an empty frame has dtype object, and indexing
    # with it selects (no) columns instead of rows.
    judged = np.fromiter((x is not None and not (isinstance(x, float) and np.isnan(x)) for x in cov["covered_by"]),
                         dtype=bool, count=len(cov))
    prep.n_facts_unjudged = int((~judged).sum())
    cov = cov[judged]
    # Facts of personas without candidates cannot be held out with a persona; left out, counted.
    pcode = pd.Index(prep.personas).get_indexer(cov["persona_id"].to_numpy())
    prep.n_facts_without_candidates = int((pcode < 0).sum())
    cov = cov[pcode >= 0]
    pcode = pcode[pcode >= 0]
    prep.has_coverage = True
    prep.fact_persona = pcode.astype(np.int64)
    lengths = np.fromiter((len(x) for x in cov["covered_by"]), dtype=np.int64, count=len(cov))
    fact = np.repeat(np.arange(len(cov), dtype=np.int64), lengths)
    ids = [str(x) for lst in cov["covered_by"] for x in lst]
    cand = pd.Index(prep.assertion_ids).get_indexer(ids) if ids else np.zeros(0, np.int64)
    ok = cand >= 0
    # Only a candidate of the fact's own persona can state it.
    ok &= prep.persona[np.where(ok, cand, 0)] == prep.fact_persona[fact] if len(fact) else ok
    prep.pair_fact = fact[ok].astype(np.int64)
    prep.pair_cand = cand[ok].astype(np.int64)


# ---------------------------------------------------------------------------------------
# protocol


def fold_assignment(n_personas: int, repeats: int, folds: int, seed: int):
    """[(repeat, fold, held-out persona codes)] exactly as spec §8."""
    out = []
    for r in range(repeats):
        perm = np.random.default_rng(seed + r).permutation(n_personas)
        for k, f in enumerate(np.array_split(perm, folds)):
            out.append((r, k, f))
    return out


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
    """Per-fold differences (undefined folds left out): mean, 2.5/97.5 percentiles and the
    number of folds whose difference has the sign of the mean."""
    d = np.asarray(diff, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return {"mean": None, "lo": None, "hi": None, "same_sign": 0}
    mean = float(d.mean())
    lo, hi = np.percentile(d, [2.5, 97.5])
    return {"mean": mean, "lo": float(lo), "hi": float(hi), "same_sign": int((np.sign(d) == np.sign(mean)).sum())}


def paired_summary(diff, test_train_ratio: float) -> dict:
    """`change_summary` plus the Nadeau–Bengio interval (nb_lo, nb_hi)."""
    out = change_summary(diff)
    if out["mean"] is None:
        return {**out, "nb_lo": None, "nb_hi": None}
    nb_lo, nb_hi = nadeau_bengio(diff, test_train_ratio)
    return {**out, "nb_lo": nb_lo, "nb_hi": nb_hi}


def rate_interval(num: np.ndarray, den: np.ndarray, weights: np.ndarray) -> dict:
    """A rate sum(num)/sum(den) of per-persona totals with its persona-cluster bootstrap
    percentile interval: {"value", "lo", "hi", "n"} (n = sum(den)); null when undefined."""
    from memjudge.stats.bootstrap import ratio_interval

    n = float(np.sum(den))
    lo, hi = ratio_interval(np.asarray(num, float), np.asarray(den, float), weights)
    return {"value": _num(np.sum(num) / n) if n else None, "lo": _num(lo), "hi": _num(hi), "n": int(round(n))}


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


class _Engine:
    """Pre-sorted views of one prepared sample so that each fold's fit is masks + cumsums."""

    def __init__(self, prep: Prepared):
        self.p = prep
        self.C = len(prep.categories)
        self.order_all = np.argsort(prep.conf, kind="stable")
        self.order_cat = np.lexsort((prep.conf, prep.cat))
        self.cat_bounds = np.searchsorted(prep.cat[self.order_cat], np.arange(self.C + 1))
        self.sup = prep.sup & prep.valid

    def fit(self, fit: np.ndarray, gate, floor: float, policies=POLICY_NAMES, method: str = "greedy"):
        """Thresholds per category (array of C) for each policy fitted on the `fit` mask, and
        the gated category codes used."""
        p, C = self.p, self.C
        conf, valid, sup, cat = p.conf, p.valid, self.sup, p.cat
        n_fit = int(fit.sum())
        out = {}
        idx_all = self.order_all[fit[self.order_all]]
        opt_g = sorted_options(conf[idx_all], valid[idx_all], sup[idx_all])
        tg = float(opt_g.thresholds[choose(opt_g, n_fit, 0, 0, 0, floor)])
        out["global"] = np.full(C, tg)
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
        tt = float(opt_t.thresholds[choose(opt_t, n_fit, int(ng.sum()), int(valid[ng].sum()), int(sup[ng].sum()), floor)])
        out["targeted"] = np.where(gated_fit, tt, NEG_INF)
        if "per_category" in policies:
            segments = [(conf[s], valid[s], sup[s]) for s in segs]
            th = fit_per_category_sorted(segments, conf[idx_all], n_fit, floor,
                                         [list(out["global"]), list(out["targeted"])], method)
            out["per_category"] = np.array(th)
        return out, gcodes

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
    e = _Engine(prep)
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
    e = _Engine(prep)
    gate_arg = "auto" if gate == "auto" else prep.gate_codes(gate)
    rows = []
    gates = []
    ratios = []
    nf = len(prep.fact_persona)
    all_names = ("write_all",) + tuple(policies)
    cats = prep.categories.tolist()
    for r, k, held in fold_assignment(P, repeats, folds, seed):
        test_p = np.zeros(P, bool)
        test_p[held] = True
        test = test_p[prep.persona]
        te = np.flatnonzero(test)
        fitted, gcodes = e.fit(~test, gate_arg, floor, policies, per_category)
        gates.append([cats[c] for c in gcodes])
        ratios.append(len(held) / (P - len(held)))
        test_facts = np.flatnonzero(test_p[prep.fact_persona]) if nf else np.zeros(0, np.int64)
        pair_test = test[prep.pair_cand] if len(prep.pair_cand) else np.zeros(0, bool)
        pf, pc = prep.pair_fact[pair_test], prep.pair_cand[pair_test]
        for name in all_names:
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


# ---------------------------------------------------------------------------------------
# result


def _mean_sd(x: np.ndarray) -> dict:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return {"mean": None, "sd": None}
    return {"mean": float(x.mean()), "sd": float(x.std(ddof=1)) if len(x) > 1 else None}


@dataclass
class CompareResult:
    judge: str | None
    replicate: object
    floor: float
    gate: object                 # list of categories, or "auto"
    repeats: int
    folds: int
    seed: int
    write_all: dict
    folds_detail: pd.DataFrame
    fold_gates: list
    test_train_ratio: float
    prepared: Prepared
    policy_names: tuple = POLICY_NAMES
    per_category_method: str = "greedy"
    B: int = B_DEFAULT
    # resamples of personas shared with a caller (robustness) so that intervals are paired
    weights: np.ndarray | None = field(default=None, repr=False, compare=False)
    _fitted: dict | None = field(default=None, init=False, repr=False, compare=False)
    gold: object = field(default=None, repr=False, compare=False)  # crossval_gold.GoldComparison (--gold)
    _write_all_ci: dict | None = field(default=None, init=False, repr=False, compare=False)

    # -- summaries -------------------------------------------------------------------------
    def _metric(self, policy: str, metric: str) -> np.ndarray:
        d = self.folds_detail
        return d.loc[d["policy"] == policy, metric].to_numpy(dtype=float)

    def policies(self) -> dict:
        out = {}
        has_cov = self.prepared.coverage_measured
        for name in self.policy_names:
            f = _mean_sd(self._metric(name, "faithfulness"))
            r = _mean_sd(self._metric(name, "retention"))
            c = _mean_sd(self._metric(name, "coverage")) if has_cov else None
            out[name] = {
                "faithfulness": f, "retention": r, "coverage": c,
                "delta_faithfulness": _delta(f["mean"], self.write_all["faithfulness"]),
                "delta_coverage": _delta(c["mean"], self.write_all["coverage"]) if c else None,
            }
        return out

    def paired(self) -> dict:
        out = {}
        for m in METRICS:
            if m == "coverage" and not self.prepared.coverage_measured:
                out[m] = None
                continue
            diff = self._metric("targeted", m) - self._metric("global", m)
            out[m] = paired_summary(diff, self.test_train_ratio)
        return out

    def paired_vs_write_all(self) -> dict:
        """Per policy and metric, the change against write-all on the same held-out fold:
        mean, 2.5/97.5 percentiles of the per-fold changes, folds with the sign of the mean."""
        wa = {m: self._metric("write_all", m) for m in METRICS}
        return {name: {m: (None if m == "coverage" and not self.prepared.coverage_measured
                           else change_summary(self._metric(name, m) - wa[m])) for m in METRICS}
                for name in self.policy_names}

    def write_all_ci(self) -> dict:
        """Write-all faithfulness (overall support rate) and coverage with persona-cluster
        bootstrap intervals (B resamples, the comparison's seed)."""
        if self._write_all_ci is None:
            from memjudge.stats.bootstrap import cluster_weights

            W = self.weights if self.weights is not None else cluster_weights(len(self.prepared.personas),
                                                                              B=self.B, seed=self.seed)
            self._write_all_ci = write_all_intervals(self.prepared, W)
        return self._write_all_ci

    def notes(self) -> list[str]:
        return prepared_notes(self.prepared)

    def to_json(self) -> dict:
        d = self.folds_detail
        detail = [
            {"repeat": int(r), "fold": int(k), "policy": p, "threshold": t,
             "faithfulness": _num(f), "retention": _num(ret), "coverage": _num(c)}
            for r, k, p, t, f, ret, c in d.itertuples(index=False, name=None)
        ]
        return {
            "judge": self.judge,
            "floor": self.floor,
            "gate": self.gate,
            "repeats": self.repeats,
            "folds": self.folds,
            "seed": self.seed,
            "B": self.B,
            "strict_binary": self.prepared.strict_binary,
            "write_all": {k: _num(v) for k, v in self.write_all.items()},
            "write_all_ci": json_safe(self.write_all_ci()),
            "policies": json_safe(self.policies()),
            "paired": json_safe(self.paired()),
            "paired_vs_write_all": json_safe(self.paired_vs_write_all()),
            "folds_detail": detail,
            **({"gold": self.gold.to_json()} if self.gold is not None else {}),
            "notes": self.notes(),
        }

    def table(self) -> pd.DataFrame:
        """Table 1 as a DataFrame (fractions): one row per policy (write-all with its bootstrap
        interval), the paired targeted − global row, and each policy's paired change against
        write-all ("<policy> - write_all": mean, lo, hi, same_sign)."""
        rows = []
        wa = self.write_all
        ci = self.write_all_ci()
        rows.append({"policy": "write_all", **{m: wa[m] for m in METRICS},
                     **{f"{m}_sd": np.nan for m in METRICS},
                     **{f"delta_{m}": 0.0 if wa[m] is not None else np.nan for m in METRICS},
                     **{f"{m}_{k}": _nan(ci[m][k]) if ci.get(m) else np.nan
                        for m in ("faithfulness", "coverage") for k in ("lo", "hi")}})
        for name, s in self.policies().items():
            row = {"policy": name}
            for m in METRICS:
                ms = s[m] or {"mean": None, "sd": None}
                row[m] = _nan(ms["mean"])
                row[f"{m}_sd"] = _nan(ms["sd"])
                row[f"delta_{m}"] = _nan(_delta(ms["mean"], wa[m]))
            rows.append(row)
        pr = {"policy": "targeted - global"}
        for m, s in self.paired().items():
            pr[m] = _nan(s["mean"]) if s else np.nan
            pr[f"{m}_lo"] = _nan(s["lo"]) if s else np.nan
            pr[f"{m}_hi"] = _nan(s["hi"]) if s else np.nan
            pr[f"{m}_nb_lo"] = _nan(s["nb_lo"]) if s else np.nan
            pr[f"{m}_nb_hi"] = _nan(s["nb_hi"]) if s else np.nan
            pr[f"{m}_same_sign"] = s["same_sign"] if s else np.nan
        rows.append(pr)
        if self.gold is not None:  # the PPI++ faithfulness column(s) of `compare --gold`
            extra = self.gold.table_columns()
            rows = [{**r, **{k: _nan(v) for k, v in extra.get(r["policy"], {}).items()}} for r in rows]
        for name, changes in self.paired_vs_write_all().items():
            row = {"policy": f"{name} - write_all"}
            for m, s in changes.items():
                for k, col in (("mean", m), ("lo", f"{m}_lo"), ("hi", f"{m}_hi"), ("same_sign", f"{m}_same_sign")):
                    row[col] = _nan(s[k]) if s else np.nan
            rows.append(row)
        return pd.DataFrame(rows).set_index("policy")

    def render(self) -> str:
        text = render_table(self)
        if self.gold is not None:
            text += "\n" + self.gold.render(self.repeats * self.folds)
        return text

    # -- full-sample artefacts for the report -------------------------------------------------
    def full_gate(self) -> list[str]:
        p = self.prepared
        if self.gate == "auto":
            low = lowest_support_category(p.cat, p.valid, p.sup & p.valid)
            return [str(p.categories[int(low)])] if low is not None else []
        return list(self.gate)

    def fit_full(self) -> dict:
        """Each policy fitted on all personas: per-category threshold arrays (fitted once, shared
        by `sweep` and `export_policy`)."""
        if self._fitted is None:
            p = self.prepared
            gate_arg = "auto" if self.gate == "auto" else p.gate_codes(self.gate)
            self._fitted, _ = _Engine(p).fit(np.ones(p.n, bool), gate_arg, self.floor, self.policy_names,
                                             self.per_category_method)
        return self._fitted

    def sweep(self) -> dict:
        return sweep(self.prepared, self.full_gate(), self.floor, fitted=self.fit_full(),
                     write_all=self.write_all)

    def calibration(self, B: int = 2000, seed: int = 0) -> dict:
        return calibration(self.prepared, B=B, seed=seed)

    def write_run(self, run_dir, *, candidates, labels, coverage=None, seed: int = 0) -> None:
        """Everything `memjudge report` reads about this comparison, into RUN_DIR: the fixed-key
        compare.json, the inputs' paths, the full-sample sweep and the calibration table."""
        from memjudge.formats import write_json

        run = Path(run_dir)
        write_json(run / "compare.json", self.to_json())
        write_json(run / "compare_inputs.json", {
            "candidates": str(Path(candidates).resolve()),
            "labels": [str(Path(p).resolve()) for p in labels],
            "coverage": str(Path(coverage).resolve()) if coverage else None,
            "judge": self.judge, "replicate": self.replicate, "per_category_method": self.per_category_method,
        })
        write_json(run / "sweep.json", self.sweep())
        write_json(run / "calibration.json", self.calibration(seed=seed))

    def export_policy(self, path, kind: str = "targeted") -> dict:
        """Fit `kind` on all personas (same floor and gate) and write the gate's JSON."""
        from memjudge.formats import write_json
        from memjudge.policies import POLICY_FORMAT, POLICY_VERSION
        import datetime as dt

        if kind not in ("global", "targeted", "per_category"):
            raise UsageError(f"cannot export policy {kind!r}")
        p = self.prepared
        fitted = self.fit_full()
        thr = fitted[kind]
        gate = self.full_gate()
        cats = p.categories.tolist()
        num = lambda t: None if t == NEG_INF else float(t)  # noqa: E731
        if kind == "global":
            thresholds, default = {}, num(thr[0])
        elif kind == "targeted":
            thresholds, default = {c: num(thr[i]) for i, c in enumerate(cats) if c in gate}, None
        else:
            thresholds, default = {c: num(t) for c, t in zip(cats, thr)}, None
        fs = full_sample(p, thr)
        d = {
            "format": POLICY_FORMAT, "version": POLICY_VERSION, "kind": kind,
            "thresholds": thresholds, "default_threshold": default,
            "gate": gate if kind != "global" else None, "floor": self.floor,
            "fitted_on": {
                **{k: v for k, v in p.inputs.items()}, "judge": p.judge, "replicate": p.replicate,
                "n_candidates": p.n, "n_personas": len(p.personas), "n_valid": int(p.valid.sum()),
                "strict_binary": p.strict_binary,
                "gate_requested": self.gate, "fit_set": json_safe(fs),
                **({"per_category_method": self.per_category_method} if kind == "per_category" else {}),
                "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            },
        }
        write_json(path, d)
        return d


def _num(v):
    if v is None:
        return None
    v = float(v)
    return None if not np.isfinite(v) else v


def _nan(v):
    return np.nan if v is None else v


def _delta(a, b):
    return None if a is None or b is None else float(a - b)


def _resolve_gate(gate, categories: np.ndarray):
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


def compare(candidates, labels, coverage=None, *, judge=None, replicate=0, gate="values",
            floor: float = 0.8, repeats: int = 20, folds: int = 5, seed: int = 0,
            policies=POLICY_NAMES, per_category: str = "greedy", strict_binary: bool = False,
            B: int = B_DEFAULT, gold=None) -> CompareResult:
    """Write-all vs global vs targeted (vs per-category) by the exact protocol of spec §8.

    candidates, labels, coverage: DataFrames or paths. `gate`: "values", "a,b", a list, or
    "auto". `per_category`: "greedy" or "exact" (see `memjudge.policies.PerCategory`).
    `gold` (path or DataFrame of hand labels): each held-out faithfulness is also estimated by
    PPI++ (`memjudge.comparison.gold`); thresholds and judge-only figures are unchanged.
    `strict_binary`: a verdict other than supported/unsupported is no valid verdict (default:
    valid, not supported). `B`: bootstrap resamples for the write-all interval (seed `seed`).
    Returns a `CompareResult` (``.to_json()``, ``.table()``, ``.render()``)."""
    prep = labels if isinstance(labels, Prepared) else prepare(candidates, labels, coverage, judge=judge,
                                                               replicate=replicate, strict_binary=strict_binary)
    res = compare_prepared(prep, gate=gate, floor=floor, repeats=repeats, folds=folds, seed=seed,
                           policies=policies, per_category=per_category, B=B)
    if gold is not None:
        from memjudge.comparison.gold import compare_with_gold

        # the judge's raw verdicts weight a sample stratified by verdict (as `memjudge estimate`)
        verdicts = None if isinstance(labels, Prepared) else select_verdicts(
            labels if isinstance(labels, pd.Series) else _load_labels(labels), prep.judge, prep.replicate)[0]
        res.gold = compare_with_gold(res, gold, verdicts=verdicts)
    return res


def compare_prepared(prep: Prepared, *, gate="values", floor=0.8, repeats=20, folds=5, seed=0,
                     policies=POLICY_NAMES, per_category: str = "greedy", B: int = B_DEFAULT,
                     weights: np.ndarray | None = None) -> CompareResult:
    from memjudge.policies import PER_CATEGORY_METHODS

    if per_category not in PER_CATEGORY_METHODS:
        raise UsageError(f"per-category method must be one of {', '.join(PER_CATEGORY_METHODS)}, got {per_category!r}")
    policies = tuple(p for p in POLICY_NAMES if p in policies)
    if "global" not in policies or "targeted" not in policies:
        raise UsageError("the comparison needs both the global and the targeted policy")
    if B < 1:
        raise UsageError(f"B (bootstrap resamples) must be at least 1, got {B}")
    g = _resolve_gate(gate, prep.categories)
    detail, gates, ratio = run_protocol(prep, gate=g, floor=float(floor), repeats=repeats, folds=folds,
                                        seed=seed, policies=policies, per_category=per_category)
    return CompareResult(
        judge=prep.judge, replicate=prep.replicate, floor=float(floor), gate=g, repeats=repeats,
        folds=folds, seed=seed, write_all=full_sample(prep), folds_detail=detail, fold_gates=gates,
        test_train_ratio=ratio, prepared=prep, policy_names=policies, per_category_method=per_category,
        B=B, weights=weights,
    )


# ---------------------------------------------------------------------------------------
# sweep and calibration (full sample)


def _coverage_curve(prep: Prepared, always: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Coverage at each threshold when candidates with `always` are kept regardless: a fact is
    covered at t iff its best covering candidate's key ≥ t (key = +∞ for always-kept)."""
    nf = len(prep.fact_persona)
    if not prep.has_coverage or nf == 0:
        return np.full(len(thresholds), np.nan)
    key = np.where(always, np.inf, prep.conf)
    best = np.full(nf, -np.inf)
    np.maximum.at(best, prep.pair_fact, key[prep.pair_cand])
    covered_any = np.isfinite(best) | (best == np.inf)
    s = np.sort(best[covered_any])
    # facts covered at t = those with best >= t
    return (len(s) - np.searchsorted(s, thresholds, side="left")) / nf


def _sweep_rows(prep: Prepared, gated: np.ndarray) -> list[dict]:
    g = np.flatnonzero(gated)
    order = g[np.argsort(prep.conf[g], kind="stable")]
    sup = prep.sup & prep.valid
    opt: Options = sorted_options(prep.conf[order], prep.valid[order], sup[order])
    ng = ~gated
    kept = int(ng.sum()) + opt.n - opt.removed
    valid = int(prep.valid[ng].sum()) + opt.valid - opt.removed_valid
    s = int(sup[ng].sum()) + opt.supported - opt.removed_supported
    with np.errstate(invalid="ignore", divide="ignore"):
        faith = s / valid
    ret = kept / prep.n
    cov = _coverage_curve(prep, ng, opt.thresholds)
    # −∞ and the lowest confidence make the same decisions; keep both, as candidates.
    return [{"threshold": _num(t), "faithfulness": _num(f), "retention": _num(r),
             "coverage": _num(c) if prep.coverage_measured else None}
            for t, f, r, c in zip(opt.thresholds, faith, ret, cov)]


def sweep(prep: Prepared, gate: list[str], floor: float, *, fitted: dict | None = None,
          write_all: dict | None = None) -> dict:
    gated = np.isin(prep.categories[prep.cat], gate)
    out = {
        "judge": prep.judge, "replicate": prep.replicate, "floor": floor, "gate": list(gate),
        "write_all": json_safe(write_all or full_sample(prep)),
        "global": _sweep_rows(prep, np.ones(prep.n, bool)),
        "targeted": _sweep_rows(prep, gated),
        "fitted": {},
    }
    cats = prep.categories.tolist()
    for name, thr in (fitted or {}).items():
        fs = json_safe(full_sample(prep, thr))
        if name == "global":
            t = _num(thr[0])
        elif name == "targeted":
            gi = [i for i, c in enumerate(cats) if c in gate]
            t = _num(thr[gi[0]]) if gi else None
        else:
            t = {c: _num(v) for c, v in zip(cats, thr)}
        entry = {"threshold": t, **fs}
        if name == "targeted":
            entry["gate"] = list(gate)
        out["fitted"][name] = entry
    return out


def _bins_for(conf: np.ndarray):
    """("distinct", values) when ≤ 10 distinct confidences, else ("deciles", edges)."""
    vals = np.unique(conf)
    if len(vals) <= 10:
        return "distinct", vals
    return "deciles", np.round(np.linspace(0.0, 1.0, 11), 1)


def calibration(prep: Prepared, *, B: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    from memjudge.stats.bootstrap import cluster_counts, cluster_weights, ratio_interval

    P = len(prep.personas)
    W = cluster_weights(P, B=B, seed=seed)
    sup = (prep.sup & prep.valid).astype(float)
    valid = prep.valid.astype(float)
    cats_out = []
    for ci, c in enumerate(prep.categories.tolist()):
        m = prep.cat == ci
        conf = prep.conf[m]
        kind, spec = _bins_for(conf)
        if kind == "distinct":
            b = np.searchsorted(spec, conf)
            nb = len(spec)
            edges = [(float(v), float(v)) for v in spec]
        else:
            b = np.clip(np.searchsorted(spec, conf, side="right") - 1, 0, 9)
            nb = 10
            edges = [(float(spec[i]), float(spec[i + 1])) for i in range(10)]
        pers = prep.persona[m]
        # per-persona per-bin sufficient statistics, then all resamples by one matrix product
        S = cluster_counts(pers, b, P, nb + 1, weights=sup[m])
        V = cluster_counts(pers, b, P, nb + 1, weights=valid[m])
        S[:, nb] = S[:, :nb].sum(1)
        V[:, nb] = V[:, :nb].sum(1)
        lo, hi = ratio_interval(S, V, W, level)
        counts = np.bincount(b, minlength=nb)
        tv, ts = V.sum(0), S.sum(0)
        bins = []
        for i in range(nb):
            if counts[i] == 0:
                continue
            bins.append({"conf_lo": edges[i][0], "conf_hi": edges[i][1], "n": int(counts[i]),
                         "valid": int(tv[i]), "supported": int(ts[i]),
                         "support_rate": _num(ts[i] / tv[i]) if tv[i] else None,
                         "ci_lo": _num(lo[i]), "ci_hi": _num(hi[i])})
        cats_out.append({"category": c, "n": int(m.sum()), "valid": int(tv[nb]), "supported": int(ts[nb]),
                         "support_rate": _num(ts[nb] / tv[nb]) if tv[nb] else None,
                         "ci_lo": _num(lo[nb]), "ci_hi": _num(hi[nb]), "binning": kind, "bins": bins})
    return {"judge": prep.judge, "replicate": prep.replicate, "B": B, "level": level, "categories": cats_out}


# ---------------------------------------------------------------------------------------
# human output


_LABEL = {"write_all": "Write-all (full sample)", "global": "Global threshold",
          "targeted": "Targeted", "per_category": "Per-category"}


def _pct(v, nd=2):
    return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{100 * v:.{nd}f}"


def _pts(v):
    return "—" if v is None or not np.isfinite(v) else f"{100 * v:+.2f}"


def render_table(res: CompareResult) -> str:
    p = res.prepared
    gate = "auto (lowest-support category per fit fold)" if res.gate == "auto" else ", ".join(res.gate)
    lines = [
        f"Table 1 — held-out retention policies (judge {res.judge}, replicate {res.replicate}; "
        f"{p.n} candidates, {len(p.personas)} personas, {int(p.valid.sum())} valid verdicts)",
        f"{res.repeats} × {res.folds}-fold persona-grouped CV (seed {res.seed}), retention floor "
        f"{_pct(res.floor)}%, gate: {gate}. Entries: fold mean ± SD, percent.",
        "",
    ]
    head = f"{'Policy':<30}{'Faithfulness':>24}{'Retention':>24}{'Est. coverage':>24}{'Δ faith (pts)':>15}{'Δ cov (pts)':>13}"
    lines += [head, "-" * len(head)]
    wa, ci = res.write_all, res.write_all_ci()

    def with_ci(m):
        c = ci.get(m)
        return _pct(wa[m]) + (f" [{_pct(c['lo'])}, {_pct(c['hi'])}]" if c and c["lo"] is not None else "")

    lines.append(f"{_LABEL['write_all']:<30}{with_ci('faithfulness'):>24}{_pct(wa['retention']):>24}"
                 f"{with_ci('coverage'):>24}{'':>15}{'':>13}")
    for name, s in res.policies().items():
        cells = []
        for m in METRICS:
            ms = s[m]
            if ms is None or ms["mean"] is None:
                cells.append("—")
            else:
                cells.append(f"{_pct(ms['mean'])} ± {_pct(ms['sd'])}")
        label = _LABEL[name] + (f" ({', '.join(res.gate)})" if name == "targeted" and res.gate != "auto" else "")
        label += f" ({res.per_category_method})" if name == "per_category" else ""
        lines.append(f"{label:<30}{cells[0]:>24}{cells[1]:>24}{cells[2]:>24}"
                     f"{_pts(_nan(s['delta_faithfulness'])):>15}{_pts(_nan(s['delta_coverage'])):>13}")
    def change(s):
        return "—" if not s or s["mean"] is None else f"{_pts(s['mean'])} [{_pts(s['lo'])}, {_pts(s['hi'])}]"

    for name, changes in res.paired_vs_write_all().items():
        cells = [change(changes[m]) for m in METRICS]
        lines.append(f"{_LABEL[name] + ' − write-all':<30}{cells[0]:>24}{cells[1]:>24}{cells[2]:>24}")
    pr = res.paired()
    cells = [change(pr[m]) for m in METRICS]
    lines.append(f"{'Targeted − global':<30}{cells[0]:>24}{cells[1]:>24}{cells[2]:>24}")
    lines.append("")
    J = res.repeats * res.folds
    lines.append(f"  write-all: full-sample values with 95% persona-cluster bootstrap intervals (B = {res.B}); "
                 "'− write-all' rows: paired per-fold change against write-all on the same held-out personas, "
                 "mean [2.5%, 97.5%] in points")
    for m in METRICS:
        s = pr[m]
        if not s or s["mean"] is None:
            continue
        lines.append(f"  {m:<13} paired mean {_pts(s['mean'])} pts; 2.5–97.5% of folds [{_pts(s['lo'])}, "
                     f"{_pts(s['hi'])}]; Nadeau–Bengio 95% [{_pts(s['nb_lo'])}, {_pts(s['nb_hi'])}]; "
                     f"same sign in {s['same_sign']}/{J} folds")
    if res.gate == "auto":
        from collections import Counter

        cnt = Counter(",".join(g) for g in res.fold_gates)
        lines.append("  auto gate chosen per fold: " + ", ".join(f"{k} ×{v}" for k, v in cnt.most_common()))
    for n in res.notes():
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def prepared_notes(p: Prepared) -> list[str]:
    """What was left out of (or counted differently in) the figures, in sentences."""
    notes = []
    if p.n_unlabelled:
        notes.append(f"{p.n_unlabelled} candidates have no label from this judge (no valid verdict)")
    if p.n_labels_unmatched:
        notes.append(f"{p.n_labels_unmatched} labels name assertions that are not among the candidates (ignored)")
    if p.n_nonbinary:
        notes.append(f"{p.n_nonbinary} candidates have a verdict other than supported/unsupported: "
                     + ("excluded from faithfulness and support rates (strict binary), still counted in retention"
                        if p.strict_binary else "valid and not supported (--strict-binary excludes them)"))
    if p.has_coverage and p.n_facts_unjudged:
        notes.append(f"{p.n_facts_unjudged} reference facts without a coverage verdict excluded")
    if p.has_coverage and p.n_facts_without_candidates:
        notes.append(f"{p.n_facts_without_candidates} reference facts of personas without candidates excluded")
    if p.has_coverage and not p.coverage_measured:
        notes.append("no judged reference fact of a persona with candidates: estimated coverage not computed")
    if not p.has_coverage:
        notes.append("no coverage file: estimated coverage not computed")
    return notes
