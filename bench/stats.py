"""Benchmark of the agreement and noise reports with persona-cluster bootstrap intervals.

    python bench/stats.py [--items 20000] [--personas 300] [--judges 3] [--B 2000] [--naive-resamples 5]

A synthetic study (three labels, judges that agree ~90%) is timed through the Python API
(`memjudge.stats.agreement.agreement`, `memjudge.stats.noise.noise`) from an in-memory labels frame, and
compared in the same run with the naive peer: a loop that, for each resample, rebuilds the
resampled labels by concatenating the drawn personas' rows and computes every figure with the
reference libraries (scikit-learn κ, irrCAC AC1, krippendorff α, statsmodels Fleiss κ). The
naive loop is run for a few resamples and extrapolated to B; the output says so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.stats.agreement import agreement  # noqa: E402
from memjudge.stats.bootstrap import cluster_weights  # noqa: E402
from memjudge.stats.noise import noise  # noqa: E402

LABELS = np.array(["supported", "unsupported", "partial"], dtype=object)


def synthetic_labels(items: int, personas: int, judges: int, replicates: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    persona = rng.integers(0, personas, size=items)
    truth = rng.choice(3, size=items, p=[0.75, 0.2, 0.05])
    frames = []
    for j in range(judges):
        for r in range(replicates):
            wrong = rng.random(items) < 0.08 + 0.02 * j
            verdict = np.where(wrong, rng.integers(0, 3, size=items), truth)
            v = LABELS[verdict].copy()
            v[rng.random(items) < 0.01] = None  # unparseable answers
            frames.append(pd.DataFrame({
                "assertion_id": [f"a{k}" for k in range(items)], "persona_id": [f"p{p:04d}" for p in persona],
                "category": "c", "judge": f"judge{j}", "rubric": "support", "replicate": r, "verdict": v}))
    return pd.concat(frames, ignore_index=True)


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def naive_resample(groups: dict, personas: list[str], w: np.ndarray) -> dict:
    """One resample the naive way: rebuild the rows, pivot, call the reference libraries."""
    import krippendorff
    from irrCAC.raw import CAC
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    parts = []
    for p, k in zip(personas, w):
        for copy in range(int(k)):
            g = groups[p].copy()
            g["assertion_id"] = g["assertion_id"] + f"#{copy}"  # a persona drawn twice is two clusters
            parts.append(g)
    sample = pd.concat(parts, ignore_index=True)
    sample = sample[(sample["replicate"] == 0) & sample["verdict"].notna()]
    wide = sample.pivot(index="assertion_id", columns="judge", values="verdict")
    out = {}
    for a, b in combinations(wide.columns, 2):
        sh = wide[[a, b]].dropna()
        out[(a, b, "po")] = float((sh[a] == sh[b]).mean())
        out[(a, b, "kappa")] = cohen_kappa_score(sh[a], sh[b])
        out[(a, b, "ac1")] = CAC(sh.reset_index(drop=True)).gwet()["est"]["coefficient_value"]
    cats = sorted(set(sample["verdict"]))
    codes = wide.apply(lambda c: c.map({k: i for i, k in enumerate(cats)})).to_numpy(dtype=float)
    out["alpha"] = krippendorff.alpha(reliability_data=codes.T, level_of_measurement="nominal")
    complete = codes[~np.isnan(codes).any(axis=1)].astype(int)
    out["fleiss"] = fleiss_kappa(aggregate_raters(complete, n_cat=len(cats))[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--personas", type=int, default=300)
    ap.add_argument("--judges", type=int, default=3)
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--naive-resamples", type=int, default=5)
    args = ap.parse_args()

    labels = synthetic_labels(args.items, args.personas, args.judges, replicates=2)
    print(f"study: {args.items} items, {args.personas} personas, {args.judges} judges, 2 replicates "
          f"({len(labels)} label rows), B = {args.B}")

    agreement(labels, B=args.B)  # warm-up: imports, allocator
    t_agree = timed(lambda: agreement(labels, B=args.B), args.repeat)
    t_noise = timed(lambda: noise(labels, B=args.B), args.repeat)
    t_point = timed(lambda: agreement(labels, B=1), args.repeat)
    print(f"agreement report with intervals (pairs, α, Fleiss; B={args.B}): {t_agree:.3f} s "
          f"(median of {args.repeat}; target < 1 s: {'met' if t_agree < 1 else 'NOT met'})")
    print(f"  of which point estimates and sufficient statistics (B=1): {t_point:.3f} s; "
          f"{args.B} resamples add {max(t_agree - t_point, 0):.3f} s")
    print(f"noise report with intervals (B={args.B}): {t_noise:.3f} s")

    personas = sorted(labels["persona_id"].unique())
    W = cluster_weights(len(personas), args.B, 0)
    k = min(args.naive_resamples, args.B)
    groups = dict(tuple(labels.groupby("persona_id")))  # split once, outside the loop
    t = time.perf_counter()
    for b in range(k):
        naive_resample(groups, personas, W[b])
    per = (time.perf_counter() - t) / k
    naive_total = per * args.B
    print(f"naive per-resample loop (rebuild rows + sklearn/irrCAC/krippendorff/statsmodels): "
          f"{per:.3f} s per resample, measured on {k} resamples and extrapolated to B={args.B}: "
          f"{naive_total:.0f} s")
    print(f"ratio naive / vectorised: {naive_total / t_agree:.0f}x")
    print("(the tests check that both paths give identical intervals: tests/test_agreement.py::test_bootstrap_equals_naive_persona_resampling)")


if __name__ == "__main__":
    main()
