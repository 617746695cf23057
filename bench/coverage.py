"""Benchmark of the embedded judge's coverage (the per-fact rubric) against the simulated map.

    python bench/coverage.py scores dev     --personas 3 --facts 100  # the tuning corpus (seed 11), resumable
    python bench/coverage.py scores heldout --personas 3 --facts 100  # the held-out corpus (seed 90210)
    python bench/coverage.py scores demo    --personas 2 --facts 100  # the demo's own corpus (seed 0)
    python bench/coverage.py quality                                  # the figures -> bench/results/coverage.txt

`--facts 100` takes every fact: the construction maps then leave 15% of them uncovered, which the
first 8 facts of a persona (an earlier run) never were, so a judge that over-covers shows.

`scores` runs `memjudge score --rubric coverage-fact --judge local:qwen2.5-coder-1.5b` on the first
`--facts` reference facts of the first `--personas` personas of a generated corpus (the demo's
shape: paper preset, 25 candidates per persona) and saves the coverage rows, with every
candidate's log-odds, under bench/results/coverage_scores_<set>.jsonl (plus wall and CPU seconds,
threads and load), so the figures never re-run the model. `quality` chooses the coverage threshold
on dev (`memjudge calibrate --coverage`'s search, balanced accuracy) and reports on heldout and demo, at
that threshold, the packaged one and the former packaged one: pair and fact agreement and Cohen's κ with the construction map
(κ checked against sklearn's cohen_kappa_score), per candidate category, AUC of the reads, and the
effect on the post-threshold coverage estimate: Table 1 (write-all, global, targeted) computed
with the construction truth's support labels twice, once over the construction map and once over
the judge's coverage labels, on the same facts. Speed: facts per minute and tokens evaluated per
fact, with `uptime`'s load (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
JUDGE = "local:qwen2.5-coder-1.5b"
# dev chooses the threshold; heldout and demo (the demo's own corpus, seed 0) only report it
SEEDS = {"dev": 11, "heldout": 90210, "demo": 0}
SCALE = {"corpus": {"candidates": 25 * 100, "personas": 100}}


def corpus(name: str, personas: int):
    from memjudge.simulation import simulate

    return simulate(preset="paper", seed=SEEDS[name], personas=personas, config=SCALE)


def scores_path(name: str) -> Path:
    return RESULTS / f"coverage_scores_{name}.jsonl"


def cmd_scores(args) -> None:
    from memjudge.judges import make_judge
    from memjudge.scoring.engine import score_run

    c = corpus(args.set, args.personas)
    facts = c.facts.groupby("persona_id", sort=False).head(args.facts)[["persona_id", "fact_id", "text"]]
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    judge = make_judge(JUDGE, options={"n_threads": threads})
    judge.load_all()
    load0, t0, cpu0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    res = score_run(c.candidates, c.sources, judge, rubric="coverage-fact", facts=facts,
                    out=ROOT / "runs" / f"bench-coverage-{args.set}", cache_dir=ROOT / "runs" / "bench-coverage-cache",
                    progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rows = res.coverage.to_dict("records")
    meta = {"set": args.set, "seed": SEEDS[args.set], "personas": args.personas, "facts_per_persona": args.facts,
            "facts": len(rows), "requested": res.summary.requested, "wall_s": wall, "cpu_s": cpu, "threads": threads,
            "load_start": load0, "load_end": os.getloadavg()[0], "tokens": res.summary.tokens}
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(scores_path(args.set), "w") as f:
        f.write(json.dumps({"meta": meta}) + "\n")
        for r in rows:
            f.write(json.dumps({k: r[k] for k in ("persona_id", "fact_id", "covered_by", "judge", "replicate",
                                                   "judge_score", "candidate_scores")}) + "\n")
    print(json.dumps(meta, indent=1))


def load_scores(name: str) -> tuple[dict, pd.DataFrame]:
    lines = scores_path(name).read_text().splitlines()
    return json.loads(lines[0])["meta"], pd.DataFrame([json.loads(x) for x in lines[1:]])


def relabel(rows: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """The coverage rows at another threshold (from the saved per-candidate log-odds)."""
    cov = [[a for a, s in sc.items() if s >= threshold] if isinstance(sc, dict) else None for sc in rows["candidate_scores"]]
    return rows.assign(covered_by=cov)


def table1(c, coverage: pd.DataFrame, personas: list[str], facts: pd.DataFrame) -> dict:
    """Table 1's coverage (write-all, and fold means of global and targeted) under the
    construction truth's support labels, over `coverage` restricted to `facts`."""
    from memjudge.comparison import compare

    keep = set(zip(facts["persona_id"], facts["fact_id"]))
    cov = coverage[[(p, f) in keep for p, f in zip(coverage["persona_id"], coverage["fact_id"])]]
    cands = c.candidates[c.candidates["persona_id"].isin(personas)]
    labels = c.labels[c.labels["assertion_id"].isin(cands["assertion_id"])]
    res = compare(cands, labels, cov[["persona_id", "fact_id", "covered_by"]], judge="gold", folds=min(3, len(personas)),
                  repeats=5, seed=0).to_json()
    out = {"write_all": res["write_all"]["coverage"]}
    for p in ("global", "targeted"):
        out[p] = res["policies"][p]["coverage"]["value"]
    return out


