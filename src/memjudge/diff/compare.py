"""`diff_labels`: did NEW get better than BASE? A pure function of two labels frames (spec §12).

Contract:
- Items are one judge's verdicts (one replicate, or the replicates' majority) on the support
  rubric, chosen as `memjudge estimate` chooses them (`memjudge.stats.verdicts`). A valid verdict
  is a non-null one; support = "supported". Items without a valid verdict are counted, never
  rated.
- Mode ``"auto"``: ``"items"`` when both runs label the same assertion ids (a new rubric, judge
  or temperature over one candidate set), else ``"personas"`` (two extractors over the same
  sources).
- personas: each run's support rate over the personas common to both (personas in one run only
  are listed and left out of every paired figure), and NEW − BASE with a persona-cluster
  bootstrap interval, the common personas resampled jointly (`memjudge.diff.paired`; the
  expanded percentile interval, `memjudge.stats.bootstrap.interval`).
- items: the item-paired difference over the items both runs judged validly (resampled by
  persona too), McNemar's exact test of the discordant pairs, and the items whose verdict
  changed.
- The judge: ``judge`` if named (both runs must hold it); else the one judge the runs share;
  else, when each run holds exactly one judge (a new judge over the same items), those two.
  Every other judge the runs share gets its own overall difference, and the result says
  whether all of them agree on its sign.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from memjudge.diff.paired import PairedDraws, mcnemar_exact, paired_draws, paired_ppi
from memjudge.diff.result import Changed, Counts, DiffResult, Figure, GoldDiff, JudgeDiff, McNemar, Triple
from memjudge.errors import InputError, UsageError

__all__ = ["MODES", "diff_labels"]

MODES = ("auto", "personas", "items")
SUPPORTED = "supported"
ALL = "all"


def _items(labels: pd.DataFrame, judge: str, replicate) -> pd.DataFrame:
    from memjudge.stats.verdicts import select_verdicts

    verdicts, _ = select_verdicts(labels, judge, replicate)
    meta = labels[["assertion_id", "persona_id", "category"]].drop_duplicates("assertion_id").set_index("assertion_id")
    ids = verdicts.index.astype(str)
    where = meta.reindex(ids)
    v = verdicts.to_numpy(dtype=object)
    valid = pd.notna(v)
    return pd.DataFrame({"assertion_id": ids.to_numpy(dtype=object),
                         "persona_id": where["persona_id"].astype(str).to_numpy(dtype=object),
                         "category": where["category"].astype(str).to_numpy(dtype=object),
                         "verdict": np.where(valid, v, np.array(None, dtype=object)), "valid": valid, "sup": valid & (v == SUPPORTED)})


def _choose_judges(base: pd.DataFrame, new: pd.DataFrame, judge: str | None) -> tuple[str, str, list[str], list[str]]:
    """(base judge, new judge, the judges both runs hold, notes)."""
    from memjudge.stats.verdicts import judges_in

    jb, jn = judges_in(base), judges_in(new)
    if not jb or not jn:
        raise UsageError(f"{'BASE' if not jb else 'NEW'} run's labels hold no judge")
    common = sorted(set(jb) & set(jn))
    notes: list[str] = []
    if judge is not None:
        for name, js in (("BASE", jb), ("NEW", jn)):
            if judge not in js:
                raise UsageError(f"judge {judge!r} is not in the {name} run's labels (judges: {', '.join(js)})")
        return judge, judge, common, notes
    if len(common) == 1:
        return common[0], common[0], common, notes
    if len(common) > 1:
        notes.append(f"the runs share {len(common)} judges ({', '.join(common)}): headline and gate use "
                     f"{common[0]} (choose with --judge); each judge's difference is listed")
        return common[0], common[0], common, notes
    if len(jb) == 1 and len(jn) == 1:
        return jb[0], jn[0], common, notes
    raise UsageError(f"the runs share no judge (BASE: {', '.join(jb)}; NEW: {', '.join(jn)}): compare one judge "
                     f"each, or name a judge both hold with --judge")


def _weights(n: int, B: int, seed: int) -> np.ndarray | None:
    from memjudge.stats.bootstrap import cluster_weights

    return cluster_weights(n, B, seed) if n >= 2 else None


def _sums(pcode: np.ndarray, ccode: np.ndarray, values: np.ndarray, n_p: int, n_c: int) -> np.ndarray:
    """(personas, 1 + categories) sums of an item flag: overall first, then each category."""
    from memjudge.stats.bootstrap import cluster_counts

    per_cat = cluster_counts(pcode, ccode, n_p, n_c, weights=values.astype(float))
    return np.column_stack([per_cat.sum(1), per_cat])


def _triples(num_b, den_b, num_n, den_n, W, level, n_diff: int, n_base=None, n_new=None
             ) -> tuple[list[Triple], PairedDraws]:
    """The figures of each group, and the resampled ratios they came from (for the gate)."""
    draws = paired_draws(num_b, den_b, num_n, den_n, W)
    b, n, d = draws.estimates(level)
    n_base = den_b.sum(0) if n_base is None else n_base
    n_new = den_n.sum(0) if n_new is None else n_new
    return [Triple(Figure.of(b[g], n_base[g]), Figure.of(n[g], n_new[g]), Figure.of(d[g], n_diff))
            for g in range(len(b))], draws


class _Layout:
    """The common units of a comparison: persona codes and category codes of each run's items."""

    def __init__(self, personas: list[str], categories: list[str]):
        self.personas = np.array(sorted(personas), dtype=object)
        self.categories = sorted(categories)
        self._cats = np.array(self.categories, dtype=object)

    def codes(self, items: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        p = np.searchsorted(self.personas, items["persona_id"].to_numpy(dtype=object)).astype(np.int64)
        c = np.searchsorted(self._cats, items["category"].to_numpy(dtype=object)).astype(np.int64)
        return p, c

    def sums(self, items: pd.DataFrame, values) -> np.ndarray:
        p, c = self.codes(items)
        return _sums(p, c, np.asarray(values), len(self.personas), len(self.categories))


def _personas_figures(ib, in_, lay: _Layout, W, level) -> tuple[list[Triple], Counts, np.ndarray | None]:
    den_b, num_b = lay.sums(ib, ib["valid"]), lay.sums(ib, ib["sup"])
    den_n, num_n = lay.sums(in_, in_["valid"]), lay.sums(in_, in_["sup"])
    P = len(lay.personas)
    triples, draws = _triples(num_b, den_b, num_n, den_n, W, level, P)
    cand_b, cand_n = lay.sums(ib, np.ones(len(ib))), lay.sums(in_, np.ones(len(in_)))
    ones = np.ones((P, 1))
    per_persona = _triples(cand_b[:, :1], ones, cand_n[:, :1], ones, W, level, P,
                           n_base=cand_b[:, :1].sum(0), n_new=cand_n[:, :1].sum(0))[0][0]
    counts = Counts(candidates={"base": len(ib), "new": len(in_)},
                    null_verdicts={"base": int((~ib["valid"]).sum()), "new": int((~in_["valid"]).sum())},
                    per_persona=per_persona,
                    by_category={c: {"base": int(cand_b[:, 1 + i].sum()), "new": int(cand_n[:, 1 + i].sum())}
                                 for i, c in enumerate(lay.categories)})
    return triples, counts, draws.reps_difference


def _paired_items(ib: pd.DataFrame, in_: pd.DataFrame) -> pd.DataFrame:
    both = ib.merge(in_[["assertion_id", "verdict", "valid", "sup"]], on="assertion_id", suffixes=("_b", "_n"))
    both["pair"] = both["valid_b"] & both["valid_n"]
    return both


def _items_figures(pairs: pd.DataFrame, lay: _Layout, W, level) -> tuple[list[Triple], McNemar, np.ndarray | None]:
    ok = pairs["pair"].to_numpy()
    den = lay.sums(pairs, ok)
    num_b = lay.sums(pairs, pairs["sup_b"].to_numpy() & ok)
    num_n = lay.sums(pairs, pairs["sup_n"].to_numpy() & ok)
    triples, draws = _triples(num_b, den, num_n, den, W, level, int(ok.sum()))
    # the difference counts paired items; each category's its own
    triples = [Triple(t.base, t.new, Figure(t.difference.value, t.difference.lo, t.difference.hi, int(den[:, g].sum())))
               for g, t in enumerate(triples)]
    sb, sn = pairs["sup_b"].to_numpy() & ok, pairs["sup_n"].to_numpy() & ok
    b, c = int((sb & ~sn).sum()), int((~sb & sn).sum())
    return triples, McNemar(b=b, c=c, p_value=mcnemar_exact(b, c), pairs=int(ok.sum())), draws.reps_difference


def _changed(pairs: pd.DataFrame) -> list[Changed]:
    def verdict(v):
        return None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)

    vb = [verdict(v) for v in pairs["verdict_b"]]
    vn = [verdict(v) for v in pairs["verdict_n"]]
    differ = np.array([a != b for a, b in zip(vb, vn)], dtype=bool)
    return sorted((Changed(str(a), str(p), str(c), b, n)
                   for a, p, c, b, n, d in zip(pairs["assertion_id"], pairs["persona_id"], pairs["category"], vb, vn, differ)
                   if d), key=lambda x: x.assertion_id)


