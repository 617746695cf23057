"""Do PPI++ intervals cover the true support rate when the judge is biased? (simulated)

    python bench/ppi.py [--studies 200] [--pool 1000] [--personas 150] [--n-gold 200] [--B 2000] [--seed 0]
                        [--design uniform|stratified|both]

What it rests on — simulation, not real judges:
- one corpus of `--pool` personas from `memjudge.simulation` (preset `paper`, about 47
  candidates per persona), whose construction truth (`truth.jsonl`: supported or not) is the
  gold; the population support rate (overall and for `values`) is the rate over this pool;
- the judges are memjudge's simulated judges `sim:paper`, `sim:lenient` (accepts 60% of
  over-inferences), `sim:strict` and `sim:noisy` (judges/sim.py profiles), replicate 0,
  labelled once over the whole pool (the sim judge's fast path, the same verdicts `memjudge
  score --judge sim:...` writes);
- each study draws `--personas` personas without replacement from the pool (a study corpus
  of about 7,000 items) and a uniform random gold sample of `--n-gold` of its items, then
  computes judge-only, gold-only and PPI++ support rates with 95% intervals by
  `memjudge.stats.ppi.three_estimates` — the function `memjudge estimate` calls — with the
  persona-cluster bootstrap (B resamples, λ re-tuned in each) and, for comparison, PPI++'s
  iid CLT interval.
With `--design stratified` (or `both`, the default) the gold items are instead drawn as
`memjudge sample --strategy stratified` draws them (category × the judge's verdict, Neyman
allocation; `memjudge.stats.sampling.allocate`) and weighted back as `memjudge estimate` weights them
(gold 1/π_h, `memjudge.stats.active.ipw_three_estimates` post-stratified by category × verdict; until
issue 50 the items without gold weighed 1/(1 − π_h), which counted a stratum sampled whole twice).
Reusing one scored pool and resampling personas and gold sets keeps the run to a few
minutes; drawing 150 of 1,000 personas without replacement makes the intervals very slightly
conservative (finite-population correction ≈ 0.92 on the variance).

Printed per judge: its accuracy against the truth, then for `all` and `values`: coverage of
the pool's true rate and mean interval width of judge-only, gold-only and PPI++, PPI++ with
the CLT interval, the width ratio PPI++ / gold-only and the mean effective gold sample size.
Targets (issue 15): PPI++ coverage ≥ 93% for every judge; judge-only coverage far below for
biased judges; PPI++ width ≤ 0.85 × gold-only width for a judge with ≥ 90% accuracy.
"""

from __future__ import annotations

import argparse
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
from memjudge.stats.active import ipw_three_estimates  # noqa: E402
from memjudge.stats.bootstrap import cluster_weights  # noqa: E402
from memjudge.stats.ppi import three_estimates  # noqa: E402
from memjudge.stats.sampling import _stratum_sd, allocate, stratum_key  # noqa: E402

JUDGES = ("paper", "lenient", "strict", "noisy")


