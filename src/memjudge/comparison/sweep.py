"""Full-sample artefacts of a comparison for the report: the threshold sweep and the support
rate by confidence bin (the reliability of the candidates' confidences per category).

``sweep.json`` — the global-threshold sweep on the full sample::

    {"judge": SPEC, "replicate": 0|"majority", "floor": 0.8, "gate": [CAT, ...],
     "write_all": {"faithfulness", "retention", "coverage"},
     "global":   [{"threshold": null|t, "faithfulness", "retention", "coverage"}, ...],
     "targeted": [{"threshold": null|t, "faithfulness", "retention", "coverage"}, ...],
     "fitted": {"global": {"threshold", "faithfulness", "retention", "coverage"},
                "targeted": {"threshold", "gate": [CAT, ...], "faithfulness", "retention", "coverage"},
                "per_category": {"threshold": {CAT: null|t}, "faithfulness", "retention", "coverage"}}}

  ``global`` has one row per candidate threshold (−∞ as null, then every distinct
  confidence, ascending); ``targeted`` the same over the gated categories' confidences;
  ``fitted`` is each policy fitted on all personas (what ``--export-policy`` writes).
  ``coverage`` is null throughout when no coverage file was given.

``calibration.json`` — support rate by confidence bin within each category, chosen judge::

    {"judge": SPEC, "replicate": 0|"majority", "B": 2000, "level": 0.95,
     "categories": [{"category", "n", "valid", "supported", "support_rate", "ci_lo", "ci_hi",
                     "binning": "distinct"|"deciles",
                     "bins": [{"conf_lo", "conf_hi", "n", "valid", "supported",
                               "support_rate", "ci_lo", "ci_hi"}, ...]}, ...]}

  A category with at most 10 distinct confidences gets one bin per value (conf_lo = conf_hi);
  otherwise fixed deciles [0, .1), [.1, .2), …, [.9, 1] — only populated bins are listed.
  ci_lo/ci_hi are persona-cluster bootstrap percentile intervals (`memjudge.stats.bootstrap`).
"""

from __future__ import annotations

import numpy as np

from memjudge.comparison.prepare import Prepared
from memjudge.comparison.protocol import full_sample, num
from memjudge.formats import json_safe
from memjudge.policies.kernel import Options, sorted_options