def _gold_ppi(gold_y: pd.Series, ib, in_, lay: _Layout, W, level) -> GoldDiff:
    from memjudge.stats.bootstrap import cluster_sums
    from memjudge.stats.ppi import labelled_features, unlabelled_features

    def sums(items):
        mask = items["assertion_id"].isin(gold_y.index).to_numpy()
        y = np.zeros(len(items))
        y[mask] = gold_y.loc[items.loc[mask, "assertion_id"]].to_numpy(float)
        yhat = items["sup"].to_numpy(float)  # a null verdict predicts "not supported" (as memjudge estimate)
        Lf = labelled_features(y, yhat) * mask[:, None]
        Uf = unlabelled_features(yhat) * (~mask)[:, None]
        p, c = lay.codes(items)
        groups = [np.ones(len(items), bool)] + [c == i for i in range(len(lay.categories))]
        return [(cluster_sums(p[g], Lf[g], len(lay.personas)), cluster_sums(p[g], Uf[g], len(lay.personas)))
                for g in groups], int(mask.sum()), [int((mask & g).sum()) for g in groups]

    sb, nb, gb = sums(ib)
    sn, nn, gn = sums(in_)
    out = []
    for (Lb, Ub), (Ln, Un), kb, kn in zip(sb, sn, gb, gn):
        b, n, d = paired_ppi(Lb, Ub, Ln, Un, W, level)
        out.append(Triple(Figure.of(b, kb), Figure.of(n, kn), Figure.of(d, len(lay.personas))))
    return GoldDiff(method="ppi++", n_gold={"base": nb, "new": nn}, overall=out[0],
                    by_category=dict(zip(lay.categories, out[1:])))


