"""Tidy frames read from a run's JSON: the inputs of the figures and of the tables.

Each function turns one file's documented shape into a DataFrame (or a list of plain dicts)
with value/lo/hi columns; nothing is recomputed.
"""

from __future__ import annotations

import pandas as pd

from memjudge.reporting.blocks import count
from memjudge.reporting.reader import (
    POLICY_NAMES,
    Run,
    first_of,
    gated_categories,
    interval,
    judge_label,
    num,
    records,
    stat,
)


def robustness_units(run: Run) -> list[dict]:
    """robustness.json's units (one per judge, or per judge × replicate), normalised:
    judge, replicate, label, primary (the judge's first unit), categories [{category, rate, lo,
    hi, n}], overall {rate, lo, hi, n} (None when absent), lowest, gated, p_gated_lowest, table
    (compare.json's write_all/policies/paired)."""
    rob = run.get("robustness") or {}
    raw = rob.get("units") if rob.get("units") is not None else rob.get("judges", [])
    units = []
    for u in records(raw, "judge"):
        cats = []
        by = first_of(u, ("categories", "support_by_category", "by_category", "support", "category_rates"), [])
        for c in records(by, "category"):
            lo, hi = interval(first_of(c, ("ci", "support_rate_ci", "rate_ci"), c))
            cats.append({"category": str(c.get("category")), "lo": lo, "hi": hi,
                         "rate": num(first_of(c, ("support_rate", "rate", "value", "support"))),
                         "n": num(first_of(c, ("valid", "n", "items", "count")))})
        g = u.get("gated")
        table = first_of(u, ("table", "compare", "table1", "table_1", "comparison"), {})
        ov = u.get("overall")
        overall = None
        if isinstance(ov, dict) and num(ov) is not None:
            lo, hi = interval(ov)
            overall = {"rate": num(ov), "lo": lo, "hi": hi, "n": num(first_of(ov, ("n", "valid")))}
        units.append({"judge": str(u.get("judge")), "replicate": u.get("replicate"), "categories": cats,
                      "overall": overall,
                      "lowest": u.get("lowest_category") or u.get("lowest"),
                      "gated": [str(x) for x in g] if isinstance(g, list) else [str(g)] if isinstance(g, str) else None,
                      "p_gated_lowest": num(first_of(u, ("p_gated_lowest", "prob_gated_lowest", "p_lowest"))),
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
    sw = run.get("sweep") or {}
    keys = ("global", "points", "sweep", "thresholds", "curve") if policy == "global" else (policy,)
    pts = first_of(sw, keys, [])
    if isinstance(pts, dict) and all(isinstance(v, list) for v in pts.values()):  # columnar
        pts = pd.DataFrame(pts).to_dict("records")
    rows = [{"threshold": num(p.get("threshold")), "faithfulness": num(p.get("faithfulness")),
             "retention": num(p.get("retention")), "coverage": num(p.get("coverage"))}
            for p in (pts if isinstance(pts, list) else []) if isinstance(p, dict)]
    df = pd.DataFrame(rows, columns=["threshold", "faithfulness", "retention", "coverage"]).astype(float)
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
                         **{m: num(wa.get(m)) for m in ("faithfulness", "retention", "coverage")}})
        for name, pol in cmp_.get("policies", {}).items():
            if name == "write_all":
                continue
            row = {"label": f"{POLICY_NAMES.get(name, name)} (held-out mean ± SD)", "policy": name, "kind": "heldout"}
            for m in ("faithfulness", "retention", "coverage"):
                row[m], row[f"{m}_sd"] = stat(pol.get(m)), stat(pol.get(m), "sd")
            rows.append(row)
    else:
        fitted = (run.get("sweep") or {}).get("fitted") or {}
        for f in records(fitted, "policy"):
            rows.append({"label": f"{POLICY_NAMES.get(f['policy'], f['policy'])} (fitted, full sample)",
                         "policy": f["policy"], "kind": "full",
                         **{m: num(f.get(m)) for m in ("faithfulness", "retention", "coverage")}})
    cols = ["label", "policy", "kind", "faithfulness", "retention", "coverage", "faithfulness_sd", "retention_sd",
            "coverage_sd"]
    return pd.DataFrame(rows, columns=cols)


