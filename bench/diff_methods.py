"""Why `memjudge diff`'s intervals missed: which interval method covers, on the same simulated runs.

    python bench/diff_methods.py [--pairs 10000] [--B 2000] [--seed 7]

bench/diff.py's scenarios (the same generative model, its `population_rates` truth), drawn as
per-persona sums directly (binomial counts per persona and category: the same distribution as its
item-level frames, about a hundred times cheaper), so each scenario gets enough pairs for a
figure's Monte-Carlo SE of about 0.2 points. On each pair, the paired persona-bootstrap replicates
of NEW − BASE (one weight matrix, `memjudge.stats.bootstrap.cluster_weights`) go through every
method of `memjudge.stats.bootstrap.interval`, and BCa at the expanded level besides.

Printed per figure: bias of the point estimate (points), the SD of z = (estimate − truth) /
bootstrap SD (above 1: the bootstrap SD is too small), the mean of z, the skewness of the
estimate over pairs; then each method's coverage and its misses below/above the truth (even
misses: too narrow; uneven: shifted or skewed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import diff as d  # noqa: E402  (bench/diff.py: the scenarios and their truth)
from memjudge.stats import bootstrap as bs  # noqa: E402

METHODS = ("percentile", "expanded", "bca", "bca-exp")


def sums_run(rng, shared, rates, own_sd, n_per=47.15, size_sd=0.3, spec=d.SPEC):
    """One run's per-persona (judged supported, items) by category, and the truly supported."""
    own = rng.normal(0, own_sd, shared.size)
    m = np.maximum(rng.poisson(n_per * rng.lognormal(-size_sd ** 2 / 2, size_sd, shared.size)), 1)
    n = rng.multinomial(m, d.SHARES)
    lr = np.array([d.logit(rates[c]) for c in d.CATS])[None, :] + (shared + own)[:, None]
    t = rng.binomial(n, d.expit(lr))
    s = rng.binomial(t, d.SENS) + rng.binomial(n - t, 1 - spec)
    return s.astype(float), n.astype(float), t


def with_all(x):
    return np.column_stack([x.sum(1), x])


def intervals(nb, db, nn, dn, W, level=0.95):
    P = nb.shape[0]

    def ratio(a, b):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)

    point = ratio(nn.sum(0), dn.sum(0)) - ratio(nb.sum(0), db.sum(0))
    reps = ratio(W @ nn, W @ dn) - ratio(W @ nb, W @ db)
    jack = bs.jackknife_ratios(nn, dn) - bs.jackknife_ratios(nb, db)
    out = {
        "percentile": bs.interval(reps, level),
        "expanded": bs.interval(reps, level, method="expanded", n=P),
        "bca": bs.interval(reps, level, method="bca", point=point, jackknife=jack),
        "bca-exp": bs.interval(reps, bs.expanded_level(level, P), method="bca", point=point, jackknife=jack),
    }
    return point, np.nanstd(reps, axis=0, ddof=1), out


def scenario(name, rng, pairs, B, base_rates, new_rates, shared_sd=0.6, own_sd=0.4, n_p=100, items_spec=None):
    if items_spec is None:
        sd = np.hypot(shared_sd, own_sd)
        tb, tn = d.population_rates(base_rates, sd), d.population_rates(new_rates, sd)
    else:   # one candidate set, a new judge: items mode
        sd = shared_sd
        tb, tn = d.population_rates(d.PAPER, sd), d.population_rates(d.PAPER, sd, spec=items_spec)
    keys = ["all", *d.CATS]
    truth = np.array([tn[k] - tb[k] for k in keys])
    rec: dict[str, list] = {m: [] for m in METHODS}
    zs, pts = [], []
    t0 = time.perf_counter()
    for _ in range(pairs):
        shared = rng.normal(0, shared_sd, n_p)
        if items_spec is None:
            sb, nb, _ = sums_run(rng, shared, base_rates, own_sd)
            sn, nn, _ = sums_run(rng, shared, new_rates, own_sd)
        else:
            sb, nb, t = sums_run(rng, shared, d.PAPER, 0.0)
            nn = nb
            sn = (rng.binomial(t, d.SENS) + rng.binomial(nb.astype(int) - t, 1 - items_spec)).astype(float)
        W = bs.cluster_weights(n_p, B, int(rng.integers(1 << 31)))
        point, sdb, out = intervals(with_all(sb), with_all(nb), with_all(sn), with_all(nn), W)
        zs.append((point - truth) / sdb)
        pts.append(point)
        for m, lohi in out.items():
            rec[m].append(lohi)
    zs, pts = np.array(zs), np.array(pts)
    arr = {m: np.array(v) for m, v in rec.items()}   # (pairs, 2, figures)
    print(f"\n## {name}: {pairs} pairs ({(time.perf_counter() - t0) / pairs * 1000:.0f} ms a pair); a coverage's "
          f"Monte-Carlo SE at 95%: {100 * np.sqrt(.95 * .05 / pairs):.2f} points")
    print(f"{'figure':<12}{'truth':>7}{'bias':>7}{'sd(z)':>7}{'mean z':>7}{'skew':>7}  "
          + "".join(f"{m + ' cov lo/hi':>20}" for m in METHODS))
    for j, k in enumerate(keys):
        x = pts[:, j] - pts[:, j].mean()
        line = (f"{k:<12}{100 * truth[j]:>+7.2f}{100 * (pts[:, j].mean() - truth[j]):>+7.2f}{zs[:, j].std():>7.3f}"
                f"{zs[:, j].mean():>+7.3f}{(x ** 3).mean() / (x ** 2).mean() ** 1.5:>+7.2f}  ")
        for m in METHODS:
            lo, hi = arr[m][:, 0, j], arr[m][:, 1, j]
            cov, below = np.mean((lo <= truth[j]) & (truth[j] <= hi)), np.mean(hi < truth[j])
            line += f"{100 * cov:>10.1f} {100 * below:4.1f}/{100 * (1 - cov - below):<4.1f}"
        print(line, flush=True)
    cover = {m: [np.mean((arr[m][:, 0, j] <= truth[j]) & (truth[j] <= arr[m][:, 1, j])) for j in range(len(keys))]
             for m in METHODS}
    print("mean coverage over the figures: " + ", ".join(f"{m} {100 * np.mean(c):.2f}% (lowest {100 * np.min(c):.1f})"
                                                         for m, c in cover.items()))
    print("mean width overall / values (points): " + ", ".join(
        f"{m} {100 * np.mean(np.diff(arr[m][:, :, 0], axis=1)):.2f}/{100 * np.mean(np.diff(arr[m][:, :, 1], axis=1)):.2f}"
        for m in METHODS))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"bench/diff_methods.py --pairs {args.pairs} --B {args.B} --seed {args.seed}")
    rng = np.random.default_rng(args.seed)
    drop = dict(d.PAPER, values=0.70)
    scenario("drop", rng, args.pairs, args.B, d.PAPER, drop)
    scenario("heterogeneous", rng, args.pairs, args.B, d.PAPER, drop, shared_sd=0.3, own_sd=0.9)
    scenario("null", rng, args.pairs, args.B, d.PAPER, d.PAPER)
    scenario("items (specificity 0.85 -> 0.75)", rng, args.pairs, args.B, None, None, items_spec=0.75)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