def _gold_accuracy(gold_y: pd.Series, pairs: pd.DataFrame, lay: _Layout, W, level) -> GoldDiff:
    g = pairs["assertion_id"].isin(gold_y.index).to_numpy() & pairs["pair"].to_numpy()
    y = np.zeros(len(pairs), bool)
    y[g] = gold_y.loc[pairs.loc[g, "assertion_id"]].to_numpy(float) == 1.0
    den = lay.sums(pairs, g)
    num_b = lay.sums(pairs, g & (pairs["sup_b"].to_numpy() == y))
    num_n = lay.sums(pairs, g & (pairs["sup_n"].to_numpy() == y))
    t, _ = _triples(num_b, den, num_n, den, W, level, int(g.sum()))
    return GoldDiff(method="accuracy", n_gold={"base": int(g.sum()), "new": int(g.sum())}, overall=t[0],
                    by_category=dict(zip(lay.categories, t[1:])))


def _coverage(cov_b, cov_n, judge_b, judge_n, lay: _Layout, W, level, notes) -> Triple | None:
    def per_persona(cov, judge, name):
        if cov is None:
            return None
        from memjudge.formats import only_rubric

        c = only_rubric(cov, "coverage")
        judges = sorted(c["judge"].dropna().astype(str).unique()) if "judge" in c.columns else []
        if len(judges) > 1:
            if judge not in judges:
                notes.append(f"{name} coverage.jsonl holds several judges ({', '.join(judges)}) and not {judge}: "
                             f"coverage left out")
                return None
            c = c[c["judge"].astype(str) == judge]
        if "replicate" in c.columns:
            c = c[pd.to_numeric(c["replicate"], errors="coerce").fillna(0).astype(int) == 0]
        c = c[c["persona_id"].astype(str).isin(set(lay.personas))]
        valid = c["covered_by"].map(lambda v: v is not None).to_numpy(bool)
        covered = c["covered_by"].map(lambda v: bool(v)).to_numpy(bool) & valid
        p = np.searchsorted(lay.personas, c["persona_id"].astype(str).to_numpy(dtype=object))
        n = len(lay.personas)
        return (np.bincount(p, weights=covered.astype(float), minlength=n)[:, None],
                np.bincount(p, weights=valid.astype(float), minlength=n)[:, None])

    b = per_persona(cov_b, judge_b, "BASE")
    n = per_persona(cov_n, judge_n, "NEW")
    if b is None or n is None:
        return None
    return _triples(b[0], b[1], n[0], n[1], W, level, len(lay.personas))[0][0]


