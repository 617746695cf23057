"""Judge-corrected faithfulness in the policy comparison: `memjudge compare --gold` (issue 15).

Thresholds are fitted exactly as without gold, on the judge's labels in the fit folds
(`memjudge.comparison`); nothing here changes a threshold or a judge-only figure. On each held-out
fold, each policy's faithfulness — the support rate of its retained set — is *also* estimated
by prediction-powered inference (PPI++, power-tuned λ; `memjudge.stats.ppi.ppi_mean_point`):

- the population is the fold's retained candidates (the judge-only faithfulness leaves out
  those without a valid verdict; PPI++ estimates the support rate of all of them, as
  `memjudge estimate` does, with a null judge verdict predicting 0, "not supported");
- labelled set = those of them with a gold verdict (gold Y = "supported", judge Ŷ);
- unlabelled set = the rest of them (judge Ŷ only) — ppi_py's ``Yhat_unlabeled``;
- gold is resolved as `memjudge estimate` resolves it (`memjudge.stats.estimate.resolve_gold`:
  latest row per assertion and annotator, annotators' majority, skips and ties are no gold);
  a gold file that is a labelled `memjudge sample` (``inclusion_prob``, ``stratum``,
  ``strata_by``) is weighted as `estimate` weights it (`design_weights`: gold items
  1/inclusion_prob, the inverse-probability-weighted PPI of `memjudge.stats.active` over the
  retained items, so a stratum sampled whole counts once); otherwise all weights are 1 (a
  simple random sample is assumed).

A fold whose retained set holds no gold item has no PPI figure (null; counted per policy as
``folds_without_gold``); when every retained item has gold the estimate is the gold mean
(λ = 0). A gold row whose assertion is not among the candidates is ignored and counted; gold
items with a null judge verdict are counted; a gold file that matches no candidate is an error.
So the write-all figure equals `memjudge estimate`'s overall PPI++ value on the same labels.

The retained sets are rebuilt from the thresholds stored in ``folds_detail`` (−∞ where null)
and the per-fold gates, with the fold assignment of spec §8, so the judge-only faithfulness of
each rebuilt set equals the stored one (tested).

``compare.json`` gains, only when gold is given, ``"gold"``::

    {"path": PATH|null, "n_gold": rows, "n_matched": gold rows among the candidates,
     "n_unmatched", "n_null_judge": matched gold items with no valid judge verdict,
     "notes": [str, ...],
     "weighted": bool, "judge_accuracy_on_gold": fraction|null,
     "write_all": {"judge", "ppi", "lambda", "n_gold"},          # full sample
     "policies": {POLICY: {"judge": {"value", "lo", "hi", "sd"}, "ppi": {"value", "lo", "hi", "sd"},
                           "delta_faithfulness_ppi", "n_folds", "folds_without_gold",
                           "folds_undefined", "gold_per_fold": mean gold items in the retained set}},
     "paired": {"judge": {"value", "lo", "hi", "same_sign", "nb_lo", "nb_hi"},
                "ppi": {...same keys..., "n_folds"}},
     "ordering": {"judge": bool|null, "ppi": bool|null, "survives": bool|null},
     "folds_detail": [{"repeat", "fold", "policy", "n_gold", "n_unlabelled", "ppi", "lambda"}]}

``ordering.judge`` is targeted ≥ global on the judge's fold means of faithfulness (as
`memjudge robustness` counts it); ``ordering.ppi`` is the paired PPI mean targeted − global ≥ 0
over the folds where both are defined; ``survives`` is whether they agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from memjudge._util.text import MISSING, coef, num, pct, pts
from memjudge.comparison.protocol import NEG_INF, POLICY_LABELS, delta, mean_sd, paired_summary
from memjudge.comparison.result import format_columns
from memjudge.errors import UsageError
from memjudge.formats import json_safe
from memjudge.policies.splitter import fold_assignment

# ---------------------------------------------------------------------------------------
# gold labels joined to one prepared comparison


@dataclass
class GoldJoin:
    """Gold labels aligned with a `memjudge.comparison.prepare.Prepared` sample (index = candidate)."""

    has_gold: np.ndarray     # bool
    y: np.ndarray            # float: 1.0 gold "supported", 0.0 otherwise, NaN without gold
    w_gold: np.ndarray       # design weight of a gold item (1 / inclusion_prob; 1.0 without a design)
    weighted: bool
    path: str | None
    n_gold: int              # items with a gold verdict (after resolving annotators)
    n_matched: int
    n_unmatched: int
    n_null_judge: int
    notes: list


def load_gold(gold, path=None):
    """Hand labels as `memjudge.stats.estimate.Gold` (the latest row per assertion and annotator,
    annotators' majority, skips and ties resolved exactly as `memjudge estimate` does), from a
    path, a frame of gold rows, or a `Gold`."""
    from memjudge.stats.estimate import Gold, read_gold_file, resolve_gold

    if isinstance(gold, Gold):
        return gold
    if isinstance(gold, (str, os.PathLike)):
        return read_gold_file(gold)
    if not isinstance(gold, pd.DataFrame):
        raise UsageError(f"gold must be a path or a DataFrame, got {type(gold).__name__}")
    missing = [c for c in ("assertion_id", "verdict") if c not in gold.columns]
    if missing:
        raise UsageError(f"gold labels need column(s): {', '.join(missing)}")
    df = gold.copy()
    df["assertion_id"] = df["assertion_id"].astype(str)
    return resolve_gold(df, path or "gold")


def join_gold(prep, gold, path=None, verdicts: pd.Series | None = None) -> GoldJoin:
    """Align gold labels (a path, a frame or a `Gold`; `path` names a frame's file) with the
    candidates of `prep` (a `memjudge.comparison.prepare.Prepared`). `verdicts` (the judge's raw verdict per
    assertion id) is needed only to weight a sample stratified by verdict."""
    from memjudge.errors import InputError

    path = str(Path(gold).resolve()) if isinstance(gold, (str, os.PathLike)) else path
    g = load_gold(gold, path)
    if len(g.y) == 0:
        raise InputError(path or "gold", "no gold verdict (every row is a skip, or annotators tie)")
    gy = g.y
    where = pd.Index(gy.index.astype(str)).get_indexer(prep.assertion_ids)
    has = where >= 0
    n_matched = int(has.sum())
    if n_matched == 0:
        raise InputError(path or "gold", f"none of its {len(gy)} gold assertion ids is among the {prep.n} "
                                         "candidates: is it the gold file of other candidates?")
    y = np.full(prep.n, np.nan)
    y[has] = gy.to_numpy(dtype=float)[where[has]]
    notes = []
    if g.non_verdicts:
        notes.append(f"{g.non_verdicts} gold item(s) have only non-verdicts (skip, unsure, ...): not gold")
    if g.ties:
        notes.append(f"{g.ties} gold item(s) have tied annotators: no gold verdict")
    w_gold, weighted = np.ones(prep.n), False
    if g.frame is not None and "inclusion_prob" in g.frame.columns:
        # a labelled sample of `memjudge sample`: weighted as `memjudge estimate` weights it
        from memjudge.stats.estimate import design_weights

        if verdicts is None:
            v = np.full(prep.n, None, dtype=object)
            v[prep.valid] = np.where(prep.sup, "supported", "unsupported")[prep.valid]
        else:
            v = verdicts.reindex(prep.assertion_ids).to_numpy(dtype=object)
        items = pd.DataFrame({"assertion_id": prep.assertion_ids, "category": prep.categories[prep.cat],
                              "verdict": pd.Series(v, dtype=object).where(pd.notna(v), None)})
        w_gold = design_weights(g.frame.drop_duplicates("assertion_id", keep="first"), path or "gold", items, has)
        active = str(g.frame["strata_by"].iloc[0]) == "active" if "strata_by" in g.frame.columns else False
        weighted = bool(active or np.ptp(w_gold[has]) > 1e-12)
    return GoldJoin(has_gold=has, y=y, w_gold=w_gold, weighted=weighted, path=path,
                    n_gold=len(gy), n_matched=n_matched, n_unmatched=len(gy) - n_matched,
                    n_null_judge=int((has & ~prep.valid).sum()), notes=notes)


# ---------------------------------------------------------------------------------------
# one retained set


def ppi_faithfulness(retained: np.ndarray, prep, gj: GoldJoin) -> tuple[float, float, int, int]:
    """(PPI++ support rate, λ, n gold, n unlabelled) of the retained candidates; (NaN, NaN, 0, n)
    when none of them has gold. A null judge verdict predicts 0 ("not supported")."""
    from memjudge.stats.ppi import ppi_mean_point

    lab = retained & gj.has_gold
    unl = retained & ~gj.has_gold
    n_l, n_u = int(lab.sum()), int(unl.sum())
    if n_l == 0:
        return float("nan"), float("nan"), 0, n_u
    if gj.weighted:
        # a sample design: as `memjudge estimate` weighs it over all items (stats.active: post-
        # stratified by category × verdict where each cell holds gold, else by verdict, else pooled)
        from memjudge.stats.active import cell_sums, ipw_features, ipw_from_sums

        yr, sr = np.nan_to_num(gj.y[retained]), prep.sup[retained].astype(float)
        gr, wr = gj.has_gold[retained], gj.w_gold[retained]
        S = ipw_features(yr, sr, gr, wr).sum(axis=0)
        zero = np.zeros(int(retained.sum()), np.int64)
        Cv = cell_sums(zero, sr.astype(np.int64), yr, sr, gr, wr, 1, 2)[0]
        cells = prep.cat[retained].astype(np.int64) * 2 + sr.astype(np.int64)
        Cc = cell_sums(zero, cells, yr, sr, gr, wr, 1, 2 * len(prep.categories))[0]
        t, la, _ = ipw_from_sums(S, None, Cc, Cv)
        est, lam = float(t), float(la)
    else:
        # every retained item labelled (n_u = 0): stats.ppi returns the gold-only mean with λ = 0
        est, lam = ppi_mean_point(gj.y[lab], prep.sup[lab].astype(float), prep.sup[unl].astype(float))
    if not (np.isfinite(est) and np.isfinite(lam)):
        return float("nan"), float("nan"), n_l, n_u
    return est, lam, n_l, n_u


# ---------------------------------------------------------------------------------------
# every held-out fold of a comparison


def fold_thresholds(res) -> list[tuple[int, int, str, np.ndarray, np.ndarray]]:
    """(repeat, fold, policy, per-category thresholds, held-out persona mask) per row of
    ``res.folds_detail``, from the stored thresholds (null = −∞) and per-fold gates."""
    p = res.prepared
    cats = p.categories.tolist()
    code = {c: i for i, c in enumerate(cats)}
    P = len(p.personas)
    held = {(r, k): h for r, k, h in fold_assignment(P, res.repeats, res.folds, res.seed)}
    gates = {}
    for i, (r, k, _) in enumerate(fold_assignment(P, res.repeats, res.folds, res.seed)):
        gates[(r, k)] = [code[c] for c in res.fold_gates[i]]
    out = []
    for r, k, policy, t in res.folds_detail[["repeat", "fold", "policy", "threshold"]].itertuples(index=False):
        r, k = int(r), int(k)
        thr = np.full(len(cats), NEG_INF)
        if policy == "global":
            thr[:] = NEG_INF if t is None else float(t)
        elif policy == "targeted":
            thr[gates[(r, k)]] = NEG_INF if t is None else float(t)
        elif policy == "per_category":
            for c, v in (t or {}).items():
                thr[code[c]] = NEG_INF if v is None else float(v)
        test_p = np.zeros(P, bool)
        test_p[held[(r, k)]] = True
        out.append((r, k, policy, thr, test_p))
    return out


def retained_mask(prep, thr: np.ndarray, test_personas: np.ndarray) -> np.ndarray:
    return test_personas[prep.persona] & (prep.conf >= thr[prep.cat])


@dataclass
class GoldComparison:
    """The PPI++ side of one `CompareResult` (see the module docstring)."""

    gold: GoldJoin
    folds_detail: pd.DataFrame      # repeat, fold, policy, n_gold, n_unlabelled, ppi, lambda
    write_all: dict                 # judge, ppi, lambda, n_gold
    judge_policies: dict            # policy -> {"value", "lo", "hi", "sd"} (the comparison's own judge-only figures)
    judge_paired: dict              # the comparison's paired faithfulness
    test_train_ratio: float
    judge_accuracy: float | None

    def _ppi(self, policy: str) -> np.ndarray:
        d = self.folds_detail
        return d.loc[d["policy"] == policy, "ppi"].to_numpy(dtype=float)

    def policies(self) -> dict:
        d = self.folds_detail
        out = {}
        for name, judge in self.judge_policies.items():
            sub = d[d["policy"] == name]
            ppi = mean_sd(sub["ppi"].to_numpy(dtype=float))
            out[name] = {
                "judge": judge, "ppi": ppi,
                "delta_faithfulness_ppi": delta(ppi["value"], self.write_all["ppi"]),
                "n_folds": int(np.isfinite(sub["ppi"].to_numpy(dtype=float)).sum()),
                "folds_without_gold": int((sub["n_gold"] == 0).sum()),
                "folds_undefined": int(((sub["n_gold"] > 0) & sub["ppi"].isna()).sum()),
                "gold_per_fold": float(sub["n_gold"].mean()) if len(sub) else None,
            }
        return out

    def paired(self) -> dict:
        diff = self._ppi("targeted") - self._ppi("global")
        ppi = paired_summary(diff, self.test_train_ratio)
        ppi["n_folds"] = int(np.isfinite(diff).sum())
        return {"judge": self.judge_paired, "ppi": ppi}

    def ordering(self) -> dict:
        t, g = self.judge_policies["targeted"], self.judge_policies["global"]
        judge = None if t["value"] is None or g["value"] is None else bool(t["value"] >= g["value"])
        m = self.paired()["ppi"]["value"]
        ppi = None if m is None else bool(m >= 0)
        return {"judge": judge, "ppi": ppi, "survives": None if judge is None or ppi is None else judge == ppi}

    def to_json(self) -> dict:
        g = self.gold
        detail = [{"repeat": int(r), "fold": int(k), "policy": p, "n_gold": int(ng), "n_unlabelled": int(nu),
                   "ppi": v, "lambda": lam}
                  for r, k, p, ng, nu, v, lam in self.folds_detail.itertuples(index=False, name=None)]
        return json_safe({
            "path": g.path, "n_gold": g.n_gold, "n_matched": g.n_matched, "n_unmatched": g.n_unmatched,
            "n_null_judge": g.n_null_judge, "notes": g.notes, "weighted": g.weighted,
            "judge_accuracy_on_gold": self.judge_accuracy,
            "write_all": self.write_all, "policies": self.policies(), "paired": self.paired(),
            "ordering": self.ordering(), "folds_detail": detail,
        })

    def table_columns(self) -> dict:
        """policy -> {faithfulness_ppi, faithfulness_ppi_sd} for `CompareResult.table()`."""
        out = {"write_all": {"faithfulness_ppi": self.write_all["ppi"], "faithfulness_ppi_sd": np.nan}}
        for name, s in self.policies().items():
            out[name] = {"faithfulness_ppi": s["ppi"]["value"], "faithfulness_ppi_sd": s["ppi"]["sd"]}
        pr = self.paired()["ppi"]
        out["targeted - global"] = {"faithfulness_ppi": pr["value"], "faithfulness_ppi_lo": pr["lo"],
                                    "faithfulness_ppi_hi": pr["hi"]}
        return out

    def render(self, folds_total: int) -> str:
        g = self.gold
        pols, pr, order = self.policies(), self.paired(), self.ordering()
        lines = ["", f"Judge-corrected faithfulness (PPI++ with {g.n_matched} gold labels"
                 + (", weighted by 1/inclusion_prob" if g.weighted else "") + "; thresholds fitted on the judge's "
                 "labels as above). Entries: fold mean ± SD, percent."]
        wa = self.write_all
        lam = f" (λ {coef(wa['lambda'], 2)})" if num(wa["lambda"]) is not None else ""
        rows = [[POLICY_LABELS["write_all"], pct(wa["judge"]), pct(wa["ppi"]) + lam, "", str(wa["n_gold"])]]

        def ms(s):
            return MISSING if s["value"] is None else f"{pct(s['value'])} ± {pct(s['sd'])}"

        for name, s in pols.items():
            per_fold = MISSING if s["gold_per_fold"] is None else f"{s['gold_per_fold']:.1f}"
            rows.append([POLICY_LABELS[name], ms(s["judge"]), ms(s["ppi"]), f"{s['n_folds']}/{folds_total}", per_fold])
        lines += format_columns(["Policy", "Judge only", "PPI++", "folds with PPI", "gold/fold"], rows)
        for key, label in (("judge", "judge only"), ("ppi", "PPI++")):
            s = pr[key]
            if not s or s["value"] is None:
                lines.append(f"  targeted − global, {label}: not defined")
                continue
            n = s.get("n_folds", folds_total)
            lines.append(f"  targeted − global, {label}: mean {pts(s['value'])} pts; 2.5–97.5% of folds "
                         f"[{pts(s['lo'])}, {pts(s['hi'])}]; Nadeau–Bengio 95% [{pts(s['nb_lo'])}, "
                         f"{pts(s['nb_hi'])}]; same sign in {s['same_sign']}/{n} folds")
        lines.append("  " + ordering_sentence(order, pr["ppi"]))
        missing = {n: s["folds_without_gold"] for n, s in pols.items() if s["folds_without_gold"]}
        if missing:
            lines.append("  note: folds whose retained set holds no gold item (no PPI figure): "
                         + ", ".join(f"{POLICY_LABELS[n]} {v}/{folds_total}" for n, v in missing.items()))
        if g.n_unmatched:
            lines.append(f"  note: {g.n_unmatched} gold labels name assertions that are not among the candidates (ignored)")
        if g.n_null_judge:
            lines.append(f"  note: {g.n_null_judge} gold items have no valid judge verdict (in PPI++ with the "
                         "prediction 'not supported'; not in the judge-only figures)")
        lines += [f"  note: {n}" for n in g.notes]
        return "\n".join(lines)


def ordering_sentence(order: dict, ppi_paired: dict | None = None) -> str:
    """Plain words for compare.json's ``gold.ordering`` and ``gold.paired.ppi`` (the report uses
    it too: it only reads the JSON)."""
    j, p = (order or {}).get("judge"), (order or {}).get("ppi")
    if j is None or p is None:
        return "Whether the ordering survives the correction cannot be said (a figure is undefined)."
    say = {True: "targeted ≥ global", False: "targeted < global"}
    if j == p:
        s = f"The ordering survives the correction: {say[j]} on faithfulness under the judge and under PPI++"
    else:
        s = f"The ordering does not survive the correction: the judge says {say[j]}, PPI++ says {say[p]}"
    lo, hi = (ppi_paired or {}).get("nb_lo"), (ppi_paired or {}).get("nb_hi")
    if lo is not None and hi is not None:
        span = f"{100 * lo:+.2f} to {100 * hi:+.2f} points"
        s += (f" (the PPI++ Nadeau–Bengio interval, {span}, excludes zero)" if lo > 0 or hi < 0 else
              f"; the PPI++ Nadeau–Bengio interval ({span}) includes zero, so the gold labels do not settle "
              "the ordering")
    return s + "."


def compare_with_gold(res, gold, path=None, verdicts: pd.Series | None = None) -> GoldComparison:
    """The PPI++ side of a finished `CompareResult` (see the module docstring); `gold` a path, a
    frame of gold rows or a `Gold` (then `path` names its file); `verdicts` as in `join_gold`."""
    prep = res.prepared
    gj = join_gold(prep, gold, path, verdicts)
    rows = []
    for r, k, policy, thr, test_p in fold_thresholds(res):
        v, lam, ng, nu = ppi_faithfulness(retained_mask(prep, thr, test_p), prep, gj)
        rows.append((r, k, policy, ng, nu, v, lam))
    detail = pd.DataFrame(rows, columns=["repeat", "fold", "policy", "n_gold", "n_unlabelled", "ppi", "lambda"])
    everyone = np.ones(len(prep.personas), bool)
    v, lam, ng, _ = ppi_faithfulness(retained_mask(prep, np.full(len(prep.categories), NEG_INF), everyone), prep, gj)
    write_all = {"judge": res.write_all["faithfulness"], "ppi": v, "lambda": lam, "n_gold": ng}
    both = gj.has_gold & prep.valid  # accuracy over gold items the judge answered
    acc = float((prep.sup[both].astype(float) == gj.y[both]).mean()) if both.any() else None
    pols = res.policies()
    return GoldComparison(gold=gj, folds_detail=detail, write_all=write_all,
                          judge_policies={n: pols[n]["faithfulness"] for n in pols},
                          judge_paired=res.paired()["faithfulness"], test_train_ratio=res.test_train_ratio,
                          judge_accuracy=acc)


__all__ = ["GoldComparison", "GoldJoin", "compare_with_gold", "join_gold", "load_gold", "ordering_sentence",
           "ppi_faithfulness"]
