"""Does the policy ordering survive a change of judge? (spec §7 category ordering, §8 robustness)

For every judge in the labels — and every replicate of it, when there are several — a *unit*:

- support rate by category and overall (supported / valid verdicts, spec §7) with
  persona-cluster bootstrap intervals (B resamples of personas, the same resamples for every
  unit, so units are compared on paired resamples); a third verdict (``partial`` or any label
  but supported/unsupported) is valid and not supported, or excluded with ``strict_binary``;
- the lowest-support category, and the bootstrap probability that the gated category is the
  lowest (share of resamples whose lowest category is a gated one; with ``gate="auto"`` the gated
  category is the unit's own full-sample lowest);
- Table 1 refitted under the unit's labels (`memjudge.comparison`, thresholds refit per unit).

Across judges: Kendall's τ-b (scipy.stats.kendalltau) between each pair of judges' category
rates (each judge's first replicate, categories with a rate under both). A summary counts the
judges (each judge's first replicate) and the units for which targeted ≥ global on held-out
faithfulness and on estimated coverage (fold means), and for which the lowest category is gated.

Coverage for a unit: the coverage rows of the same judge when the coverage files name it, else
the single coverage judge's rows when there is only one, else none (coverage null).

``RobustnessResult.to_json()`` (also ``robustness.json`` under ``--out``)::

    {"gate": [CAT, ...] | "auto", "floor", "repeats", "folds", "seed", "B", "strict_binary",
     "units": [{"judge", "replicate", "n_candidates", "n_valid", "has_coverage",
                "categories": [{"category", "n", "valid", "supported", "support_rate", "lo", "hi"}],
                "overall": {"value", "lo", "hi", "n"},     # support rate of all candidates; n = valid
                "lowest_category", "gated": [CAT, ...], "p_gated_lowest",
                "table": {"write_all", "write_all_ci", "policies", "paired", "paired_vs_write_all"},
                "notes": [str, ...]}],
                # "table" = those keys of compare.json for this unit (write_all_ci's faithfulness
                # is "overall": the same resamples)
     "kendall": [{"judge_a", "judge_b", "tau", "p_value", "n_categories"}],
     "summary": {"judges", "units",
                 "faithfulness": {"judges", "units"},            # targeted >= global
                 "coverage": {"judges", "units", "judges_with_coverage", "units_with_coverage"},
                 "lowest_is_gated": {"judges", "units"}}}

With gold labels (``gold=``, ``memjudge robustness --gold GOLD``) each unit's ``table`` also
holds compare.json's ``gold`` block (`memjudge.comparison.gold`: held-out faithfulness by PPI++
beside the judge's), and the summary gains ``"faithfulness_ppi": {"judges", "units",
"judges_defined", "units_defined", "survives_judges", "survives_units"}``: for how many judges
(units) targeted ≥ global on the paired PPI++ mean, of those where it is defined, and for how
many the judge's ordering survives the correction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memjudge._util.text import MISSING, coef, pct, pts, with_interval
from memjudge.comparison.gold import compare_with_gold, load_gold
from memjudge.comparison.prepare import (
    Prepared,
    judges_in,
    load_candidates,
    load_labels,
    prepare,
    select_verdicts,
)
from memjudge.comparison.protocol import num, overall_support, resolve_gate
from memjudge.comparison.result import CompareResult, format_columns
from memjudge.comparison.run import compare_prepared
from memjudge.errors import UsageError
from memjudge.formats import json_safe, only_rubric
from memjudge.stats.bootstrap import B_DEFAULT, cluster_counts, cluster_weights, percentile_interval


def category_rates(prep: Prepared, W: np.ndarray):
    """Per-category counts, full-sample rates and bootstrap replicates (B × C) of support rates."""
    P, C = len(prep.personas), len(prep.categories)
    S = cluster_counts(prep.persona, prep.cat, P, C, weights=prep.sup & prep.valid)
    V = cluster_counts(prep.persona, prep.cat, P, C, weights=prep.valid)
    n = np.bincount(prep.cat, minlength=C)
    s, v = S.sum(0), V.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = s / v
        reps = (W @ S) / (W @ V)
    return n, v, s, rates, reps


def p_lowest(reps: np.ndarray, gated_codes) -> float:
    """Share of bootstrap resamples whose lowest-rate category is gated (ties → first by name)."""
    r = np.where(np.isnan(reps), np.inf, reps)
    low = np.argmin(r, axis=1)
    defined = np.isfinite(r).any(axis=1)
    if not defined.any():
        return float("nan")
    return float(np.isin(low[defined], list(gated_codes)).mean())


@dataclass
class Unit:
    judge: str
    replicate: object
    prepared: Prepared
    categories: pd.DataFrame
    overall: dict
    lowest: str | None
    gated: list
    p_gated_lowest: float
    result: CompareResult

    def ge(self, metric: str):
        """targeted ≥ global on the fold mean of `metric` (None when undefined)."""
        pol = self.result.policies()
        t, g = pol["targeted"][metric], pol["global"][metric]
        if t is None or g is None or t["value"] is None or g["value"] is None:
            return None
        return bool(t["value"] >= g["value"])

    def ordering_ppi(self) -> dict | None:
        """compare.json's gold ``ordering`` for this unit (None without gold)."""
        gold = self.result.gold
        return None if gold is None else gold.ordering()