def _table1(cmp_b: dict | None, cmp_n: dict | None) -> dict | None:
    if not isinstance(cmp_b, dict) or not isinstance(cmp_n, dict):
        return None
    pb, pn = cmp_b.get("policies") or {}, cmp_n.get("policies") or {}
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for policy in [p for p in pb if p in pn]:
        row = {}
        for metric in ("faithfulness", "retention", "coverage"):
            vb = (pb[policy].get(metric) or {}).get("value") if isinstance(pb[policy], dict) else None
            vn = (pn[policy].get(metric) or {}).get("value") if isinstance(pn[policy], dict) else None
            row[metric] = {"base": vb, "new": vn,
                           "difference": None if vb is None or vn is None else float(vn) - float(vb)}
        out[policy] = row
    return out


def _gold_y(gold, gold_path) -> pd.Series:
    from memjudge.stats.estimate import Gold, read_gold_file, resolve_gold

    if isinstance(gold, Gold):
        return gold.y
    if isinstance(gold, pd.DataFrame):
        return resolve_gold(gold, gold_path or "gold").y
    return read_gold_file(gold).y


def diff_labels(base: pd.DataFrame, new: pd.DataFrame, *, judge: str | None = None, replicate: int | str = 0,
                by: str | None = None, mode: str = "auto", gold=None, gold_path=None,
                base_coverage: pd.DataFrame | None = None, new_coverage: pd.DataFrame | None = None,
                base_compare: dict | None = None, new_compare: dict | None = None,
                B: int = 2000, seed: int = 0, level: float = 0.95,
                base_run: str | None = None, new_run: str | None = None) -> DiffResult:
    """Compare two runs' labels (frames as `memjudge.formats.read_labels` returns them); see the
    module doc. ``gold``: a gold path, frame or `memjudge.stats.estimate.Gold`; coverage frames
    (`read_coverage`) and compare.json dicts add those figures side by side."""
    if by not in (None, "category"):
        raise UsageError(f"--by must be 'category', got {by!r}")
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if B < 1:
        raise UsageError(f"B must be at least 1, got {B}")
    judge_b, judge_n, common_judges, notes = _choose_judges(base, new, judge)
    ib, in_ = _items(base, judge_b, replicate), _items(new, judge_n, replicate)
    same_items = set(ib["assertion_id"]) == set(in_["assertion_id"])
    if mode == "auto":
        mode = "items" if same_items else "personas"
    if mode == "items" and not same_items:
        shared = len(set(ib["assertion_id"]) & set(in_["assertion_id"]))
        if shared == 0:
            raise UsageError("--mode items: the runs share no assertion id (different candidates: use --mode personas)")
        notes.append(f"--mode items: {len(ib) - shared} BASE and {len(in_) - shared} NEW items are in one run only "
                     f"and left out")
    cats = sorted(set(ib["category"]) | set(in_["category"])) if by == "category" else []

    if mode == "items":
        pairs = _paired_items(ib, in_)
        pb = set(ib.loc[~ib["assertion_id"].isin(pairs["assertion_id"]), "persona_id"]) - set(pairs["persona_id"])
        pn = set(in_.loc[~in_["assertion_id"].isin(pairs["assertion_id"]), "persona_id"]) - set(pairs["persona_id"])
        personas = sorted(set(pairs["persona_id"]))
    else:
        sb, sn = set(ib["persona_id"]), set(in_["persona_id"])
        personas = sorted(sb & sn)
        pb, pn = sb - sn, sn - sb
        if not personas:
            raise UsageError("the runs share no persona: nothing to pair (are they over the same sources?)")
        ib = ib[ib["persona_id"].isin(personas)].reset_index(drop=True)
        in_ = in_[in_["persona_id"].isin(personas)].reset_index(drop=True)
    if pb or pn:
        notes.append(f"{len(pb)} persona(s) only in BASE and {len(pn)} only in NEW: left out of the paired figures")
    lay = _Layout(personas, cats or sorted(set(ib["category"]) | set(in_["category"])))
    W = _weights(len(personas), B, seed)
    if W is None:
        notes.append("fewer than 2 common personas: no interval")

    mcn = changed = None
    gold_diff = None
    if mode == "items":
        triples, mcn, draws = _items_figures(pairs, lay, W, level)
        changed = _changed(pairs)
        counts = _personas_figures(ib[ib["persona_id"].isin(personas)], in_[in_["persona_id"].isin(personas)],
                                   lay, W, level)[1]
    else:
        triples, counts, draws = _personas_figures(ib, in_, lay, W, level)
    if not cats:
        counts = Counts(counts.candidates, counts.null_verdicts, counts.per_persona, {})
    if gold is not None:
        gy = _gold_y(gold, gold_path)
        pool = set(ib["assertion_id"]) | set(in_["assertion_id"])
        if not gy.index.isin(list(pool)).any():
            raise InputError(gold_path or gold if not isinstance(gold, pd.DataFrame) else "gold",
                             f"none of its {len(gy)} gold assertion ids is among either run's items")
        if mode == "items":
            gold_diff = _gold_accuracy(gy, pairs, lay, W, level)
            notes.append("same candidates: one true support rate, so gold measures each run's accuracy against it")
        else:
            gold_diff = _gold_ppi(gy, ib, in_, lay, W, level)
            for name, k in gold_diff.n_gold.items():
                if k == 0:
                    notes.append(f"no gold item among the {name.upper()} run's items: its PPI++ figures are null")
        if not cats:
            gold_diff = GoldDiff(gold_diff.method, gold_diff.n_gold, gold_diff.overall, {})

    judges: list[JudgeDiff] = []
    agree = None
    if len(common_judges) > 1:
        for j in common_judges:
            jb_, jn_ = _items(base, j, replicate), _items(new, j, replicate)
            if mode == "items":
                t = _items_figures(_paired_items(jb_, jn_), lay, W, level)[0][0]
            else:
                t = _personas_figures(jb_[jb_["persona_id"].isin(personas)], jn_[jn_["persona_id"].isin(personas)],
                                      lay, W, level)[0][0]
            judges.append(JudgeDiff(j, t))
        signs = {np.sign(jd.overall.difference.value) for jd in judges if jd.overall.difference.value is not None}
        agree = len(signs) == 1 and 0 not in signs

    return DiffResult(
        mode=mode, judge=judge_b if judge_b == judge_n else f"{judge_b} -> {judge_n}", judge_base=judge_b,
        judge_new=judge_n, replicate=replicate, level=level, B=B, seed=seed, personas_common=len(personas),
        personas_only_base=sorted(pb), personas_only_new=sorted(pn), overall=triples[0],
        by_category=dict(zip(cats, triples[1:])) if cats else {}, counts=counts, mcnemar=mcn, changed=changed,
        coverage=_coverage(base_coverage, new_coverage, judge_b, judge_n, lay, W, level, notes),
        table1=_table1(base_compare, new_compare), gold=gold_diff, judges=judges, judges_agree_on_sign=agree,
        base_run=base_run, new_run=new_run, notes=notes,
        draws=None if draws is None else draws[:, :1 + len(cats)])
