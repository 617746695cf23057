"""Coverage labels against a reference map: how good a judge is at coverage.

A coverage label says, for one reference fact, which of the persona's candidate assertions state
it (`covered_by`). Against a reference map (hand labels, or a simulated corpus's construction
map) two units are compared:

- **pairs** (fact, candidate of its persona): the judge lists the candidate for the fact or not,
  and so does the reference. Percent agreement, Cohen's κ, positive agreement, the confusion
  counts; per category of the candidate too. Most pairs are "not stated", so κ is the figure
  to read, not agreement.
- **facts**: covered by at least one candidate, or not (what the estimated coverage of Table 1
  counts). Agreement, κ, and the two coverage rates side by side.

Facts the judge left without a valid answer (`covered_by` null) are left out and counted,
never read as "not covered". `coverage_calibration` sets a judge's coverage threshold on the
per-candidate scores it gave (`candidate_scores`, the embedded judge's per-fact reads) against
the reference, with `memjudge calibrate`'s own threshold search.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from memjudge.errors import UsageError
from memjudge.stats.agreement import pair_coefficients
from memjudge.stats.thresholds import (
    TARGETS,
    Calibration,
    accuracy,
    auc,
    balanced_accuracy,
    calibrate_scores,
    candidate_thresholds,
)


def _covered(frame: pd.DataFrame, replicate: int | None) -> pd.DataFrame:
    if replicate is not None and "replicate" in frame.columns and (frame["replicate"] == replicate).any():
        frame = frame[frame["replicate"] == replicate]
    return frame.drop_duplicates(["persona_id", "fact_id"])


def _figures(judge: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    conf = np.array([[np.sum(judge & ref), np.sum(judge & ~ref)], [np.sum(~judge & ref), np.sum(~judge & ~ref)]], dtype=float)
    c = pair_coefficients(conf, positive=0)
    return {"n": int(conf.sum()), "percent_agreement": float(c["percent_agreement"]), "cohen_kappa": float(c["cohen_kappa"]),
            "positive_agreement": float(c["positive_agreement"]),
            "confusion": {"both": int(conf[0, 0]), "judge_only": int(conf[0, 1]), "reference_only": int(conf[1, 0]),
                          "neither": int(conf[1, 1])}}


def coverage_pairs(judged: pd.DataFrame, reference: pd.DataFrame, candidates: pd.DataFrame,
                   replicate: int | None = 0) -> tuple[pd.DataFrame, int]:
    """One row per (fact, candidate of its persona) for the facts both the judge (a valid answer)
    and the reference cover: persona_id, fact_id, assertion_id, category, judge, reference (bools);
    and the number of the reference's facts the judge left without a valid answer."""
    j = _covered(judged, replicate)
    r = _covered(reference, None)
    ref_map = {(p, f): set(c or []) for p, f, c in zip(r["persona_id"].astype(str), r["fact_id"].astype(str), r["covered_by"])}
    got = {(p, f): c for p, f, c in zip(j["persona_id"].astype(str), j["fact_id"].astype(str), j["covered_by"])}
    by_persona: dict[str, list[tuple[str, str]]] = {}
    for p, a, c in zip(candidates["persona_id"].astype(str), candidates["assertion_id"].astype(str), candidates["category"].astype(str)):
        by_persona.setdefault(p, []).append((a, c))
    rows, unanswered = [], 0
    for (p, f), truth in ref_map.items():
        if (p, f) not in got or p not in by_persona:
            continue
        listed = got[(p, f)]
        if listed is None or (isinstance(listed, float) and np.isnan(listed)):
            unanswered += 1
            continue
        listed = set(map(str, listed))
        rows += [(p, f, a, c, a in listed, a in truth) for a, c in by_persona[p]]
    cols = ["persona_id", "fact_id", "assertion_id", "category", "judge", "reference"]
    return pd.DataFrame(rows, columns=cols), unanswered


def coverage_agreement(judged: pd.DataFrame, reference: pd.DataFrame, candidates: pd.DataFrame,
                       replicate: int | None = 0) -> dict[str, Any]:
    """The judge's coverage labels (replicate `replicate`) against the reference map: pairs
    overall and per candidate category, facts covered or not, and both coverage rates."""
    pairs, unanswered = coverage_pairs(judged, reference, candidates, replicate)
    if pairs.empty:
        return {"n_facts": 0, "facts_unanswered": unanswered}
    jv, rv = pairs["judge"].to_numpy(bool), pairs["reference"].to_numpy(bool)
    by_cat = {str(c): _figures(g["judge"].to_numpy(bool), g["reference"].to_numpy(bool))
              for c, g in pairs.groupby("category", sort=True)}
    facts = pairs.groupby(["persona_id", "fact_id"], sort=False)[["judge", "reference"]].any()
    fj, fr = facts["judge"].to_numpy(bool), facts["reference"].to_numpy(bool)
    return {
        "n_facts": int(len(facts)), "facts_unanswered": unanswered,
        "pairs": _figures(jv, rv), "pairs_by_category": by_cat,
        "facts": _figures(fj, fr),
        "coverage_rate": {"judge": float(fj.mean()), "reference": float(fr.mean())},
    }


