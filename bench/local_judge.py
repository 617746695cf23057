"""Benchmark of the embedded judge `local:qwen2.5-coder-1.5b`: speed and quality.

    python bench/local_judge.py scores dev --variant top3      # judge_scores of the tuning corpus (resumable)
    python bench/local_judge.py scores heldout --variant top3  # ... of the held-out corpus (scored once)
    python bench/local_judge.py scores sales --variant top3 --per-doc 6   # SummEdits sales calls (held out)
    python bench/local_judge.py scores qmsum|corpus [--variant V]          # other data
    python bench/local_judge.py speed [dev] [--variant V]  # assertions/minute with and without prefix reuse
    python bench/local_judge.py quality [--variant V]      # the figures: choices, per domain, per kind, speed

Variants: `rubric` (the support rubric over the whole source, the judge before premise
selection) and the judge's own prompt over `k` selected source sentences (`top2`, `top3`,
`top5`; `full` = the whole source; `top3-nofs` without few-shot turns). Datasets: generated
corpora of fixed seeds (`dev` is the only one anything is tuned on; `heldout` is scored once with
everything fixed) and SummEdits (`sales` held out, `qmsum`). Scores are computed once and saved
under bench/results/ (with the prompt id and the weights' hash), so calibration experiments
never re-run the model. Quality is printed beside the published SummEdits balanced accuracies
(../shared/data/summedits/README.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.stats.thresholds import auc, balanced_accuracy, best_threshold, calibrate_scores  # noqa: E402
from memjudge.judges.base import Prompt  # noqa: E402
from memjudge.judges.local import DEFAULT_MODEL, PACKAGED, load_model, packaged_model_path  # noqa: E402

SHARED = Path(os.environ.get("MEMJUDGE_SHARED_DATA", ROOT.parent / "shared" / "data"))
RESULTS = ROOT / "bench" / "results"
SUMMEDITS = {"sales": "summedits_sales_call.json", "qmsum": "summedits_qmsumm.json"}
# Published balanced accuracies on the Sales Call domain (SummEdits README, zero-shot).
PUBLISHED_SALES = {"Mistral-7b": 63.4, "Llama2-13b": 63.1, "Vicuna-13b": 57.9, "ChatGPT": 79.4,
                   "Claude v2": 81.0, "GPT-4": 87.9, "Human": 91.8}


def summedits_items(name: str) -> pd.DataFrame:
    """SummEdits as memjudge rows: persona = one source document, assertion = one summary."""
    raw = json.loads((SHARED / "summedits" / SUMMEDITS[name]).read_text(encoding="utf-8"))
    docs: dict[str, str] = {}
    rows = []
    for item in raw:
        doc_id = docs.setdefault(item["doc"], f"{name}-doc{len(docs):02d}")
        rows.append({
            "assertion_id": item["id"], "persona_id": doc_id, "category": "summary",
            "text": item["summary"], "source": item["doc"],
            "gold": "supported" if str(item["label"]) == "1" else "unsupported",
        })
    return pd.DataFrame(rows)


# Corpora with more unsupported candidates than the paper preset (so every unsupported kind has
# enough items to measure): the same generator and lexicon, only the shares changed.
HARD_CONFIG = {
    "corpus": {"candidates": 2500, "personas": 100, "values_share": 0.45},
    "support": {"values": 0.30, "other": 0.50},
    "kinds": {"values": {"over_inference": 0.55, "fabrication": 0.01, "contradiction": 0.24, "wrong_person": 0.20},
              "other": {"fabrication": 0.22, "contradiction": 0.55, "wrong_person": 0.23}},
}
# name -> (personas, seed, config). "dev" is the only generated data any choice was tuned on
# (prompt, k, threshold); "heldout" is measured once, at the end, with everything fixed.
CORPORA = {
    "corpus": (6, 1, None),           # the demo's shape (paper preset), seed 1 (first calibration corpus)
    "dev": (8, 11, HARD_CONFIG),
    "heldout": (32, 2027, HARD_CONFIG),
}


def corpus_items(name: str) -> pd.DataFrame:
    from memjudge.demo import CANDIDATES_PER_PERSONA
    from memjudge.simulation import simulate

    personas, seed, config = CORPORA[name]
    # The demo's corpus shape (paper preset scaled to ~25 candidates per persona) unless overridden.
    config = config or {"corpus": {"candidates": CANDIDATES_PER_PERSONA * 100, "personas": 100}}
    corpus = simulate(personas=personas, seed=seed, config=config)
    cand, src, truth = corpus.candidates, corpus.sources, corpus.truth
    df = cand.merge(src[["persona_id", "source"]], on="persona_id")
    t = truth[["assertion_id", "kind"]].assign(gold=np.where(truth["supported"], "supported", "unsupported"))
    return df.merge(t, on="assertion_id")[["assertion_id", "persona_id", "category", "text", "source", "gold", "kind"]]


def render(rubric, row) -> Prompt:
    return rubric.render_support(source=row["source"], assertion=row["text"], category=row["category"],
                                 persona_id=row["persona_id"], assertion_id=row["assertion_id"])


def load_default_model():
    # BENCH_THREADS: on a machine shared far beyond its cores, fewer llama.cpp threads wait less.
    threads = int(os.environ.get("BENCH_THREADS", "0")) or None
    return load_model(packaged_model_path(DEFAULT_MODEL), n_ctx=8192, n_threads=threads, n_batch=512)


# Scoring variants: "rubric" renders the support rubric over the whole source (the judge before
# premise selection); the others are the judge's own prompt (local_premise) with k premises per
# assertion sentence (0 = whole source), with or without the few-shot turns.
VARIANTS = {"rubric": None, "full": (0, True), "top2": (2, True), "top3": (3, True), "top5": (5, True),
            "top3-nofs": (3, False)}


def results_path(dataset: str, variant: str = "rubric") -> Path:
    suffix = "" if variant == "rubric" else f"_{variant}"
    return RESULTS / f"local_judge_scores_{dataset}{suffix}.jsonl"


def variant_id(variant: str) -> str:
    from memjudge.judges.local_premise import PROMPT_VERSION
    from memjudge.judges.rubrics import load_rubric

    if VARIANTS[variant] is None:
        return load_rubric("support").id
    k, fs = VARIANTS[variant]
    return f"{PROMPT_VERSION}/k={k}/few_shot={fs}"


def dataset_items(name: str) -> pd.DataFrame:
    if name in SUMMEDITS:
        return summedits_items(name).assign(kind=lambda d: np.where(d["gold"] == "supported", "supported", "edited"))
    return corpus_items(name)


def cmd_scores(args) -> None:
    from memjudge.judges.rubrics import load_rubric

    rubric = load_rubric("support")
    vid = variant_id(args.variant)
    items = dataset_items(args.dataset)
    if args.per_doc:
        # A fixed pseudo-random subset per source (ids hashed), for a shared machine's time budget.
        items = items.assign(_h=items["assertion_id"].map(lambda a: hashlib.sha256(a.encode()).hexdigest()))
        items = items.sort_values(["persona_id", "_h"]).groupby("persona_id").head(args.per_doc).drop(columns="_h")
    items = items.sort_values(["persona_id", "assertion_id"], kind="stable")
    out = results_path(args.dataset, args.variant)
    out.parent.mkdir(parents=True, exist_ok=True)
    done: set[str] = set()
    if out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            if row.get("rubric") != vid or row.get("weights_sha256") != PACKAGED[DEFAULT_MODEL].sha256:
                sys.exit(f"{out} was scored with another prompt/model ({row.get('rubric')}); move it away first")
            done.add(row["assertion_id"])
    model = load_default_model()
    todo = items[~items["assertion_id"].isin(done)]
    print(f"{args.dataset} / {args.variant}: {len(items)} items, {len(done)} already scored, {len(todo)} to go",
          flush=True)
    t_all = time.perf_counter()
    with open(out, "a", encoding="utf-8") as f:
        for i, row in enumerate(todo.to_dict("records"), start=1):
            t = time.perf_counter()
            s = _score(model, args.variant, row, rubric, True)
            rec = {
                "assertion_id": row["assertion_id"], "persona_id": row["persona_id"], "category": row["category"],
                "gold": row["gold"], "kind": row["kind"], "judge_score": s.log_odds,
                "logp_supported": s.logp_supported, "logp_unsupported": s.logp_unsupported,
                "prompt_tokens": s.prompt_tokens, "reused_tokens": s.reused_tokens,
                "seconds": round(time.perf_counter() - t, 3), "rubric": vid,
                "weights_sha256": PACKAGED[DEFAULT_MODEL].sha256,
            }
            f.write(json.dumps(rec) + "\n")
            f.flush()
            if i % 20 == 0:
                rate = i / (time.perf_counter() - t_all) * 60
                print(f"  {i}/{len(todo)}  {rate:.1f} assertions/min", flush=True)


def cmd_speed(args) -> None:
    """The same items scored twice: cold (KV cache dropped before each) and warm (persona order,
    shared prefix kept). Prints both rates and their ratio."""
    from memjudge.judges.rubrics import load_rubric

    rubric = load_rubric("support")
    items = dataset_items(args.dataset).sort_values(["persona_id", "assertion_id"], kind="stable")
    docs = items["persona_id"].unique()[: args.docs]
    items = items[items["persona_id"].isin(docs)].groupby("persona_id").head(args.per_doc)
    rows = items.to_dict("records")
    model = load_default_model()
    model.forget()
    t = time.perf_counter()
    cold = []
    for r in rows:
        model.forget()
        cold.append(_score(model, args.variant, r, rubric, False))
    t_cold = time.perf_counter() - t
    model.forget()
    t = time.perf_counter()
    warm = [_score(model, args.variant, r, rubric, True) for r in rows]
    t_warm = time.perf_counter() - t
    n = len(rows)
    tokens = np.mean([s.prompt_tokens for s in warm])
    evaluated = np.mean([s.prompt_tokens - s.reused_tokens for s in warm])
    print(f"{args.dataset} / {args.variant} ({variant_id(args.variant)}): {n} items ({len(docs)} sources x "
          f"{args.per_doc}), mean prompt {tokens:.0f} tokens of which {evaluated:.0f} evaluated warm; "
          f"threads: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    print(f"cold (no prefix reuse):  {n / t_cold * 60:6.1f} assertions/min  ({t_cold / n:.2f} s each)")
    print(f"warm (prefix reused):    {n / t_warm * 60:6.1f} assertions/min  ({t_warm / n:.2f} s each)")
    print(f"speed-up from prefix reuse: {t_cold / t_warm:.2f}x")
    diff = float(np.max(np.abs(np.array([s.log_odds for s in cold]) - np.array([s.log_odds for s in warm]))))
    print(f"max |log-odds cold - warm|: {diff:.2e} (prefix reuse must not change scores)")


def _score(model, variant, row, rubric, reuse):
    from memjudge.judges.local import score_premises

    if VARIANTS[variant] is None:
        return model.score(render(rubric, row), reuse=reuse)
    k, fs = VARIANTS[variant]
    return score_premises(model, row["source"], row["text"], k, few_shot=fs, reuse=reuse)


def load_scores(dataset: str, variant: str = "rubric") -> pd.DataFrame:
    path = results_path(dataset, variant)
    if not path.exists():
        raise SystemExit(f"{path} missing: run `python bench/local_judge.py scores {dataset} --variant {variant}` first")
    df = pd.read_json(path, lines=True)
    if "kind" not in df.columns and dataset in CORPORA:  # files scored before kinds were recorded
        df = df.merge(corpus_items(dataset)[["assertion_id", "kind"]], on="assertion_id", how="left")
    return df


def have(dataset: str, variant: str) -> bool:
    path = results_path(dataset, variant)
    return path.exists() and path.stat().st_size > 0


def cluster_interval(df, threshold, B=2000, seed=0) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% percentile intervals of AUC and balanced accuracy, resampling source documents (summaries
    of one document are not independent)."""
    rng = np.random.default_rng(seed)
    groups = [g for _, g in df.groupby("persona_id")]
    aucs, bas = [], []
    for _ in range(B):
        sample = pd.concat([groups[i] for i in rng.integers(0, len(groups), len(groups))])
        s, y = sample["judge_score"].to_numpy(float), (sample["gold"] == "supported").to_numpy()
        if y.all() or (~y).all():
            continue
        aucs.append(auc(s, y))
        bas.append(balanced_accuracy(s, y, threshold))
    return tuple(np.percentile(aucs, [2.5, 97.5])), tuple(np.percentile(bas, [2.5, 97.5]))


