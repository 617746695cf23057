"""Do memjudge's 95% persona-cluster bootstrap intervals cover the truth 95% of the time?

    python bench/intervals.py [--studies 200] [--personas 100] [--B 2000] [--seed 0] [--scenario moderate|heavy|both]

A known generative process with clustered personas, so that the population values are known
in closed form:

- persona i has m_i = 1 + Poisson(46) candidates (about the paper's 47 per persona), a support
  probability p_i ~ Beta(mu*k, (1 - mu)*k) (mu = 0.92: some users are harder to read),
  and a judge flip probability e_i ~ Beta(a, b) (mean 0.024, i.e. ~4.7% of replicate pairs differ);
- each candidate is truly supported with probability p_i; the judge's modal verdict has
  sensitivity 0.97 and specificity 0.80; each of two replicates flips it with probability e_i.

Two scenarios: `moderate` (k = 50; e_i ~ Beta(4, 160)) and `heavy` (k = 20; e_i ~ Beta(1.2,
48.8), so a few personas carry most of the flips: a skewed cluster distribution, where the
percentile bootstrap is known to run slightly short with 100 clusters).

Per study, three statistics with their 95% intervals, through the public API:
support rate of the judge's replicate-0 verdicts (`bootstrap.ratio_interval`), flip rate
(`memjudge.stats.noise.noise`), Cohen's κ against gold (`memjudge.stats.agreement.agreement`). The
benchmark prints, per statistic, the share of studies whose interval covers the population
value (target ≥ 93%), beside the naive peer that ignores persona clustering (item-level
Wald interval), which should fall short.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.stats.agreement import agreement  # noqa: E402
from memjudge.stats.bootstrap import cluster_weights, ratio_interval  # noqa: E402
from memjudge.stats.noise import noise  # noqa: E402

MU = 0.92                        # mean persona support probability
SENS, SPEC = 0.97, 0.80          # the judge's modal verdict
MEAN_ITEMS = 46
# k: concentration of the persona support probability; (a, b): persona flip probability ~ Beta(a, b).
SCENARIOS = {"moderate": dict(k=50.0, a=4.0, b=160.0), "heavy": dict(k=20.0, a=1.2, b=48.8)}


def population_values(scenario: str = "moderate") -> dict[str, float]:
    """Closed-form population values of the three statistics (ratio-of-sums targets; m_i is
    independent of p_i and e_i, so persona weights drop out)."""
    sc = SCENARIOS[scenario]
    FLIP_A, FLIP_B = sc["a"], sc["b"]
    ee = FLIP_A / (FLIP_A + FLIP_B)
    ee2 = FLIP_A * (FLIP_A + 1) / ((FLIP_A + FLIP_B) * (FLIP_A + FLIP_B + 1))
    flip = 2 * (ee - ee2)  # E[2e(1 - e)]
    # A replicate's verdict: the modal one flipped with probability e (e independent of truth).
    say_s_given_s = SENS * (1 - ee) + (1 - SENS) * ee
    say_s_given_u = (1 - SPEC) * (1 - ee) + SPEC * ee
    p11, p10 = MU * say_s_given_s, MU * (1 - say_s_given_s)          # gold S: judge S / U
    p01, p00 = (1 - MU) * say_s_given_u, (1 - MU) * (1 - say_s_given_u)
    po = p11 + p00
    pe = (p11 + p01) * (p11 + p10) + (p00 + p10) * (p00 + p01)
    return {"support_rate": p11 + p01, "flip_rate": flip, "kappa": (po - pe) / (1 - pe)}


def study(rng: np.random.Generator, personas: int, scenario: str = "moderate") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(labels with 2 replicates, gold) of one simulated study."""
    sc = SCENARIOS[scenario]
    m = 1 + rng.poisson(MEAN_ITEMS, personas)
    p = rng.beta(MU * sc["k"], (1 - MU) * sc["k"], personas)
    e = rng.beta(sc["a"], sc["b"], personas)
    pid = np.repeat(np.arange(personas), m)
    n = pid.size
    truth = rng.random(n) < p[pid]
    modal = np.where(truth, rng.random(n) < SENS, rng.random(n) >= SPEC)
    aid = np.array([f"a{i}" for i in range(n)], dtype=object)
    pname = np.array([f"p{i:04d}" for i in range(personas)], dtype=object)[pid]
    frames = []
    for r in range(2):
        said = modal ^ (rng.random(n) < e[pid])
        frames.append(pd.DataFrame({"assertion_id": aid, "persona_id": pname, "category": "all", "judge": "sim:bench",
                                    "rubric": "support", "replicate": r,
                                    "verdict": np.where(said, "supported", "unsupported")}))
    gold = pd.DataFrame({"assertion_id": aid, "verdict": np.where(truth, "supported", "unsupported")})
    return pd.concat(frames, ignore_index=True), gold


