"""Calibrating a judge's threshold on its `judge_score` against gold labels.

A scoring judge (the embedded `local:` judge gives log-odds) says "supported" when its score
is at least a threshold. `calibrate` picks the threshold that maximises a target measure on
labelled data and returns it; `memjudge calibrate --panel` (or `memjudge.write_threshold`)
writes it into a judge panel file (`[judge.options] threshold = ...`), which
`memjudge score --judges-file` then uses. Named categories may get thresholds of their own
(`own=("values",)`, written as `category_thresholds`), each chosen on that category's items and
the plain threshold on the rest. Measures are pure functions of arrays.

Positive class throughout: "supported" (gold verdict), predicted when score >= threshold.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from memjudge._util.registry import CALIBRATION_TARGETS
from memjudge.errors import UsageError

# ---------------------------------------------------------------------------------------
# measures (arrays in, numbers out)


def auc(scores, positive) -> float:
    """Area under the ROC curve by the rank (Mann-Whitney) formula; ties count one half.
    NaN when one class is absent."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    from scipy.stats import rankdata  # here: importing scipy.stats costs most of a second

    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _rates_at(scores: np.ndarray, positive: np.ndarray, thresholds: np.ndarray):
    """True-positive and true-negative counts of `score >= t` for every t, vectorised by sorting."""
    pos_sorted = np.sort(scores[positive])
    neg_sorted = np.sort(scores[~positive])
    tp = pos_sorted.size - np.searchsorted(pos_sorted, thresholds, side="left")
    tn = np.searchsorted(neg_sorted, thresholds, side="left")
    return tp, tn, pos_sorted.size, neg_sorted.size


def balanced_accuracy(scores, positive, threshold: float) -> float:
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    tp, tn, p, n = _rates_at(s, y, np.array([threshold], dtype=float))
    if p == 0 or n == 0:
        return math.nan
    return float((tp[0] / p + tn[0] / n) / 2)


def accuracy(scores, positive, threshold: float) -> float:
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    if s.size == 0:
        return math.nan
    return float(((s >= threshold) == y).mean())


def _target_values(target: str, tp, tn, p, n) -> np.ndarray:
    tpr = tp / p if p else np.full(tp.shape, np.nan)
    tnr = tn / n if n else np.full(tn.shape, np.nan)
    if target == "balanced_accuracy":
        return (tpr + tnr) / 2
    if target == "accuracy":
        return (tp + tn) / (p + n)
    if target == "youden":
        return tpr + tnr - 1
    if target == "f1_unsupported":
        pred_unsup = (p - tp) + tn
        prec = np.divide(tn, pred_unsup, out=np.zeros(tn.shape, dtype=float), where=pred_unsup > 0)
        rec = tn / n if n else np.zeros(tn.shape)
        denom = prec + rec
        return np.divide(2 * prec * rec, denom, out=np.zeros(tn.shape, dtype=float), where=denom > 0)
    raise UsageError(f"unknown calibration target {target!r} (known: {', '.join(TARGETS)})")


TARGETS = CALIBRATION_TARGETS  # named once, in the light registry the CLI reads


def candidate_thresholds(scores: np.ndarray) -> np.ndarray:
    """Midpoints between consecutive distinct scores, plus one below and one above all: every
    distinct classification of the data, each at a threshold robust to rounding."""
    u = np.unique(scores)
    if u.size == 0:
        return np.array([0.0])
    mids = (u[:-1] + u[1:]) / 2
    return np.concatenate([[u[0] - 1.0], mids, [u[-1] + 1.0]])


def best_threshold(scores, positive, target: str = "balanced_accuracy") -> tuple[float, float]:
    """(threshold, target value) maximising the target; among ties the threshold nearest the
    middle of the tied run of candidates (a plateau's centre generalises better than its edge)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    if s.size == 0:
        raise UsageError("no items with both a judge_score and a gold verdict to calibrate on")
    if y.all() or (~y).all():
        raise UsageError("calibration needs gold labels of both classes (supported and unsupported)")
    thresholds = candidate_thresholds(s)
    tp, tn, p, n = _rates_at(s, y, thresholds)
    values = _target_values(target, tp, tn, p, n)
    best = np.nanmax(values)
    tied = np.flatnonzero(np.isclose(values, best, rtol=0, atol=1e-12))
    # Centre of the first contiguous run of best values.
    run_end = tied[0]
    while run_end + 1 < values.size and np.isclose(values[run_end + 1], best, rtol=0, atol=1e-12):
        run_end += 1
    i = (tied[0] + run_end) // 2
    return float(thresholds[i]), float(best)


# ---------------------------------------------------------------------------------------
# the API


def thresholds_of(categories, threshold: float, own: dict[str, float]) -> np.ndarray:
    """Each item's threshold from its category: `own[category]`, else `threshold`."""
    cats = np.asarray(categories, dtype=object)
    out = np.full(cats.shape, threshold, dtype=float)
    for c, t in own.items():
        out[cats == c] = t
    return out