def quality_row(name, df, threshold) -> dict:
    s, y = df["judge_score"].to_numpy(float), (df["gold"] == "supported").to_numpy()
    (a_lo, a_hi), (b_lo, b_hi) = cluster_interval(df, threshold)
    return {"data": name, "n": len(df), "docs": df["persona_id"].nunique(), "unsupported": int((~y).sum()),
            "AUC": auc(s, y), "AUC 95% CI": f"{a_lo:.3f}-{a_hi:.3f}",
            "BA at t": balanced_accuracy(s, y, threshold), "BA 95% CI": f"{b_lo:.3f}-{b_hi:.3f}",
            "support rate": float((s >= threshold).mean()), "gold rate": float(y.mean()),
            "best BA (in-sample)": best_threshold(s, y)[1], "in-sample t": best_threshold(s, y)[0],
            "s/item": float(np.median(df["seconds"])) if "seconds" in df else float("nan")}


def kind_rows(name, df, threshold) -> list[dict]:
    """Per unsupported kind: how many, the share flagged unsupported at the threshold, and the AUC
    of supported items against that kind alone."""
    sup = df[df["gold"] == "supported"]
    rows = []
    for kind, g in df[df["gold"] == "unsupported"].groupby("kind"):
        both = pd.concat([sup, g])
        rows.append({"data": name, "kind": kind, "n": len(g),
                     "flagged unsupported": float((g["judge_score"] < threshold).mean()),
                     "AUC vs supported": auc(both["judge_score"], both["gold"] == "supported")})
    rows.append({"data": name, "kind": "supported", "n": len(sup),
                 "flagged unsupported": float((sup["judge_score"] < threshold).mean()), "AUC vs supported": float("nan")})
    return rows