def calibration_frame(run: Run) -> pd.DataFrame:
    cal = run.get("calibration") or {}
    rows = []
    raw = first_of(cal, ("bins", "categories", "by_category"), [])
    recs = []
    if isinstance(raw, dict):  # {CAT: [bins]} or {CAT: {"bins": [...]}}
        for cat, v in raw.items():
            bins = v.get("bins", []) if isinstance(v, dict) else v
            recs += [{"category": cat, **b} for b in bins if isinstance(b, dict)]
    elif isinstance(raw, list):
        for r in raw:
            if isinstance(r, dict) and isinstance(r.get("bins"), list):  # [{category, ..., bins: [...]}]
                recs += [{**b, "category": r.get("category")} for b in r["bins"] if isinstance(b, dict)]
            elif isinstance(r, dict):
                recs.append(r)
    for b in recs:
        lo = num(first_of(b, ("conf_lo", "lo", "bin_lo", "low", "confidence_lo")))
        hi = num(first_of(b, ("conf_hi", "hi", "bin_hi", "high", "confidence_hi")))
        edges = b.get("bin") or b.get("edges")
        if (lo is None or hi is None) and isinstance(edges, (list, tuple)) and len(edges) == 2:
            lo, hi = num(edges[0]), num(edges[1])
        clo, chi = interval(first_of(b, ("ci", "support_rate_ci", "rate_ci"), {}))
        if clo is None and hi is not None:
            clo, chi = num(b.get("ci_lo")), num(b.get("ci_hi"))
        rows.append({"category": str(b.get("category")), "lo": lo, "hi": hi,
                     "n": num(first_of(b, ("valid", "n", "count", "items"))),
                     "rate": num(first_of(b, ("support_rate", "rate", "support"))), "ci_lo": clo, "ci_hi": chi})
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
        lo, hi = interval(j.get("flip_rate_ci"))
        rows.append({"judge": name, "category": "all", "flip_rate": num(j.get("flip_rate")), "lo": lo, "hi": hi,
                     "items": num(j.get("items"))})
        for c in records(j.get("by_category") or {}, "category"):
            lo, hi = interval(c.get("flip_rate_ci"))
            rows.append({"judge": name, "category": str(c["category"]), "flip_rate": num(c.get("flip_rate")),
                         "lo": lo, "hi": hi, "items": num(c.get("items"))})
    df = pd.DataFrame(rows, columns=["judge", "category", "flip_rate", "lo", "hi", "items"])
    return df.astype({"flip_rate": float, "lo": float, "hi": float, "items": float})


def pair_frame(run: Run) -> pd.DataFrame:
    rows = []
    for p in (run.get("agreement") or {}).get("pairs", []):
        rows.append({"a": judge_label(p["a"], run), "b": judge_label(p["b"], run), "n": num(p.get("n")),
                     "cohen_kappa": num(p.get("cohen_kappa")), "gwet_ac1": num(p.get("gwet_ac1"))})
    return pd.DataFrame(rows, columns=["a", "b", "n", "cohen_kappa", "gwet_ac1"])


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
        rows += [{"metric": m, "repeat": r, "fold": f, "difference": float(v)} for (r, f), v in d.items()]
    return pd.DataFrame(rows, columns=["metric", "repeat", "fold", "difference"])


def panel_error_frame(run: Run) -> pd.DataFrame:
    """panel.json's judge_errors as rows (judge, measure, value, lo, hi, gold, gold_lo, gold_hi)."""
    rows = []
    for r in (run.get("panel") or {}).get("judge_errors", []):
        for m in ("sensitivity", "specificity"):
            est, gold = r.get(m) or {}, r.get(f"gold_{m}") or {}
            rows.append({"judge": judge_label(r["judge"], run), "measure": m, "value": num(est.get("value")),
                         "lo": num(est.get("lo")), "hi": num(est.get("hi")), "gold": num(gold.get("value")),
                         "gold_lo": num(gold.get("lo")), "gold_hi": num(gold.get("hi"))})
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
        label = f"{g['group']}\n{count(n_gold)} gold / {count(n_items)}" + (f"; eff. n {count(eff)}" if eff is not None else "")
        for m, _ in METHODS:
            e = g.get(m) if isinstance(g.get(m), dict) else {}
            lo, hi = interval(e)
            rows.append({"group": str(g["group"]), "label": label, "method": m, "value": num(e.get("value")),
                         "lo": lo, "hi": hi, "n_gold": n_gold, "n_items": n_items, "effective_gold_n": eff,
                         "lambda": num(e.get("lambda")) if m == "ppi" else None})
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
        tv, gv = stat((pols.get("targeted") or {}).get(m)), stat((pols.get("global") or {}).get(m))
        if tv is not None and gv is not None:
            out[m] = tv >= gv
        else:
            v = stat((t.get("paired") or {}).get(m))
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