@dataclass
class RobustnessResult:
    gate: list[str] | str
    floor: float
    repeats: int
    folds: int
    seed: int
    B: int
    units: list
    kendall: pd.DataFrame
    strict_binary: bool = False

    def _primary(self):
        return first_per_judge(self.units)

    def summary(self) -> dict:
        prim = self._primary()

        def count(units, metric):
            vals = [u.ge(metric) for u in units]
            return sum(1 for v in vals if v), sum(1 for v in vals if v is not None)

        fj, _ = count(prim, "faithfulness")
        fu, _ = count(self.units, "faithfulness")
        cj, cjn = count(prim, "coverage")
        cu, cun = count(self.units, "coverage")
        out = {
            "judges": len(prim), "units": len(self.units),
            "faithfulness": {"judges": fj, "units": fu},
            "coverage": {"judges": cj, "units": cu, "judges_with_coverage": cjn, "units_with_coverage": cun},
            "lowest_is_gated": {"judges": sum(u.lowest in u.gated for u in prim),
                                "units": sum(u.lowest in u.gated for u in self.units)},
        }
        if any(u.ordering_ppi() is not None for u in self.units):
            out["faithfulness_ppi"] = ppi_counts(prim, self.units)
        return out

    def to_json(self) -> dict:
        units = []
        for u in self.units:
            cj = u.result.to_json()
            units.append({
                "judge": u.judge, "replicate": u.replicate, "n_candidates": u.prepared.n,
                "n_valid": int(u.prepared.valid.sum()), "has_coverage": u.prepared.has_coverage,
                "categories": json_safe(u.categories.to_dict("records")),
                "overall": json_safe(u.overall),
                "lowest_category": u.lowest, "gated": list(u.gated), "p_gated_lowest": num(u.p_gated_lowest),
                "table": {k: cj[k] for k in ("write_all", "write_all_ci", "policies", "paired", "paired_vs_write_all",
                                             "gold") if k in cj},
                "notes": cj["notes"],
            })
        return {
            "gate": self.gate, "floor": self.floor, "repeats": self.repeats, "folds": self.folds,
            "seed": self.seed, "B": self.B, "strict_binary": self.strict_binary, "units": units,
            "kendall": json_safe(self.kendall.to_dict("records")),
            "summary": self.summary(),
        }

    def notes(self) -> list[str]:
        return [f"{u.judge}, replicate {u.replicate}: {n}" for u in self.units for n in u.result.notes()]

    def render(self) -> str:
        """The text of `memjudge robustness`, in the report's convention: support rates and
        figures in percent, P(gated lowest) a fraction (3 decimals), intervals labelled."""
        first = "each judge's first replicate"
        lines = [f"Robustness across judges: {len(self._primary())} judges, {len(self.units)} judge×replicate "
                 f"units; gate {self.gate if self.gate == 'auto' else ', '.join(self.gate)}; floor "
                 f"{pct(self.floor)}%; {self.repeats} × {self.folds}-fold CV per unit; B = {self.B}.", ""]
        cats = sorted({c for u in self.units for c in u.categories["category"]})
        rows = []
        for u in self.units:
            rates = dict(zip(u.categories["category"], u.categories["support_rate"]))
            o = u.overall
            rows.append([u.judge, str(u.replicate), *(pct(rates.get(c), 1) for c in cats),
                         with_interval(lambda v: pct(v, 1), o["value"], o["lo"], o["hi"]),
                         str(u.lowest) if u.lowest is not None else MISSING, coef(u.p_gated_lowest)])
        lines += ["Support rate by category and overall (%)"]
        lines += format_columns(["Judge", "rep", *cats, "overall [95% CI]", "lowest", "P(gated lowest)"], rows)
        lines += [f"  overall [95% CI]: 95% percentile interval (persona bootstrap, B = {self.B}). P(gated lowest): "
                  "share of the persona-bootstrap resamples whose lowest-support category is gated (a fraction)."]
        if len(self.kendall):
            lines += ["", f"Kendall's τ-b between judges' category rates ({first}):"]
            r: Any
            for r in self.kendall.itertuples():
                tau = MISSING if not np.isfinite(r.tau) else f"{r.tau:+.3f}"
                lines.append(f"  {r.judge_a} vs {r.judge_b}: τ-b {tau} (p {r.p_value:.3g}, {r.n_categories} categories)")
        lines += ["", "Held-out Table 1 per unit (fold means, %): faithfulness / retention / est. coverage"]
        rows = []
        for u in self.units:
            pol, pr = u.result.policies(), u.result.paired()

            def trio(p):
                f = pol[p]["faithfulness"]["value"]
                r = pol[p]["retention"]["value"]
                c = pol[p]["coverage"]["value"] if pol[p]["coverage"] else None
                return f"{pct(f)}/{pct(r)}/{pct(c)}"

            pf, pc = pr["faithfulness"] or {}, pr["coverage"] or {}
            ge = u.ge("faithfulness")
            rows.append([u.judge, str(u.replicate), trio("global"), trio("targeted"),
                         with_interval(pts, pf.get("value"), pf.get("lo"), pf.get("hi")),
                         with_interval(pts, pc.get("value"), pc.get("lo"), pc.get("hi")),
                         MISSING if ge is None else ("yes" if ge else "no")])
        lines += format_columns(["Judge", "rep", "global", "targeted", "Δ faith (pts) [95%]", "Δ cov (pts) [95%]",
                                 "T ≥ G faith."], rows)
        lines += ["  Δ: targeted − global, mean of the per-fold differences with its 95% percentile interval "
                  "(2.5–97.5% of the per-fold differences), as in the report; compare.json also holds the "
                  "Nadeau–Bengio interval. T ≥ G faith.: targeted ≥ global on held-out faithfulness, per unit "
                  "(the judge counts below take each judge's first replicate)."]
        lines += [f"  note: {n}" for n in self.notes()]
        s = self.summary()
        lines += ["",
                  f"Targeted ≥ global on faithfulness: {s['faithfulness']['judges']}/{s['judges']} judges ({first}), "
                  f"{s['faithfulness']['units']}/{s['units']} units.",
                  "Targeted ≥ global on est. coverage: "
                  f"{s['coverage']['judges']}/{s['coverage']['judges_with_coverage']} judges ({first}), "
                  f"{s['coverage']['units']}/{s['coverage']['units_with_coverage']} units (with coverage).",
                  f"Lowest-support category is gated: {s['lowest_is_gated']['judges']}/{s['judges']} judges ({first}), "
                  f"{s['lowest_is_gated']['units']}/{s['units']} units."]
        if "faithfulness_ppi" in s:
            lines += render_ppi(self.units, s["faithfulness_ppi"], s["judges"], s["units"])
        return "\n".join(lines)


