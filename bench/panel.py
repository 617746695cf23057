"""Benchmark of `memjudge panel` (Dawid–Skene): recovery, accuracy, interval coverage, speed.

    python bench/panel.py [--personas 400] [--seed 0] [--B 2000] [--coverage-reps 200]

Everything here is SIMULATED.

1. Recovery and accuracy. A corpus from the `paper` preset of `memjudge simulate`, labelled by
   three `sim:` judges with declared sensitivity and specificity (conditionally independent
   given the truth: leniency = 1 − specificity, strictness 0, each judge its own seed). The
   panel (Dawid–Skene, no gold) estimates each judge's sensitivity and specificity; they are
   compared with the declared values (target: within ±0.03) and with the same measured on the
   corpus's gold labels; the panel's accuracy against gold is compared with the best single
   judge's (target: at least as high).
2. Interval coverage. Many small persona-clustered panels drawn straight from the
   Dawid–Skene model: how often the 95% persona-cluster bootstrap interval covers the
   declared sensitivity and specificity (target: about 0.95).
3. Speed. The B-resample bootstrap (batched EM on per-persona response-pattern counts)
   against the per-resample peer, crowd-kit's DawidSkene refitted on each resampled data set
   (timed for a few resamples and extrapolated to B; the output says so). Ratios, not
   absolute times, are the result.
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

from memjudge.stats.panel import panel  # noqa: E402

# declared (sensitivity, specificity) of the simulated judges
JUDGES = {"sim:lenient": (0.97, 0.70), "sim:balanced": (0.92, 0.88), "sim:strict": (0.85, 0.93)}


def simulated_panel(personas: int, seed: int, out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(labels of the three sim judges, gold labels) on a paper-preset corpus."""
    from memjudge.judges import make_judge
    from memjudge.simulation import simulate

    corpus = simulate("paper", seed=seed, personas=personas, out=out)
    frames = []
    for i, (spec, (sens, spec_)) in enumerate(JUDGES.items()):
        judge = make_judge(spec, options={"truth": str(out), "seed": 1000 * seed + i + 1, "sensitivity": sens,
                                          "specificity": spec_, "leniency": 1 - spec_, "strictness": 0.0,
                                          "flip_rate": 0.0})
        frames.append(judge.labels(corpus.candidates))
    return pd.concat(frames, ignore_index=True), corpus.labels


def recovery(personas: int, seed: int, B: int, out: Path) -> bool:
    t = time.perf_counter()
    labels, gold = simulated_panel(personas, seed, out)
    t_sim = time.perf_counter() - t
    t = time.perf_counter()
    res = panel(labels, method="dawid-skene", gold=gold, B=B, seed=seed)
    t_panel = time.perf_counter() - t
    print(f"1. Recovery (SIMULATED: paper preset, {personas} personas, {res.n_items} items, {n_unsupported(gold)} "
          f"unsupported; 3 sim judges; seed {seed}; B = {B})")
    print(f"   simulate + label: {t_sim:.1f} s; panel (EM + {B} bootstrap refits + gold): {t_panel:.2f} s; "
          f"{res.iterations} EM iterations")
    print(f"   {'judge':<14} {'declared':>10} {'estimated [95% CI]':>26} {'gold-measured':>14} {'|est-decl|':>10}")
    worst = 0.0
    for r in res.judge_errors:
        for m, k in (("sensitivity", 0), ("specificity", 1)):
            decl = JUDGES[r["judge"]][k]
            e = r[m]
            gap = abs(e["value"] - decl)
            worst = max(worst, gap)
            print(f"   {r['judge']:<14} {m[:4]} {decl:>5.3f} {e['value']:>10.3f} [{e['lo']:.3f}, {e['hi']:.3f}] "
                  f"{r['gold_' + m]['value']:>14.3f} {gap:>10.3f}")
    acc = {k: v["value"] for k, v in res.gold["accuracy"].items()}
    best = max(v for k, v in acc.items() if k != res.judge)
    print("   accuracy against gold: " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()))
    ok_rec, ok_acc = worst <= 0.03, acc[res.judge] >= best
    print(f"   largest |estimated - declared| = {worst:.3f} (target <= 0.03: {'met' if ok_rec else 'NOT met'}); "
          f"panel accuracy {acc[res.judge]:.4f} vs best single judge {best:.4f} "
          f"({'met' if ok_acc else 'NOT met'})")
    return ok_rec and ok_acc