def stratified_gold(idx, categories, yhat_all, n_gold, seed):
    """Gold drawn as `memjudge sample --strategy stratified --labels` draws it, with the weights
    `memjudge estimate` gives: (gold mask, gold weights, unlabelled weights) over the study's items."""
    cat = pd.Series(categories[idx])
    verdict = pd.Series(np.where(yhat_all[idx], "supported", "unsupported"))
    by = ["category", "verdict"]
    keys = stratum_key(by, cat, verdict)
    strata = np.array(sorted(keys.unique()), dtype=object)
    h = pd.Index(strata).get_indexer(keys)
    sizes = np.bincount(h, minlength=len(strata))
    sd = _stratum_sd(keys, pd.DataFrame({"category": cat, "verdict": verdict}), by).reindex(strata).to_numpy()
    alloc = allocate(n_gold, sizes, sd, np.minimum(2, sizes))
    rng = np.random.default_rng(seed)
    gold = np.zeros(len(idx), bool)
    for k in range(len(strata)):
        gold[rng.choice(np.flatnonzero(h == k), alloc[k], replace=False)] = True
    pi = alloc[h] / sizes[h]
    cells = pd.Series(categories[idx]).astype("category").cat.codes.to_numpy().astype(np.int64) * 2 + yhat_all[idx]
    return gold, 1.0 / pi, cells


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--pool", type=int, default=1000, help="personas in the simulated pool")
    ap.add_argument("--personas", type=int, default=150, help="personas per study")
    ap.add_argument("--n-gold", type=int, default=200)
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--judges", default=",".join(JUDGES))
    ap.add_argument("--design", choices=["uniform", "stratified", "both"], default="both")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        memjudge.simulate(preset="paper", seed=args.seed, personas=args.pool, out=tmp)
        cand = memjudge.read_candidates(Path(tmp) / "candidates.jsonl")
        truth = pd.read_json(Path(tmp) / "truth.jsonl", lines=True, dtype={"assertion_id": str})
        truth = truth.set_index("assertion_id").loc[cand["assertion_id"], "supported"].to_numpy(bool)
        verdicts = {}
        for name in args.judges.split(","):
            judge = make_judge(f"sim:{name}", options={"truth": tmp, "seed": args.seed})
            lab = judge.labels(cand)
            verdicts[name] = (lab.set_index("assertion_id").loc[cand["assertion_id"], "verdict"] == "supported").to_numpy()
    t_setup = time.perf_counter() - t0
    personas = np.array(sorted(cand["persona_id"].unique()))
    pcode = np.searchsorted(personas, cand["persona_id"].to_numpy())
    is_values = (cand["category"] == "values").to_numpy()
    true_rate = {"all": truth.mean(), "values": truth[is_values].mean()}
    by_persona = [np.flatnonzero(pcode == p) for p in range(len(personas))]
    rng = np.random.default_rng(args.seed + 1)
    studies = []
    for _s in range(args.studies):
        chosen = np.sort(rng.choice(len(personas), args.personas, replace=False))
        idx = np.concatenate([by_persona[p] for p in chosen])
        gold = np.zeros(len(idx), bool)
        gold[rng.choice(len(idx), args.n_gold, replace=False)] = True
        studies.append((idx, np.searchsorted(chosen, pcode[idx]), gold, rng.integers(2**31)))
    categories = cand["category"].to_numpy()
    W = cluster_weights(args.personas, args.B, args.seed + 2)   # one weight matrix: personas are renumbered per study

    print(f"PPI++ coverage bench: pool {args.pool} personas / {len(cand):,} items (simulated, preset paper), "
          f"{args.studies} studies of {args.personas} personas (~{int(np.mean([len(s[0]) for s in studies])):,} items) "
          f"with {args.n_gold} gold items ({args.design}); 95% intervals, persona bootstrap B = {args.B}")
    print(f"true support rate: all {true_rate['all']:.4f}, values {true_rate['values']:.4f}\n")
    designs = ["uniform", "stratified"] if args.design == "both" else [args.design]
    rows = []
    for design in designs:
      for name, yhat_all in verdicts.items():
        acc = float((yhat_all == truth).mean())
        drawn = [stratified_gold(idx, categories, yhat_all, args.n_gold, seed) if design == "stratified"
                 else (gold, None, None) for idx, _, gold, seed in studies]
        for group in ("all", "values"):
            cov = {k: [] for k in ("judge", "gold", "ppi", "ppi_clt")}
            wid = {k: [] for k in cov}
            eff = []
            for (idx, pc, _, _), (gold, w, wu) in zip(studies, drawn):
                m = np.ones(len(idx), bool) if group == "all" else is_values[idx]
                y, yh = truth[idx][m].astype(float), yhat_all[idx][m].astype(float)
                args_ = (pc[m], y, yh, gold[m], np.ones(m.sum(), bool), yh.astype(bool))
                if w is None:
                    r = three_estimates(*args_, n_personas=args.personas, interval="bootstrap", W=W)
                    c = three_estimates(*args_, n_personas=args.personas, interval="clt")
                else:
                    kw = {"cells": wu[m] if group == "all" else None}
                    r = ipw_three_estimates(*args_, w[m], n_personas=args.personas, interval="bootstrap", W=W, **kw)
                    c = ipw_three_estimates(*args_, w[m], n_personas=args.personas, interval="clt", **kw)
                t = true_rate[group]
                for k, src, key in (("judge", r, "judge"), ("gold", r, "gold"), ("ppi", r, "ppi"), ("ppi_clt", c, "ppi")):
                    lo, hi = src[f"{key}_lo"], src[f"{key}_hi"]
                    cov[k].append(lo <= t <= hi)
                    wid[k].append(hi - lo)
                eff.append(r["effective_gold_n"])
            rows.append({"design": design, "judge": f"sim:{name}", "accuracy": acc, "group": group,
                         **{f"cov_{k}": np.mean(v) for k, v in cov.items()},
                         **{f"width_{k}": np.nanmean(v) for k, v in wid.items()},
                         "width_ratio": np.nanmean(wid["ppi"]) / np.nanmean(wid["gold"]),
                         "eff_n": np.nanmean(eff)})
    t_total = time.perf_counter() - t0
    df = pd.DataFrame(rows)
    print("| gold sample | judge | accuracy | group | coverage judge-only | coverage gold-only | coverage PPI++ | coverage PPI++ (CLT) "
          "| width judge-only | width gold-only | width PPI++ | PPI++ / gold-only width | effective gold n |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in df.itertuples():
        print(f"| {r.design} | {r.judge} | {r.accuracy:.3f} | {r.group} | {r.cov_judge:.1%} | {r.cov_gold:.1%} | {r.cov_ppi:.1%} | "
              f"{r.cov_ppi_clt:.1%} | {r.width_judge:.4f} | {r.width_gold:.4f} | {r.width_ppi:.4f} | "
              f"{r.width_ratio:.2f} | {r.eff_n:.0f} |")
    ok_cov = bool((df["cov_ppi"] >= 0.93).all())
    good = df[(df["accuracy"] >= 0.90) & (df["group"] == "all") & (df["design"] == "uniform")]
    ok_width = bool((good["width_ratio"] <= 0.85).all()) and len(good) > 0
    print(f"\ntargets: PPI++ coverage ≥ 93% for every judge and group: {'met' if ok_cov else 'NOT met'}; "
          f"PPI++ width ≤ 0.85 × gold-only for judges with ≥ 90% accuracy (all, uniform gold): {'met' if ok_width else 'NOT met'}")
    print(f"time: setup (simulate + sim judges) {t_setup:.0f} s, total {t_total:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