def intervals(labels: pd.DataFrame, gold: pd.DataFrame, B: int, seed: int) -> dict[str, tuple[float, float, float]]:
    """(estimate, lo, hi) of each statistic, as memjudge computes them."""
    rep0 = labels[labels["replicate"] == 0]
    personas = np.array(sorted(rep0["persona_id"].unique()), dtype=object)
    code = np.searchsorted(personas, rep0["persona_id"].to_numpy())
    sup = np.bincount(code, weights=(rep0["verdict"] == "supported").to_numpy(float), minlength=len(personas))
    tot = np.bincount(code, minlength=len(personas)).astype(float)
    lo, hi = ratio_interval(sup, tot, cluster_weights(len(personas), B, seed))
    out = {"support_rate": (sup.sum() / tot.sum(), lo, hi)}
    nz = noise(labels, seed=seed, B=B).judges.iloc[0]
    out["flip_rate"] = (nz["flip_rate"], nz["flip_rate_lo"], nz["flip_rate_hi"])
    g = agreement(labels, gold=gold, replicate=0, seed=seed, B=B).gold.iloc[0]
    out["kappa"] = (g["cohen_kappa"], g["cohen_kappa_lo"], g["cohen_kappa_hi"])
    return out


def naive_interval(labels: pd.DataFrame, gold: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Item-level Wald intervals that treat every candidate as independent (the naive peer)."""
    rep = labels.pivot(index="assertion_id", columns="replicate", values="verdict")
    n = len(rep)
    s = (rep[0] == "supported").mean()
    f = (rep[0] != rep[1]).mean()
    g = gold.set_index("assertion_id").loc[rep.index, "verdict"]
    j = rep[0]
    po = (g == j).mean()
    pe = (g == "supported").mean() * (j == "supported").mean() + (g != "supported").mean() * (j != "supported").mean()
    k = (po - pe) / (1 - pe)
    se_k = np.sqrt(po * (1 - po) / n) / (1 - pe)
    z = 1.959964
    return {
        "support_rate": (s - z * np.sqrt(s * (1 - s) / n), s + z * np.sqrt(s * (1 - s) / n)),
        "flip_rate": (f - z * np.sqrt(f * (1 - f) / n), f + z * np.sqrt(f * (1 - f) / n)),
        "kappa": (k - z * se_k, k + z * se_k),
    }


def run(studies: int = 200, personas: int = 100, B: int = 2000, seed: int = 0, naive: bool = True,
        scenario: str = "moderate") -> dict:
    truth = population_values(scenario)
    rng = np.random.default_rng(seed)
    hits = {k: 0 for k in truth}
    naive_hits = {k: 0 for k in truth}
    widths = {k: [] for k in truth}
    for s in range(studies):
        labels, gold = study(rng, personas, scenario)
        got = intervals(labels, gold, B, seed + s)
        for k, (_, lo, hi) in got.items():
            hits[k] += bool(lo <= truth[k] <= hi)
            widths[k].append(hi - lo)
        if naive:
            for k, (lo, hi) in naive_interval(labels, gold).items():
                naive_hits[k] += bool(lo <= truth[k] <= hi)
    return {
        "scenario": scenario, "studies": studies, "personas": personas, "B": B, "truth": truth,
        "coverage": {k: hits[k] / studies for k in truth},
        "naive_coverage": {k: naive_hits[k] / studies for k in truth} if naive else None,
        "mean_width": {k: float(np.mean(widths[k])) for k in truth},
    }


def _mc_interval(c: float, n: int) -> str:
    """Wilson 95% interval of a coverage share estimated from n studies (Monte Carlo error)."""
    z = 1.959964
    centre = (c + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(c * (1 - c) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"[{100 * (centre - half):.1f}, {100 * (centre + half):.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--personas", type=int, default=100)
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenario", choices=["moderate", "heavy", "both"], default="both")
    a = ap.parse_args()
    for scenario in (["moderate", "heavy"] if a.scenario == "both" else [a.scenario]):
        t0 = time.perf_counter()
        res = run(a.studies, a.personas, a.B, a.seed, scenario=scenario)
        secs = time.perf_counter() - t0
        print(f"scenario {scenario}: {res['studies']} simulated studies of {res['personas']} personas "
              f"(~{MEAN_ITEMS + 1} candidates each), 95% persona-cluster bootstrap, B = {res['B']} ({secs:.1f} s)")
        print(f"{'statistic':<14}{'true value':>12}{'covered':>10}{'(MC 95%)':>15}{'naive covered':>15}{'ratio':>8}{'mean width':>12}")
        for k, v in res["truth"].items():
            c, nc = res["coverage"][k], res["naive_coverage"][k]
            print(f"{k:<14}{v:>12.4f}{100 * c:>9.1f}%{_mc_interval(c, res['studies']):>15}{100 * nc:>14.1f}%"
                  f"{c / 0.95:>8.3f}{res['mean_width'][k]:>12.4f}")
        ok = all(c >= 0.93 for c in res["coverage"].values())
        print(f"target: every statistic covered in >= 93% of studies (ratio = covered / nominal 95%): "
              f"{'met' if ok else 'NOT met'}\n")


if __name__ == "__main__":
    main()