@dataclass
class Calibration:
    judge: str
    target: str
    threshold: float
    target_value: float
    n: int
    n_supported: int
    n_unsupported: int
    balanced_accuracy: float
    accuracy: float
    auc: float
    panel: str | None = None
    # Categories with a threshold of their own; `threshold` is then the rest's. The figures
    # above are those of the whole rule (each item against its category's threshold).
    category_thresholds: dict[str, float] = field(default_factory=dict)

    def threshold_of(self, categories) -> np.ndarray:
        """Each item's threshold under this calibration, from its category."""
        return thresholds_of(categories, self.threshold, self.category_thresholds)

    def as_dict(self) -> dict:
        return asdict(self)


def join_gold(labels: pd.DataFrame, gold: pd.DataFrame, judge: str, replicate: int | None = 0) -> pd.DataFrame:
    """One row per assertion judged by `judge` with a judge_score and a gold verdict."""
    if "judge_score" not in labels.columns:
        raise UsageError("the labels have no judge_score column: this judge gives no score to calibrate")
    sel = labels[labels["judge"] == judge]
    if sel.empty:
        known = ", ".join(sorted(map(str, labels["judge"].unique())))
        raise UsageError(f"no labels of judge {judge!r} (labels have: {known})")
    if replicate is not None and (sel["replicate"] == replicate).any():
        sel = sel[sel["replicate"] == replicate]
    sel = sel[pd.to_numeric(sel["judge_score"], errors="coerce").notna()]
    sel = sel.drop_duplicates("assertion_id")
    g = gold[["assertion_id", "verdict"]].rename(columns={"verdict": "gold"})
    g = g[g["gold"].isin(["supported", "unsupported"])]
    return sel.merge(g, on="assertion_id", how="inner")


def calibrate_scores(scores, gold_supported, judge: str = "", target: str = "balanced_accuracy", *,
                     categories=None, own=()) -> Calibration:
    """The threshold maximising `target`; with `own` (category names, `categories` one per item),
    each of those categories gets the threshold maximising it on its own items and `threshold`
    is chosen on the other items. Figures are the whole rule's."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(gold_supported, dtype=bool)
    own = list(dict.fromkeys(own))
    per: dict[str, float] = {}
    if not own:
        t, value = best_threshold(s, y, target)
        shifted, cut = s, t
    else:
        if categories is None:
            raise UsageError("thresholds per category need the items' categories")
        cats = np.asarray(categories, dtype=object)
        for c in own:
            per[c] = _group_threshold(s, y, cats == c, f"category {c!r}", target)
        t = _group_threshold(s, y, ~np.isin(cats, own), f"the categories other than {', '.join(own)}", target)
        shifted, cut = s - thresholds_of(cats, t, per), 0.0
        value = float(_target_values(target, *_rates_at(shifted, y, np.array([cut])))[0])
    return Calibration(
        judge=judge, target=target, threshold=t, target_value=value, n=int(s.size),
        n_supported=int(y.sum()), n_unsupported=int((~y).sum()),
        balanced_accuracy=balanced_accuracy(shifted, y, cut), accuracy=accuracy(shifted, y, cut), auc=auc(shifted, y),
        category_thresholds=per,
    )


def _group_threshold(s: np.ndarray, y: np.ndarray, mask: np.ndarray, name: str, target: str) -> float:
    if not (y[mask].any() and (~y[mask]).any()):
        have = "no items" if not mask.any() else f"{int(y[mask].sum())} supported, {int((~y[mask]).sum())} unsupported"
        raise UsageError(f"{name} needs gold labels of both classes for a threshold of its own ({have})")
    return best_threshold(s[mask], y[mask], target)[0]


def calibrate(labels, gold, judge: str, target: str = "balanced_accuracy", own=()) -> Calibration:
    """Pick `judge`'s threshold on labels (paths or a DataFrame) against gold (path or DataFrame);
    `own`: categories that get a threshold of their own (chosen on their items; the threshold
    on the rest). Nothing is written: `memjudge.write_threshold` (the CLI's --panel) puts the
    thresholds into a judges file."""
    from memjudge.formats import read_gold, read_labels

    if target not in TARGETS:
        raise UsageError(f"unknown calibration target {target!r} (known: {', '.join(TARGETS)})")
    labels_df = labels if isinstance(labels, pd.DataFrame) else read_labels(labels)
    gold_df = gold if isinstance(gold, pd.DataFrame) else read_gold(gold)
    joined = join_gold(labels_df, gold_df, judge)
    if joined.empty:
        raise UsageError(f"no assertion of judge {judge!r} has both a judge_score and a gold verdict")
    if own and "category" not in joined.columns:
        raise UsageError("the labels have no category column: thresholds per category need it")
    cal = calibrate_scores(joined["judge_score"].astype(float), joined["gold"] == "supported", judge, target,
                           categories=joined["category"] if own else None, own=own)
    return cal


__all__ = [
    "Calibration", "TARGETS", "accuracy", "auc", "balanced_accuracy", "best_threshold", "calibrate",
    "calibrate_scores", "candidate_thresholds", "join_gold",
]

