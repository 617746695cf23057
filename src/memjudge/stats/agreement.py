"""Agreement between judges, and with gold labels (spec §7).

Labels are nominal strings (`supported`, `unsupported`, and any other such as `partial`).

- Per pair of judges, on the items both labelled: n, percent agreement, Cohen's κ, Gwet's AC1
  (chance agreement Σ_k π_k(1 − π_k)/(q − 1), π_k the mean of the two judges' marginal
  proportions; q = the number of labels the pair used on its shared items in the full sample,
  or the size of a declared `label_set` — fixed for every bootstrap resample, so a resample that
  happens to miss a rare label such as one `partial` is not scored with a smaller q), positive
  and negative agreement on `supported`
  (2a/(2a+b+c) and 2d/(2d+b+c), where everything that is not `supported` — `unsupported`,
  `partial`, ... — counts as negative), the confusion matrix.
- Across all judges: Krippendorff's α (nominal; items with one value are unpairable and
  drop out, as in Krippendorff's definition) and Fleiss' κ on the items every judge labelled.
- Against gold labels: accuracy, Cohen's κ, precision and recall of `unsupported`.

Which verdict stands for a judge that has replicates: replicate r (default 0) or the
majority — the label given by strictly more valid replicates than any other; a tie leaves
the item unlabelled by that judge (counted in `AgreementResult.ties`), because picking a
side would bias agreement.

Every coefficient is a function of additive sufficient statistics (confusion cells per pair,
the coincidence matrix for α, per-item category counts for Fleiss), so they are summed per
persona once and the persona-cluster bootstrap is `cluster_weights(...) @ per_persona`. AC1 is
the only coefficient with a label count in its formula; κ, α, Fleiss' κ and positive/negative
agreement depend on the labels only through counts (an absent label contributes zero), so a
resample missing a label leaves their definition unchanged.
A figure that cannot be computed (e.g. κ when both judges use one label) is NaN here and
null in JSON; resamples where it is undefined are left out of its interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, cast

import numpy as np
import pandas as pd

from memjudge._util.text import coef, with_interval
from memjudge.errors import UsageError
from memjudge.formats.estimate import Estimate
from memjudge.stats.bootstrap import B_DEFAULT, cluster_counts, cluster_sums, cluster_weights, interval_pairs

SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
PAIR_MEASURES = ["percent_agreement", "cohen_kappa", "gwet_ac1", "positive_agreement", "negative_agreement"]
GOLD_MEASURES = ["accuracy", "cohen_kappa", "unsupported_precision", "unsupported_recall"]


# ---------------------------------------------------------------------------------------
# pure functions: sufficient statistics → coefficients, vectorised over leading axes


def _div(num, den):
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan)


def pair_coefficients(conf: np.ndarray, positive: int | None = None, q: int | None = None) -> dict[str, np.ndarray]:
    """Coefficients of two raters from confusion counts `conf[..., a_label, b_label]`.

    Works on one (q, q) matrix or a (B, q, q) stack of bootstrap resamples. `positive` is
    the index of the label whose positive/negative agreement is wanted (None: NaN). `q` is
    AC1's number of labels; None counts the labels present in each matrix, which is right for
    the full sample but not for resamples (pass the full sample's q for those).
    """
    conf = np.asarray(conf, dtype=float)
    n = conf.sum(axis=(-2, -1))
    agree = np.trace(conf, axis1=-2, axis2=-1)
    rows, cols = conf.sum(axis=-1), conf.sum(axis=-2)
    # Cohen's κ = 1 − observed/expected disagreement, in counts so the degenerate case
    # (both raters constant on the same label) is an exact 0/0.
    expected_dis = n - _div((rows * cols).sum(axis=-1), n)
    kappa = 1.0 - _div(n - agree, expected_dis)
    pa = _div(agree, n)
    pi = _div(rows + cols, 2.0 * n[..., None])
    if q is None:
        q = ((rows + cols) > 0).sum(axis=-1)
    pe = _div((pi * (1.0 - pi)).sum(axis=-1), np.asarray(q) - 1)
    ac1 = _div(pa - pe, 1.0 - pe)
    ac1 = np.where(q >= 2, ac1, np.nan)
    out = {"n": n, "percent_agreement": pa, "cohen_kappa": kappa, "gwet_ac1": ac1}
    if positive is None:
        out["positive_agreement"] = out["negative_agreement"] = np.full(np.shape(n), np.nan)
    else:
        a = conf[..., positive, positive]
        b = rows[..., positive] - a
        c = cols[..., positive] - a
        d = n - a - b - c
        out["positive_agreement"] = _div(2 * a, 2 * a + b + c)
        out["negative_agreement"] = _div(2 * d, 2 * d + b + c)
    return out


def gold_coefficients(conf: np.ndarray, negative: int | None) -> dict[str, np.ndarray]:
    """Judge (rows) against gold (columns): accuracy, κ, precision/recall of label `negative`."""
    base = pair_coefficients(conf)
    conf = np.asarray(conf, dtype=float)
    out = {"n": base["n"], "accuracy": base["percent_agreement"], "cohen_kappa": base["cohen_kappa"]}
    if negative is None:
        out["unsupported_precision"] = out["unsupported_recall"] = np.full(np.shape(base["n"]), np.nan)
    else:
        hit = conf[..., negative, negative]
        out["unsupported_precision"] = _div(hit, conf[..., negative, :].sum(axis=-1))
        out["unsupported_recall"] = _div(hit, conf[..., :, negative].sum(axis=-1))
    return out


def unit_coincidences(counts: np.ndarray) -> np.ndarray:
    """Krippendorff's coincidence matrix of each unit from its (units, q) value counts:
    o_ck = (n_c n_k − [c = k] n_c) / (m − 1), zero for units with fewer than two values."""
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    outer = counts[:, :, None] * counts[:, None, :]
    q = counts.shape[1]
    idx = np.arange(q)
    outer[:, idx, idx] -= counts
    scale = _div(1.0, m - 1)
    scale = np.where(m >= 2, scale, 0.0)
    return outer * scale[:, None, None]


def krippendorff_alpha_nominal(coincidence: np.ndarray) -> np.ndarray:
    """α = 1 − D_o/D_e for nominal data from a (..., q, q) coincidence matrix:
    1 − (n − 1)(n − Σ o_cc) / (n² − Σ n_c²)."""
    o = np.asarray(coincidence, dtype=float)
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    observed = n - np.trace(o, axis1=-2, axis2=-1)
    expected = n * n - (n_c * n_c).sum(axis=-1)
    return 1.0 - _div((n - 1) * observed, expected)


def fleiss_kappa_from_sums(items: np.ndarray, sum_sq: np.ndarray, totals: np.ndarray, raters: int) -> np.ndarray:
    """Fleiss' κ from additive sums over complete items: number of items N, Σ_i Σ_k n_ik²,
    and per-label totals Σ_i n_ik (last axis), each item rated by `raters` raters."""
    items = np.asarray(items, dtype=float)
    m = float(raters)
    p_bar = _div(np.asarray(sum_sq, dtype=float) - items * m, items * m * (m - 1))
    p_k = _div(np.asarray(totals, dtype=float), (items * m)[..., None])
    p_e = (p_k * p_k).sum(axis=-1)
    return _div(p_bar - p_e, 1.0 - p_e)


# ---------------------------------------------------------------------------------------
# labels frame → verdict matrix


def _rater_names(labels: pd.DataFrame) -> pd.Series:
    """A judge is a rater; when several rubrics are present each (judge, rubric) is one,
    so that rubric versions of one judge can be compared."""
    if labels["rubric"].nunique() <= 1:
        return labels["judge"].astype(str)
    return labels["judge"].astype(str) + " [" + labels["rubric"].astype(str) + "]"


def majority_votes(valid: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, int]:
    """Strict majority verdict of each `keys` group of rows with a valid verdict: the label
    given by more rows than any other; a tie gives no verdict, never a coin flip. Returns the
    (keys..., verdict) rows of the groups with a majority and the number of tied groups."""
    cnt = valid.groupby(keys + ["verdict"], sort=False).size().rename("c").reset_index()
    top = cnt["c"] == cnt.groupby(keys, sort=False)["c"].transform("max")
    best = cnt[top]
    n_top = best.groupby(keys, sort=False)["verdict"].transform("size")
    ties = len(best[n_top > 1].drop_duplicates(keys))
    return best[n_top == 1][keys + ["verdict"]], ties


def standing_verdicts(labels: pd.DataFrame, replicate: int | str = 0) -> tuple[pd.DataFrame, int]:
    """One verdict per (rater, item): replicate `replicate`, or the strict majority of valid
    replicates (ties → no verdict). Returns (rater, assertion_id, persona_id, verdict) rows
    with a valid verdict, and the number of (rater, item) pairs dropped as ties."""
    df = labels[["assertion_id", "persona_id", "judge", "rubric", "replicate", "verdict"]].copy()
    df["rater"] = _rater_names(df)
    df = df[df["verdict"].notna()]
    ties = 0
    if replicate == "majority":
        chosen, ties = majority_votes(df, ["rater", "assertion_id"])
        persona = df.drop_duplicates("assertion_id").set_index("assertion_id")["persona_id"]
        chosen = chosen.assign(persona_id=persona.loc[chosen["assertion_id"]].to_numpy())
    else:
        if isinstance(replicate, bool) or not isinstance(replicate, (int, np.integer)) or replicate < 0:
            raise UsageError(f"replicate must be a non-negative integer or 'majority', got {replicate!r}")
        chosen = df[df["replicate"] == replicate][["rater", "assertion_id", "persona_id", "verdict"]]
    return chosen.reset_index(drop=True), ties


# ---------------------------------------------------------------------------------------
# result


@dataclass
class AgreementResult:
    """Agreement figures. Frames carry `<measure>_lo/_hi` interval columns; `confusion`
    maps (a, b) to a DataFrame (rows: a's label, columns: b's label)."""

    judges: list[str]
    items: int
    labels: list[str]
    pairs: pd.DataFrame
    confusion: dict[tuple[str, str], pd.DataFrame]
    overall: pd.DataFrame  # measure, units, value, lo, hi (krippendorff_alpha, fleiss_kappa)
    gold: pd.DataFrame
    replicate: int | str
    seed: int
    B: int
    personas: int
    ties: int = 0
    notes: list[str] = field(default_factory=list)
    gold_missing: int = 0  # gold rows without a verdict (None, NaN, blank), left out

    def _overall(self, measure: str) -> dict:
        row = self.overall[self.overall["measure"] == measure]
        if not len(row):
            return Estimate(None).to_dict()
        return Estimate(row["value"].iloc[0], row["lo"].iloc[0], row["hi"].iloc[0]).to_dict()

    def to_json(self) -> dict:
        """Every coefficient as an `Estimate` ``{"value", "lo", "hi"}`` (its 95% persona-cluster
        interval; null parts where it cannot be computed)."""
        from memjudge.formats import json_safe

        def est(r, m):
            return Estimate(getattr(r, m), getattr(r, f"{m}_lo"), getattr(r, f"{m}_hi")).to_dict()

        pairs = []
        r: Any  # itertuples rows: typed per column at run time only
        for r in self.pairs.itertuples(index=False):
            conf = self.confusion[(r.a, r.b)]
            pairs.append({
                "a": r.a, "b": r.b, "n": int(r.n), **{m: est(r, m) for m in PAIR_MEASURES},
                "confusion": {str(i): {str(j): int(conf.loc[i, j]) for j in conf.columns} for i in conf.index},
            })
        gold = [{"judge": g.judge, "n": int(g.n), **{m: est(g, m) for m in GOLD_MEASURES}}
                for g in cast(Any, self.gold).itertuples(index=False)]
        return json_safe({
            "judges": list(self.judges), "items": int(self.items), "pairs": pairs,
            "krippendorff_alpha": self._overall("krippendorff_alpha"),
            "fleiss_kappa": self._overall("fleiss_kappa"),
            "gold": gold,
        })

    def to_frame(self) -> pd.DataFrame:
        """The pairwise table."""
        return self.pairs.copy()

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"pairs": self.pairs.copy(), "overall": self.overall.copy(), "gold": self.gold.copy()}

    def to_text(self) -> str:
        """Readable tables: pairs, confusion matrices, all-judge coefficients, gold."""
        def cell(r, m):
            return with_interval(coef, getattr(r, m), getattr(r, f"{m}_lo"), getattr(r, f"{m}_hi"))

        rep = "majority of replicates" if self.replicate == "majority" else f"replicate {self.replicate}"
        parts = [f"Agreement ({len(self.judges)} judges, {self.items} items, {rep}; 95% persona-cluster bootstrap, "
                 f"B={self.B}, seed={self.seed}, {self.personas} personas)"]
        if len(self.pairs):
            t = pd.DataFrame({"a": self.pairs["a"], "b": self.pairs["b"], "n": self.pairs["n"]})
            names = {"percent_agreement": "agreement", "cohen_kappa": "Cohen κ", "gwet_ac1": "Gwet AC1",
                     "positive_agreement": "pos. agr.", "negative_agreement": "neg. agr."}
            for m, label in names.items():
                t[label] = [cell(r, m) for r in self.pairs.itertuples()]
            parts += ["", t.to_string(index=False)]
            for (a, b), conf in self.confusion.items():
                parts += ["", f"Confusion: rows {a}, columns {b}", conf.to_string()]
        if len(self.overall):
            o = pd.DataFrame({"measure": self.overall["measure"].map(
                {"krippendorff_alpha": "Krippendorff α (nominal)", "fleiss_kappa": "Fleiss κ (complete items)"}),
                "units": self.overall["units"],
                "value": [with_interval(coef, r.value, r.lo, r.hi) for r in self.overall.itertuples()]})
            parts += ["", o.to_string(index=False)]
        if len(self.gold):
            g = pd.DataFrame({"judge": self.gold["judge"], "n": self.gold["n"]})
            for m, label in {"accuracy": "accuracy", "cohen_kappa": "Cohen κ", "unsupported_precision": "unsupp. precision",
                             "unsupported_recall": "unsupp. recall"}.items():
                g[label] = [cell(r, m) for r in self.gold.itertuples()]
            parts += ["", "Against gold labels", "", g.to_string(index=False)]
        parts += [f"note: {n}" for n in self.notes]
        return "\n".join(parts)


# ---------------------------------------------------------------------------------------
# API


def _with_ci(point: dict, reps: dict | None, measures) -> dict:
    row = {}
    for m in measures:
        row[m] = float(point[m])
        lo_hi = interval_pairs(reps[m]) if reps is not None else (np.nan, np.nan)
        row[f"{m}_lo"], row[f"{m}_hi"] = float(lo_hi[0]), float(lo_hi[1])
    return row


def agreement(labels: pd.DataFrame, gold: pd.DataFrame | None = None, replicate: int | str = 0,
              seed: int = 0, B: int = B_DEFAULT, label_set=None) -> AgreementResult:
    """Agreement figures for a labels frame (memjudge.formats.read_labels) and optional gold frame
    (memjudge.formats.read_gold). Personas are sorted as strings and resampled with one weight
    matrix for every figure, so intervals are reproducible for a given `seed` and paired.
    With fewer than two personas intervals are null. `label_set`: the labels a judge could
    give (e.g. ["supported", "unsupported", "partial"]); AC1's q is then its size for every
    pair, and a verdict outside it is an error. Without it, q is the number of labels a pair
    used on its shared items."""
    need = {"assertion_id", "persona_id", "judge", "rubric", "replicate", "verdict"}
    missing = need - set(labels.columns)
    if missing:
        raise UsageError(f"labels lack column(s): {', '.join(sorted(missing))}")
    if B < 1:
        raise UsageError(f"B must be at least 1, got {B}")
    raters = sorted(_rater_names(labels).unique())
    if len(raters) < 2 and gold is None:
        raise UsageError(f"agreement needs at least two judges or --gold (found {len(raters)}: {', '.join(raters)})")
    chosen, ties = standing_verdicts(labels, replicate)

    gold_map, gold_missing = None, 0
    if gold is not None:
        gold_map, gold_missing = _gold_verdicts(gold)
    seen = set(chosen["verdict"]) | (set(gold_map) if gold_map is not None else set())
    declared = label_set is not None
    if declared:
        label_names = _declared_labels(label_set)
        unknown = sorted(seen - set(label_names))
        if unknown:
            raise UsageError(f"verdict {unknown[0]!r} is not in the declared label set ({', '.join(label_names)})")
    else:
        label_names = sorted(seen)
    q = max(len(label_names), 1)
    code = {lab: i for i, lab in enumerate(label_names)}

    item_code, item_ids = pd.factorize(chosen["assertion_id"])
    n_items = len(item_ids)
    rater_code = pd.Index(raters).get_indexer(chosen["rater"])
    X = np.full((n_items, len(raters)), -1, dtype=np.int64)
    X[item_code, rater_code] = chosen["verdict"].map(code).to_numpy(dtype=np.int64)
    persona_of_item = chosen.drop_duplicates("assertion_id").set_index("assertion_id").loc[item_ids, "persona_id"].astype(str).to_numpy()
    # Personas: every persona in the labels, so one seed draws the same resamples whatever the replicate.
    personas = np.array(sorted(labels["persona_id"].astype(str).unique()), dtype=object)
    n_p = len(personas)
    pers = np.searchsorted(personas, persona_of_item).astype(np.int64)
    W = cluster_weights(n_p, B, seed) if n_p >= 2 else None
    pos = code.get(SUPPORTED)
    neg = code.get(UNSUPPORTED)

    # --- pairs -------------------------------------------------------------------------
    pair_rows, confusion = [], {}
    for ia, ib in combinations(range(len(raters)), 2):
        both = (X[:, ia] >= 0) & (X[:, ib] >= 0)
        cells = cluster_counts(pers[both], X[both, ia] * q + X[both, ib], n_p, q * q)
        full = cells.sum(axis=0).reshape(q, q)
        # AC1's q from the full sample (or the declared label set), the same in every resample
        q_ac1 = q if declared else int(((full.sum(axis=0) + full.sum(axis=1)) > 0).sum())
        point = pair_coefficients(full, pos, q_ac1)
        reps = pair_coefficients((W @ cells).reshape(-1, q, q), pos, q_ac1) if W is not None else None
        row = {"a": raters[ia], "b": raters[ib], "n": int(point["n"])}
        row.update(_with_ci(point, reps, PAIR_MEASURES))
        pair_rows.append(row)
        conf = cells.sum(axis=0).reshape(q, q).astype(np.int64)
        present = (conf.sum(axis=0) + conf.sum(axis=1)) > 0
        names = [label_names[i] for i in np.flatnonzero(present)]
        confusion[(raters[ia], raters[ib])] = pd.DataFrame(conf[np.ix_(present, present)], index=names, columns=names)
    pair_cols = ["a", "b", "n"] + [c for m in PAIR_MEASURES for c in (m, f"{m}_lo", f"{m}_hi")]
    pairs = pd.DataFrame(pair_rows, columns=pair_cols)

    # --- across all judges ---------------------------------------------------------------
    onehot = np.zeros((n_items, q))
    for r in range(len(raters)):
        ok = X[:, r] >= 0
        onehot[np.flatnonzero(ok), X[ok, r]] += 1
    overall_rows = []
    if len(raters) >= 2:
        coinc = cluster_sums(pers, unit_coincidences(onehot).reshape(n_items, q * q), n_p)
        alpha = krippendorff_alpha_nominal(coinc.sum(axis=0).reshape(q, q))
        alpha_reps = krippendorff_alpha_nominal((W @ coinc).reshape(-1, q, q)) if W is not None else None
        units = int(((onehot.sum(axis=1)) >= 2).sum())
        overall_rows.append(_overall_row("krippendorff_alpha", units, alpha, alpha_reps))

        complete = (X >= 0).all(axis=1)
        m = len(raters)
        stats = np.column_stack([np.ones(complete.sum()), (onehot[complete] ** 2).sum(axis=1), onehot[complete]])
        fsum = cluster_sums(pers[complete], stats, n_p)
        fleiss = fleiss_kappa_from_sums(*_fleiss_args(fsum.sum(axis=0)), m)
        fleiss_reps = fleiss_kappa_from_sums(*_fleiss_args(W @ fsum), m) if W is not None else None
        overall_rows.append(_overall_row("fleiss_kappa", int(complete.sum()), fleiss, fleiss_reps))
    overall = pd.DataFrame(overall_rows, columns=["measure", "units", "value", "lo", "hi"])

    # --- against gold --------------------------------------------------------------------
    gold_rows = []
    if gold_map is not None:
        g = gold_map.reindex(item_ids).map(code).to_numpy(dtype=float)
        g = np.where(np.isnan(g), -1, g).astype(np.int64)
        for r, name in enumerate(raters):
            both = (X[:, r] >= 0) & (g >= 0)
            cells = cluster_counts(pers[both], X[both, r] * q + g[both], n_p, q * q)
            point = gold_coefficients(cells.sum(axis=0).reshape(q, q), neg)
            reps = gold_coefficients((W @ cells).reshape(-1, q, q), neg) if W is not None else None
            row = {"judge": name, "n": int(point["n"])}
            row.update(_with_ci(point, reps, GOLD_MEASURES))
            gold_rows.append(row)
    gold_cols = ["judge", "n"] + [c for m in GOLD_MEASURES for c in (m, f"{m}_lo", f"{m}_hi")]
    gold_frame = pd.DataFrame(gold_rows, columns=gold_cols)

    notes = []
    if ties:
        notes.append(f"{ties} (judge, item) majority ties left unlabelled")
    if n_p < 2:
        notes.append("fewer than two personas: no persona-cluster interval")
    if gold_missing:
        notes.append(f"{gold_missing} gold rows without a verdict excluded")
    if gold_map is not None and not gold_frame["n"].any():
        notes.append("no gold label matches a labelled assertion_id")
    return AgreementResult(
        judges=raters, items=n_items, labels=label_names, pairs=pairs, confusion=confusion,
        overall=overall, gold=gold_frame, replicate=replicate, seed=seed, B=B, personas=n_p,
        ties=ties, notes=notes, gold_missing=gold_missing,
    )


def _gold_verdicts(gold: pd.DataFrame) -> tuple[pd.Series, int]:
    """verdict per assertion_id (first row per assertion) from the gold rows that have one, and
    the number of rows without (None, NaN or blank: not a label, so excluded and counted)."""
    missing_cols = [c for c in ("assertion_id", "verdict") if c not in gold.columns]
    if missing_cols:
        raise UsageError(f"gold labels lack column(s): {', '.join(missing_cols)}")
    v = gold["verdict"]
    missing = (v.isna() | v.map(lambda x: isinstance(x, str) and not x.strip())).to_numpy(dtype=bool)
    kept = gold[~missing]
    verdicts = kept.drop_duplicates("assertion_id").set_index("assertion_id")["verdict"]
    return verdicts.map(str).astype(object), int(missing.sum())


def _declared_labels(label_set) -> list[str]:
    names = [x.strip() for x in label_set.split(",")] if isinstance(label_set, str) else [str(x) for x in label_set]
    names = [x for x in names if x]
    if len(names) < 2 or len(set(names)) != len(names):
        raise UsageError(f"a label set needs at least two distinct labels, got {', '.join(names) or 'none'}")
    return names


def _fleiss_args(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return sums[..., 0], sums[..., 1], sums[..., 2:]


def _overall_row(measure: str, units: int, point, reps) -> dict:
    lo_hi = interval_pairs(reps) if reps is not None else (np.nan, np.nan)
    return {"measure": measure, "units": units, "value": float(point), "lo": float(lo_hi[0]), "hi": float(lo_hi[1])}
