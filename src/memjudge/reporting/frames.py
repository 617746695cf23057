"""Tidy frames read from a run's JSON: the inputs of the figures and of the tables.

Each function turns one file's documented shape into a DataFrame (or a list of plain dicts)
with value/lo/hi columns; nothing is recomputed. Every figure stored with its interval is an
`Estimate` ``{"value", "lo", "hi"}`` (`memjudge.formats.estimate`) and is read back with
`Estimate.from_dict`; a policy's fold mean ± SD is ``{"value", "sd"}``. The one exception is
calibration.json's bins (``support_rate``, ``ci_lo``, ``ci_hi``), read under those names.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from memjudge._util.text import count, num
from memjudge.formats.estimate import Estimate
from memjudge.reporting.reader import POLICY_NAMES, Run, gated_categories, judge_label

METRICS = ("faithfulness", "retention", "coverage")


def value(entry) -> float | None:
    """The point estimate of a stored `Estimate` (or of a ``{"value", "sd"}`` fold mean)."""
    return Estimate.from_dict(entry).value


def sd(entry) -> float | None:
    """The standard deviation of a ``{"value", "sd"}`` fold mean, None when absent."""
    return num(entry.get("sd")) if isinstance(entry, dict) else None


def robustness_units(run: Run) -> list[dict]:
    """robustness.json's units (one per judge, or per judge × replicate), normalised:
    judge, replicate, label, primary (the judge's first unit), categories [{category, rate, lo,
    hi, n}], overall (an `Estimate`, None when absent) and overall_n, lowest, gated,
    p_gated_lowest, table (compare.json's write_all/policies/paired)."""
    units: list[dict[str, Any]] = []
    for u in (run.get("robustness") or {}).get("units") or []:
        if not isinstance(u, dict):
            continue
        cats = []
        for c in u.get("categories") or []:
            if isinstance(c, dict):
                cats.append({"category": str(c.get("category")), "rate": num(c.get("support_rate")),
                             "lo": num(c.get("lo")), "hi": num(c.get("hi")), "n": num(c.get("valid"))})
        g = u.get("gated")
        table = u.get("table")
        ov = Estimate.from_dict(u.get("overall"))
        units.append({"judge": str(u.get("judge")), "replicate": u.get("replicate"), "categories": cats,
                      "overall": ov if ov.value is not None else None,
                      "lowest": u.get("lowest_category"),
                      "gated": [str(x) for x in g] if isinstance(g, list) else None,
                      "p_gated_lowest": num(u.get("p_gated_lowest")),
                      "table": table if isinstance(table, dict) else {}})
    per_judge: dict[str, int] = {}
    for u in units:
        per_judge[u["judge"]] = per_judge.get(u["judge"], 0) + 1
    seen = set()
    for u in units:
        several = per_judge[u["judge"]] > 1 and u["replicate"] is not None
        u["label"] = judge_label(u["judge"], run) + (f", replicate {u['replicate']}" if several else "")
        u["primary"] = u["judge"] not in seen
        seen.add(u["judge"])
    return units


def support_rates(run: Run, primary_only: bool = True) -> pd.DataFrame:
    """Per judge (each judge's first unit) and category: rate, lo, hi, n from robustness.json."""
    rows = []
    for u in robustness_units(run):
        if primary_only and not u["primary"]:
            continue
        for c in u["categories"]:
            rows.append({"judge": judge_label(u["judge"], run) if primary_only else u["label"],
                         "raw_judge": u["judge"], **c})
    return pd.DataFrame(rows, columns=["judge", "raw_judge", "category", "rate", "lo", "hi", "n"]).astype(
        {"rate": float, "lo": float, "hi": float, "n": float})


def sweep_frame(run: Run, policy: str = "global") -> pd.DataFrame:
    """One row per candidate threshold of `policy`'s full-sample sweep (sweep.json)."""
    points = (run.get("sweep") or {}).get(policy)
    rows = [{"threshold": num(p.get("threshold")), **{m: num(p.get(m)) for m in METRICS}}
            for p in (points if isinstance(points, list) else []) if isinstance(p, dict)]
    df = pd.DataFrame(rows, columns=["threshold", *METRICS]).astype(float)
    return df[df["faithfulness"].notna()]


def policy_points(run: Run) -> pd.DataFrame:
    """Write-all (full sample) and each fitted policy (held-out fold means ± SD) from compare.json;
    when there is no compare.json, the fitted points stored with the sweep (full sample)."""
    cmp_ = run.get("compare")
    rows = []
    if cmp_:
        wa = cmp_.get("write_all") or {}
        if num(wa.get("faithfulness")) is not None:
            rows.append({"label": "Write-all (full sample)", "policy": "write_all", "kind": "full",
                         **{m: num(wa.get(m)) for m in METRICS}})
        for name, pol in cmp_.get("policies", {}).items():
            if name == "write_all":
                continue
            row = {"label": f"{POLICY_NAMES.get(name, name)} (held-out mean ± SD)", "policy": name, "kind": "heldout"}
            for m in METRICS:
                row[m], row[f"{m}_sd"] = value(pol.get(m)), sd(pol.get(m))
            rows.append(row)
    else:
        fitted = (run.get("sweep") or {}).get("fitted") or {}
        for name, f in fitted.items() if isinstance(fitted, dict) else []:
            if isinstance(f, dict):
                rows.append({"label": f"{POLICY_NAMES.get(name, name)} (fitted, full sample)",
                             "policy": name, "kind": "full", **{m: num(f.get(m)) for m in METRICS}})
    cols = ["label", "policy", "kind", *METRICS, "faithfulness_sd", "retention_sd", "coverage_sd"]
    return pd.DataFrame(rows, columns=cols)


def calibration_frame(run: Run) -> pd.DataFrame:
    """calibration.json's bins, one row per (category, confidence bin): the bin's edges lo/hi,
    its valid verdicts n, support rate and its interval ci_lo/ci_hi."""
    rows = []
    for c in (run.get("calibration") or {}).get("categories") or []:
        if not isinstance(c, dict):
            continue
        for b in c.get("bins") or []:
            if isinstance(b, dict):
                rows.append({"category": str(c.get("category")), "lo": num(b.get("conf_lo")),
                             "hi": num(b.get("conf_hi")), "n": num(b.get("valid")),
                             "rate": num(b.get("support_rate")), "ci_lo": num(b.get("ci_lo")),
                             "ci_hi": num(b.get("ci_hi"))})
    cols = ["category", "lo", "hi", "n", "rate", "ci_lo", "ci_hi"]
    df = pd.DataFrame(rows, columns=cols)
    return df.astype({c: float for c in cols[1:]}) if not df.empty else df


def flip_frame(run: Run) -> pd.DataFrame:
    rows = []
    judges = (run.get("noise") or {}).get("judges", [])
    several = {n for n in {j["judge"] for j in judges} if sum(j["judge"] == n for j in judges) > 1}
    for j in judges:
        # the rubric is named only where one judge was measured under several
        name = judge_label(j["judge"], run) + (f" [{j.get('rubric')}]" if j["judge"] in several else "")
        e = Estimate.from_dict(j.get("flip_rate"))
        rows.append({"judge": name, "category": "all", "flip_rate": e.value, "lo": e.lo, "hi": e.hi,
                     "items": num(j.get("items"))})
        by = j.get("by_category")
        for cat, c in by.items() if isinstance(by, dict) else []:
            e = Estimate.from_dict(c.get("flip_rate") if isinstance(c, dict) else None)
            rows.append({"judge": name, "category": str(cat), "flip_rate": e.value, "lo": e.lo, "hi": e.hi,
                         "items": num(c.get("items")) if isinstance(c, dict) else None})
    df = pd.DataFrame(rows, columns=["judge", "category", "flip_rate", "lo", "hi", "items"])
    return df.astype({"flip_rate": float, "lo": float, "hi": float, "items": float})


def pair_frame(run: Run) -> pd.DataFrame:
    rows = []
    for p in (run.get("agreement") or {}).get("pairs", []):
        rows.append({"a": judge_label(p["a"], run), "b": judge_label(p["b"], run), "n": num(p.get("n")),
                     "cohen_kappa": value(p.get("cohen_kappa")), "gwet_ac1": value(p.get("gwet_ac1"))})
    return pd.DataFrame(rows, columns=["a", "b", "n", "cohen_kappa", "gwet_ac1"])


def paired_intervals(run: Run) -> dict[str, dict]:
    """compare.json's paired targeted − global per metric: value, lo, hi (percentile interval of
    the per-fold differences) and nb_lo, nb_hi (Nadeau–Bengio), for the fold-differences figure."""
    out = {}
    for m, p in ((run.get("compare") or {}).get("paired") or {}).items():
        if isinstance(p, dict):
            e = Estimate.from_dict(p)
            out[m] = {"value": e.value, "lo": e.lo, "hi": e.hi, "nb_lo": num(p.get("nb_lo")),
                      "nb_hi": num(p.get("nb_hi"))}
    return out


def fold_diff_frame(run: Run, a: str = "targeted", b: str = "global") -> pd.DataFrame:
    """Per held-out fold, `a` − `b` for each metric (the pairs the paired comparison summarises)."""
    detail = (run.get("compare") or {}).get("folds_detail") or []
    df = pd.DataFrame([d for d in detail if isinstance(d, dict)])
    if df.empty or not {"repeat", "fold", "policy"} <= set(df.columns):
        return pd.DataFrame(columns=["metric", "repeat", "fold", "difference"])
    rows = []
    for m in ("faithfulness", "retention", "coverage"):
        if m not in df.columns:
            continue
        wide = df.pivot_table(index=["repeat", "fold"], columns="policy", values=m, aggfunc="first", dropna=False)
        if a not in wide.columns or b not in wide.columns:
            continue
        d = (pd.to_numeric(wide[a], errors="coerce") - pd.to_numeric(wide[b], errors="coerce")).dropna()
        rows += [{"metric": m, "repeat": r, "fold": f, "difference": float(v)} for (r, f), v in zip(d.index, d)]
    return pd.DataFrame(rows, columns=["metric", "repeat", "fold", "difference"])


def panel_error_frame(run: Run) -> pd.DataFrame:
    """panel.json's judge_errors as rows (judge, measure, value, lo, hi, gold, gold_lo, gold_hi)."""
    rows = []
    for r in (run.get("panel") or {}).get("judge_errors", []):
        for m in ("sensitivity", "specificity"):
            est, gold = Estimate.from_dict(r.get(m)), Estimate.from_dict(r.get(f"gold_{m}"))
            rows.append({"judge": judge_label(r["judge"], run), "measure": m, "value": est.value, "lo": est.lo,
                         "hi": est.hi, "gold": gold.value, "gold_lo": gold.lo, "gold_hi": gold.hi})
    df = pd.DataFrame(rows, columns=["judge", "measure", "value", "lo", "hi", "gold", "gold_lo", "gold_hi"])
    return df[df["value"].notna()] if not df.empty else df
METHODS = (("judge_only", "Judge only"), ("gold_only", "Gold only"), ("ppi", "PPI++"))


def estimate_frame(run: Run) -> pd.DataFrame:
    """estimate.json as one row per (group, method): value, lo, hi, and the group's counts."""
    rows = []
    for g in (run.get("estimate") or {}).get("groups") or []:
        if not isinstance(g, dict):
            continue
        n_gold, n_items, eff = num(g.get("n_gold")), num(g.get("n_items")), num(g.get("effective_gold_n"))
        label = (f"{g['group']}\n{count(n_gold)} gold / {count(n_items)}"
                 + (f"; eff. n {count(eff)}" if eff is not None else ""))
        for m, _ in METHODS:
            e = Estimate.from_dict(g.get(m))
            rows.append({"group": str(g["group"]), "label": label, "method": m, "value": e.value,
                         "lo": e.lo, "hi": e.hi, "n_gold": n_gold, "n_items": n_items, "effective_gold_n": eff,
                         "lambda": num(g.get("ppi_lambda")) if m == "ppi" else None})
    cols = ["group", "label", "method", "value", "lo", "hi", "n_gold", "n_items", "effective_gold_n", "lambda"]
    df = pd.DataFrame(rows, columns=cols)
    return df.astype({c: float for c in cols[3:]})


def fold_count(c: dict) -> int | None:
    r, k = num(c.get("repeats")), num(c.get("folds"))
    return int(r * k) if r is not None and k is not None else None


def unit_holds(unit: dict) -> dict[str, bool | None]:
    """targeted ≥ global on the held-out fold mean of faithfulness and of coverage (as
    robustness.json's summary counts it); None when a metric was not measured."""
    t = unit["table"] or {}
    pols = t.get("policies") or {}
    out: dict[str, bool | None] = {}
    for m in ("faithfulness", "coverage"):
        tv, gv = value((pols.get("targeted") or {}).get(m)), value((pols.get("global") or {}).get(m))
        if tv is not None and gv is not None:
            out[m] = tv >= gv
        else:
            v = value((t.get("paired") or {}).get(m))
            out[m] = None if v is None else v >= 0
    return out


def emphasised_category(run: Run, cal: pd.DataFrame) -> str | None:
    cats = set(cal["category"])
    for g in gated_categories(run):
        if g in cats:
            return g
    if "values" in cats:
        return "values"
    return None