def table(rows) -> str:
    return pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}")


# The judge's `prompt = "premise"` (3 premises, few-shot): the variant fixed before any scoring.
PACKAGED_VARIANT = "top3"
DATASET_NOTES = {
    "dev": "generated, seed 11, 8 personas, HARD_CONFIG (TUNING: prompt, k and threshold chosen here)",
    "corpus": "generated, seed 1, 6 personas, the demo's shape (paper preset: 92% supported)",
    "heldout": "generated, seed 2027, 32 personas, HARD_CONFIG (HELD OUT: scored once, nothing chosen on it)",
    "sales": "SummEdits Sales Call (held out)",
    "qmsum": "SummEdits QMSum (earlier calibration data of the rubric prompt)",
}


def cmd_quality(args) -> None:
    variant = args.variant
    weights = PACKAGED[DEFAULT_MODEL]
    # The packaged thresholds: of the rubric prompt, and of the premise prompt (variant top3).
    packaged = weights.threshold if VARIANTS[variant] is None else weights.premise_threshold
    print(f"judge: local:{DEFAULT_MODEL}, variant {variant} ({variant_id(variant)}), packaged threshold {packaged:+.2f}")
    for d, note in DATASET_NOTES.items():
        print(f"  {d:<8} {note}")

    # 1. The choice of variant, on the tuning data only.
    print("\nvariants on the tuning data (dev), AUC and in-sample best balanced accuracy:")
    rows = []
    for v in VARIANTS:
        if have("dev", v):
            df = load_scores("dev", v)
            s, y = df["judge_score"].to_numpy(float), (df["gold"] == "supported").to_numpy()
            rows.append({"variant": v, "prompt": variant_id(v), "n": len(df), "AUC": auc(s, y),
                         "best BA": best_threshold(s, y)[1], "at t": best_threshold(s, y)[0],
                         "s/item (median)": float(np.median(df["seconds"]))})
    print(table(rows) if rows else "  (no dev scores)")

    # 2. The threshold, as `memjudge calibrate` picks it, on the calibration sets.
    calib_sets = [d for d in args.calibrate_on.split(",") if d and have(d, variant)]
    if calib_sets:
        calib = pd.concat([load_scores(d, variant) for d in calib_sets], ignore_index=True)
        cal = calibrate_scores(calib["judge_score"], calib["gold"] == "supported", DEFAULT_MODEL)
        print(f"\ncalibration on {'+'.join(calib_sets)} ({len(calib)} items): threshold {cal.threshold:+.2f} "
              f"(balanced accuracy {cal.balanced_accuracy:.3f}, AUC {cal.auc:.3f}); packaged: {packaged:+.2f}")
        # Per-category thresholds (values vs the fact categories), on the same data.
        for name, part in (("values", calib[calib["category"] == "values"]),
                           ("facts", calib[~calib["category"].isin(["values", "summary"])])):
            y = part["gold"] == "supported"
            if y.any() and (~y).any():
                t, ba = best_threshold(part["judge_score"], y)
                print(f"  {name}: {len(part)} items, best threshold {t:+.2f} (balanced accuracy {ba:.3f}; "
                      f"at the pooled threshold {balanced_accuracy(part['judge_score'], y, cal.threshold):.3f})")

    # 3. Quality at the packaged threshold, per domain, and per unsupported kind.
    rows, krows = [], []
    for d in DATASET_NOTES:
        if have(d, variant):
            df = load_scores(d, variant)
            rows.append(quality_row(d, df, packaged))
            if d in CORPORA:
                krows += kind_rows(d, df, packaged)
    print(f"\nquality at the packaged threshold {packaged:+.2f} (95% intervals resample sources):")
    print(table(rows))
    if krows:
        print("\nper unsupported kind (generated corpora):")
        print(table(krows))
    if have("sales", variant):
        sales = load_scores("sales", variant)
        ba = 100 * balanced_accuracy(sales["judge_score"], sales["gold"] == "supported", packaged)
        print(f"\nSummEdits Sales Call, balanced accuracy (held out, {len(sales)} items): local:{DEFAULT_MODEL} {ba:.1f}")
        for name, v in PUBLISHED_SALES.items():
            print(f"  {name:<11} {v:5.1f}   ratio local/{name}: {ba / v:.2f}")
    # 4. Speed as the scores were computed (wall time per item on this shared machine).
    print("\nspeed while scoring (this shared machine; see `speed` for a controlled measurement):")
    for d in DATASET_NOTES:
        if have(d, variant):
            sec = load_scores(d, variant)["seconds"]
            print(f"  {d:<8} {len(sec):4d} items, median {np.median(sec):.2f} s, {60 * len(sec) / sec.sum():.1f} assertions/min")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scores")
    s.add_argument("dataset", choices=[*SUMMEDITS, *CORPORA])
    s.add_argument("--variant", choices=list(VARIANTS), default="rubric")
    s.add_argument("--per-doc", type=int, default=0, help="score only this many items per source (0 = all)")
    s.set_defaults(func=cmd_scores)
    sp = sub.add_parser("speed")
    sp.add_argument("dataset", nargs="?", choices=[*SUMMEDITS, *CORPORA], default="dev")
    sp.add_argument("--variant", choices=list(VARIANTS), default=PACKAGED_VARIANT)
    sp.add_argument("--docs", type=int, default=2)
    sp.add_argument("--per-doc", type=int, default=5)
    sp.set_defaults(func=cmd_speed)
    q = sub.add_parser("quality")
    q.add_argument("--variant", choices=list(VARIANTS), default=PACKAGED_VARIANT)
    q.add_argument("--calibrate-on", default="dev")
    q.set_defaults(func=cmd_quality)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
