"""`memjudge estimate`: support rates three ways — judge only, gold only, PPI++ — from a judge's
labels and a small gold set (spec §10).

Contract:
- Items are the assertions in the labels (one judge, one replicate choice). Support = the
  verdict "supported"; any other verdict is "not supported". The judge-only rate is supported /
  valid verdicts (what every other memjudge figure reports). Gold-only and PPI++ estimate the
  support rate of *all* items.
- Labelled set = the gold items (gold Y, judge Ŷ); unlabelled set = the judge's verdicts on the
  items without gold (ppi_py's convention). A gold item whose judge verdict is null keeps its
  gold label: PPI uses the prediction Ŷ = 0 for a null verdict (PPI is unbiased for any fixed
  predictor, so this costs width, never validity); the judge-only column leaves nulls out.
- Gold file (`assertion_id, verdict`, optional `annotator, note, labelled_at`, and the
  sample's `inclusion_prob, stratum, strata_by` when the gold file is the labelled sample):
  the latest row per (assertion, annotator) counts (by `labelled_at`, then file order); two
  rows of one annotator at the same time with different verdicts are an error. A row whose
  verdict is one of ``NON_VERDICTS`` ("skip", "unsure", ...) gives no verdict. Several
  annotators: the strict majority of their support values (supported vs not); a tie is no
  gold verdict. Gold rows whose id is not in the labels are counted and left out (they belong
  to no item); if none matches, it is an error.
- Weights: with a sample (``--sample``, or the gold file itself when it has
  ``inclusion_prob``) whose probabilities differ (stratified, active), the estimator is the
  inverse-probability-weighted PPI of ``stats/active.py``: the judge's mean over *every* item
  plus the gold items' rectifier weighted by 1/inclusion_prob (Hájek), so a stratum or item
  sampled whole (π = 1) is counted once. For strata, each gold item's stratum is recomputed from
  ``strata_by`` with this judge's verdicts and must agree with the sample's; an active sample
  (``strata_by`` "active") has per-item probabilities and no strata. Without a sample, or with
  equal probabilities, all weights are 1 (a simple random sample: ppi_py's PPI++).
- Every rate lies in [0, 1] and inside its own interval; ``effective_gold_n`` is never above
  the number of items (weighted: the uniform gold sample size with the same variance).
- A group (category) with no gold item has null gold-only and PPI figures and a note.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from memjudge._util.text import MISSING, coef
from memjudge._util.text import estimate as estimate_text
from memjudge._util.text import num as finite
from memjudge.errors import InputError, UsageError
from memjudge.formats import LINE  # the readers' private line-number column
from memjudge.formats.estimate import Estimate

NON_VERDICTS = frozenset({"skip", "skipped", "unsure", "unknown", "n/a", "na", "?", "cannot tell", "cannot_tell"})
SUPPORTED = "supported"


# ---------------------------------------------------------------------------------------
# gold

@dataclass
class Gold:
    """One gold support value per assertion, and what resolving the rows found."""

    y: pd.Series                   # assertion_id → 1.0 / 0.0
    rows: int = 0
    non_verdicts: int = 0          # items whose latest rows are all skips
    ties: int = 0                  # items where annotators tie
    annotators: int = 1
    frame: pd.DataFrame | None = None  # the rows as read (with _line), for the sample columns


def resolve_gold(df: pd.DataFrame, path) -> Gold:
    """Latest row per (assertion, annotator), then the annotators' strict majority (see module doc)."""
    df = df.copy()
    if LINE not in df.columns:
        df[LINE] = np.arange(1, len(df) + 1)
    df["annotator"] = df["annotator"].where(df["annotator"].notna(), "").astype(str) if "annotator" in df.columns else ""
    df["_order"] = np.arange(len(df))
    if "labelled_at" in df.columns and df["labelled_at"].notna().any():
        t = pd.to_datetime(df["labelled_at"], errors="coerce", utc=True, format="mixed")
        bad = df["labelled_at"].notna() & t.isna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(path, f"'labelled_at' is not a date/time: {df['labelled_at'].iloc[i]!r}", int(df[LINE].iloc[i]))
        df["_t"] = t
    else:
        df["_t"] = pd.NaT
    df["_v"] = df["verdict"].astype(str).str.strip()
    # Same annotator, same item, same time (or both undated), different verdicts: which one
    # stands cannot be decided.
    key = ["assertion_id", "annotator", "_t"]
    nv = df.groupby(key, dropna=False, sort=False)["_v"].transform("nunique")
    if (nv > 1).any():
        i = int(np.flatnonzero((nv > 1).to_numpy())[0])
        r = df.iloc[i]
        who = f" by annotator {r['annotator']!r}" if r["annotator"] else ""
        raise InputError(path, f"conflicting gold verdicts for {r['assertion_id']!r}{who} at the same time "
                               f"(give 'labelled_at' or remove one)", int(r[LINE]))
    df = df.sort_values(["_t", "_order"], na_position="first", kind="stable")
    latest = df.drop_duplicates(["assertion_id", "annotator"], keep="last")
    is_verdict = ~latest["_v"].str.lower().isin(NON_VERDICTS)
    votes = latest[is_verdict].assign(_s=(latest.loc[is_verdict, "_v"] == SUPPORTED).astype(float))
    all_items = latest["assertion_id"].unique()
    g = votes.groupby("assertion_id", sort=False)["_s"].agg(["sum", "count"])
    pos, neg = g["sum"], g["count"] - g["sum"]
    decided = pos != neg
    y = (pos[decided] > neg[decided]).astype(float)
    return Gold(y=y, rows=len(df), non_verdicts=int(len(set(all_items) - set(g.index))),
                ties=int((~decided).sum()), annotators=int(latest["annotator"].nunique()),
                frame=df.sort_values("_order"))