def coverage_calibration(judged: pd.DataFrame, reference: pd.DataFrame, judge: str, target: str = "balanced_accuracy",
                         replicate: int | None = 0) -> Calibration:
    """The coverage threshold on the judge's per-candidate scores (`candidate_scores` of its
    per-fact coverage rows) that best matches the reference map: a candidate the reference lists
    for the fact is the positive class. Only the candidates the judge read count.

    Target "coverage_rate" matches facts instead (what Table 1's estimated coverage counts): the
    threshold at which the share of facts the judge covers (its best candidate's read at or above
    it) equals the reference's share, the centre of the run of thresholds closest to it; the
    figures are then the facts' (n facts; "supported" = covered by the reference)."""
    if target not in COVERAGE_TARGETS:
        raise UsageError(f"unknown coverage calibration target {target!r} (known: {', '.join(COVERAGE_TARGETS)})")
    if "candidate_scores" not in judged.columns:
        raise UsageError("the coverage rows have no candidate_scores column: this judge gives no coverage score to calibrate")
    sel = judged[judged["judge"] == judge] if "judge" in judged.columns else judged
    if sel.empty:
        raise UsageError(f"no coverage rows of judge {judge!r}")
    sel = _covered(sel, replicate)
    r = _covered(reference, None)
    ref_map = {(p, f): set(c or []) for p, f, c in zip(r["persona_id"].astype(str), r["fact_id"].astype(str), r["covered_by"])}
    scores, positive, fact_best, fact_covered = [], [], [], []
    for p, f, sc in zip(sel["persona_id"].astype(str), sel["fact_id"].astype(str), sel["candidate_scores"]):
        if not isinstance(sc, dict) or (p, f) not in ref_map:
            continue
        for a, s in sc.items():
            scores.append(float(s))
            positive.append(a in ref_map[(p, f)])
        # a fact shown no candidate is covered at no threshold
        fact_best.append(max(map(float, sc.values())) if sc else -np.inf)
        fact_covered.append(bool(ref_map[(p, f)]))
    if not scores:
        raise UsageError(f"no fact of judge {judge!r} has candidate scores and a reference entry")
    if target == "coverage_rate":
        return _rate_calibration(np.array(fact_best), np.array(fact_covered), judge)
    return calibrate_scores(scores, positive, judge, target)


# memjudge calibrate --coverage --target: the support targets (on pairs), and the facts' rate
COVERAGE_TARGETS = (*TARGETS, "coverage_rate")


def _rate_calibration(best: np.ndarray, covered: np.ndarray, judge: str) -> Calibration:
    finite = best[np.isfinite(best)]
    thresholds = candidate_thresholds(finite)
    rates = (best[None, :] >= thresholds[:, None]).mean(axis=1)
    gap = np.abs(rates - covered.mean())
    tied = np.flatnonzero(np.isclose(gap, gap.min(), rtol=0, atol=1e-12))
    run_end = tied[0]  # the centre of the first contiguous run of closest thresholds
    while run_end + 1 < gap.size and np.isclose(gap[run_end + 1], gap.min(), rtol=0, atol=1e-12):
        run_end += 1
    t = float(thresholds[(tied[0] + run_end) // 2])
    return Calibration(
        judge=judge, target="coverage_rate", threshold=t, target_value=float((best >= t).mean()), n=int(best.size),
        n_supported=int(covered.sum()), n_unsupported=int((~covered).sum()),
        balanced_accuracy=balanced_accuracy(best, covered, t), accuracy=accuracy(best, covered, t),
        auc=auc(np.where(np.isfinite(best), best, finite.min() - 1.0 if finite.size else 0.0), covered),
    )


def calibrate_coverage_files(coverage, reference, judge: str, target: str = "balanced_accuracy") -> Calibration:
    """`memjudge calibrate --coverage`: coverage rows (paths or a DataFrame) against a reference
    map (path or DataFrame). Nothing is written: the CLI's --panel writes the threshold as
    options.coverage_threshold (`memjudge.write_threshold(..., key="coverage_threshold")`)."""
    from memjudge.formats import read_coverage

    judged = coverage if isinstance(coverage, pd.DataFrame) else read_coverage(coverage)
    ref = reference if isinstance(reference, pd.DataFrame) else read_coverage(reference)
    return coverage_calibration(judged, ref, judge, target)


__all__ = ["COVERAGE_TARGETS", "calibrate_coverage_files", "coverage_agreement", "coverage_calibration", "coverage_pairs"]