def coverage_curve(prep: Prepared, always: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Coverage at each threshold when candidates with `always` are kept regardless: a fact is
    covered at t iff its best covering candidate's key ≥ t (key = +∞ for always-kept)."""
    nf = len(prep.fact_persona)
    if not prep.has_coverage or nf == 0:
        return np.full(len(thresholds), np.nan)
    key = np.where(always, np.inf, prep.conf)
    best = np.full(nf, -np.inf)
    np.maximum.at(best, prep.pair_fact, key[prep.pair_cand])
    covered_any = np.isfinite(best) | (best == np.inf)
    s = np.sort(best[covered_any])
    # facts covered at t = those with best >= t
    return (len(s) - np.searchsorted(s, thresholds, side="left")) / nf


def sweep_rows(prep: Prepared, gated: np.ndarray) -> list[dict]:
    g = np.flatnonzero(gated)
    order = g[np.argsort(prep.conf[g], kind="stable")]
    sup = prep.sup & prep.valid
    opt: Options = sorted_options(prep.conf[order], prep.valid[order], sup[order])
    ng = ~gated
    kept = int(ng.sum()) + opt.n - opt.removed
    valid = int(prep.valid[ng].sum()) + opt.valid - opt.removed_valid
    s = int(sup[ng].sum()) + opt.supported - opt.removed_supported
    with np.errstate(invalid="ignore", divide="ignore"):
        faith = s / valid
    ret = kept / prep.n
    cov = coverage_curve(prep, ng, opt.thresholds)
    # −∞ and the lowest confidence make the same decisions; keep both, as candidates.
    return [{"threshold": num(t), "faithfulness": num(f), "retention": num(r),
             "coverage": num(c) if prep.coverage_measured else None}
            for t, f, r, c in zip(opt.thresholds, faith, ret, cov)]


def sweep(prep: Prepared, gate: list[str], floor: float, *, fitted: dict | None = None,
          write_all: dict | None = None) -> dict:
    gated = np.isin(prep.categories[prep.cat], gate)
    out = {
        "judge": prep.judge, "replicate": prep.replicate, "floor": floor, "gate": list(gate),
        "write_all": json_safe(write_all or full_sample(prep)),
        "global": sweep_rows(prep, np.ones(prep.n, bool)),
        "targeted": sweep_rows(prep, gated),
        "fitted": {},
    }
    cats = prep.categories.tolist()
    for name, thr in (fitted or {}).items():
        fs = json_safe(full_sample(prep, thr))
        if name == "global":
            t = num(thr[0])
        elif name == "targeted":
            gi = [i for i, c in enumerate(cats) if c in gate]
            t = num(thr[gi[0]]) if gi else None
        else:
            t = {c: num(v) for c, v in zip(cats, thr)}
        entry = {"threshold": t, **fs}
        if name == "targeted":
            entry["gate"] = list(gate)
        out["fitted"][name] = entry
    return out


def confidence_bins(conf: np.ndarray):
    """("distinct", values) when ≤ 10 distinct confidences, else ("deciles", edges)."""
    vals = np.unique(conf)
    if len(vals) <= 10:
        return "distinct", vals
    return "deciles", np.round(np.linspace(0.0, 1.0, 11), 1)


def calibration(prep: Prepared, *, B: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    from memjudge.stats.bootstrap import cluster_counts, cluster_weights, ratio_interval

    P = len(prep.personas)
    W = cluster_weights(P, B=B, seed=seed)
    sup = (prep.sup & prep.valid).astype(float)
    valid = prep.valid.astype(float)
    cats_out = []
    for ci, c in enumerate(prep.categories.tolist()):
        m = prep.cat == ci
        conf = prep.conf[m]
        kind, spec = confidence_bins(conf)
        if kind == "distinct":
            b = np.searchsorted(spec, conf)
            nb = len(spec)
            edges = [(float(v), float(v)) for v in spec]
        else:
            b = np.clip(np.searchsorted(spec, conf, side="right") - 1, 0, 9)
            nb = 10
            edges = [(float(spec[i]), float(spec[i + 1])) for i in range(10)]
        pers = prep.persona[m]
        # per-persona per-bin sufficient statistics, then all resamples by one matrix product
        S = cluster_counts(pers, b, P, nb + 1, weights=sup[m])
        V = cluster_counts(pers, b, P, nb + 1, weights=valid[m])
        S[:, nb] = S[:, :nb].sum(1)
        V[:, nb] = V[:, :nb].sum(1)
        lo, hi = ratio_interval(S, V, W, level)
        counts = np.bincount(b, minlength=nb)
        tv, ts = V.sum(0), S.sum(0)
        bins = []
        for i in range(nb):
            if counts[i] == 0:
                continue
            bins.append({"conf_lo": edges[i][0], "conf_hi": edges[i][1], "n": int(counts[i]),
                         "valid": int(tv[i]), "supported": int(ts[i]),
                         "support_rate": num(ts[i] / tv[i]) if tv[i] else None,
                         "ci_lo": num(lo[i]), "ci_hi": num(hi[i])})
        cats_out.append({"category": c, "n": int(m.sum()), "valid": int(tv[nb]), "supported": int(ts[nb]),
                         "support_rate": num(ts[nb] / tv[nb]) if tv[nb] else None,
                         "ci_lo": num(lo[nb]), "ci_hi": num(hi[nb]), "binning": kind, "bins": bins})
    return {"judge": prep.judge, "replicate": prep.replicate, "B": B, "level": level, "categories": cats_out}


__all__ = ["calibration", "confidence_bins", "coverage_curve", "sweep", "sweep_rows"]
