"""Benchmark of the policy comparison (spec §8) against a straightforward loop implementation.

    PYTHONPATH=src python bench/compare.py [--quick]

1. Paper scale: 4,715 candidates / 100 personas, R = 20, K = 5 (100 folds), global, targeted
   and per_category with coverage. Times `memjudge.comparison.compare` and a loop implementation
   of the same protocol written here (loop over folds, over candidate thresholds, over facts;
   numpy masks per threshold), checks both give identical numbers, prints the speed-up and the
   memory peak (tracemalloc).
2. Scale: 470,000 candidates / 10,000 personas (100× the persons and candidates), same protocol;
   prints time and its ratio to 100× the small case (1.0 = exactly linear).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from memjudge.comparison import compare, compare_prepared, prepare  # noqa: E402

CATS = ["values", "identity", "preferences", "relationships", "work", "hobbies", "health"]
SHARE = [0.215, 0.14, 0.16, 0.13, 0.13, 0.12, 0.105]


def synthetic(n_personas: int, n_candidates: int, seed: int = 0, facts_per_persona: int = 10):
    """Paper-like corpus: values 21.5% of candidates and ~78% supported (rising with
    confidence), the other categories ~96%; confidences with two decimals; a coverage map."""
    rng = np.random.default_rng(seed)
    persona = np.sort(rng.integers(0, n_personas, n_candidates))
    persona[:n_personas] = np.arange(n_personas)  # every persona has candidates
    persona.sort()
    cat = rng.choice(len(CATS), n_candidates, p=SHARE)
    conf = np.round(rng.beta(5, 2, n_candidates), 2)
    values = cat == 0
    p_sup = np.where(values, np.clip(0.45 + 0.5 * conf, 0, 1), 0.962)
    verdict = np.where(rng.random(n_candidates) < p_sup, "supported", "unsupported").astype(object)
    verdict[rng.random(n_candidates) < 0.01] = None
    aid = np.array([f"a{i}" for i in range(n_candidates)])
    pid = np.array([f"p{i:05d}" for i in range(n_personas)])
    cand = pd.DataFrame({"persona_id": pid[persona], "assertion_id": aid, "category": np.array(CATS)[cat],
                         "confidence": conf, "text": "t"})
    lab = pd.DataFrame({"assertion_id": aid, "judge": "sim:bench", "replicate": 0, "verdict": verdict})
    # coverage: each fact is stated by 0–2 random candidates of its persona
    starts = np.searchsorted(persona, np.arange(n_personas))
    ends = np.searchsorted(persona, np.arange(n_personas), side="right")
    rows = []
    for p in range(n_personas):
        ids = aid[starts[p]:ends[p]]
        for f in range(facts_per_persona):
            k = rng.integers(0, 3)
            rows.append((pid[p], f"f{f}", list(rng.choice(ids, size=min(k, len(ids)), replace=False))))
    cov = pd.DataFrame(rows, columns=["persona_id", "fact_id", "covered_by"])
    return cand, lab, cov


# ---------------------------------------------------------------------------------------
# the straightforward implementation: loops over folds, thresholds, categories and facts


def loop_compare(cand, lab, cov, gate=("values",), floor=0.8, R=20, K=5, seed=0):
    df = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left")
    conf = df["confidence"].to_numpy()
    cat = df["category"].to_numpy()
    valid = df["verdict"].notna().to_numpy()
    sup = (df["verdict"] == "supported").to_numpy()
    pers = df["persona_id"].to_numpy()
    personas = sorted(set(pers))
    cats = sorted(set(cat))
    pos = {a: i for i, a in enumerate(df["assertion_id"])}
    facts = [(p, [pos[a] for a in cb if a in pos]) for p, cb in zip(cov["persona_id"], cov["covered_by"]) if cb is not None]

    def value(keep, n):
        v = int((keep & valid).sum())
        k = int(keep.sum())
        ok = k / n >= floor and v > 0
        return (int((keep & sup).sum()) / v if ok else -np.inf), k

    def fit_single(fit, gated):
        n = int(fit.sum())
        best_t, best = -np.inf, -np.inf
        for t in [-np.inf] + sorted(set(conf[fit & gated])):
            s, _ = value(fit & (~gated | (conf >= t)), n)
            if s > best:
                best_t, best = t, s
        return best_t

    def fit_per_category(fit, starts):
        n = int(fit.sum())
        allc = sorted(set(conf[fit]))
        options = {}
        for c in cats:
            cc = sorted(set(conf[fit & (cat == c)]))
            opts = [-np.inf] + cc
            if cc:
                above = [u for u in allc if u > cc[-1]]
                if above:
                    opts.append(above[0])
            options[c] = opts

        def keep_of(th):
            keep = fit.copy()
            for c, t in th.items():
                keep &= (cat != c) | (conf >= t)
            return keep

        def removal(c, t):
            return int((fit & (cat == c) & (conf < t)).sum())

        best = None
        for st in starts:
            th = {}
            for c in cats:
                r = removal(c, st[c])
                th[c] = next(o for o in options[c] if removal(c, o) == r)
            val = value(keep_of(th), n)
            if best is None or val > best[0]:
                best = (val, th)
        cur, th = best
        while True:
            changed = False
            for c in cats:
                if len(options[c]) <= 1:
                    continue
                bs, bk, bt = -np.inf, None, None
                for o in options[c]:
                    s, k = value(keep_of({**th, c: o}), n)
                    if bt is None or s > bs:
                        bs, bk, bt = s, k, o
                if (bs, bk) > cur:
                    th[c], cur, changed = bt, (bs, bk), True
            if not changed:
                return th

    def held_out(test, keep, test_facts):
        kept = test & keep
        v = int((kept & valid).sum())
        f = int((kept & sup).sum()) / v if v else np.nan
        r = int(kept.sum()) / int(test.sum())
        c = sum(any(kept[i] for i in ids) for ids in test_facts) / len(test_facts) if test_facts else np.nan
        return f, r, c

    rows = []
    for r in range(R):
        perm = np.random.default_rng(seed + r).permutation(len(personas))
        for k, fold in enumerate(np.array_split(perm, K)):
            held = {personas[i] for i in fold}
            test = np.array([p in held for p in pers])
            fit = ~test
            test_facts = [ids for p, ids in facts if p in held]
            gated = np.isin(cat, list(gate))
            tg = fit_single(fit, np.ones(len(conf), bool))
            tt = fit_single(fit, gated)
            th = fit_per_category(fit, [{c: tg for c in cats}, {c: (tt if c in gate else -np.inf) for c in cats}])
            pc_keep = np.ones(len(conf), bool)
            for c, t in th.items():
                pc_keep &= (cat != c) | (conf >= t)
            rows.append((r, k, "write_all", *held_out(test, np.ones(len(conf), bool), test_facts)))
            rows.append((r, k, "global", *held_out(test, conf >= tg, test_facts)))
            rows.append((r, k, "targeted", *held_out(test, ~gated | (conf >= tt), test_facts)))
            rows.append((r, k, "per_category", *held_out(test, pc_keep, test_facts)))
    return pd.DataFrame(rows, columns=["repeat", "fold", "policy", "faithfulness", "retention", "coverage"])


def timed(fn, *a, **kw):
    tracemalloc.start()
    t = time.perf_counter()
    out = fn(*a, **kw)
    dt = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, dt, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="R=4 for the loop and large runs (CI smoke)")
    args = ap.parse_args()
    R = 4 if args.quick else 20

    cand, lab, cov = synthetic(100, 4715, seed=0)
    print(f"small: {len(cand)} candidates, {cand.persona_id.nunique()} personas, {len(cov)} facts; R={R} K=5")
    compare(cand, lab, cov, repeats=1, folds=5)  # warm imports
    t = time.perf_counter()
    res = compare(cand, lab, cov, repeats=R, folds=5)
    fast = time.perf_counter() - t
    _, _, peak = timed(compare, cand, lab, cov, repeats=R, folds=5)
    prep, prep_t, _ = timed(prepare, cand, lab, cov)
    t = time.perf_counter()
    compare_prepared(prep, repeats=R, folds=5)
    proto = time.perf_counter() - t
    print(f"  memjudge.comparison.compare: {fast:.3f} s = join {prep_t:.3f} s + protocol {proto:.3f} s "
          f"({proto / (R * 5) * 1000:.2f} ms/fold); memory peak {peak / 2**20:.1f} MiB (tracemalloc)")
    ref, slow, _ = timed(loop_compare, cand, lab, cov, R=R)
    got = res.folds_detail.drop(columns="threshold").reset_index(drop=True)
    same = (got[["repeat", "fold", "policy"]].equals(ref[["repeat", "fold", "policy"]])
            and all(np.array_equal(got[m].to_numpy(float), ref[m].to_numpy(float), equal_nan=True)
                    for m in ("faithfulness", "retention", "coverage")))
    print(f"  loop implementation:       {slow:.3f} s")
    print(f"  speed-up: {slow / fast:.1f}x (target >= 5x); identical numbers: {same}")
    t = time.perf_counter()
    ex = compare_prepared(prep, repeats=R, folds=5, per_category="exact")
    exact_t = time.perf_counter() - t
    pe = ex.to_json()["policies"]["per_category"]
    print(f"  protocol with per_category='exact' (Dinkelbach + knapsack DP per fold): {exact_t:.3f} s; "
          f"held-out faithfulness {100 * pe['faithfulness']['value']:.2f}, retention {100 * pe['retention']['value']:.2f}")
    j = res.to_json()
    for name in ("global", "targeted", "per_category"):
        p = j["policies"][name]
        print(f"  {name:<13} faithfulness {100 * p['faithfulness']['value']:.2f}  retention "
              f"{100 * p['retention']['value']:.2f}  coverage {100 * p['coverage']['value']:.2f}")

    big = synthetic(10_000, 470_000, seed=1)
    print(f"large: {len(big[0])} candidates, 10000 personas, {len(big[2])} facts; R={R} K=5")
    _, _, bpeak = timed(compare, *big, repeats=R, folds=5)
    t = time.perf_counter()
    bprep = prepare(*big)
    bprep_t = time.perf_counter() - t
    t = time.perf_counter()
    compare_prepared(bprep, repeats=R, folds=5)
    bproto = time.perf_counter() - t
    print(f"  memjudge.comparison.compare: {bprep_t + bproto:.2f} s = join {bprep_t:.2f} s + protocol "
          f"{bproto:.2f} s ({bproto / (R * 5) * 1000:.1f} ms/fold); memory peak {bpeak / 2**20:.0f} MiB")
    print(f"  protocol time / (100 x small protocol time) = {bproto / (100 * proto):.2f}; total "
          f"{(bprep_t + bproto) / (100 * fast):.2f} (1.0 = linear scaling)")
    if not same:
        raise SystemExit("loop and vectorised implementations disagree")


if __name__ == "__main__":
    main()