def cmd_quality(args) -> None:
    from memjudge.judges.local_weights import PACKAGED
    from memjudge.stats.coverage import coverage_calibration

    lines = []
    say = lines.append
    dev_meta, dev = load_scores("dev")
    cdev = corpus("dev", dev_meta["personas"])
    rate = coverage_calibration(dev, cdev.coverage, JUDGE, "coverage_rate")
    cal = coverage_calibration(dev, cdev.coverage, JUDGE, "balanced_accuracy")
    packaged = PACKAGED["qwen2.5-coder-1.5b"].coverage_threshold
    say("Embedded judge's coverage (per-fact rubric coverage-fact, k = 5; one yes/no read per fact and candidate)")
    say(f"tuning set dev (seed {dev_meta['seed']}): {dev_meta['facts']} facts of {dev_meta['personas']} personas "
        f"({100 * rate.n_supported / rate.n:.1f}% covered by the map); thresholds chosen there by `memjudge calibrate "
        f"--coverage`: --target coverage_rate {rate.threshold:+.3f} (the judge covers {100 * rate.target_value:.1f}% of the "
        f"facts), --target balanced_accuracy (pairs) {cal.threshold:+.3f} (bal. acc {cal.balanced_accuracy:.3f}, AUC "
        f"{cal.auc:.3f}, {cal.n} reads); packaged {packaged:+.3f}")
    thresholds = [("dev, coverage_rate", rate.threshold), ("dev, balanced accuracy on pairs", cal.threshold),
                  ("packaged", packaged)]
    thresholds += [("packaged until 2026-12", t) for t in PACKAGED["qwen2.5-coder-1.5b"].former_coverage_thresholds]
    for name in ("heldout", "demo"):
        if scores_path(name).is_file():
            report_set(name, thresholds, say)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (RESULTS / "coverage.txt").write_text(text)


def report_set(name: str, thresholds: list[tuple[str, float]], say) -> None:
    """One evaluation set's figures at each threshold (the set never chose any of them)."""
    from sklearn.metrics import cohen_kappa_score, roc_auc_score

    from memjudge.stats.coverage import coverage_agreement, coverage_pairs

    meta, held = load_scores(name)
    c = corpus(name, meta["personas"])
    judged_facts = held[["persona_id", "fact_id"]]
    personas = sorted(held["persona_id"].unique())
    ref = c.coverage
    truth = {(p, f): set(cb) for p, f, cb in zip(ref["persona_id"], ref["fact_id"], ref["covered_by"])}
    s, y = [], []
    for p, f, sc in zip(held["persona_id"], held["fact_id"], held["candidate_scores"]):
        for a, v in sc.items():
            s.append(v)
            y.append(a in truth[(p, f)])
    say(f"\n{name} set (seed {meta['seed']}): {meta['facts']} facts of {meta['personas']} personas, {len(s)} reads; "
        f"AUC of the reads {roc_auc_score(y, s):.3f}")
    say(f"speed: {meta['requested']} facts in {meta['wall_s']:.0f} s wall ({60 * meta['requested'] / meta['wall_s']:.1f} "
        f"facts/min), {meta['cpu_s']:.0f} s CPU, {meta['threads']} threads, load {meta['load_start']:.1f} -> "
        f"{meta['load_end']:.1f}; {meta['tokens']['input_tokens'] - meta['tokens']['cached_tokens']} tokens evaluated "
        f"({(meta['tokens']['input_tokens'] - meta['tokens']['cached_tokens']) / max(meta['requested'], 1):.0f} per fact, "
        "the persona's source included)")
    base = table1(c, ref, personas, judged_facts)
    say(f"Table 1 coverage over the construction map (these facts): write-all {100 * base['write_all']:.1f}%, "
        f"global {100 * base['global']:.1f}%, targeted {100 * base['targeted']:.1f}%")
    for label, t in thresholds:
        rows = relabel(held, t)
        ag = coverage_agreement(rows, ref, c.candidates)
        pairs, _ = coverage_pairs(rows, ref, c.candidates)
        sk = cohen_kappa_score(pairs["judge"].astype(int), pairs["reference"].astype(int))
        assert abs(sk - ag["pairs"]["cohen_kappa"]) < 1e-12, (sk, ag["pairs"]["cohen_kappa"])
        say(f"threshold {t:+.3f} ({label}): pairs agreement {100 * ag['pairs']['percent_agreement']:.1f}%, κ "
            f"{ag['pairs']['cohen_kappa']:.3f} (sklearn {sk:.3f}), positive agreement {ag['pairs']['positive_agreement']:.3f}; "
            f"facts agreement {100 * ag['facts']['percent_agreement']:.1f}%, κ {ag['facts']['cohen_kappa']:.3f}; coverage "
            f"rate judge {100 * ag['coverage_rate']['judge']:.1f}% vs map {100 * ag['coverage_rate']['reference']:.1f}%")
        for cat, v in ag["pairs_by_category"].items():
            say(f"    pairs, candidates of category {cat}: n {v['n']}, agreement {100 * v['percent_agreement']:.1f}%, "
                f"κ {v['cohen_kappa']:.3f}")
        est = table1(c, rows, personas, judged_facts)
        say("    Table 1 coverage over the judge's labels: " + ", ".join(
            f"{p} {100 * est[p]:.1f}% ({100 * (est[p] - base[p]):+.1f} points)" for p in ("write_all", "global", "targeted")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scores")
    s.add_argument("set", choices=sorted(SEEDS))
    s.add_argument("--personas", type=int, default=3)
    s.add_argument("--facts", type=int, default=8, help="reference facts per persona (the first ones)")
    s.set_defaults(func=cmd_scores)
    q = sub.add_parser("quality")
    q.set_defaults(func=cmd_quality)
    args = ap.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