def n_unsupported(gold: pd.DataFrame) -> int:
    return int((gold["verdict"] != "supported").sum())


def ds_draw(rng, personas: int, per_persona: int, prior: float, judges: dict) -> pd.DataFrame:
    """Labels drawn straight from a binary Dawid–Skene model, persona-clustered items."""
    n = personas * per_persona
    persona = np.repeat(np.arange(personas), per_persona)
    z = rng.random(n) < prior
    rows = []
    for name, (sens, spec) in judges.items():
        says = np.where(z, rng.random(n) < sens, rng.random(n) >= spec)
        rows.append(pd.DataFrame({"assertion_id": [f"a{i}" for i in range(n)], "persona_id": [f"p{p}" for p in persona],
                                  "category": "c", "judge": name, "rubric": "support", "replicate": 0,
                                  "verdict": np.where(says, "supported", "unsupported")}))
    return pd.concat(rows, ignore_index=True)


def coverage(reps: int, B: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    hits = {m: np.zeros(len(JUDGES)) for m in ("sensitivity", "specificity")}
    t = time.perf_counter()
    for r in range(reps):
        lab = ds_draw(rng, personas=60, per_persona=20, prior=0.8, judges=JUDGES)
        res = panel(lab, method="dawid-skene", B=B, seed=r)
        for i, row in enumerate(res.judge_errors):
            for k, m in enumerate(("sensitivity", "specificity")):
                decl = JUDGES[row["judge"]][k]
                hits[m][i] += row[m]["lo"] <= decl <= row[m]["hi"]
    secs = time.perf_counter() - t
    print(f"2. Interval coverage (SIMULATED: {reps} panels of 60 personas x 20 items drawn from the Dawid-Skene "
          f"model, prior 0.8; B = {B}; {secs:.0f} s)")
    for m in hits:
        print(f"   {m:<12} " + ", ".join(f"{j} {h / reps:.3f}" for j, h in zip(JUDGES, hits[m])))
    print("   (target about 0.95; with 200 repetitions a coverage of 0.95 reads 0.92-0.98 by chance)")


def speed(B: int, seed: int, naive: int) -> None:
    from crowdkit.aggregation import DawidSkene

    from memjudge.stats.bootstrap import cluster_weights

    rng = np.random.default_rng(seed)
    lab = ds_draw(rng, personas=300, per_persona=15, prior=0.85, judges=JUDGES)
    t = time.perf_counter()
    panel(lab, method="dawid-skene", B=B, seed=seed)
    ours = time.perf_counter() - t
    data = lab.rename(columns={"assertion_id": "task", "judge": "worker", "verdict": "label"})
    by_p = {p: g for p, g in data.groupby("persona_id")}
    names = sorted(by_p)
    W = cluster_weights(len(names), naive, seed)
    t = time.perf_counter()
    for b in range(naive):
        parts = []
        for k, c in enumerate(W[b].astype(int)):
            for copy in range(c):
                g = by_p[names[k]]
                parts.append(g.assign(task=g["task"] + f"#{copy}"))
        DawidSkene().fit(pd.concat(parts, ignore_index=True)[["task", "worker", "label"]])
    per = (time.perf_counter() - t) / naive
    print(f"3. Speed (SIMULATED: 300 personas x 15 items, 3 judges; B = {B})")
    print(f"   memjudge panel, EM + {B} bootstrap refits: {ours:.2f} s")
    print(f"   crowd-kit DawidSkene refitted per resample: {per:.3f} s each (timed for {naive}, extrapolated "
          f"to B = {B}: {per * B:.0f} s)")
    print(f"   ratio: {per * B / ours:.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--personas", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--coverage-reps", type=int, default=200)
    ap.add_argument("--naive-resamples", type=int, default=5)
    ap.add_argument("--out", default=None, help="folder for the simulated corpus (default: a temporary one)")
    args = ap.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ok = recovery(args.personas, args.seed, args.B, Path(args.out or tmp) / "corpus")
    if args.coverage_reps:
        coverage(args.coverage_reps, min(args.B, 1000), args.seed)
    if args.naive_resamples:
        speed(args.B, args.seed, args.naive_resamples)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
