"""Judge noise (spec §7): how often a judge contradicts itself when it re-scores the same item.

Per item with n ≥ 2 valid replicates and n_k replicates on label k, the flip probability is
the chance that two distinct replicates differ, 1 − Σ_k n_k(n_k − 1) / (n(n − 1)); the flip
rate is its mean over items (with two replicates: the share of items whose verdicts differ).
The any-flip rate is the share of items with more than one distinct verdict. Null verdicts
are excluded and counted.

A deterministic judge's replicates after the first are copies of replicate 0 (label column
`replicate_of`, written by the engine for the embedded judge at temperature 0): its flip rate is
zero by construction, not measured, and the result says so (`by_construction`, and a note).

Intervals are 95% persona-cluster percentile bootstrap: per-persona totals (items, summed
flip probabilities, items with any flip) of every judge and category are computed once and
all resamples are one product `cluster_weights(...) @ totals`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from memjudge._util.text import coef, with_interval
from memjudge.errors import UsageError
from memjudge.formats.columns import REPLICATE_OF
from memjudge.formats.estimate import Estimate
from memjudge.stats.bootstrap import B_DEFAULT, cluster_counts, cluster_weights, interval_pairs

# How a flip rate that was not measured reads (replicates copied from replicate 0).
BY_CONSTRUCTION = "0 by construction (not measured)"

# ---------------------------------------------------------------------------------------
# pure functions over arrays


def item_flip(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-item flip probability, any-disagreement flag and number of valid replicates from an
    (items, labels) count matrix. Items with fewer than two replicates get NaN."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum(axis=1)
    same_pairs = (counts * (counts - 1)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        flip = np.where(n >= 2, 1.0 - same_pairs / (n * (n - 1)), np.nan)
    any_flip = np.where(n >= 2, ((counts > 0).sum(axis=1) > 1).astype(float), np.nan)
    return flip, any_flip, n


def _ratio(num, den):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def flip_rates(persona: np.ndarray, group: np.ndarray, flip: np.ndarray, any_flip: np.ndarray,
               n_personas: int, n_groups: int, weights: np.ndarray | None) -> dict[str, np.ndarray]:
    """Flip and any-flip rates of `n_groups` groups of items (e.g. judges), with intervals.

    Per item: persona index, group index, flip probability (NaN: not measurable, skipped) and
    any-flip flag. All groups are resampled by one product `weights @ per-persona totals`;
    weights is (B, n_personas) or None (no interval). Returns arrays over groups: items,
    flip_rate, any_flip_rate, flip_rate_ci and any_flip_rate_ci ((n_groups, 2)).
    """
    ok = ~np.isnan(flip)

    def per_persona(w):
        return cluster_counts(persona[ok], group[ok], n_personas, n_groups, weights=w)

    totals = np.hstack([per_persona(None), per_persona(flip[ok]), per_persona(any_flip[ok])])
    point = totals.sum(axis=0)
    items, flips, anys = point[:n_groups], point[n_groups:2 * n_groups], point[2 * n_groups:]
    out = {"items": items.astype(np.int64), "flip_rate": _ratio(flips, items), "any_flip_rate": _ratio(anys, items)}
    if weights is not None:
        reps = weights @ totals
        n_b = reps[:, :n_groups]
        ci = interval_pairs(np.hstack([_ratio(reps[:, n_groups:2 * n_groups], n_b), _ratio(reps[:, 2 * n_groups:], n_b)]))
        out["flip_rate_ci"], out["any_flip_rate_ci"] = ci[:n_groups], ci[n_groups:]
    else:
        out["flip_rate_ci"] = out["any_flip_rate_ci"] = np.full((n_groups, 2), np.nan)
    return out


# ---------------------------------------------------------------------------------------
# labels frame → result


@dataclass
class NoiseResult:
    """Flip rates per judge and rubric (`judges`) and per category (`by_category`).

    `items`: items with at least two valid replicates; `replicates`: distinct replicate
    indices of the judge; `excluded_null`: label rows with a null verdict; `by_construction`:
    every replicate after the first copies replicate 0 (`replicate_of`), so the rate is zero by
    construction, not measured. Interval columns
    are `<rate>_lo` / `<rate>_hi`; in JSON each rate is an `Estimate` ``{"value", "lo", "hi"}``."""

    judges: pd.DataFrame
    by_category: pd.DataFrame
    seed: int
    B: int
    personas: int
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        out = []
        row: Any  # itertuples rows: typed per column at run time only
        for row in self.judges.itertuples(index=False):
            cats = self.by_category[(self.by_category["judge"] == row.judge) & (self.by_category["rubric"] == row.rubric)]
            out.append({
                "judge": row.judge,
                "rubric": row.rubric,
                "items": int(row.items),
                "replicates": int(row.replicates),
                "excluded_null": int(row.excluded_null),
                "by_construction": bool(row.by_construction),
                "flip_rate": Estimate(row.flip_rate, row.flip_rate_lo, row.flip_rate_hi).to_dict(),
                "any_flip_rate": Estimate(row.any_flip_rate, row.any_flip_rate_lo, row.any_flip_rate_hi).to_dict(),
                "by_category": {
                    c.category: {"items": int(c.items),
                                 "flip_rate": Estimate(c.flip_rate, c.flip_rate_lo, c.flip_rate_hi).to_dict()}
                    for c in cast(Any, cats).itertuples(index=False)
                },
            })
        from memjudge.formats import json_safe

        return json_safe({"judges": out})

    def to_frame(self) -> pd.DataFrame:
        return self.judges.copy()

    def to_text(self) -> str:
        """Readable tables: one line per judge, then per category."""
        head = f"Judge noise (re-score flip rate; 95% persona-cluster bootstrap, B={self.B}, seed={self.seed}, {self.personas} personas)"
        t = pd.DataFrame({
            "judge": self.judges["judge"], "rubric": self.judges["rubric"], "items": self.judges["items"],
            "replicates": self.judges["replicates"], "null": self.judges["excluded_null"],
            "flip rate": [BY_CONSTRUCTION if r.by_construction else with_interval(coef, r.flip_rate, r.flip_rate_lo, r.flip_rate_hi)
                          for r in self.judges.itertuples()],
            "any flip": [with_interval(coef, r.any_flip_rate, r.any_flip_rate_lo, r.any_flip_rate_hi) for r in self.judges.itertuples()],
        })
        parts = [head, "", t.to_string(index=False)]
        if len(self.by_category):
            c = self.by_category
            ct = pd.DataFrame({"judge": c["judge"], "rubric": c["rubric"], "category": c["category"], "items": c["items"],
                               "flip rate": [with_interval(coef, r.flip_rate, r.flip_rate_lo, r.flip_rate_hi) for r in c.itertuples()]})
            parts += ["", "By category", "", ct.to_string(index=False)]
        parts += [f"note: {n}" for n in self.notes]
        return "\n".join(parts)


def _copied_judges(labels: pd.DataFrame) -> set[tuple[str, str]]:
    """(judge, rubric) pairs with replicates after the first, every one of them a copy (replicate_of)."""
    if REPLICATE_OF not in labels.columns or "replicate" not in labels.columns:
        return set()
    later = labels[pd.to_numeric(labels["replicate"]) > 0]
    copied = later[REPLICATE_OF].notna().groupby([later["judge"], later["rubric"]]).all()
    return {(str(key[0]), str(key[1])) for key, v in cast(Any, copied).items() if v}


def item_flips(labels: pd.DataFrame) -> pd.DataFrame:
    """One row per (judge, rubric, assertion_id) with a valid verdict, in order of first
    appearance: `valid` (number of non-null replicates), `flip` (the flip probability) and
    `any_flip` (1.0 when its valid replicates are not all equal); both NaN below two valid
    replicates. `noise` averages these; `memjudge view` shows the items behind them."""
    valid = labels[labels["verdict"].notna()]
    # One count row per (judge, rubric, item): n_k per label, built in one bincount.
    key_cols = ["judge", "rubric", "assertion_id"]
    # ngroup(sort=False) numbers keys in order of first appearance, as drop_duplicates lists them.
    key_code = valid.groupby(key_cols, sort=False).ngroup().to_numpy()
    per_item = valid[key_cols].drop_duplicates().reset_index(drop=True)
    label_code, label_names = pd.factorize(valid["verdict"])
    q = max(len(label_names), 1)
    counts = np.bincount(key_code * q + label_code, minlength=len(per_item) * q).reshape(len(per_item), q)
    flip, anyf, n = item_flip(counts)
    return per_item.assign(valid=n.astype(np.int64), flip=flip, any_flip=anyf)


def noise(labels: pd.DataFrame, seed: int = 0, B: int = B_DEFAULT) -> NoiseResult:
    """Re-score noise of every (judge, rubric) in a labels frame (memjudge.formats.read_labels).

    All judges share one persona resampling (personas sorted as strings, `seed`), so their
    intervals are paired. With fewer than two personas there is no between-persona
    variability to resample and intervals are null.
    """
    need = {"assertion_id", "persona_id", "category", "judge", "rubric", "replicate", "verdict"}
    missing = need - set(labels.columns)
    if missing:
        raise UsageError(f"labels lack column(s): {', '.join(sorted(missing))}")
    if B < 1:
        raise UsageError(f"B must be at least 1, got {B}")
    copies = _copied_judges(labels)
    df = labels[list(need)]
    personas = np.array(sorted(df["persona_id"].astype(str).unique()), dtype=object)
    n_p = len(personas)
    weights = cluster_weights(n_p, B, seed) if n_p >= 2 else None

    per_item = item_flips(df)
    flip, anyf = per_item["flip"].to_numpy(), per_item["any_flip"].to_numpy()
    first = df.drop_duplicates("assertion_id").set_index("assertion_id")
    persona = np.searchsorted(personas, first.loc[per_item["assertion_id"], "persona_id"].astype(str).to_numpy()).astype(np.int64)
    category = first.loc[per_item["assertion_id"], "category"].astype(str).to_numpy()

    per_judge = df.assign(null=df["verdict"].isna()).groupby(["judge", "rubric"], sort=True).agg(
        replicates=("replicate", "nunique"), excluded_null=("null", "sum"))
    n_g = len(per_judge)
    group = per_judge.index.get_indexer(pd.MultiIndex.from_frame(per_item[["judge", "rubric"]])).astype(np.int64)
    r = flip_rates(persona, group, flip, anyf, n_p, n_g, weights)
    judges = per_judge.reset_index()
    judges["items"] = r["items"]
    judges["flip_rate"], judges["any_flip_rate"] = r["flip_rate"], r["any_flip_rate"]
    judges["flip_rate_lo"], judges["flip_rate_hi"] = r["flip_rate_ci"][:, 0], r["flip_rate_ci"][:, 1]
    judges["any_flip_rate_lo"], judges["any_flip_rate_hi"] = r["any_flip_rate_ci"][:, 0], r["any_flip_rate_ci"][:, 1]
    judges["by_construction"] = [(j, rb) in copies for j, rb in zip(judges["judge"], judges["rubric"])]
    judges = judges[["judge", "rubric", "items", "replicates", "excluded_null", "by_construction", "flip_rate", "flip_rate_lo",
                     "flip_rate_hi", "any_flip_rate", "any_flip_rate_lo", "any_flip_rate_hi"]]

    # Categories: the same computation with one group per (judge, rubric, category).
    cat_names = np.array(sorted(set(category)), dtype=object)
    n_c = max(len(cat_names), 1)
    cat_code = np.searchsorted(cat_names, category).astype(np.int64) if len(cat_names) else np.zeros(0, np.int64)
    rc = flip_rates(persona, group * n_c + cat_code, flip, anyf, n_p, n_g * n_c, weights)
    keep = np.flatnonzero(rc["items"] > 0)
    by_cat = pd.DataFrame({
        "judge": judges["judge"].to_numpy()[keep // n_c], "rubric": judges["rubric"].to_numpy()[keep // n_c],
        "category": cat_names[keep % n_c] if len(cat_names) else np.array([], dtype=object),
        "items": rc["items"][keep], "flip_rate": rc["flip_rate"][keep],
        "flip_rate_lo": rc["flip_rate_ci"][keep, 0], "flip_rate_hi": rc["flip_rate_ci"][keep, 1],
    })
    notes = []
    if len(judges) and (judges["items"] == 0).all():
        notes.append("no item has two valid replicates: score with --replicates 2 or more to measure noise")
    for j, rb in sorted(copies):
        notes.append(f"{j} ({rb}): its replicates after the first are copies of replicate 0 (a deterministic judge, "
                     "replicate_of): its flip rate is zero by construction, not measured")
    if n_p < 2:
        notes.append("fewer than two personas: no persona-cluster interval")
    return NoiseResult(judges=judges, by_category=by_cat, seed=seed, B=B, personas=n_p, notes=notes)