def read_gold_file(path) -> Gold:
    from memjudge.formats import read_gold

    return resolve_gold(read_gold(path, keep_line=True, unique=False), path)


# ---------------------------------------------------------------------------------------
# sample design (inclusion probabilities)

def _stratum_keys(by: str | list[str], category: pd.Series, verdict: pd.Series) -> pd.Series:
    from memjudge.stats.sampling import stratum_key

    return stratum_key(by, category, verdict)


ACTIVE = "active"  # strata_by of a sample with per-item probabilities (memjudge sample --strategy active)


def design_weights(sample: pd.DataFrame, sample_path, items: pd.DataFrame, gold_mask: np.ndarray) -> np.ndarray:
    """w_gold = 1/inclusion_prob per item (1 where no gold) from a sample (module doc)."""
    from memjudge.stats.sampling import check_sample

    sample = check_sample(sample, sample_path)
    known = set(items["assertion_id"])
    for aid, line in zip(sample["assertion_id"], sample[LINE]):
        if aid not in known:
            raise InputError(sample_path, f"assertion {aid!r} is not among the labelled items: was the sample "
                                          f"drawn from other candidates?", int(line))
    by = sample["strata_by"].iloc[0]
    rec = sample.set_index("assertion_id")
    if by != ACTIVE:
        keys = _stratum_keys(by, items["category"], items["verdict"])
        item_key = pd.Series(keys.to_numpy(), index=items["assertion_id"].to_numpy())
        mism = item_key.loc[rec.index].to_numpy() != rec["stratum"].astype(str).to_numpy()
        if mism.any():
            i = int(np.flatnonzero(mism)[0])
            raise InputError(sample_path, f"assertion {rec.index[i]!r} is in stratum {rec['stratum'].iloc[i]!r} in the "
                                          f"sample but {item_key.loc[rec.index[i]]!r} under these labels: estimate with "
                                          f"the judge and replicate the sample was drawn from", int(rec[LINE].iloc[i]))
    pi_item = pd.Series(rec["inclusion_prob"].to_numpy(float), index=rec.index)
    ids = items["assertion_id"]
    missing_gold = gold_mask & ~ids.isin(pi_item.index).to_numpy()
    if missing_gold.any():
        aid = ids[missing_gold].iloc[0]
        raise InputError(sample_path, f"gold item {aid!r} is not in the sample: weighting needs every gold item's "
                                      f"inclusion probability")
    w_gold = np.ones(len(items))
    w_gold[gold_mask] = 1.0 / pi_item.loc[ids[gold_mask]].to_numpy()
    return w_gold


