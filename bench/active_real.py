"""Active against stratified gold samples on real data: SynthPAI with the embedded judge's log-odds.

    python bench/active_real.py [--draws 200] [--n 60] [--first 20] [--B 500] [--out bench/results/active_real.txt]

Data: `bench/results/local_judge_scores_synthpai_checked.jsonl`, 204 SynthPAI guesses (36 users;
SynthPAI, MIT, ETH Zurich SRI Lab) scored by memjudge's embedded judge (`local:`, its support
log-odds in `judge_score`, verdict = supported when > 0) with the human-checked label as `gold`.
The embedded judge was not rerun here (it takes minutes per item on a shared machine): these are
its stored answers. The 204 items are the population; their gold rate is the truth.

Each draw labels `--n` items three ways, through the Python API that `memjudge sample` and
`memjudge estimate` run (`memjudge.sample`, `memjudge.estimate`, persona bootstrap B, 95%):
uniform; stratified (category × verdict, Neyman); active (a stratified first batch of `--first`,
labelled, then an active top-up to n calibrated on it, W chosen by the robust rule).
Printed: coverage of the truth, mean width and mean estimate per design, one draw side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import memjudge  # noqa: E402

DATA = ROOT / "bench" / "results" / "local_judge_scores_synthpai_checked.jsonl"
JUDGE = "local:embedded"


def load():
    rows = [json.loads(x) for x in DATA.read_text().splitlines()]
    df = pd.DataFrame(rows)
    cand = df[["assertion_id", "persona_id", "category"]].assign(text="(SynthPAI guess)")
    lab = df[["assertion_id", "persona_id", "category"]].assign(
        judge=JUDGE, rubric="support", replicate=0, judge_score=df["judge_score"].astype(float),
        verdict=np.where(df["judge_score"] > 0, "supported", "unsupported"))
    truth = dict(zip(df["assertion_id"], df["gold"]))
    return cand, lab, truth


def gold_of(rows, truth):
    return pd.DataFrame({"assertion_id": rows["assertion_id"], "verdict": [truth[a] for a in rows["assertion_id"]]})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--first", type=int, default=20)
    ap.add_argument("--B", type=int, default=500)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    lines: list[str] = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    t0 = time.perf_counter()
    cand, lab, truth = load()
    true_rate = float(np.mean([v == "supported" for v in truth.values()]))
    acc = float(((lab["verdict"] == "supported") == (lab["assertion_id"].map(truth) == "supported")).mean())
    say(f"SynthPAI, embedded judge (stored log-odds): {len(cand)} items, {cand['persona_id'].nunique()} users, "
        f"judge accuracy {acc:.3f}, true support rate {true_rate:.4f}; n = {args.n} gold per draw "
        f"(active: {args.first} stratified first), {args.draws} draws, persona bootstrap B = {args.B}; "
        f"load average {os.getloadavg()[0]:.2f}")
    res: dict[str, list[tuple[float, float, float, float]]] = {"uniform": [], "stratified": [], "active": []}
    example = {}
    for d in range(args.draws):
        for design in res:
            if design == "active":
                first = memjudge.sample(cand, args.first, labels=lab, strategy="stratified", seed=d)
                rows = memjudge.sample(cand, args.n - args.first, labels=lab, strategy="active", top_up=first,
                                       gold=gold_of(first, truth), seed=d)
            else:
                rows = memjudge.sample(cand, args.n, labels=lab, strategy=design, seed=d)
            est = memjudge.estimate(lab, gold_of(rows, truth), sample=rows, B=args.B, seed=d).to_dict()
            g = est["groups"][0]["ppi"]
            res[design].append((g["value"], g["lo"], g["hi"], len(rows)))
            if d == 0:
                example[design] = (g, len(rows), est["groups"][0]["effective_gold_n"],
                                   rows.attrs.get("design", {}).get("mix_w"))
    say("")
    say("| design | coverage of the truth | mean width | mean estimate | mean gold n |")
    say("|---|---|---|---|---|")
    for k, v in res.items():
        a = np.array(v)
        cov = np.mean((a[:, 1] <= true_rate) & (true_rate <= a[:, 2]))
        say(f"| {k} | {cov:.1%} | {np.mean(a[:, 2] - a[:, 1]):.4f} | {np.mean(a[:, 0]):.4f} | {np.mean(a[:, 3]):.1f} |")
    wa = {k: np.mean(np.array(v)[:, 2] - np.array(v)[:, 1]) for k, v in res.items()}
    say(f"\nwidth ratios: active / stratified {wa['active'] / wa['stratified']:.3f}, active / uniform "
        f"{wa['active'] / wa['uniform']:.3f}, stratified / uniform {wa['stratified'] / wa['uniform']:.3f}")
    say("\none draw (seed 0), side by side:")
    for k, (g, nrows, eff, W) in example.items():
        say(f"  {k:10s} {nrows} labels: {g['value']:.3f} [{g['lo']:.3f}, {g['hi']:.3f}], effective gold n "
            f"{eff if eff is None else round(eff)}" + ("" if W is None else f", W = {W:g}"))
    say(f"time {time.perf_counter() - t0:.0f} s; load average now {os.getloadavg()[0]:.2f}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
