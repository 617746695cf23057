"""Active gold samples (issue 50): do the intervals cover, and how many labels do they save? (simulated)

    python bench/active.py [--studies 500] [--pool 1000] [--personas 150] [--n 200] [--first 50] [--B 1000]
                           [--auc 0.9] [--seed 0] [--out bench/results/active.txt]

What it rests on — simulation, not real judges:
- one corpus of `--pool` personas from `memjudge.simulation` (preset `paper`); its construction
  truth is the gold, the pool's support rate (overall and per category) the truth to cover;
- the judges are `sim:paper` with a declared confidence (`confidence_auc` `--auc`, default 0.9:
  |judge_score| tells its right answers from its wrong ones with that AUC) and the same judge
  with `confidence_auc` 0.5 (a confidence that carries no signal), labelled once over the pool
  (the verdicts and scores `memjudge score --judge sim:paper` writes; a study reuses them);
- each study draws `--personas` personas from the pool (about 7,000 items) and then `--n` gold
  items by each design, the way `memjudge sample` draws them, with the same functions:
  * uniform: a simple random sample; estimated by PPI++ (ppi_py's, equal weights);
  * stratified: today's default (category × verdict, Neyman, `stats.sampling.allocate`);
  * active: a stratified first batch of `--first`, labelled, calibrates P(judge wrong | verdict,
    |log-odds|) (`stats.active.active_design`); then n − first more drawn independently with
    π ∝ sqrt(that), floored at 0.1·n/N, W = 0 (pure active); the union's probabilities
    π1 + (1 − π1)·π weigh the estimate;
  * robust: the same with W chosen on the first batch (`--mix auto`);
  the weighted designs are estimated as `memjudge estimate` does (`stats.active.ipw_three_estimates`,
  inverse-probability-weighted PPI post-stratified by category × verdict; for the active designs the
  prediction is the judge's confidence calibrated on the gold, P(supported | verdict, |log-odds|)),
  every design with the persona-cluster bootstrap (B resamples, the small-count floor), 95% intervals.
- labels needed: the active design run again at smaller n (the first batch kept at `--first`);
  the n where its mean width (overall) meets the stratified design's at `--n` is interpolated.

Printed: coverage and mean width per design and group (overall and each category), the width
ratios active / stratified and active / uniform (overall), robust / uniform for the no-signal
judge, the labels needed, and the targets (issue 50): coverage ≥ 93% (active and robust, every
group); at n = 200 active width ≤ 0.85 × stratified and ≤ 0.75 × uniform (AUC 0.9); with no
signal, robust width ≤ 1.05 × uniform.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import memjudge  # noqa: E402
from memjudge.judges import make_judge  # noqa: E402
from memjudge.stats.active import active_design, error_model, ipw_three_estimates, predictor  # noqa: E402
from memjudge.stats.bootstrap import cluster_weights  # noqa: E402
from memjudge.stats.ppi import three_estimates  # noqa: E402
from memjudge.stats.sampling import _stratum_sd, allocate, stratum_key  # noqa: E402

DESIGNS = ("uniform", "stratified", "active", "robust")


def stratified_probs(cat, sup, n):
    """(stratum index per item, allocation, sizes): `memjudge sample --strategy stratified --labels`."""
    verdict = pd.Series(np.where(sup, "supported", "unsupported"))
    catS = pd.Series(cat)
    by = ["category", "verdict"]
    keys = stratum_key(by, catS, verdict)
    strata = np.array(sorted(keys.unique()), dtype=object)
    h = pd.Index(strata).get_indexer(keys)
    sizes = np.bincount(h, minlength=len(strata))
    sd = _stratum_sd(keys, pd.DataFrame({"category": catS, "verdict": verdict}), by).reindex(strata).to_numpy()
    floor = np.minimum(2, sizes)
    if floor.sum() > n:
        floor = np.minimum(1, sizes)
    alloc = allocate(n, sizes, sd, floor)
    return h, alloc, sizes


def draw_stratified(h, alloc, sizes, rng):
    gold = np.zeros(len(h), bool)
    for k in range(len(alloc)):
        if alloc[k]:
            gold[rng.choice(np.flatnonzero(h == k), alloc[k], replace=False)] = True
    return gold, alloc[h] / sizes[h]


def draw_active(cat, sup, score, truth, n, first, mix, rng):
    """Stratified first batch of `first`, then an active top-up to n in expectation: (gold, union π, W)."""
    h, alloc, sizes = stratified_probs(cat, sup, first)
    g1, pi1 = draw_stratified(h, alloc, sizes, rng)
    N = len(sup)
    pool = ~g1
    d = active_design(score, sup, np.ones(N, bool), n - first, pool=pool, pi1=pi1, gold=g1, y=truth.astype(float),
                      min_prob=0.1 * (n - first) / pool.sum(), mix=mix)
    g2 = pool & (rng.random(N) < d["pi"])
    return g1 | g2, d["union"], d["W"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=500)
    ap.add_argument("--pool", type=int, default=1000, help="personas in the simulated pool")
    ap.add_argument("--personas", type=int, default=150, help="personas per study")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--first", type=int, default=50, help="the stratified first batch of the active designs")
    ap.add_argument("--B", type=int, default=500)
    ap.add_argument("--auc", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smaller", default="130,150,170", help="n values for the labels-needed curve")
    ap.add_argument("--out", default=None, help="also write the report there")
    args = ap.parse_args(argv)
    lines: list[str] = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        memjudge.simulate(preset="paper", seed=args.seed, personas=args.pool, out=tmp)
        cand = memjudge.read_candidates(Path(tmp) / "candidates.jsonl")
        truth = pd.read_json(Path(tmp) / "truth.jsonl", lines=True, dtype={"assertion_id": str})
        truth = truth.set_index("assertion_id").loc[cand["assertion_id"], "supported"].to_numpy(bool)
        judges = {}
        for label, auc in ((f"AUC {args.auc:g}", args.auc), ("no signal (AUC 0.5)", 0.5)):
            j = make_judge("sim:paper", options={"truth": tmp, "seed": args.seed, "confidence_auc": auc})
            lab = j.labels(cand).set_index("assertion_id").loc[cand["assertion_id"]]
            judges[label] = ((lab["verdict"] == "supported").to_numpy(), lab["judge_score"].to_numpy(float))
    t_setup = time.perf_counter() - t0
    personas = np.array(sorted(cand["persona_id"].unique()))
    pcode = np.searchsorted(personas, cand["persona_id"].to_numpy())
    categories = cand["category"].to_numpy()
    cats = sorted(set(categories))
    groups = ["all", *cats]
    true_rate = {"all": truth.mean(), **{c: truth[categories == c].mean() for c in cats}}
    by_persona = [np.flatnonzero(pcode == p) for p in range(len(personas))]
    rng = np.random.default_rng(args.seed + 1)
    studies = []
    for _ in range(args.studies):
        chosen = np.sort(rng.choice(len(personas), args.personas, replace=False))
        idx = np.concatenate([by_persona[p] for p in chosen])
        studies.append((idx, np.searchsorted(chosen, pcode[idx]), int(rng.integers(2**31))))
    W = cluster_weights(args.personas, args.B, args.seed + 2)
    load = os.getloadavg()[0]
    say(f"Active gold samples (issue 50): pool {args.pool} personas / {len(cand):,} items (simulated, preset paper), "
        f"{args.studies} studies of {args.personas} personas (~{int(np.mean([len(s[0]) for s in studies])):,} items), "
        f"n = {args.n} gold (active: {args.first} stratified first, then active); 95% intervals, persona bootstrap "
        f"B = {args.B}; load average {load:.2f} on {os.cpu_count()} cores")
    say("true support rate: " + ", ".join(f"{g} {true_rate[g]:.4f}" for g in groups))

    cat_code = pd.Series(categories).astype("category").cat.codes.to_numpy().astype(np.int64)

    def estimate(idx, pc, gold, pi, sup, score=None, gset=None):
        """Per group: (lo, hi, value) of PPI, as memjudge estimate computes it: ppi_py's PPI++ for a
        uniform sample; the weighted estimator post-stratified by category × verdict (verdict in a
        category) otherwise, with the judge's calibrated confidence as prediction for an active one."""
        y = truth[idx].astype(float)
        s = sup[idx]
        yh = s.astype(float)
        f = None
        if score is not None:
            fit = gold
            coef = error_model(score[idx][fit], s[fit], (y[fit] != yh[fit]).astype(float), 1.0 / pi[fit])
            f = predictor(coef, score[idx], s, np.ones(len(idx), bool))
        cells = cat_code[idx] * 2 + s.astype(np.int64)
        out = {}
        for g in gset or groups:
            m = np.ones(len(idx), bool) if g == "all" else categories[idx] == g
            args_ = (pc[m], y[m], yh[m], gold[m], np.ones(m.sum(), bool), s[m])
            if pi is None:
                r = three_estimates(*args_, n_personas=args.personas, interval="bootstrap", W=W)
            else:
                r = ipw_three_estimates(*args_, 1.0 / pi[m], n_personas=args.personas, interval="bootstrap", W=W,
                                        cells=cells[m] if g == "all" else None, f=None if f is None else f[m])
            out[g] = (r["ppi_lo"], r["ppi_hi"], r["ppi_value"])
        return out

    rows = []
    mixes: dict[str, list[float]] = {k: [] for k in judges}
    realised: dict[str, list[int]] = {}
    for ji, (jname, (sup_all, score_all)) in enumerate(judges.items()):
        # the no-signal judge answers one question (robust vs uniform, overall): only "all"
        gset = groups if ji == 0 else ["all"]
        for design in DESIGNS:
            cov = {g: [] for g in gset}
            wid = {g: [] for g in gset}
            for idx, pc, seed in studies:
                r = np.random.default_rng(seed)
                sup, score, cat, tr = sup_all[idx], score_all[idx], categories[idx], truth[idx]
                if design == "uniform":
                    gold = np.zeros(len(idx), bool)
                    gold[r.choice(len(idx), args.n, replace=False)] = True
                    pi = None
                elif design == "stratified":
                    gold, pi = draw_stratified(*stratified_probs(cat, sup, args.n), r)
                else:
                    gold, pi, Wm = draw_active(cat, sup, score, tr, args.n, args.first,
                                               0.0 if design == "active" else None, r)
                    if design == "robust":
                        mixes[jname].append(Wm)
                realised.setdefault(f"{jname}|{design}", []).append(int(gold.sum()))
                est = estimate(idx, pc, gold, pi, sup_all, score_all if design in ("active", "robust") else None, gset)
                for g in gset:
                    lo, hi, _ = est[g]
                    cov[g].append(lo <= true_rate[g] <= hi)
                    wid[g].append(hi - lo)
            for g in gset:
                rows.append({"judge": jname, "design": design, "group": g, "coverage": np.mean(cov[g]),
                             "width": np.nanmean(wid[g])})
            say(f"  done: {jname}, {design} ({time.perf_counter() - t0:.0f} s)")
    df = pd.DataFrame(rows)

    # labels needed: active (W = 0) at smaller n, overall width, judge of informative confidence
    jname0 = next(iter(judges))
    sup_all, score_all = judges[jname0]
    curve = []
    for n_small in [int(x) for x in args.smaller.split(",") if x]:
        ws = []
        for idx, pc, seed in studies[: max(100, args.studies // 3)]:
            r = np.random.default_rng(seed + 7)
            gold, pi, _ = draw_active(categories[idx], sup_all[idx], score_all[idx], truth[idx], n_small,
                                      min(args.first, n_small // 2), 0.0, r)
            lo, hi, _ = estimate(idx, pc, gold, pi, sup_all, score_all, ["all"])["all"]
            ws.append(hi - lo)
        curve.append((n_small, float(np.nanmean(ws))))
    t_total = time.perf_counter() - t0

    say("")
    say("| judge confidence | design | group | coverage | mean width | mean gold n |")
    say("|---|---|---|---|---|---|")
    for r in df.itertuples():
        nn = np.mean(realised[f"{r.judge}|{r.design}"])
        say(f"| {r.judge} | {r.design} | {r.group} | {r.coverage:.1%} | {r.width:.4f} | {nn:.1f} |")

    def width(j, d, g="all"):
        return float(df[(df.judge == j) & (df.design == d) & (df.group == g)]["width"].iloc[0])

    j1, j0 = list(judges)
    ratios = {
        "active / stratified": width(j1, "active") / width(j1, "stratified"),
        "active / uniform": width(j1, "active") / width(j1, "uniform"),
        "robust / stratified": width(j1, "robust") / width(j1, "stratified"),
        "robust / uniform": width(j1, "robust") / width(j1, "uniform"),
        "no signal: robust / uniform": width(j0, "robust") / width(j0, "uniform"),
        "no signal: active / uniform": width(j0, "active") / width(j0, "uniform"),
    }
    say("")
    say("width ratios (overall): " + "; ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
    say("W chosen by the robust rule: " + "; ".join(
        f"{j}: mean {np.mean(v):.2f}, median {np.median(v):.2f}" for j, v in mixes.items() if v))
    target = width(j1, "stratified")
    say(f"labels needed by active ({j1}) for the stratified width at n = {args.n} ({target:.4f}): "
        + ", ".join(f"n {n_} → {w_:.4f}" for n_, w_ in curve) + f", n {args.n} → {width(j1, 'active'):.4f}")
    pts = sorted([*curve, (args.n, width(j1, "active"))])
    need = None
    for (n_a, w_a), (n_b, w_b) in zip(pts, pts[1:]):
        if w_a >= target >= w_b:
            need = n_a + (w_a - target) / (w_a - w_b) * (n_b - n_a)
            break
    if need is None:
        say("  (the stratified width is outside the measured curve)")
    else:
        say(f"  ≈ {need:.0f} labels instead of {args.n} ({1 - need / args.n:.0%} fewer)")
    cov_ok = bool((df[df.design.isin(["active", "robust"])]["coverage"] >= 0.93).all())
    say("coverage (every group, each design): " + "; ".join(
        f"{j} {d}: lowest {g_.coverage.min():.1%} ({g_.loc[g_.coverage.idxmin(), 'group']})"
        for (j, d), g_ in df.groupby(["judge", "design"], sort=False)))
    say("")
    say(f"targets: coverage ≥ 93% (active and robust, every group, both judges): {'met' if cov_ok else 'NOT met'} "
        f"(lowest {df[df.design.isin(['active', 'robust'])]['coverage'].min():.1%}); "
        f"active ≤ 0.85 × stratified: {'met' if ratios['active / stratified'] <= 0.85 else 'NOT met'}; "
        f"active ≤ 0.75 × uniform: {'met' if ratios['active / uniform'] <= 0.75 else 'NOT met'}; "
        f"no signal: robust ≤ 1.05 × uniform: {'met' if ratios['no signal: robust / uniform'] <= 1.05 else 'NOT met'}")
    say(f"time: setup (simulate + sim judges) {t_setup:.0f} s, total {t_total:.0f} s; load average now "
        f"{os.getloadavg()[0]:.2f}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