def strata_without_gold(sample: pd.DataFrame, items: pd.DataFrame, gold_mask: np.ndarray) -> list[str]:
    """Strata of the sample's design that hold items but no gold item (skipped or unlabelled
    rows): gold only cannot represent them, PPI++ only through the judge's verdicts."""
    by = str(sample["strata_by"].iloc[0]) if len(sample) else ""
    if by == ACTIVE:
        return []
    keys = _stratum_keys(by, items["category"], items["verdict"])
    with_gold = set(keys[gold_mask])
    return sorted(set(keys) - with_gold)


# ---------------------------------------------------------------------------------------
# result

def _ci(value, lo, hi) -> dict:
    return Estimate(value, lo, hi).to_dict()


@dataclass
class EstimateResult:
    """Support rates three ways. ``groups`` are the JSON rows, one per group: ``{"group",
    "n_items", "n_gold", "judge_accuracy_on_gold", "judge_only", "gold_only", "ppi",
    "ppi_lambda", "effective_gold_n"}`` with each of the three rates an `Estimate`
    ``{"value", "lo", "hi"}``; ``frame`` is the same as a table."""

    judge: str
    replicate: int | str
    interval: str
    n_items: int
    n_gold: int
    groups: list[dict]
    counts: dict
    weighted: bool
    B: int
    seed: int
    level: float = 0.95
    plan: dict | None = None
    notes: list[str] = field(default_factory=list)
    estimator: str = "ppi++"

    def to_dict(self) -> dict:
        return {"judge": self.judge, "replicate": self.replicate, "n_items": self.n_items, "n_gold": self.n_gold,
                "interval": self.interval, "level": self.level, "B": self.B if self.interval == "bootstrap" else None,
                "seed": self.seed, "weighted": self.weighted, "estimator": self.estimator, "gold": self.counts, "groups": self.groups,
                "plan": self.plan, "notes": list(self.notes)}

    to_json = to_dict

    @property
    def frame(self) -> pd.DataFrame:
        rows = []
        for g in self.groups:
            r = {"group": g["group"], "n_items": g["n_items"], "n_gold": g["n_gold"],
                 "judge_accuracy_on_gold": g["judge_accuracy_on_gold"]}
            for k in ("judge_only", "gold_only", "ppi"):
                for part in ("value", "lo", "hi"):
                    r[f"{k}_{part}" if part != "value" else k] = g[k][part]
            r["lambda"] = g["ppi_lambda"]
            r["effective_gold_n"] = g["effective_gold_n"]
            rows.append(r)
        return pd.DataFrame(rows)

    def render(self) -> str:
        def cell(d):
            return estimate_text(Estimate.from_dict(d), coef)

        def num(x, digits):
            return MISSING if x is None else coef(x, digits)

        iv = "persona-cluster bootstrap" if self.interval == "bootstrap" else "iid CLT"
        head = (f"Support rate, judge {self.judge} ({'majority of replicates' if self.replicate == 'majority' else f'replicate {self.replicate}'}); "
                f"{self.n_gold} gold of {self.n_items} items; {int(self.level * 100)}% intervals: {iv}"
                + ("; inverse-probability-weighted PPI (gold weighted by 1/inclusion_prob, the judge's mean "
                   "over every item); eff. gold n = uniform labels for the same variance" if self.weighted else ""))
        t = pd.DataFrame([{"group": g["group"], "items": g["n_items"], "gold": g["n_gold"],
                           "judge acc.": num(g["judge_accuracy_on_gold"], 3),
                           "judge only": cell(g["judge_only"]), "gold only": cell(g["gold_only"]),
                           "PPI++": cell(g["ppi"]), "λ": num(g["ppi_lambda"], 2),
                           "eff. gold n": num(g["effective_gold_n"], 0)} for g in self.groups])
        parts = [head, "", t.to_string(index=False)]
        if self.plan:
            p = self.plan
            if p.get("reachable"):
                parts += ["", f"Plan: half-width {p['half_width']:g} needs {p['n_gold_needed']} gold items "
                              f"({p['n_more']} more; predicted half-width {p['predicted_half_width']:.4f})"]
            else:
                parts += ["", f"Plan: half-width {p['half_width']:g}: {p.get('note')}"]
        parts += [f"note: {n}" for n in self.notes]
        return "\n".join(parts)