def ppi_counts(prim, units) -> dict:
    def count(us):
        orders = [u.ordering_ppi() or {} for u in us]
        return (sum(1 for o in orders if o.get("ppi")), sum(1 for o in orders if o.get("ppi") is not None),
                sum(1 for o in orders if o.get("survives")))

    j, jd, js = count(prim)
    n, nd, ns = count(units)
    return {"judges": j, "units": n, "judges_defined": jd, "units_defined": nd,
            "survives_judges": js, "survives_units": ns}


def render_ppi(units, s: dict, n_judges: int, n_units: int) -> list[str]:
    g = units[0].result.gold.gold
    lines = ["", f"Judge-corrected held-out faithfulness (PPI++ with {g.n_matched} gold labels; fold means, %): "
             "global / targeted, judge only → PPI++"]
    rows = []
    for u in units:
        gc = u.result.gold
        pols, pr, o = gc.policies(), gc.paired()["ppi"], gc.ordering()

        def pair(key):
            return f"{pct(pols['global'][key]['value'], 1)}/{pct(pols['targeted'][key]['value'], 1)}"

        surv = MISSING if o["survives"] is None else ("yes" if o["survives"] else "no")
        rows.append([u.judge, str(u.replicate), pair("judge"), pair("ppi"),
                     with_interval(pts, pr["value"], pr["lo"], pr["hi"]), surv])
    lines += format_columns(["Judge", "rep", "judge only", "PPI++", "Δ PPI (pts) [95%]", "survives"], rows)
    lines.append(f"Targeted ≥ global on PPI++ faithfulness: {s['judges']}/{s['judges_defined']} judges (each judge's "
                 f"first replicate), {s['units']}/{s['units_defined']} units (where defined); the judge's ordering "
                 f"survives the correction for {s['survives_judges']}/{n_judges} judges, {s['survives_units']}/{n_units} "
                 "units. Δ PPI: 95% percentile interval of the per-fold differences.")
    return lines


def _load_cov_all(coverage):
    if coverage is None:
        return None
    from memjudge.formats import read_coverage

    if isinstance(coverage, pd.DataFrame):
        return coverage
    return read_coverage(coverage)


