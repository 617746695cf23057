"""Does the cascade's certificate hold, and what does it save? (issue 51's "Done when")

    python bench/cascade.py [--personas 200] [--draws 200] [--gold 300] [--seed 0]

A simulated corpus, three `sim:` judges of rising accuracy and price whose errors share an item
difficulty (shared_difficulty 0.5) and whose |judge_score| tells right from wrong (confidence
AUC 0.90-0.92). Each judge answers every item once (the sim judges' fast path: the answers
`memjudge cascade` gets from the scorer), then, for each of `--draws` random draws of a
`--gold`-item gold set (truth labels, as people's would be) and as many selection items:

* certified (memjudge cascade's default): the path chosen on the selection items (judged
  against the last stage), fixed-sequence testing with exact Clopper-Pearson bounds on all the
  gold items;
* split: no selection items; a third of the gold items choose the path, the rest certify it;
* same gold: the path chosen on the gold items that certify it (the issue's first design; not
  exact: what it costs is measured here);
* naive: the most trusting level whose gold point estimate of agreement meets the target.

Per draw the whole cascade is replayed on every item; "held" is the share of draws whose
realised agreement with the truth on the trusted items outside the gold set is >= the target
(the guarantee asks >= 1 - delta). Cost: every stage on the gold and selection items plus each
stage on what reached it (an item it answered for calibration is not paid twice), against the
last stage on every item.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.errors import UsageError  # noqa: E402
from memjudge.judges import make_judge  # noqa: E402
from memjudge.simulation import simulate  # noqa: E402
from memjudge.stats import cascade as C  # noqa: E402

# name, noise model, USD per call: accuracy ~0.92 / ~0.97 / ~0.998 on the paper corpus
JUDGES = [
    ("sim:weak", dict(sensitivity=0.93, specificity=0.86, leniency=0.15, confidence_auc=0.90), 0.0001),
    ("sim:mid", dict(sensitivity=0.97, specificity=0.95, leniency=0.06, confidence_auc=0.92), 0.001),
    ("sim:strong", dict(sensitivity=0.999, specificity=0.995, leniency=0.005, confidence_auc=0.90), 0.01),
]
METHODS = ("certified", "split", "same gold", "naive")


def answers(corpus_dir: Path, corpus):
    truth = dict(zip(corpus.truth["assertion_id"], corpus.truth["kind"] == "supported"))
    conf, right, says = [], [], []
    for i, (spec, noise, _) in enumerate(JUDGES):
        judge = make_judge(spec, options={"truth": str(corpus_dir), "flip_rate": 0.0, "strictness": 0.0,
                                          "shared_difficulty": 0.5, "seed": i + 1, **noise})
        lab = judge.labels(corpus.candidates)
        score = lab["judge_score"].astype(float).to_numpy()
        conf.append(np.abs(score))
        says.append(score > 0)
        right.append(((lab["verdict"] == "supported") == lab["assertion_id"].map(truth)).to_numpy())
    return np.column_stack(conf), np.column_stack(right), np.column_stack(says)


def thresholds(method: str, conf, right, says, gold, sel, target, delta, seed):
    try:
        return _thresholds(method, conf, right, says, gold, sel, target, delta, seed)
    except UsageError:  # too few gold items for the target at delta (split at 0.99): nothing certified
        return np.full(conf.shape[1], np.inf)


def _thresholds(method: str, conf, right, says, gold, sel, target, delta, seed):
    if method == "certified":
        agree_last = says[sel] == says[sel][:, [-1]]
        cert = C.certify_cascade(conf[gold], right[gold], target, delta, select=(conf[sel], agree_last))
    elif method == "split":
        cert = C.certify_cascade(conf[gold], right[gold], target, delta, seed=seed)
    elif method == "same gold":
        cert = C.certify_cascade(conf[gold], right[gold], target, delta, select_share=0)
    else:
        paths = C.level_thresholds(conf[gold], right[gold])
        t, e = C.replay_counts(conf[gold], right[gold], paths)
        ok = np.flatnonzero((t > 0) & (e <= (1 - target) * t))
        return paths[ok[-1]] if ok.size else np.full(conf.shape[1], np.inf)
    return np.array([np.inf if x is None else x for x in cert.thresholds])


def outcome(lam, conf, right, prices, gold, calib, target):
    n = len(conf)
    by = C.replay(conf, lam)
    outside = np.ones(n, bool)
    outside[gold] = False
    kept = (by >= 0) & outside
    agree = right[np.flatnonzero(kept), by[kept]].mean() if kept.any() else 1.0
    in_calib = np.zeros(n, bool)
    in_calib[calib] = True
    cost = 0.0
    certified = np.isfinite(lam).any()  # memjudge cascade runs no stage when nothing is certified
    for k, price in enumerate(prices):
        asked = ((by == -1) | (by >= k)) & certified
        cost += price * (asked | in_calib).sum()
    return agree >= target, agree, (by >= 0).mean(), cost / (n * prices[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--personas", type=int, default=200)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--gold", type=int, default=300)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = simulate(preset="paper", seed=3, personas=args.personas, out=Path(tmp) / "c")
        conf, right, says = answers(Path(tmp) / "c", corpus)
    prices = np.array([p for *_, p in JUDGES])
    n = len(conf)
    print(f"memjudge bench/cascade.py  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  load {os.getloadavg()[0]:.2f}")
    print(f"corpus: {n} candidates ({args.personas} personas); gold {args.gold} and selection {args.gold} items per draw; "
          f"{args.draws} draws; delta {args.delta}")
    for (spec, noise, price), acc in zip(JUDGES, right.mean(axis=0)):
        print(f"  {spec:11s} accuracy {acc:.4f}  confidence AUC {noise['confidence_auc']}  ${price}/call")
    print()
    rows = {}
    for target in (0.95, 0.98, 0.99):
        rng = np.random.default_rng(args.seed)
        res: dict[str, list] = {m: [] for m in METHODS}
        for d in range(args.draws):
            perm = rng.permutation(n)
            gold, sel = perm[: args.gold], perm[args.gold: 2 * args.gold]
            for m in METHODS:
                lam = thresholds(m, conf, right, says, gold, sel, target, args.delta, seed=d)
                calib = np.concatenate([gold, sel]) if m == "certified" else gold
                res[m].append(outcome(lam, conf, right, prices, gold, calib, target))
        rows[target] = {m: np.array(r, dtype=float) for m, r in res.items()}
    print(f"{'target':>6} {'method':10} {'held':>6} {'agreement':>9} {'decided':>8} {'cost/last':>9}   (means over draws)")
    for target, by_m in rows.items():
        for m, r in by_m.items():
            print(f"{target:6.2f} {m:10} {r[:, 0].mean():6.3f} {r[:, 1].mean():9.4f} {r[:, 2].mean():8.3f} {r[:, 3].mean():9.3f}")
    r = rows[0.98]["certified"]
    naive = rows[0.98]["naive"]
    same = rows[0.98]["same gold"]
    print()
    print(f"target 0.98, delta {args.delta}: the certified cascade held in {r[:, 0].mean():.1%} of {args.draws} draws "
          f"(needs >= {1 - args.delta:.0%}), deciding {r[:, 2].mean():.1%} of the items at {r[:, 3].mean():.1%} of the last "
          f"stage's cost (gold and selection calls included; median {np.median(r[:, 3]):.1%}); the naive point-estimate rule "
          f"held in {naive[:, 0].mean():.1%}; choosing the path on the certifying gold items held in {same[:, 0].mean():.1%}.")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