# ---------------------------------------------------------------------------------------
# the estimate

def _active_predictor(lab, judge, replicate, sample, items, y, sup, valid, gold_mask, w_gold):
    """The judge's calibrated P(supported) per item for an active sample: its confidence (the
    sample's ``signal``) through P(wrong | verdict, |score|) fitted on the gold, weighted 1/π
    (stats.active.error_model), as the sample was drawn. (None, note) when it cannot be made."""
    from memjudge.stats.active import error_model, predictor
    from memjudge.stats.verdicts import confidence_signal

    signal = str(sample["signal"].iloc[0]) if "signal" in sample.columns and sample["signal"].notna().any() else None
    try:
        s, signal = confidence_signal(lab, judge, replicate, signal)
    except UsageError:
        return None, "the judge has no confidence signal here: the PPI prediction is its verdict"
    score = s.reindex(items["assertion_id"]).to_numpy(float)
    fit = gold_mask & valid & np.isfinite(score)
    if fit.sum() < 2:
        return None, "fewer than 2 gold items with a judge score: the PPI prediction is the judge's verdict"
    coef = error_model(score[fit], sup[fit], (y[fit] != sup[fit]).astype(float), w_gold[fit])
    return predictor(coef, score, sup, valid), None


def _labels_frame(labels):
    from memjudge.formats import read_labels

    if isinstance(labels, (str, os.PathLike)) or (isinstance(labels, (list, tuple)) and labels
                                                  and all(isinstance(p, (str, os.PathLike)) for p in labels)):
        return read_labels(labels)
    return labels