def _coverage_for(cov: pd.DataFrame | None, judge: str):
    if cov is None:
        return None
    if "judge" not in cov.columns or not cov["judge"].notna().any():
        return cov
    cj = sorted(cov["judge"].dropna().astype(str).unique())
    if judge in cj:
        return cov[cov["judge"].astype(str) == judge]
    return cov if len(cj) == 1 else None


def robustness(candidates, labels, coverage=None, *, gate="values", floor: float = 0.8, repeats: int = 20,
               folds: int = 5, seed: int = 0, B: int = B_DEFAULT, replicates: bool = True,
               per_category: str = "greedy", strict_binary: bool = False, gold=None) -> RobustnessResult:
    """The comparison under every judge (and replicate) in `labels`; see the module docstring.

    candidates, labels, coverage: DataFrames or paths (labels/coverage may be lists of paths).
    `strict_binary`: a verdict other than supported/unsupported is no valid verdict.
    `gold`: hand labels (path or frame); adds PPI++ faithfulness per unit."""
    cand = load_candidates(candidates)
    lab = load_labels(labels)
    lab = only_rubric(lab, "support")
    cov = _load_cov_all(coverage)
    gold_df = gold_path = None
    if gold is not None:
        gold_path = str(Path(gold).resolve()) if isinstance(gold, (str, os.PathLike)) else None
        gold_df = load_gold(gold)
    judges = judges_in(lab)
    if not judges:
        raise UsageError("labels hold no judge")
    units_spec = []
    for j in judges:
        reps = sorted(int(r) for r in lab.loc[lab["judge"].astype(str) == j, "replicate"].unique())
        for r in (reps if replicates else reps[:1]):
            units_spec.append((j, r))
    categories = np.unique(cand["category"].astype(str).to_numpy())
    g = resolve_gate(gate, categories)
    if B < 1:
        raise UsageError(f"B (bootstrap resamples) must be at least 1, got {B}")
    n_personas = cand["persona_id"].astype(str).nunique()
    W = cluster_weights(n_personas, B=B, seed=seed)
    units = []
    for j, r in units_spec:
        prep = prepare(cand, lab, _coverage_for(cov, j), judge=j, replicate=r, strict_binary=strict_binary)
        n, v, s, rates, reps = category_rates(prep, W)
        overall = overall_support(prep, W)
        lo, hi = percentile_interval(reps)
        cats = prep.categories.tolist()
        table = pd.DataFrame({"category": cats, "n": n, "valid": v.astype(int), "supported": s.astype(int),
                              "support_rate": rates, "lo": lo, "hi": hi})
        finite = np.isfinite(rates)
        lowest = None
        if finite.any():
            m = np.nanmin(rates)
            lowest = cats[int(np.flatnonzero(rates == m)[0])]
        gated = ([lowest] if lowest is not None else []) if g == "auto" else list(g)
        p = p_lowest(reps, [cats.index(c) for c in gated])
        res = compare_prepared(prep, gate=g, floor=floor, repeats=repeats, folds=folds, seed=seed,
                               per_category=per_category, B=B, weights=W)
        if gold_df is not None:
            res.gold = compare_with_gold(res, gold_df, gold_path, select_verdicts(lab, j, r)[0])
        units.append(Unit(j, r, prep, table, overall, lowest, gated, p, res))
    ktab = kendall_table(first_per_judge(units))
    return RobustnessResult(g, float(floor), repeats, folds, seed, B, units, ktab, bool(strict_binary))


def first_per_judge(units) -> list:
    """Each judge's first unit (its first replicate), in order."""
    seen, out = set(), []
    for u in units:
        if u.judge not in seen:
            seen.add(u.judge)
            out.append(u)
    return out


def kendall_table(units) -> pd.DataFrame:
    from scipy.stats import kendalltau

    rows = []
    for i in range(len(units)):
        for k in range(i + 1, len(units)):
            a = dict(zip(units[i].categories["category"], units[i].categories["support_rate"]))
            b = dict(zip(units[k].categories["category"], units[k].categories["support_rate"]))
            common = [c for c in sorted(a) if c in b and np.isfinite(a[c]) and np.isfinite(b[c])]
            if len(common) >= 2:
                res = kendalltau([a[c] for c in common], [b[c] for c in common], variant="b")
                tau, pv = float(res.statistic), float(res.pvalue)
            else:
                tau, pv = float("nan"), float("nan")
            rows.append({"judge_a": units[i].judge, "judge_b": units[k].judge, "tau": tau, "p_value": pv,
                         "n_categories": len(common)})
    return pd.DataFrame(rows, columns=["judge_a", "judge_b", "tau", "p_value", "n_categories"])


__all__ = ["RobustnessResult", "Unit", "category_rates", "first_per_judge", "kendall_table", "p_lowest", "ppi_counts",
           "render_ppi", "robustness"]