def estimate(labels, gold, *, judge: str | None = None, replicate: int | str = 0, by: str | None = None,
             interval: str = "bootstrap", sample=None, B: int = 2000, seed: int = 0, level: float = 0.95,
             half_width: float | None = None, gold_path=None, sample_path=None) -> EstimateResult:
    """Judge-only, gold-only and PPI++ support rates, overall and per ``by`` group (``"category"``).

    ``labels``: a labels frame (memjudge.formats.read_labels) or path(s); ``gold``: a path, a frame
    of gold rows, or a ``Gold``; ``sample``: a sample file or frame (memjudge sample) whose
    inclusion probabilities weight the estimators (default: the gold file's own, if it has
    them). ``half_width``: also plan how many gold items reach that PPI++ half-width.
    """
    from memjudge.stats.active import ipw_three_estimates
    from memjudge.stats.bootstrap import cluster_weights
    from memjudge.stats.ppi import labelled_features, planned_gold_n, three_estimates, unlabelled_features
    from memjudge.stats.verdicts import select_verdicts

    if interval not in ("bootstrap", "clt"):
        raise UsageError(f"interval must be 'bootstrap' or 'clt', got {interval!r}")
    if by not in (None, "category"):
        raise UsageError(f"--by must be 'category', got {by!r}")
    if B < 1:
        raise UsageError(f"B must be at least 1, got {B}")
    if half_width is not None and not (0 < half_width < 1):
        raise UsageError(f"--half-width must be in (0, 1), got {half_width}")
    lab = _labels_frame(labels)
    verdicts, judge = select_verdicts(lab, judge, replicate)
    meta = lab.drop_duplicates("assertion_id").set_index("assertion_id")
    ids = pd.Index(verdicts.index.astype(str))
    items = pd.DataFrame({"assertion_id": ids, "persona_id": meta.loc[ids, "persona_id"].astype(str).to_numpy(),
                          "category": meta.loc[ids, "category"].astype(str).to_numpy(),
                          "verdict": verdicts.to_numpy()})

    if isinstance(gold, Gold):
        g = gold
    elif isinstance(gold, pd.DataFrame):
        g = resolve_gold(gold, gold_path or "gold")
    else:
        gold_path = gold_path or gold
        g = read_gold_file(gold)
    gold_path = gold_path or "gold"
    notes: list[str] = []
    matched = g.y.index.isin(ids)
    n_unmatched = int((~matched).sum())
    if len(g.y) and not matched.any():
        raise InputError(gold_path, f"none of its {len(g.y)} gold assertion ids is among the {len(ids)} labelled items "
                                    f"(judge {judge}): is it the gold file of other candidates?")
    if len(g.y) == 0:
        raise InputError(gold_path, "no gold verdict (every row is a skip, or annotators tie)")
    if n_unmatched:
        notes.append(f"{n_unmatched} gold item(s) match no labelled item and are left out "
                     f"(e.g. {g.y.index[~matched][0]!r})")
    gy = g.y[matched]
    gold_mask = items["assertion_id"].isin(gy.index).to_numpy()
    y = np.zeros(len(items))
    y[gold_mask] = gy.loc[items.loc[gold_mask, "assertion_id"]].to_numpy()
    valid = items["verdict"].notna().to_numpy()
    sup = (items["verdict"] == SUPPORTED).to_numpy() & valid
    yhat = sup.astype(float)  # a null verdict predicts 0 (module doc)
    null_gold = int((gold_mask & ~valid).sum())
    if null_gold:
        notes.append(f"{null_gold} gold item(s) have no valid judge verdict: they count in gold-only and in PPI++ "
                     f"(predicted 'not supported'), not in the judge's accuracy")
    if g.non_verdicts:
        notes.append(f"{g.non_verdicts} gold item(s) have only non-verdicts (skip, unsure, ...): not gold")
    if g.ties:
        notes.append(f"{g.ties} gold item(s) have tied annotators: no gold verdict")

    # Weights from the sample design.
    w_gold = None
    design = "none"
    if sample is None and g.frame is not None and "inclusion_prob" in g.frame.columns:
        sample, sample_path = g.frame.drop_duplicates("assertion_id", keep="first"), gold_path
    if sample is not None:
        from memjudge.stats.sampling import read_sample

        if isinstance(sample, (str, os.PathLike)):
            sample_path = sample
            sample = read_sample(sample)
        w_gold = design_weights(sample, sample_path or "sample", items, gold_mask)
        design = ACTIVE if str(sample["strata_by"].iloc[0]) == ACTIVE else "strata"
        empty = strata_without_gold(sample.assign(strata_by=sample["strata_by"].where(sample["strata_by"].notna(), "")),
                                    items, gold_mask)
        if empty:
            notes.append(f"{len(empty)} stratum/strata of the sample have no gold item ({', '.join(empty[:5])}"
                         f"{', ...' if len(empty) > 5 else ''}): gold only does not represent their items and "
                         f"PPI++ sees them only through the judge; label some of them")
    # Unequal weights (or an active design) take the inverse-probability-weighted estimator
    # (stats/active.py): the judge's mean over every item, the gold items weighted by 1/π; equal
    # weights are a simple random sample, where PPI++ is ppi_py's own.
    weighted = w_gold is not None and (design == ACTIVE or np.ptp(w_gold[gold_mask]) > 1e-12)
    # Post-strata of the weighted estimate: category × the judge's verdict overall (the verdict
    # inside a category); an active sample also predicts with the judge's calibrated confidence.
    cells = (pd.Series(items["category"]).astype("category").cat.codes.to_numpy().astype(np.int64) * 2
             + yhat.astype(np.int64))
    f = None
    predictor_note = None
    if weighted and design == ACTIVE:
        f, predictor_note = _active_predictor(lab, judge, replicate, sample, items, y, sup, valid, gold_mask, w_gold)
        if predictor_note:
            notes.append(predictor_note)

    personas = np.array(sorted(items["persona_id"].unique()), dtype=object)
    pcode = np.searchsorted(personas, items["persona_id"].to_numpy(dtype=object)).astype(np.int64)
    W = cluster_weights(len(personas), B, seed) if interval == "bootstrap" and len(personas) >= 2 else None
    if interval == "bootstrap" and W is None:
        notes.append("one persona only: no bootstrap interval")

    groups_def = [("all", np.ones(len(items), bool))]
    if by == "category":
        for c in sorted(items["category"].unique()):
            groups_def.append((c, (items["category"] == c).to_numpy()))
    groups, plan = [], None
    for name, m in groups_def:
        if weighted:
            assert w_gold is not None
            r = ipw_three_estimates(pcode[m], y[m], yhat[m], gold_mask[m], valid[m], sup[m], w_gold[m],
                                    n_personas=len(personas), interval=interval, W=W, B=B, seed=seed, level=level,
                                    cells=cells[m] if name == "all" else None, f=None if f is None else f[m])
            gm_ = gold_mask[m]
            r["sums"] = (labelled_features(y[m][gm_], yhat[m][gm_], w_gold[m][gm_]).sum(axis=0),
                         unlabelled_features(yhat[m][~gm_]).sum(axis=0))
        else:
            r = three_estimates(pcode[m], y[m], yhat[m], gold_mask[m], valid[m], sup[m],
                                n_personas=len(personas), interval=interval, W=W, B=B, seed=seed, level=level)
        gm = gold_mask[m] & valid[m]
        acc = float((sup[m][gm] == (y[m][gm] == 1)).mean()) if gm.any() else None
        row = {"group": name, "n_items": int(m.sum()), "n_gold": r["n_gold"], "judge_accuracy_on_gold": acc,
               "judge_only": _ci(r["judge_value"], r["judge_lo"], r["judge_hi"]),
               "gold_only": _ci(r["gold_value"], r["gold_lo"], r["gold_hi"]),
               "ppi": _ci(r["ppi_value"], r["ppi_lo"], r["ppi_hi"]),
               "ppi_lambda": finite(r["ppi_lambda"]),
               "effective_gold_n": None if not np.isfinite(r["effective_gold_n"]) else float(r["effective_gold_n"])}
        if r["n_gold"] == 0:
            notes.append(f"group {name!r} has no gold item: gold-only and PPI++ are undefined there (null); "
                         f"label some of its items")
        elif r["n_gold"] >= 1 and np.ptp(y[m][gold_mask[m]]) == 0:
            notes.append(f"group {name!r}: all {r['n_gold']} gold verdicts agree, so the gold-only interval has no "
                         f"width there; too few gold items to see the variation")
        groups.append(row)
        if name == "all" and half_width is not None:
            L, U = r["sums"]
            # The pilot's variance: the larger of the replicates' and the one the reported
            # interval implies (the small-count floor widens it), so the plan matches what is shown.
            from scipy.stats import norm

            shown = ((r["ppi_hi"] - r["ppi_lo"]) / (2 * norm.ppf(1 - (1 - level) / 2))) ** 2
            plan = planned_gold_n(L, U, half_width, float(np.nanmax([r["ppi_var"], shown])), level)
    counts = {"rows": g.rows, "items": int(len(g.y)), "matched": int(gold_mask.sum()), "unmatched": n_unmatched,
              "null_judge_verdict": null_gold, "non_verdicts": g.non_verdicts, "ties": g.ties,
              "annotators": g.annotators}
    return EstimateResult(judge=judge, replicate=replicate, interval=interval, n_items=len(items),
                          n_gold=int(gold_mask.sum()), groups=groups, counts=counts, weighted=bool(weighted),
                          B=B, seed=seed, level=level, plan=plan, notes=notes,
                          estimator="ipw" if weighted else "ppi++")
